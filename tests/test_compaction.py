"""Compaction: smaller models with the same outputs, and their parameter / FLOP counts."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sksparse_nn.compaction import (
    CompactAttention,
    compact_attention,
    compact_module,
    compact_sequential,
    count_flops,
    count_parameters,
)

pytestmark = pytest.mark.usefixtures("float64_default")  # exact equality up to float64


def _cnn():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Sequential(nn.Conv2d(8, 6, 3), nn.ReLU()),  # nested blocks are flattened
        nn.Flatten(),
        nn.Linear(6 * 2 * 2, 10),
        nn.ReLU(),
        nn.Linear(10, 3),
    )
    with torch.no_grad():
        bn = model[1]
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return model.eval()


def test_conv_bn_chain_drops_dead_filters_and_neurons_exactly():
    model = _cnn()
    with torch.no_grad():
        model[0].weight[[1, 4]] = 0  # no incoming weights: constants, folded forward
        model[4][0].weight[:, 6] = 0  # filter 6 of conv 1 is never read
        model[4][0].weight[2] = 0  # constant filter, read by the Linear after Flatten
        model[6].weight[3] = 0  # neuron 3: constant, folded into the last bias
        model[8].weight[:, 5] = 0  # neuron 5 is never read
    x = torch.randn(7, 3, 8, 8)
    small, report = compact_sequential(model, x)
    assert report.kept_units == {
        "0": [0, 2, 3, 5, 7],
        "4.0": [0, 1, 3, 4, 5],
        "6": [0, 1, 2, 4, 6, 7, 8, 9],
        "8": [0, 1, 2],
    }
    # float64 sums in another order: rounding only
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)
    assert report.params_after == count_parameters(small) < report.params_before
    assert report.flops_after < report.flops_before


@pytest.mark.parametrize("bias, kept", [(0.7, True), (-0.7, False)])
def test_constant_channel_before_a_zero_padded_conv(bias, kept):
    """Behind padding a constant channel is not constant at the border: it may only go
    when its constant is exactly 0 (ReLU of a negative bias)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 1, 3, padding=1)).eval()
    with torch.no_grad():
        model[0].weight[1] = 0
        model[0].bias[1] = bias
    x = torch.randn(4, 1, 7, 7)
    small, report = compact_sequential(model, x)
    assert (1 in report.kept_units["0"]) == kept
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)


def test_counts_on_hand_computable_models():
    mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    assert count_parameters(mlp) == 4 * 3 + 3 + 3 * 2 + 2
    assert count_flops(mlp, torch.randn(5, 4)) == 2 * (4 * 3 + 3 * 2)
    conv = nn.Sequential(nn.Conv2d(1, 2, 3))  # 5x5 -> 3x3
    assert count_flops(conv, torch.randn(2, 1, 5, 5)) == 2 * (1 * 3 * 3) * 2 * (3 * 3)


def test_first_layer_inputs_can_be_dropped():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 1)).eval()
    with torch.no_grad():
        model[0].weight[:, [0, 3]] = 0
    x = torch.randn(6, 5)
    small, report = compact_sequential(model, x, drop_inputs=True)
    assert report.kept_inputs == [1, 2, 4]
    torch.testing.assert_close(small(x[:, report.kept_inputs]), model(x))


def test_attention_heads_are_removed_and_flops_follow():
    torch.manual_seed(0)
    E, h = 16, 4
    d = E // h
    mha = nn.MultiheadAttention(E, h, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight[2 * E + d : 2 * E + 2 * d] = 0  # head 1: value rows zero
        mha.in_proj_bias[2 * E + d : 2 * E + 2 * d] = 0.3  # ... its constant output
        mha.out_proj.weight[:, 3 * d :] = 0  # head 3 is never read
    q = torch.randn(3, 5, E)
    small = compact_attention(mha)
    assert small.n_heads == 2
    torch.testing.assert_close(small(q, q, q)[0], mha(q, q, q)[0], rtol=1e-12, atol=1e-12)
    L = S = 5
    full = 4 * L * S * E + 2 * E * E * (2 * L + 2 * S)
    half = 4 * L * S * (E // 2) + 2 * E * (E // 2) * (2 * L + 2 * S)
    assert count_flops(mha, (q, q, q)) == full and count_flops(small, (q, q, q)) == half
    with pytest.raises(ValueError, match="Head 0 is live"):
        compact_attention(mha, keep_heads=[2])


def test_attention_without_live_heads_still_runs_and_is_counted():
    torch.manual_seed(0)
    E, h = 8, 2
    mha = nn.MultiheadAttention(E, h, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight[2 * E :] = 0  # every head's value rows: constants only
    q = torch.randn(3, 5, E)
    small = compact_attention(mha)
    assert small.n_heads == 0
    torch.testing.assert_close(small(q, q, q)[0], mha(q, q, q)[0], rtol=1e-12, atol=1e-12)
    assert count_flops(small, (q, q, q)) == 0  # the output is its bias


def test_unsupported_models_are_refused():
    with pytest.raises(ValueError, match="needs an nn.Sequential"):
        compact_sequential(nn.Linear(2, 2), torch.randn(1, 2))


def test_a_grouped_convolution_is_left_whole():
    """A grouped conv is neither a producer nor a consumer: the units around it stay."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 1), nn.ReLU(), nn.Conv2d(4, 4, 1, groups=2), nn.Conv2d(4, 3, 1)
    ).eval()
    with torch.no_grad():
        model[0].weight[1] = 0
        model[3].weight[:, 2] = 0
    x = torch.randn(3, 2, 5, 5)
    small, report = compact_sequential(model, x)
    assert report.kept_units == {"0": [0, 1, 2, 3], "3": [0, 1, 2]}
    assert report.params_after == report.params_before
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)


def test_estimator_compact_keeps_predictions():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sksparse_nn import DGatedNeuralNetClassifier

    rng = np.random.RandomState(0)
    X = rng.randn(300, 3, 6, 6).astype(np.float32)
    y = (X[:, 0].mean(axis=(1, 2)) > 0).astype(int)
    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 2),
    )
    clf = DGatedNeuralNetClassifier(cnn, gates={"0.weight": "out"}, lam=0.05, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    small, report = clf.compact(return_report=True)
    n_live = int((clf.tensor_group_norms_["0.weight"] > 0).sum())
    assert len(report.kept_units["0"]) == n_live < 8
    with torch.no_grad():
        logits = small(torch.as_tensor(X)).double().numpy()
    # float32 model, outputs of order 1: rounding of the reordered sums
    np.testing.assert_allclose(logits, clf.decision_function(X).reshape(len(X), -1), atol=1e-5)


def test_a_layer_without_live_units_keeps_one_and_still_runs():
    model = _cnn()
    with torch.no_grad():
        model[0].weight.zero_()  # every filter of the first conv emits a constant
        model[6].weight.zero_()  # and no neuron of the first Linear feeds the last one
    x = torch.randn(5, 3, 8, 8)
    small, report = compact_sequential(model, x)
    assert report.kept_units["0"] == [0] and report.kept_units["6"] == [0]
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- compact_module (torch.fx)
class _FunctionalCNN(nn.Module):
    """The network of ``_cnn`` written with functional calls in a forward of its own."""

    def __init__(self):
        super().__init__()
        seq = _cnn()
        self.conv1, self.bn, self.conv2 = seq[0], seq[1], seq[4][0]
        self.fc1, self.fc2 = seq[6], seq[8]

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
        h = torch.flatten(self.conv2(h).relu(), 1)
        return self.fc2(F.relu(self.fc1(h)))


def _zero_like_the_sequential_test(m):
    with torch.no_grad():
        m.conv1.weight[[1, 4]] = 0
        m.conv2.weight[:, 6] = 0
        m.conv2.weight[2] = 0
        m.fc1.weight[3] = 0
        m.fc2.weight[:, 5] = 0


def test_module_with_functional_forward_compacts_like_the_sequential():
    model = _FunctionalCNN().eval()
    _zero_like_the_sequential_test(model)
    x = torch.randn(7, 3, 8, 8)
    small, report = compact_module(model, x)
    assert type(small) is _FunctionalCNN  # the user's class and forward are kept
    assert report.kept_units == {
        "conv1": [0, 2, 3, 5, 7],
        "conv2": [0, 1, 3, 4, 5],
        "fc1": [0, 1, 2, 4, 6, 7, 8, 9],
        "fc2": [0, 1, 2],
    }
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)
    assert report.params_after == count_parameters(small) < report.params_before


class _LateFusion(nn.Module):
    """A conv branch on images and an MLP branch on a table, joined by torch.cat."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.tab = nn.Linear(5, 6)
        self.fusion = nn.Linear(4 * 2 * 2 + 6, 7)
        self.head = nn.Linear(7, 2)

    def forward(self, image, table):
        a = torch.flatten(F.avg_pool2d(torch.relu(self.bn(self.conv(image))), 2), 1)
        b = torch.tanh(self.tab(table))
        h = self.fusion(torch.relu(torch.cat([a, b], dim=1)) * 0.5)
        return self.head(F.relu(h))


def _late_fusion():
    torch.manual_seed(0)
    model = _LateFusion().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.bias.uniform_(-1, 1)
    return model


@pytest.mark.parametrize("dead", ["image", "table", "units"])
def test_late_fusion_branches_shrink_through_the_concatenation(dead):
    model = _late_fusion()
    with torch.no_grad():
        if dead == "image":  # the fusion layer never reads the image branch
            model.fusion.weight[:, :16] = 0
        elif dead == "table":
            model.fusion.weight[:, 16:] = 0
        else:  # filter 1 emits a constant; table unit 4 is never read; hidden 3 is dead
            model.conv.weight[1] = 0
            model.fusion.weight[:, 16 + 4] = 0
            model.head.weight[:, 3] = 0
    image, table = torch.randn(6, 1, 6, 6), torch.randn(6, 5)
    small, report = compact_module(model, (image, table))
    expected = {
        "image": {"conv": [0], "tab": list(range(6))},
        "table": {"conv": [0, 1, 2, 3], "tab": [0]},  # a layer keeps one unit
        "units": {"conv": [0, 2, 3], "tab": [0, 1, 2, 3, 5]},
    }[dead]
    assert {k: report.kept_units[k] for k in ("conv", "tab")} == expected
    if dead == "units":
        assert report.kept_units["fusion"] == [0, 1, 2, 4, 5, 6]
    torch.testing.assert_close(small(image, table), model(image, table), rtol=1e-12, atol=1e-12)
    assert report.flops_after < report.flops_before


class _DeepFusion(nn.Module):
    """Late fusion with a three-layer image branch (conv, conv, linear)."""

    def __init__(self):
        super().__init__()
        self.image = nn.Sequential(
            nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 6, 3), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 5), nn.ReLU(),
        )  # fmt: skip
        self.table = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU())
        self.fusion = nn.Linear(5 + 4, 1)

    def forward(self, x):
        pixels = x[:, :49].reshape(-1, 1, 7, 7)
        return self.fusion(torch.cat([self.image(pixels), self.table(x[:, 49:])], dim=1))


def test_a_dead_branch_shrinks_to_one_unit_per_layer():
    # the fusion layer never reads the image branch: its last layer loses its readers,
    # then the convolutions before it do too (passes until nothing more goes); each
    # layer keeps one unit (width 0 does not run) whose incoming weights are zeroed
    torch.manual_seed(0)
    model = _DeepFusion().double().eval()
    with torch.no_grad():
        model.fusion.weight[:, :5] = 0
    x = torch.randn(8, 52, dtype=torch.float64)
    small, report = compact_module(model, x)
    assert {k: report.kept_units[k] for k in ("image.0", "image.2", "image.6")} == {
        "image.0": [0], "image.2": [0], "image.6": [0],
    }  # fmt: skip
    assert report.kept_units["table.0"] == list(range(8))
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)
    # the remaining width-1 convolutions still run over the image: 736 of 5878 FLOPs
    assert report.flops_after == count_flops(small, x) < 0.2 * report.flops_before
    assert model.image[0].weight.abs().sum() > 0  # the user's model untouched


class _Opaque(nn.Module):
    """Data flow compaction must not cross: a residual sum, a reshape to a hard-coded
    width, a layer used twice."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.twice = nn.Linear(4, 4)
        self.c, self.d = nn.Linear(4, 6), nn.Linear(6, 2)

    def forward(self, x):
        h = torch.relu(self.a(x)) + x  # a's units are read by the sum, not by a layer
        h = self.twice(self.twice(self.b(h)))
        h = self.c(h).view(-1, 6)
        return self.d(h)


def test_operations_it_cannot_see_through_keep_their_units():
    torch.manual_seed(0)
    model = _Opaque().eval()
    with torch.no_grad():
        for layer in (model.a, model.b, model.twice, model.c):
            layer.weight[1] = 0  # incoming zeros everywhere
        model.d.weight[:, 2] = 0
    x = torch.randn(5, 4)
    small, report = compact_module(model, x)
    assert report.kept_units["a"] == [0, 1, 2, 3]  # residual
    assert report.kept_units["b"] == [0, 1, 2, 3]  # feeds a layer used twice
    assert report.kept_units["twice"] == [0, 1, 2, 3]
    assert report.kept_units["c"] == list(range(6))  # a view between c and d
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)


class _Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 4, batch_first=True)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.attn(x, x, x, need_weights=False)[0].mean(dim=1))


def test_attention_inside_a_module_loses_its_dead_heads():
    torch.manual_seed(0)
    model = _Attn().eval()
    with torch.no_grad():
        model.attn.out_proj.weight[:, 2:6] = 0  # heads 1 and 2 are never read
    x = torch.randn(3, 5, 8)
    small, report = compact_module(model, x)
    assert isinstance(small.attn, CompactAttention) and small.attn.n_heads == 2
    assert report.kept_units["attn"] == [0, 3]
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)


def test_the_users_model_is_left_as_it_was():
    model = _late_fusion().train()
    model.bn.eval()  # mixed modes survive too
    model.fusion.weight.data[:, :16] = 0
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compact_module(model, (torch.randn(4, 1, 6, 6), torch.randn(4, 5)))
    assert model.training and not model.bn.training and model.conv.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


class _Untraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow
            return self.fc(x)
        return -self.fc(x)


def test_an_untraceable_module_gets_a_clear_error():
    with pytest.raises(ValueError, match="torch.fx, which cannot trace this _Untraceable"):
        compact_module(_Untraceable(), torch.randn(2, 3))


class _TwoBranchNet(nn.Module):
    """Columns 0-3 through one branch, 4-7 through another, fused by a Linear."""

    def __init__(self, n_features=8, n_outputs=1):
        super().__init__()
        self.left, self.right = nn.Linear(4, 6), nn.Linear(n_features - 4, 6)
        self.fusion = nn.Linear(12, n_outputs)

    def forward(self, x):
        h = torch.cat([self.left(x[:, :4]), self.right(x[:, 4:])], dim=1)
        return self.fusion(torch.relu(h))


def test_estimator_compacts_a_module_with_its_own_forward():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sksparse_nn import DGatedNeuralNetRegressor
    from sksparse_nn.groups import AxisGroups

    rng = np.random.RandomState(0)
    X = rng.randn(400, 8).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.randn(400)  # the right branch is noise
    modality = AxisGroups(1, np.repeat([0, 1], 6))  # fusion columns grouped by branch
    est = DGatedNeuralNetRegressor(
        _TwoBranchNet, gates={"fusion.weight": modality}, lam=0.05, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    norms = est.tensor_group_norms_["fusion.weight"]
    assert norms[1] == 0 < norms[0]  # exact zero for the noise branch
    small, report = est.compact(return_report=True)
    assert report.kept_units["right"] == [0]  # one unit kept: a layer never goes to width 0
    assert small.module.right.out_features == 1
    with torch.no_grad():
        pred = small(torch.as_tensor(X)).double().numpy().ravel()
    # float32 model, outputs of order 1: rounding of the reordered sums
    np.testing.assert_allclose(pred, est.predict(X), atol=1e-5)
