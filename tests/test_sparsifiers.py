"""The sparsifier protocol and its methods (D-Gating, DAM, DS, direct L2,1) in torch alone."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from torch import nn

from sksparse_nn.gating import DGate
from sksparse_nn.groups import AxisGroups
from sksparse_nn.solvers import lambda_max, solve_group_lasso
from sksparse_nn.sparsifiers import (
    DS,
    Sparsifier,
    collapse,
    get_sparsifier,
    group_norms,
    penalty,
    sparsified_tensors,
    sparsifier_names,
    sparsify,
    support,
)
from sksparse_nn.sparsifiers import _base as sparsifier_base

METHODS = [
    ("dgating", {"D": 3}),
    ("dam", {}),
    ("ds", {}),
    ("ds", {"form": "softmax"}),
    ("ds", {"norm": "l21", "blocks": [0, 0, 1, 1, 2, 2]}),
    ("l21", {}),
]


pytestmark = pytest.mark.usefixtures("float64_default")  # exact math in float64


def _layer_with_a_zero_column(seed=0):
    torch.manual_seed(seed)
    layer = nn.Linear(6, 4)
    with torch.no_grad():
        layer.weight[:, 1] = 0.0
    return layer


def _only(model):
    ((_, _, _, sparsifier),) = list(sparsified_tensors(model))
    return sparsifier


def test_registry_lists_the_builtin_methods():
    assert {"dgating", "dam", "ds", "l21"} <= set(sparsifier_names())
    assert get_sparsifier("dgating") is DGate and get_sparsifier(DS) is DS
    with pytest.raises(ValueError, match="Unknown sparsifier 'prune'.*registered"):
        get_sparsifier("prune")


@pytest.mark.parametrize("init", ["identity", "balanced"])
@pytest.mark.parametrize("method, options", METHODS)
def test_attaching_leaves_the_output_unchanged(method, options, init):
    layer = _layer_with_a_zero_column()
    x = torch.randn(7, 6)
    before = layer(x).detach()
    sparsify(layer, method=method, groups="in", init=init, **options)
    torch.testing.assert_close(layer(x), before, rtol=1e-12, atol=1e-12)
    norms = group_norms(layer)["weight"]
    assert norms[1] == 0.0  # a zero group stays exactly zero
    assert torch.all(norms[[0, 2, 3, 4, 5]] > 0)
    assert penalty(layer).requires_grad


@pytest.mark.parametrize("method, options", METHODS)
def test_collapse_removes_the_parametrization_and_keeps_the_output(method, options):
    layer = _layer_with_a_zero_column()
    sparsify(layer, method=method, groups="in", **options)
    x = torch.randn(5, 6)
    before = layer(x).detach()
    keep = support(layer)["weight"]
    collapse(layer)
    assert not list(sparsified_tensors(layer))
    assert isinstance(layer.weight, nn.Parameter)
    assert torch.equal(layer.weight[:, 1], torch.zeros(4))
    assert keep.tolist() == [True, False, True, True, True, True]
    torch.testing.assert_close(layer(x), before, rtol=1e-12, atol=1e-12)


def test_errors_name_the_problem():
    layer = nn.Linear(4, 3)
    sparsify(layer, method="ds")
    with pytest.raises(ValueError, match="already sparsified \\(method 'ds'\\)"):
        sparsify(layer, method="l21")
    with pytest.raises(ValueError, match="group_weights do not apply"):
        sparsify(nn.Linear(4, 3), method="dam", group_weights=np.ones(4))
    with pytest.raises(ValueError, match="permutation"):
        sparsify(nn.Linear(4, 3), method="dam", order=[0, 0, 1, 2])
    with pytest.raises(ValueError, match="norm must be"):
        sparsify(nn.Linear(4, 3), method="ds", norm="l2")
    with pytest.raises(ValueError, match="constant"):
        sparsify(nn.Linear(4, 3), method="ds", form="softmax", norm="l1")
    with pytest.raises(ValueError, match="threshold must be"):
        sparsify(nn.Linear(4, 3), method="l21", threshold=-1.0)
    with pytest.raises(ValueError, match="init must be"):
        sparsify(nn.Linear(4, 3), method="ds", init="dwf")  # D-Gating only


# ------------------------------------------------------------------------- DAM
def test_dam_counts_open_gates_as_its_paper_says():
    """Eq. 3 of the DAM paper: ceil(J (1 + beta / k)) open gates for -k <= beta <= 0."""
    J, k = 40, 5.0
    layer = nn.Linear(J, 2)
    sparsify(layer, method="dam", groups="in", k=k)
    dam = _only(layer)
    for beta in [-0.3, -0.7, -2.1, -4.93, -5.0]:
        dam.beta.data.fill_(beta)
        assert int((dam.gate() > 0).sum()) == math.ceil(J * (1 + beta / k))
        # the closed gates are the first ones in the order, and exactly zero
        open_ = (dam.gate() > 0).nonzero().flatten()
        assert open_.numel() == 0 or open_.tolist() == list(range(int(open_[0]), J))
    dam.beta.data.fill_(-6.0)
    assert torch.equal(layer.weight, torch.zeros_like(layer.weight))


def test_dam_penalty_pulls_beta_down_until_every_gate_is_closed():
    layer = nn.Linear(10, 1)
    sparsify(layer, method="dam", groups="in")
    dam = _only(layer)
    for beta, slope in [(1.0, 1.0), (-3.0, 1.0), (-5.5, 0.0)]:
        dam.beta.data.fill_(beta)
        dam.beta.grad = None
        penalty(layer).backward()
        assert float(dam.beta.grad) == slope  # bounded below: no pull once all are closed


def test_dam_follows_a_given_order_and_warm_start_closes_the_dead_prefix():
    layer = nn.Linear(5, 2)
    order = [4, 3, 2, 1, 0]  # the last column closes first
    with torch.no_grad():
        layer.weight[:, 4] = 0.0
        layer.weight[:, 3] = 0.0
    x = torch.randn(3, 5)
    before = layer(x).detach()
    sparsify(layer, method="dam", groups="in", order=order, init="balanced")
    dam = _only(layer)
    assert (dam.gate() > 0).tolist() == [True, True, True, False, False]
    torch.testing.assert_close(layer(x), before)


# -------------------------------------------------------------------------- DS
def test_ds_signed_form_is_eq12_and_its_norms_are_the_architecture_parameters():
    layer = nn.Linear(4, 3)
    sparsify(layer, method="ds", groups="in")
    ds = _only(layer)
    ds.alpha.data.copy_(torch.tensor([2.0, -1.0, 0.2, 0.5]))
    ds.beta.data.fill_(0.0)  # threshold sigmoid(0) * ||alpha||_1 = 0.5 * 3.7
    expected = torch.tensor([2.0 - 1.85, 0.0, 0.0, 0.0])
    torch.testing.assert_close(ds.architecture(), expected)
    torch.testing.assert_close(group_norms(layer)["weight"], expected.abs())
    # l1 of a is the group lasso's penalty of the effective weight
    torch.testing.assert_close(penalty(layer), expected.abs().sum())


def test_ds_softmax_form_shares_a_unit_budget():
    layer = nn.Linear(5, 2)
    sparsify(layer, method="ds", groups="in", form="softmax")
    ds = _only(layer)
    ds.alpha.data.copy_(torch.tensor([1.0, 0.5, -3.0, 0.0, -4.0]))
    ds.beta.data.fill_(-1.0)
    a = ds.architecture()
    gamma = torch.exp(ds.alpha)
    kept = torch.relu(gamma - torch.sigmoid(ds.beta) * gamma.sum())
    torch.testing.assert_close(a, kept / kept.sum())
    # threshold sigmoid(-1) * 5.43 = 1.46: only e^1 and e^0.5 stay
    assert float(a.detach().sum()) == pytest.approx(1.0)
    assert (a > 0).tolist() == [True, True, False, False, False]
    # l0.5: (sum sqrt(a))^2
    torch.testing.assert_close(penalty(layer), a.sqrt().sum() ** 2)


@pytest.mark.parametrize("rgf", [True, False])
def test_ds_rectified_gradient_flow_reaches_thresholded_groups(rgf):
    layer = nn.Linear(3, 1, bias=False)
    sparsify(layer, method="ds", groups="in", rgf=rgf)
    ds = _only(layer)
    ds.alpha.data.copy_(torch.tensor([1.0, 0.9, 0.05]))
    ds.beta.data.fill_(-1.5)  # threshold 0.18 * 1.95 = 0.35: the third group is off
    a = ds.architecture()
    assert a[2] == 0.0
    (grad,) = torch.autograd.grad(a[2], ds.alpha)
    # through the threshold x = |alpha_2| - s ||alpha||_1 (dx/dalpha_2 = 1 - s): the ELU's
    # slope exp(x) with rgf, the ReLU's 0 without
    s = torch.sigmoid(torch.tensor(-1.5))
    x = 0.05 - s * 1.95
    assert float(grad[2]) == pytest.approx(float(torch.exp(x) * (1 - s)) if rgf else 0.0)


def test_ds_is_the_group_lasso_when_trained():
    """Signed DS with the l1 norm penalizes sum_j ||w_j||: full-batch SGD must land on the
    exact solver's support with exact zeros and (nearly) its objective."""
    rng = np.random.RandomState(0)
    n, p = 200, 8
    X = rng.randn(n, p)
    y = X @ np.array([1.0, -1.0, 0, 0, 0.5, 0.5, 0, 0]) + 0.3 * rng.randn(n)
    labels = np.repeat(np.arange(4), 2)
    lam = 0.3 * lambda_max(X, y[:, None], labels, np.ones(4), fit_intercept=False)
    ref = solve_group_lasso(X, y, lam, labels, np.ones(4), tol=1e-12, fit_intercept=False)

    def objective(coef):
        norms = [np.linalg.norm(coef[labels == g]) for g in range(4)]
        return 0.5 * np.mean((y - X @ coef) ** 2) + lam * sum(norms)

    torch.manual_seed(0)
    layer = nn.Linear(p, 1, bias=False)
    sparsify(layer, method="ds", groups=AxisGroups(1, labels))
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)[:, None]
    for _ in range(4000):
        loss = 0.5 * (layer(Xt) - yt).pow(2).mean() + lam * penalty(layer)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    coef = layer.weight.detach().numpy().ravel()
    norms = group_norms(layer)["weight"].numpy()
    ref_norms = np.array([np.linalg.norm(ref.coef[labels == g]) for g in range(4)])
    np.testing.assert_array_equal(norms == 0.0, ref_norms == 0.0)  # exact zeros, same support
    # DS reaches the optimum sublinearly through its direction normalization: 4000 steps
    # measure ~4e-5 relative; 1e-3 leaves a 25x margin for other summation orders
    assert objective(coef) - objective(ref.coef) <= 1e-3 * objective(ref.coef)


# ------------------------------------------------------------------------- L21
def test_l21_has_no_exact_zeros_and_selects_by_its_threshold():
    torch.manual_seed(0)
    X = torch.randn(300, 6)
    y = X[:, :2] @ torch.tensor([[1.0], [-1.0]])
    layer = nn.Linear(6, 1, bias=False)
    sparsify(layer, method="l21", groups="in", threshold=0.05)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(500):
        loss = 0.5 * (layer(X) - y).pow(2).mean() + 0.1 * penalty(layer)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    norms = group_norms(layer)["weight"]
    assert not get_sparsifier("l21").exact_zeros
    assert torch.all(norms[2:] > 0)  # subgradient steps hover around zero, never on it
    assert support(layer)["weight"].tolist() == [True, True, False, False, False, False]
    collapse(layer)
    assert torch.equal(layer.weight[0, 2:], torch.zeros(4))


# ------------------------------------------------------------ a fourth method
class _Scale(Sparsifier):
    """A method written for this test: one learnable scale per group, l1 on the scales."""

    method = "test-scale"

    def __init__(self, grouping, group_weights=None):
        super().__init__(grouping, group_weights)
        self.scale = nn.Parameter(torch.ones(grouping.n_groups))

    def forward(self, original):
        return original * self.grouping.expand(self.scale)

    def penalty(self, original):
        return self._weighted(self.scale.abs()) + 0.5 * original.pow(2).sum()

    def initialize(self, original, init):
        self.scale.data.fill_(1.0)


@pytest.fixture
def scale_method():
    yield _Scale
    sparsifier_base._REGISTRY.pop(_Scale.method, None)


def test_a_new_method_is_one_class(scale_method):
    from sksparse_nn import DGatedMLPRegressor

    assert "test-scale" in sparsifier_names()
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    sparsify(model[0], method="test-scale", groups="in")
    sparsify(model[2], method="dgating", groups="in", D=2)
    assert set(group_norms(model)) == {"0.weight", "2.weight"}
    assert penalty(model).requires_grad
    collapse(model)
    assert not list(sparsified_tensors(model))
    # and the estimators take it by name
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = X[:, 0]
    est = DGatedMLPRegressor(sparsifier="test-scale", hidden_layer_sizes=(8,), max_epochs=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 5 epochs: not the point here
        est.fit(X, y)
    assert est.group_norms_.shape == (4,)
