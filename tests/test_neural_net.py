"""DGatedNeuralNetClassifier / Regressor: a user's torch module with declared gates."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks
from torch import nn

from sksparse_nn import DGatedNeuralNetClassifier, DGatedNeuralNetRegressor


class TinyNet(nn.Module):
    """A two-layer network sized by the estimator (n_features, n_outputs)."""

    def __init__(self, n_features, n_outputs, hidden=8):
        super().__init__()
        self.hidden = nn.Linear(n_features, hidden)
        self.out = nn.Linear(hidden, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class TinyCNN(nn.Module):
    def __init__(self, n_features, n_outputs, filters=6):
        super().__init__()
        self.conv = nn.Conv2d(n_features, filters, 3, padding=1)
        self.head = nn.Linear(filters, n_outputs)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))


SMALL = {"gates": {"hidden.weight": "in"}, "lam": 1e-3, "max_epochs": 10, "random_state": 0}


@parametrize_with_checks(
    [DGatedNeuralNetRegressor(TinyNet, **SMALL), DGatedNeuralNetClassifier(TinyNet, **SMALL)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _quiet(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short fits on purpose
        return est.fit(X, y)


def test_only_the_informative_input_channel_survives():
    """Images with 3 channels, the label depends on channel 0 only: the first conv's
    input-channel groups of channels 1 and 2 end exactly at zero, channel 0 lives."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3, 6, 6).astype(np.float32)
    y = (X[:, 0].mean(axis=(1, 2)) > 0).astype(int)
    clf = DGatedNeuralNetClassifier(TinyCNN, gates={"conv.weight": "in"}, lam=0.05, random_state=0)
    _quiet(clf, X, y)
    norms = clf.tensor_group_norms_["conv.weight"]
    assert norms[0] > 0 and norms[1] == 0.0 and norms[2] == 0.0
    dead, live = clf.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live
    assert torch.equal(clf.module_.module.conv.weight[:, 1:], torch.zeros(6, 2, 3, 3))
    assert clf.score(X, y) > 0.9


def test_instance_module_is_copied_and_input_features_are_selected():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 6)
    y = 3 * X[:, 0] - 2 * X[:, 1] + 0.1 * rng.randn(300)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    before = [p.detach().clone() for p in net.parameters()]
    reg = DGatedNeuralNetRegressor(net, gates={"0.weight": "in"}, lam=0.05, random_state=0)
    _quiet(reg, X, y)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    norms = reg.tensor_group_norms_["0.weight"]
    assert set(np.flatnonzero(norms)) == {0, 1}
    np.testing.assert_array_equal(reg.selected_components_, [0, 1])
    assert reg.score(X, y) > 0.95  # targets standardized in training, user units out
    again = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(again.predict(X), reg.predict(X))


def test_module_parameters_clone_and_grid_search():
    rng = np.random.RandomState(0)
    X = rng.randn(120, 4)
    y = X[:, 0]
    est = DGatedNeuralNetRegressor(TinyNet, module__hidden=4, **SMALL)
    assert est.get_params()["module__hidden"] == 4
    assert clone(est).get_params()["module__hidden"] == 4
    est.set_params(module__hidden=6, lam=0.02)
    assert est.module__hidden == 6 and est.lam == 0.02
    _quiet(est, X, y)
    assert est.module_.module.hidden.out_features == 6
    search = GridSearchCV(est, {"module__hidden": [2, 6], "lam": [1e-3, 1e-2]}, cv=2)
    _quiet(search, X, y)
    assert set(search.best_params_) == {"module__hidden", "lam"}


def test_regularization_path_counts_groups():
    rng = np.random.RandomState(0)
    X = rng.randn(150, 5)
    y = X[:, 0] - X[:, 1]
    est = DGatedNeuralNetRegressor(TinyNet, **{**SMALL, "max_epochs": 30})
    assert est.lambda_max(X, y) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = est.regularization_path(X, y, n_lams=4, lam_min_ratio=0.05)
    assert path.n_selected[0] >= 2 and path.n_selected[-1] == 0
    assert path.group_norms.shape[1] == 5


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"gates": {"nope.weight": "in"}}, ValueError, "'nope.weight' is not a parameter"),
        ({"gates": {}}, ValueError, "gates is empty"),
        ({"gates": {"hidden.weight": "rows"}}, ValueError, "gates\\['hidden.weight'\\]"),
        ({"module__width": 3}, ValueError, "module__\\* parameters do not fit"),
    ],
)
def test_bad_declarations_raise_clear_errors(params, error, message):
    X, y = np.random.RandomState(0).randn(30, 4), np.arange(30.0)
    with pytest.raises(error, match=message):
        DGatedNeuralNetRegressor(TinyNet, **{**SMALL, **params}).fit(X, y)


def test_output_width_and_instance_kwargs_are_checked():
    X, y = np.random.RandomState(0).randn(30, 4), np.arange(30) % 3
    net = nn.Sequential(nn.Linear(4, 2))
    with pytest.raises(ValueError, match="returns 2 logits per sample; 3 classes need 3"):
        DGatedNeuralNetClassifier(net, gates={"0.weight": "in"}, max_epochs=2).fit(X, y)
    with pytest.raises(ValueError, match="need `module` to be a class"):
        DGatedNeuralNetClassifier(
            net, gates={"0.weight": "in"}, module__hidden=3, max_epochs=2
        ).fit(X, y)
    with pytest.raises(TypeError, match="unexpected keyword argument\\(s\\) \\['hidden'\\]"):
        DGatedNeuralNetClassifier(net, gates={"0.weight": "in"}, hidden=3).fit(X, y)
    # two logits for two classes are fine (cross-entropy)
    y2 = (X[:, 0] > 0).astype(int)
    clf = DGatedNeuralNetClassifier(net, gates={"0.weight": "in"}, max_epochs=30, lr=0.1)
    _quiet(clf, X, y2)
    assert clf.predict_proba(X).shape == (30, 2)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_weight_decay_reaches_the_ungated_weights_only(optimizer):
    """weight_decay is L2 on the ungated weights: the optimizer's groups give it to
    out.weight (ungated) and to nothing else (the D-Gating factors carry their own L2,
    biases are not decayed)."""
    from skorch import NeuralNet

    from sksparse_nn.gating import dgate
    from sksparse_nn.training import resolve_optimizer, step_size_groups

    est = DGatedNeuralNetRegressor(
        TinyNet, gates={"hidden.weight": "in"}, lam=10.0, weight_decay=0.3, optimizer=optimizer
    )
    module = TinyNet(4, 1)
    dgate(module.hidden, "weight", groups="in", D=3)
    opt, opt_kwargs = resolve_optimizer(optimizer)
    net = NeuralNet(
        module,
        criterion=nn.MSELoss,
        optimizer=opt,
        lr=est.lr,
        **{f"optimizer__{k}": v for k, v in opt_kwargs.items()},
        optimizer__param_groups=step_size_groups(module, opt, est.lam, est.lr, None, 0.3),
    ).initialize()
    decay = {
        id(p): group.get("weight_decay", 0.0)
        for group in net.optimizer_.param_groups
        for p in group["params"]
    }
    names = dict(module.named_parameters())
    assert decay[id(names["out.weight"])] == 0.3
    for name, param in names.items():
        if name != "out.weight":  # factors (original, gates) and biases
            assert decay[id(param)] == 0.0, name


def test_weight_decay_shrinks_the_ungated_layer():
    """With a strong weight_decay the ungated output layer ends smaller."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 4)
    y = X[:, 0] - X[:, 1]
    norms = []
    for decay in (0.0, 0.05):
        est = DGatedNeuralNetRegressor(TinyNet, weight_decay=decay, **{**SMALL, "max_epochs": 20})
        _quiet(est, X, y)
        norms.append(float(est.module_.module.out.weight.norm()))
    assert norms[1] < 0.8 * norms[0]


class TwoBranch(nn.Module):
    """Late fusion: columns 0-2 and 3-5 are two modalities, each with its own branch; the
    fusion layer's columns are grouped by modality."""

    def __init__(self, n_features=6, n_outputs=1):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 4), nn.ReLU())
        self.b = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 4), nn.ReLU())
        self.fusion = nn.Linear(8, n_outputs)

    def forward(self, x):
        return self.fusion(torch.cat([self.a(x[:, :3]), self.b(x[:, 3:])], dim=1))


def test_late_fusion_drops_the_uninformative_modality_exactly():
    """Only modality A carries signal: B's fusion group ends exactly at 0, A's stays."""
    from sksparse_nn.groups import AxisGroups

    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (400, 6))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.randn(400)
    est = DGatedNeuralNetRegressor(
        TwoBranch,
        gates={"fusion.weight": AxisGroups(1, [0, 0, 0, 0, 1, 1, 1, 1])},
        lam=0.03,
        weight_decay=1e-3,
        random_state=0,
    )
    _quiet(est, X, y)
    norm_a, norm_b = est.group_norms_
    assert norm_b == 0.0 and norm_a > 1e-2
    fusion = est.module_.module.fusion.weight.detach().numpy()
    assert np.all(fusion[:, 4:] == 0.0) and np.any(fusion[:, :4] != 0.0)
    dead, live = est.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live
    assert est.score(X, y) > 0.8
