"""Channel groups: what the trace couples, gating over a group's tensors, compaction that
removes a group everywhere (exact in float64), the estimator's declarations."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator
from torch import nn

from sksparse_nn import DGatedNeuralNetClassifier
from sksparse_nn.channels import channel_groups, compact_channels, gate_channels, lam_for_target
from sksparse_nn.sparsifiers import collapse, group_norms, penalty, sparsified_tensors, sparsify

# float64 outputs of modules with |outputs| ~ 1: equal up to a few ulps of summation order
EXACT = 1e-12


class Block(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:  # projection shortcut
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.short(x)
        return torch.relu(out)


class ResNetish(nn.Module):
    """Stem, an identity block, a projection block, a depthwise-separable block."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.layer1 = Block(4, 4)
        self.layer2 = Block(4, 6, stride=2)
        self.dw = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.bn_dw = nn.BatchNorm2d(6)
        self.pw = nn.Conv2d(6, 5, 1)
        self.bn_pw = nn.BatchNorm2d(5)
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        x = torch.relu(self.bn_dw(self.dw(x)))
        x = torch.relu(self.bn_pw(self.pw(x)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Concat(nn.Module):
    """Two branches concatenated, flattened over 2x2 positions, read by a Linear."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 3, 3, padding=1), nn.Conv2d(1, 2, 3, padding=1)
        self.pool, self.flat = nn.AdaptiveMaxPool2d(2), nn.Flatten()
        self.head = nn.Linear(20, 2)

    def forward(self, x):
        h = torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], dim=1)
        return self.head(self.flat(self.pool(h)))


def _randomized(model):
    """float64, eval mode, batch norms with non-trivial statistics and affine maps."""
    torch.manual_seed(0)
    model = model.double().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.5, 0.5)
    return model


def _labels(groups, name, dim=0):
    return groups.tensors[name, dim].labels


def test_groups_couple_bn_residuals_projections_and_depthwise_filters():
    model = _randomized(ResNetish())
    groups = channel_groups(model, torch.randn(2, 1, 8, 8, dtype=torch.float64))
    stem = _labels(groups, "stem.0.weight")
    # the identity shortcut: stem and layer1.conv2 carry the same channels, their batch
    # norms too, and layer1.conv1 / layer2's convs read them
    for name in ("stem.1.weight", "stem.1.bias", "layer1.conv2.weight", "layer1.bn2.bias"):
        np.testing.assert_array_equal(_labels(groups, name), stem)
    np.testing.assert_array_equal(_labels(groups, "layer1.conv1.weight", 1), stem)
    np.testing.assert_array_equal(_labels(groups, "layer2.short.0.weight", 1), stem)
    # the projection shortcut joins layer2.conv2's channels; the depthwise filter and its
    # batch norm keep them (channel c in, channel c out); the pointwise conv reads them
    out2 = _labels(groups, "layer2.conv2.weight")
    for name in ("layer2.short.0.weight", "layer2.short.1.weight", "dw.weight", "dw.bias"):
        np.testing.assert_array_equal(_labels(groups, name), out2)
    np.testing.assert_array_equal(_labels(groups, "pw.weight", 1), out2)
    assert groups.tensors["stem.1.running_var", 0].role == "stat"
    assert groups.tensors["pw.weight", 1].role == "reader"
    assert set(groups.producers[int(out2[0])]) == {"layer2.conv2", "layer2.short.0"}
    # every conv channel is one group: 4 + 4 + 6 + 6 + 5; the head is the output
    assert groups.n_groups == 25
    assert ("head.weight", 0) not in groups.tensors


def test_cat_offsets_channels_and_flatten_repeats_them_per_position():
    groups = channel_groups(Concat(), torch.randn(2, 1, 4, 4))
    a, b = _labels(groups, "a.weight"), _labels(groups, "b.weight")
    assert len(set(a) | set(b)) == 5
    np.testing.assert_array_equal(_labels(groups, "head.weight", 1), np.repeat(np.r_[a, b], 4))


def test_an_unknown_operation_on_a_channel_path_is_named():
    class Flip(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            h = torch.flip(self.conv(x), dims=[1])
            return self.head(h.mean((2, 3)))

    with pytest.raises(ValueError, match=r"layer 'conv'.*'flip'.*gates=\{'channels'"):
        channel_groups(Flip(), torch.randn(2, 1, 5, 5))
    with pytest.raises(ValueError, match="cannot trace"):
        channel_groups(_Branchy(), torch.randn(2, 1, 5, 5))


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow
            return self.conv(x)
        return -self.conv(x)


def _gated(model, x):
    groups = channel_groups(model, x)

    def lead(owner, attr, grouping, init):
        sparsify(owner, attr, groups=grouping, init=init, D=3)

    gate_channels(model, groups, lead)
    return groups


def test_one_set_of_gates_per_group_over_all_its_tensors():
    model = _randomized(ResNetish())
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    expected = model(x)
    groups = _gated(model, x)
    torch.testing.assert_close(model(x), expected, rtol=0, atol=EXACT)  # identity start
    gates = {id(s.gates) for *_, s in sparsified_tensors(model)}
    leaders = [s for *_, s in sparsified_tensors(model) if not s.tied]
    assert len(gates) == len(leaders) and sum(s.n_groups for s in leaders) == groups.n_groups
    # the penalty counts each factor once: (||omega||^2 over every slice + ||Gamma||^2) / D
    omega = sum(
        m.parametrizations[n].original.pow(2).sum() for _, m, n, _ in sparsified_tensors(model)
    )
    expected_penalty = (omega + sum(s.gates.pow(2).sum() for s in leaders)) / 3
    torch.testing.assert_close(penalty(model), expected_penalty)
    # a group's gate at zero zeroes it in every tensor (the shortcut's conv included)
    group = int(_labels(groups, "layer2.conv2.weight")[2])
    sparsifiers = {q: s for q, _, _, s in sparsified_tensors(model)}

    def local(name):  # the group's index among the gates of the tensor's tie
        position = int(np.flatnonzero(groups.gated()[name].labels == group)[0])
        index = sparsifiers[name].grouping.index
        return position if index is None else int(index[position])

    with torch.no_grad():
        sparsifiers["layer2.conv2.weight"].gates[:, local("layer2.conv2.weight")] = 0
    norms = group_norms(model)
    spanned = [name for name, t in groups.gated().items() if (t.labels == group).any()]
    assert len(spanned) == 10  # conv2, bn2 (2), shortcut conv + bn (3), dw (2), bn_dw (2)
    for name in spanned:
        assert norms[name][local(name)] == 0


def _zero_groups(model, groups, chosen):
    with torch.no_grad():
        for name, t in groups.gated().items():
            p = model.get_parameter(name)
            index = torch.as_tensor(np.flatnonzero(np.isin(t.labels, chosen)))
            p.index_fill_(t.dim, index, 0.0)


@pytest.mark.parametrize("model_class", [ResNetish, Concat])
def test_compaction_removes_a_group_everywhere_exactly(model_class):
    model = _randomized(model_class())
    x = torch.randn(5, 1, 8, 8, dtype=torch.float64)
    groups = channel_groups(model, x, layers=(nn.Conv2d,))
    # every other group: residual ones, projection + depthwise ones, branches of a cat
    _zero_groups(model, groups, np.arange(0, groups.n_groups, 2))
    small, report = compact_channels(model, x)
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=EXACT)
    torch.testing.assert_close(small(2 * x + 1), model(2 * x + 1), rtol=0, atol=EXACT)
    assert report.params_after < report.params_before
    assert report.flops_after < report.flops_before
    for name, units in report.kept_units.items():
        assert small.get_submodule(name).weight.shape[0] == len(units)
    if model_class is ResNetish:
        assert small.dw.groups == small.dw.in_channels == small.dw.out_channels == 3
        assert small.stem[1].running_mean.shape == (2,)


class GroupNormed(nn.Module):
    """Group norms: two groups of two channels, then one channel per group."""

    def __init__(self):
        super().__init__()
        self.conv1, self.gn1 = nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4)
        self.conv2, self.gn2 = nn.Conv2d(4, 3, 3, padding=1), nn.GroupNorm(3, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        x = torch.relu(self.gn1(self.conv1(x)))
        x = torch.relu(self.gn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


def test_a_group_norm_couples_the_channels_of_each_of_its_groups():
    # its statistics mix the channels of a group: they form one channel group (with the
    # group norm's scale and shift), removed whole and exactly
    model = _randomized(GroupNormed())
    with torch.no_grad():
        for gn in (model.gn1, model.gn2):
            nn.init.uniform_(gn.weight, 0.5, 1.5)
            nn.init.uniform_(gn.bias, -0.5, 0.5)
    x = torch.randn(5, 1, 6, 6, dtype=torch.float64)
    groups = channel_groups(model, x)
    conv1 = _labels(groups, "conv1.weight")
    assert conv1[0] == conv1[1] != conv1[2] == conv1[3]
    np.testing.assert_array_equal(_labels(groups, "gn1.bias"), conv1)
    assert len(set(_labels(groups, "conv2.weight"))) == 3 and groups.n_groups == 5
    _zero_groups(model, groups, [int(conv1[2]), int(_labels(groups, "conv2.weight")[0])])
    small, _ = compact_channels(model, x)
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=EXACT)
    assert (small.gn1.num_groups, small.gn1.num_channels) == (1, 2)
    assert (small.gn2.num_groups, small.gn2.num_channels) == (2, 2)
    assert small.conv2.in_channels == 2


class Seq1d(nn.Module):
    """Conv1d + BatchNorm1d, a depthwise conv called twice, a subtraction, a flatten
    written as a view, a hidden Linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4)
        self.dw = nn.Conv1d(4, 4, 3, padding=1, groups=4)
        self.hidden, self.head = nn.Linear(4 * 5, 6), nn.Linear(6, 2)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        h = self.dw(h) - self.dw(h * 0.5)
        h = nn.functional.max_pool1d(h, 2)
        return self.head(nn.functional.gelu(self.hidden(h.view(h.size(0), -1))))


def test_conv1d_shared_layers_views_and_hidden_units_compact_exactly():
    model = _randomized(Seq1d())
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(3, 2, 10, dtype=torch.float64)
    groups = channel_groups(model, x, layers=(nn.Conv1d, nn.Linear))
    conv = _labels(groups, "conv.weight")
    np.testing.assert_array_equal(_labels(groups, "dw.weight"), conv)  # called twice
    np.testing.assert_array_equal(_labels(groups, "hidden.weight", 1), np.repeat(conv, 5))
    assert groups.n_groups == 4 + 6  # the conv's channels, the hidden units
    _zero_groups(model, groups, [int(conv[1]), int(_labels(groups, "hidden.weight")[2])])
    small, report = compact_channels(model, x)
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=EXACT)
    assert report.kept_units["conv"] == [0, 2, 3] and report.kept_units["hidden"] == [0, 1, 3, 4, 5]
    assert small.dw.groups == 3 and small.hidden.in_features == 15


def test_a_group_whose_zero_channel_is_not_zero_downstream_stays():
    class Sig(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.head = nn.Conv2d(1, 3, 3), nn.Conv2d(3, 2, 3)

        def forward(self, x):
            return self.head(torch.sigmoid(self.conv(x)))  # sigmoid(0) = 1/2

    model = Sig().double().eval()
    x = torch.randn(2, 1, 7, 7, dtype=torch.float64)
    groups = channel_groups(model, x)
    _zero_groups(model, groups, [0])
    small, report = compact_channels(model, x)
    assert report.kept_units["conv"] == [0, 1, 2]
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=EXACT)


class BNCNN(nn.Module):
    def __init__(self, n_features=1, n_outputs=3):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(n_features, 6, 3, padding=1), nn.BatchNorm2d(6)
        self.conv2, self.bn2 = nn.Conv2d(6, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.head = nn.Linear(8, n_outputs)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


def _images(n=120, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 1, 6, 6).astype(np.float32)
    return X, (X[:, 0, :, :3].mean(axis=(1, 2)) > 0).astype(int)


@pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("gates", ["channels", {"conv1.weight": "out", "conv2.weight": "out"}])
def test_a_removed_group_is_zero_in_every_tensor_and_compaction_keeps_predictions(gates):
    # a lam that removes every group: each is zero in its filter, bias and batch norm
    # (a filter gate alone would leave the batch norm's shift alive)
    X, y = _images()
    clf = DGatedNeuralNetClassifier(
        BNCNN, module__n_outputs=2, gates=gates, lam=20.0, max_epochs=8, batch_size=32,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    assert list(clf.tensor_group_norms_) == ["conv1.weight", "conv2.weight"]
    assert len(clf.group_norms_) == 6 + 8  # one norm per group
    user = clf.module_.module
    for layer, bn in ((user.conv1, user.bn1), (user.conv2, user.bn2)):
        assert isinstance(bn.weight, nn.Parameter)  # collapsed: plain weights
        dead = (layer.weight.detach().flatten(1) == 0).all(dim=1)
        assert dead.all()
        for tensor in (layer.bias, bn.weight, bn.bias):
            assert torch.all(tensor.detach()[dead] == 0)
    small = clf.compact().double()
    assert small.module.conv1.out_channels == small.module.conv2.out_channels == 1
    with torch.no_grad():
        out = small(torch.as_tensor(X, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(out, clf.decision_function(X), rtol=0, atol=1e-9)


def test_prefixes_choose_the_layers_and_lambda_max_reads_the_groups():
    X, y = _images(40)
    clf = DGatedNeuralNetClassifier(BNCNN, gates=["conv2"], max_epochs=1, random_state=0)
    clf.fit(X, y)
    assert clf.channel_group_layers_ == {"conv2.weight": [["conv2"]] * 8}
    assert list(clf.tensor_group_norms_) == ["conv2.weight"]
    # lambda_max: the largest gradient norm of a group over all its tensors, so above
    # that of the filters alone
    top = clf.lambda_max(X, y)
    alone = DGatedNeuralNetClassifier(BNCNN, gates={"conv2.weight": "out"}, sparsifier="l21")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the batch norm stays out of l21
        assert top > alone.set_params(random_state=0).lambda_max(X, y) > 0


def test_declaration_errors_and_the_warning_naming_the_batch_norm():
    X, y = _images(30)
    for gates, match in [
        ("filters", "must be 'channels'"),
        ([], "module prefixes"),
        ({"channels": []}, "gates\\['channels'\\]"),
        (["head"], "no channel of the modules under \\['head'\\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            DGatedNeuralNetClassifier(BNCNN, gates=gates, max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="sparsifier='dgating'"):
        DGatedNeuralNetClassifier(BNCNN, gates="channels", sparsifier="l21", max_epochs=1).fit(X, y)
    with pytest.warns(UserWarning, match="batch norm 'bn1'"):
        DGatedNeuralNetClassifier(
            BNCNN, gates={"conv1.weight": "out"}, sparsifier="l21", max_epochs=1
        ).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = _randomized(ResNetish())
        _gated(model, torch.randn(2, 1, 8, 8, dtype=torch.float64))
        collapse(model)


class _BNMLP(nn.Module):
    """Tabular: Linear -> BatchNorm1d -> ReLU -> Linear (the hidden units are channels)."""

    def __init__(self, n_features=4, hidden=6, n_outputs=2):
        super().__init__()
        self.hidden = nn.Linear(n_features, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.out = nn.Linear(hidden, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.hidden(x))))


class _SoftmaxMLP(nn.Module):
    """Hidden units mixed by a softmax (an operation channel groups do not follow)."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        return self.out(torch.softmax(self.hidden(x), dim=1))


@pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")
def test_channels_gate_the_hidden_units_of_linear_layers():
    # one group per hidden unit over the Linear's row, its bias and the batch norm; the
    # output layer's units reach the output and stay. A lam that removes every group:
    # zero in each tensor, and the compacted model predicts the same
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    clf = DGatedNeuralNetClassifier(
        _BNMLP(), gates="channels", lam=20.0, max_epochs=8, batch_size=15, random_state=0
    ).fit(X, y)
    assert clf.channel_group_layers_ == {"hidden.weight": [["hidden"]] * 6}
    user = clf.module_.module
    assert torch.all(user.hidden.weight == 0) and torch.all(user.hidden.bias == 0)
    assert torch.all(user.bn.weight == 0) and torch.all(user.bn.bias == 0)
    small = clf.compact().double()
    assert small.module.hidden.out_features == 1  # a layer keeps one unit
    with torch.no_grad():
        out = small(torch.as_tensor(X, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(out, clf.decision_function(X), rtol=0, atol=1e-9)
    # a Linear whose units the trace cannot follow is left out (where a convolution's
    # would be an error): here nothing is left to gate, and the error names why
    with pytest.raises(ValueError, match="no channel of the module can be removed.*'hidden'"):
        DGatedNeuralNetClassifier(_SoftmaxMLP(), gates="channels", max_epochs=1).fit(X, y)


class _FakeReport:
    def __init__(self, share):
        self.flops_before, self.flops_after = 1000, round(1000 * share)
        self.params_before, self.params_after = 100, round(100 * share)


class _SizeByLam(BaseEstimator):
    """Keeps ``1 / (1 + lam)`` of its size: lam_for_target's search on a known curve."""

    def __init__(self, lam=1.0, warm_start=False):
        self.lam, self.warm_start = lam, warm_start

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def compact(self, return_report=False):
        return None, _FakeReport(1 / (1 + self.lam))


def test_lam_for_target_brackets_and_bisects_to_the_share():
    X, y = np.zeros((4, 2)), np.zeros(4)
    result = lam_for_target(_SizeByLam(lam=0.01), X, y, flops=0.25, tol=0.02)
    # share 1 / (1 + lam) <= 0.25 needs lam >= 3; within tol: share in [0.23, 0.25]
    assert 0.23 <= result.share <= 0.25 and result.lam >= 3
    assert result.trials[0][0] == 0.01 and len(result.trials) <= 10
    assert [lam for lam, _ in result.trials[:4]] == [0.01, 0.04, 0.16, 0.64]  # x 4
    assert result.estimator.lam == result.lam and result.estimator.fitted_
    assert lam_for_target(_SizeByLam(lam=100), X, y, params=0.5, max_fits=1).lam == 100
    for kwargs, match in [
        ({}, "exactly one"),
        ({"flops": 0.5, "params": 0.5}, "exactly one"),
        ({"flops": 1.5}, "share in"),
        ({"params": 0.5, "max_fits": 0}, "max_fits"),
    ]:
        with pytest.raises(ValueError, match=match):
            lam_for_target(_SizeByLam(), X, y, **kwargs)


class _DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 24, 3, padding=1), nn.BatchNorm2d(24)
        self.conv2, self.bn2 = nn.Conv2d(24, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.pool, self.head = nn.AdaptiveAvgPool2d(1), nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(torch.flatten(self.pool(x), 1))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("max_epochs", [None, 40])
@pytest.mark.parametrize("gates", ["channels", {"conv1.weight": "out", "conv2.weight": "out"}])
def test_a_batch_norm_cnn_on_digits_loses_filters_not_accuracy(gates, max_epochs):
    # the case: filter gates alone kept all 56 filters behind the batch norms;
    # with its fixed budget of 40 epochs the coupled groups were still in transit at the
    # end until the drop at the end of a fixed budget
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X.reshape(-1, 1, 8, 8).astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    torch.manual_seed(0)  # the module's own init
    clf = DGatedNeuralNetClassifier(
        _DigitsCNN(), gates=gates, lam=0.01, max_epochs=max_epochs, random_state=0
    )
    clf.fit(X_train, y_train)
    assert clf.score(X_test, y_test) >= 0.9
    small, report = clf.compact(return_report=True)
    conv = sum(small.module.get_submodule(c).weight.numel() for c in ("conv1", "conv2"))
    assert conv < 0.7 * (24 * 9 + 32 * 24 * 9)  # more than 30% of the conv weights gone
    with torch.no_grad():
        out = small.double()(torch.as_tensor(X_test, dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(out.argmax(1), clf.predict(X_test))
