"""The D-Gating core: parametrization, penalties, gradients, dynamics and collapse."""

import numpy as np
import pytest
import torch
from scipy.stats import norm, truncnorm
from torch import nn

from sksparse_nn.gating import (
    DGate,
    collapse,
    dgate,
    gated_tensors,
    group_norms,
    induced_penalty,
    misalignment,
    penalty,
)
from sksparse_nn.groups import AxisGroups

pytestmark = pytest.mark.usefixtures("float64_default")  # exact math in float64


def _gate(module, name="weight"):
    (gate,) = [g for _, m, n, g in gated_tensors(module) if m is module and n == name]
    return gate


def _random_labels(shape, rng, n_groups=4, with_ungrouped=True):
    low = -1 if with_ungrouped else 0
    labels = rng.integers(low, n_groups, size=shape)
    labels.flat[0] = 0  # at least one grouped entry
    return labels


GROUP_SPECS = {
    "in": lambda shape, rng: "in",
    "out": lambda shape, rng: "out",
    "element": lambda shape, rng: "element",
    "axis-labels": lambda shape, rng: AxisGroups(0, _random_labels((shape[0],), rng, 3)),
    "labels": lambda shape, rng: _random_labels(shape, rng),
}


def _set_balanced(module, rng):
    """Overwrite omega and gates with random balanced factors (||omega_j||^2 = gamma^2)."""
    gate = _gate(module)
    omega = module.parametrizations.weight.original
    with torch.no_grad():
        direction = torch.as_tensor(rng.normal(size=omega.shape))
        norms = gate.grouping.group_sum(direction.pow(2)).sqrt()
        scale = torch.as_tensor(rng.uniform(0.2, 2.0, size=gate.n_groups))
        omega.copy_(direction * gate.grouping.expand(scale / norms))
        signs = torch.as_tensor(rng.choice([-1.0, 1.0], size=gate.gates.shape))
        gate.gates.copy_(signs * scale)


@pytest.mark.numerics
@pytest.mark.parametrize("D", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("spec", sorted(GROUP_SPECS))
def test_penalty_equals_induced_at_balanced_factors(D, spec):
    rng = np.random.default_rng(D)
    layer = nn.Linear(7, 6)
    weights = rng.uniform(0.5, 2.0, size=1000)
    dgate(layer, groups=GROUP_SPECS[spec](layer.weight.shape, rng), D=D)
    gate = _gate(layer)
    gate.group_weights = torch.as_tensor(weights[: gate.n_groups])
    _set_balanced(layer, rng)
    p, ip = float(penalty(layer).detach()), float(induced_penalty(layer).detach())
    assert p > 0
    # float64: sums of <= 42 squares and a power, a few eps64 apart (~1e-15 relative)
    assert abs(p - ip) <= 1e-12 * abs(ip)
    # arbitrary (unbalanced) factors: penalty >= induced penalty (AM-GM)
    with torch.no_grad():
        gate.gates.mul_(torch.as_tensor(rng.uniform(0.1, 3.0, size=gate.gates.shape)))
    assert float(misalignment(layer).detach()) > 1e-3  # far from balanced: clearly positive


@pytest.mark.numerics
@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize("spec", sorted(GROUP_SPECS))
def test_balanced_init_keeps_output_and_is_balanced(D, spec):
    rng = np.random.default_rng(0)
    layer = nn.Linear(7, 6)
    x = torch.randn(5, 7)
    before = layer(x)
    dgate(layer, groups=GROUP_SPECS[spec](layer.weight.shape, rng), D=D, init="balanced")
    # float64: w is re-split into D factors (D-th roots) and multiplied back: ~D eps64
    torch.testing.assert_close(layer(x), before, rtol=1e-10, atol=1e-12)
    assert abs(float(misalignment(layer).detach())) <= 1e-9 * float(penalty(layer).detach())


@pytest.mark.numerics
@pytest.mark.parametrize("spec", sorted(GROUP_SPECS))
def test_identity_init_and_collapse_keep_the_output(spec):
    rng = np.random.default_rng(1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16, 2))
    x = torch.randn(2, 3, 4, 4)
    before = model(x)
    for layer in (model[0], model[3]):
        dgate(layer, groups=GROUP_SPECS[spec](layer.weight.shape, rng), D=3)
    # identity gates multiply by exactly 1.0 (bitwise in practice; float64 outputs <~ 1)
    torch.testing.assert_close(model(x), before, rtol=0, atol=1e-12)
    with torch.no_grad():  # move away from the identity, then collapse
        for _, _, _, gate in gated_tensors(model):
            gate.gates.mul_(torch.rand_like(gate.gates) + 0.5)
    gated = model(x)
    collapse(model, zero_tol=0)
    assert not list(gated_tensors(model))
    assert all(isinstance(p, nn.Parameter) for p in (model[0].weight, model[3].weight))
    # collapse stores the product the parametrization computes: float64, a few eps64
    torch.testing.assert_close(model(x), gated, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("D", [2, 3, 4, 5])
def test_dgate_adds_exactly_D_minus_1_parameters_per_group(D):
    rng = np.random.default_rng(D)
    for spec, expected_groups in [("in", 7), ("out", 6), ("element", 42)]:
        layer = nn.Linear(7, 6)
        n_before = sum(p.numel() for p in layer.parameters())
        dgate(layer, groups=spec, D=D)
        n_after = sum(p.numel() for p in layer.parameters())
        assert n_after - n_before == (D - 1) * expected_groups
    layer = nn.Linear(7, 6)
    labels = rng.integers(0, 5, size=(6, 7))
    labels[0, :5] = np.arange(5)
    n_before = sum(p.numel() for p in layer.parameters())
    dgate(layer, groups=labels, D=D)
    assert sum(p.numel() for p in layer.parameters()) - n_before == (D - 1) * 5


@pytest.mark.numerics
@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize("spec", ["in", "out", "labels"])
def test_autograd_matches_closed_form_gradients(D, spec):
    """Gradients of L0(w) + lam * penalty w.r.t. omega_j and gamma_{j,d} (chain rule)."""
    rng = np.random.default_rng(3)
    lam = 0.7
    layer = nn.Linear(5, 4, bias=False)
    dgate(layer, groups=GROUP_SPECS[spec](layer.weight.shape, rng), D=D)
    gate = _gate(layer)
    with torch.no_grad():
        gate.gates.copy_(torch.as_tensor(rng.uniform(0.3, 1.5, size=gate.gates.shape)))
    x, target = torch.randn(9, 5), torch.randn(9, 4)

    def data_loss(w):
        return (x @ w.T - target).pow(2).mean()

    omega = layer.parametrizations.weight.original
    loss = data_loss(layer.weight) + lam * penalty(layer)
    g_omega, g_gates = torch.autograd.grad(loss, [omega, gate.gates])

    w = layer.weight.detach().requires_grad_(True)
    (grad_w,) = torch.autograd.grad(data_loss(w), [w])
    prod = gate.gates.detach().prod(0)  # (J,)
    grouped = 1 - gate.grouping.expand(torch.zeros(gate.n_groups))  # ungrouped: no penalty
    expected_omega = gate.grouping.expand(prod) * grad_w + 2 * lam / D * omega.detach() * grouped
    inner = gate.grouping.group_sum(omega.detach() * grad_w)  # omega_j^T grad_{w_j} L0
    expected_gates = prod / gate.gates.detach() * inner + 2 * lam / D * gate.gates.detach()
    # float64, autograd vs the chain rule written out: a few eps64 per term
    torch.testing.assert_close(g_omega, expected_omega, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_gates, expected_gates, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("D", [2, 3, 4])
def test_gradient_descent_shrinks_imbalance_at_lemma_rate(D):
    """||omega_j||^2 - gamma_{j,1}^2 decays by (1 - 4 lam lr / D) per GD step."""
    torch.manual_seed(0)
    lam, lr, steps = 0.5, 1e-3, 200
    layer = nn.Linear(6, 3)
    dgate(layer, groups="in", D=D)
    gate = _gate(layer)
    with torch.no_grad():
        gate.gates.fill_(2.0)  # strongly imbalanced start
    omega = layer.parametrizations.weight.original
    x, y = torch.randn(32, 6), torch.randn(32, 3)
    opt = torch.optim.SGD(layer.parameters(), lr=lr)

    def imbalance():
        with torch.no_grad():
            return gate.grouping.group_sum(omega.pow(2)) - gate.gates[0].pow(2)

    start = imbalance()
    for _ in range(steps):
        opt.zero_grad()
        ((layer(x) - y).pow(2).mean() + lam * penalty(layer)).backward()
        opt.step()
    observed = imbalance() / start
    predicted = (1 - 4 * lam * lr / D) ** steps
    # compare decay amounts: within 10% of the first-order prediction
    np.testing.assert_allclose((1 - observed).numpy(), 1 - predicted, rtol=0.1)


def test_gated_descent_reaches_zero_where_subgradient_descent_cannot():
    """Two-feature toy: squared loss + lam ||w||^(2/D) whose global minimum is w = 0."""
    D, lam, lr, steps = 3, 3.0, 0.02, 3000
    x, y = torch.tensor([1.0, 1.0]), torch.tensor(1.0)

    def objective(w):
        return (y - x @ w).pow(2) + lam * w.norm().pow(2.0 / D)

    # the global minimum is at 0 (objective 1 there, larger on a fine grid elsewhere)
    a, b = torch.meshgrid(torch.linspace(-2, 2, 801), torch.linspace(-2, 2, 801), indexing="ij")
    grid = torch.stack([a.reshape(-1), b.reshape(-1)], dim=1)
    values = (y - grid @ x).pow(2) + lam * grid.norm(dim=1).pow(2.0 / D)
    # float64; the grid contains 0, so the minimum equals objective(0) up to rounding
    assert float(values.min()) >= float(objective(torch.zeros(2))) - 1e-12

    # direct (sub)gradient descent on the non-smooth objective
    w = torch.tensor([0.6, 0.2], requires_grad=True)
    for _ in range(steps):
        (grad,) = torch.autograd.grad(objective(w), [w])
        with torch.no_grad():
            w -= lr * grad
    assert float(w.detach().norm()) > 1e-3  # oscillates around 0 at the step size's scale

    # the same objective, D-gated, under plain gradient descent
    layer = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.6, 0.2]]))
    dgate(layer, groups="out", D=D)  # one group: the whole vector w
    opt = torch.optim.SGD(layer.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        ((y - layer(x)).pow(2).sum() + lam * penalty(layer)).backward()
        opt.step()
    assert float(layer.weight.detach().norm()) < 1e-8  # geometric decay to 0 over 3000 steps


def test_collapse_sets_small_groups_to_exact_zero_and_spares_ungrouped():
    layer = nn.Linear(4, 2, bias=False)
    labels = np.array([[0, 1, -1, 2], [0, 1, -1, 2]])
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1e-9, 0.5, 1e-12, 1.0], [1e-9, 0.1, 1e-12, 1.0]]))
    dgate(layer, groups=labels, D=3)
    norms = group_norms(layer)["weight"]
    assert norms.shape == (3,)
    collapse(layer, zero_tol=1e-6)
    w = layer.weight.detach()
    assert torch.all(w[:, 0] == 0)
    assert torch.all(w[:, 2] == 1e-12)  # in no group: never thresholded
    assert torch.all(w[:, [1, 3]] != 0)


@pytest.mark.numerics
def test_group_weights_enter_penalty_and_zero_weight_is_unpenalized():
    layer = nn.Linear(3, 2)
    dgate(layer, groups="in", D=2, group_weights=[0.0, 1.0, 2.0])
    omega = layer.parametrizations.weight.original.detach()
    expected = (
        sum(rho * (omega[:, j].pow(2).sum() + 1.0) for j, rho in enumerate([0.0, 1.0, 2.0])) / 2
    )
    torch.testing.assert_close(penalty(layer), expected)


def test_dwf_init_is_variance_matched_and_truncated():
    torch.manual_seed(0)
    D, sigma, eps = 4, 0.05, 3e-3
    layer = nn.Linear(400, 300)
    dgate(layer, groups="element", D=D, init="dwf", dwf_sigma=sigma, dwf_eps=eps)
    gate = _gate(layer)
    factors = torch.cat(
        [
            layer.parametrizations.weight.original.detach()[None],
            gate.gates.detach().reshape(D - 1, 300, 400),
        ]
    )
    lo, hi = eps ** (1 / D), min(1.0, (2 * sigma) ** (1 / D))
    assert float(factors.abs().min()) > lo and float(factors.abs().max()) < hi
    w = layer.weight.detach()
    assert float(w.abs().min()) > eps
    # each factor ~ N(0, sigma^(2/D)) truncated to lo < |x| < hi: its variance is that of
    # the truncated normal, and the product of D independent factors has its D-th power
    s = sigma ** (1 / D)
    factor_var = truncnorm.var(-hi / s, hi / s, scale=s)  # symmetric part of the law
    inner_mass = norm.cdf(lo / s) - norm.cdf(-lo / s)
    outer_mass = norm.cdf(hi / s) - norm.cdf(-hi / s)
    inner_var = truncnorm.var(-lo / s, lo / s, scale=s)
    factor_var = (factor_var * outer_mass - inner_var * inner_mass) / (outer_mass - inner_mass)
    # sampling error, not rounding (seeded; the draws do not depend on threads): the
    # relative standard error of a variance is sqrt((kurtosis - 1) / N) with N = 120000 and
    # kurtosis <= 3^D = 81 for a product of D truncated normals: <= 2.6% (0.2% and 0.3%
    # observed here: the truncation makes the factors light-tailed); mean: SE 1e-3 sigma
    np.testing.assert_allclose(float(factors.var()), factor_var, rtol=0.02)
    np.testing.assert_allclose(float(w.var()), factor_var**D, rtol=0.05)
    assert abs(float(w.mean())) < 0.05 * sigma


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"D": 1}, "D must be an integer >= 2"),
        ({"D": 2.5}, "D must be an integer >= 2"),
        ({"D": True}, "D must be an integer >= 2"),
        ({"groups": "rows"}, "Unknown groups"),
        ({"groups": np.zeros((3, 3), dtype=int)}, "must have shape"),
        ({"groups": np.full((2, 4), 0.5)}, "must be integers"),
        ({"groups": np.full((2, 4), -2)}, ">= 0, or -1"),
        ({"groups": np.full((2, 4), -1)}, "nothing to gate"),
        ({"groups": np.array([["a"] * 4] * 2)}, "must be integers"),
        ({"groups": AxisGroups(2)}, "is not an axis"),
        ({"groups": AxisGroups(1, [0, 1])}, "must have shape"),
        ({"name": "bias", "groups": "in"}, "at least 2 dimensions"),
        ({"name": "nope"}, "is not a parameter"),
        ({"init": "random"}, "init must be"),
        ({"init": "dwf", "groups": "in"}, "groups='element'"),
        ({"group_weights": [1.0, 2.0]}, "one entry per group"),
        ({"group_weights": [1.0, -1.0, 1.0, 1.0]}, "non-negative"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    layer = nn.Linear(4, 2)
    with pytest.raises(ValueError, match=message):
        dgate(layer, **kwargs)
    assert not list(gated_tensors(layer))  # nothing half-registered


def test_buffers_and_gating_twice_are_rejected():
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="not a parameter"):
        dgate(bn, "running_mean", groups="element")
    layer = nn.Linear(3, 2)
    dgate(layer, groups="in")
    with pytest.raises(ValueError, match="already sparsified"):
        dgate(layer, groups="out")
    with pytest.raises(ValueError, match="zero_tol"):
        collapse(layer, zero_tol=-1.0)


@pytest.mark.numerics
def test_dgate_is_the_registered_parametrization_and_penalty_sums_tensors():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    dgate(model[0], groups="in", D=3)
    dgate(model[2], groups="out", D=2)
    names = [q for q, *_ in gated_tensors(model)]
    assert names == ["0.weight", "2.weight"]
    assert isinstance(model[0].parametrizations.weight[0], DGate)
    torch.testing.assert_close(penalty(model), penalty(model[0]) + penalty(model[2]))
    assert set(group_norms(model)) == {"0.weight", "2.weight"}
    assert float(penalty(nn.Linear(2, 2))) == 0.0


def test_balanced_zero_group_is_all_zero_and_stays_zero():
    """Warm starts: a dropped group is re-split as all-zero factors, which GD never revives."""
    layer = nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight[:, 1] = 0.0
    dgate(layer, groups="in", D=3, init="balanced")
    gate = _gate(layer)
    assert torch.all(gate.gates[:, 1] == 0)
    assert torch.all(layer.parametrizations.weight.original[:, 1] == 0)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    x, y = torch.randn(16, 3), torch.randn(16, 2)
    for _ in range(5):
        opt.zero_grad()
        ((layer(x) - y).pow(2).mean() + 0.01 * penalty(layer)).backward()
        opt.step()
    assert torch.all(layer.weight[:, 1] == 0)
    assert torch.all(layer.weight[:, [0, 2]] != 0)


@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize(
    "spec, shape",
    [
        ("in", (5, 7)),
        ("out", (4, 3, 2, 2)),
        ("element", (3, 4)),
        (AxisGroups(0, [0, -1, 1, 1, 0]), (5, 3)),
        (AxisGroups(1, [0, 0, 1, -1]), (2, 4, 3)),
    ],
)
def test_the_fused_gated_weight_has_the_composed_gradients(spec, shape, D):
    """The one-node gated weight equals omega * expand(prod gates) and its gradients are
    the finite-difference ones (float64 gradcheck), also with a gate at exactly 0."""
    from sksparse_nn.groups import resolve_groups
    from sksparse_nn.sparsifiers._dgating import _GatedWeight

    grouping = resolve_groups(spec, shape)
    gen = torch.Generator().manual_seed(0)
    omega = torch.randn(*shape, dtype=torch.float64, generator=gen, requires_grad=True)
    gates = torch.randn(D - 1, grouping.n_groups, dtype=torch.float64, generator=gen)
    gates[0, 0] = 0.0
    gates.requires_grad_(True)
    fused = _GatedWeight.apply(omega, gates, grouping)
    assert torch.equal(fused, omega * grouping.expand(gates.prod(dim=0)))
    assert torch.autograd.gradcheck(lambda o, g: _GatedWeight.apply(o, g, grouping), (omega, gates))


@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize(
    "groups, weights",
    [
        ("in", None),
        (AxisGroups(1, [0, 0, 1, -1, 2, 2]), None),  # a column in no group: no penalty
        ("in", [1.0, 2.0, 3.0, 0.5, 0.0, 1.0]),
        ("in", [1.0] * 6),  # unit weights given explicitly (the NAM's): the plain route
    ],
)
def test_closed_form_penalty_gradient_is_autograds(groups, weights, D):
    """add_penalty_grad_ adds exactly what backward of scale * penalty would (float64)
    and returns the penalty's value."""
    layer = nn.Linear(6, 5).double()
    rho = None if weights is None else torch.tensor(weights, dtype=torch.float64)
    dgate(layer, "weight", groups=groups, D=D, group_weights=rho)
    gate, original = layer.parametrizations.weight[0], layer.parametrizations.weight.original
    with torch.no_grad():
        gate.gates.uniform_(0.5, 1.5)
    _assert_closed_form_is_autograds(gate, original, 1.7)
    if rho is None:
        return
    # the per-entry weights are kept between steps; changed group weights are honoured
    with torch.no_grad():
        gate.group_weights.mul_(torch.linspace(0.5, 2.0, rho.numel(), dtype=torch.float64))
    _assert_closed_form_is_autograds(gate, original, 1.7)


def _assert_closed_form_is_autograds(gate, original, scale):
    original.grad, gate.gates.grad = None, None
    (scale * gate.penalty(original)).backward()
    expected = original.grad.clone(), gate.gates.grad.clone()
    original.grad, gate.gates.grad = None, None
    value = gate.add_penalty_grad_(original, scale)
    torch.testing.assert_close(value, gate.penalty(original).detach(), rtol=1e-14, atol=0)
    torch.testing.assert_close(original.grad, expected[0], rtol=1e-14, atol=0)
    torch.testing.assert_close(gate.gates.grad, expected[1], rtol=1e-14, atol=0)


@pytest.mark.parametrize(
    "spec, shape",
    [
        (AxisGroups(0, [0, 1, 2, 3]), (4, 3)),  # one group per slice, in order (a NAM's)
        (AxisGroups(1, [5, 6, 7]), (4, 3)),  # the same with other labels
        (AxisGroups(0, [1, 0, 2, 3]), (4, 3)),  # one per slice, permuted
        (AxisGroups(0, [0, 0, 1, 2]), (4, 3)),  # a shared group
        (np.arange(12).reshape(4, 3), (4, 3)),  # one group per entry, in order
        (np.arange(12)[::-1].reshape(4, 3), (4, 3)),  # one per entry, reversed
    ],
)
def test_labelled_groupings_expand_and_sum_by_their_labels(spec, shape):
    from sksparse_nn.groups import resolve_groups

    grouping = resolve_groups(spec, shape)
    if isinstance(spec, AxisGroups):
        view = [1, 1]
        view[spec.dim] = -1
        labels = np.broadcast_to(np.reshape(spec.labels, view), shape)
    else:
        labels = spec
    ids, group = np.unique(labels, return_inverse=True)  # each entry's group, 0..J-1
    group = group.reshape(shape)
    np.testing.assert_array_equal(grouping.group_ids, ids)
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(ids.size, dtype=torch.float64, generator=gen)
    expanded = torch.broadcast_to(grouping.expand(values), shape)
    torch.testing.assert_close(expanded, values[torch.as_tensor(group)], rtol=0, atol=0)
    tensor = torch.randn(shape, dtype=torch.float64, generator=gen)
    sums = np.bincount(group.ravel(), weights=tensor.numpy().ravel(), minlength=ids.size)
    torch.testing.assert_close(grouping.group_sum(tensor), torch.as_tensor(sums))
