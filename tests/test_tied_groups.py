"""One group spanning slices of several tensors (sparsify(..., tie=)): a hidden neuron's
incoming weights, its bias and its outgoing weights share one set of D-Gating factors."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from sksparse_nn.gating import induced_penalty, misalignment
from sksparse_nn.groups import AxisGroups
from sksparse_nn.sparsifiers import (
    collapse,
    group_norms,
    penalty,
    penalty_curvatures,
    sparsify,
    support,
)

D = 3


def _tied_net(seed=0):
    """Linear(4, 3) -> ReLU -> Linear(3, 2); neuron j's row, bias entry and column are
    one group (leader: the first layer's rows)."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    sparsify(net[0], "weight", groups="out", D=D)
    leader = net[0].parametrizations.weight[0]
    sparsify(net[0], "bias", groups=AxisGroups(0), tie=leader)
    sparsify(net[2], "weight", groups="in", tie=leader)
    with torch.no_grad():  # gates away from 1, so their contribution is visible
        leader.gates.copy_(torch.tensor([[0.5, 1.5, 2.0], [1.2, 0.7, 0.9]]))
    return net, leader


def _originals(net):
    return (
        net[0].parametrizations.weight.original,
        net[0].parametrizations.bias.original,
        net[2].parametrizations.weight.original,
    )


def test_the_tie_shares_one_set_of_gates():
    net, leader = _tied_net()
    gates = {id(net[0].parametrizations.bias[0].gates), id(net[2].parametrizations.weight[0].gates)}
    assert gates == {id(leader.gates)}
    assert sum(p is leader.gates for p in net.parameters()) == 1  # counted once


def test_the_penalty_counts_the_shared_gates_once():
    net, leader = _tied_net()
    w0, b0, w2 = _originals(net)
    expected = (w0.pow(2).sum() + b0.pow(2).sum() + w2.pow(2).sum() + leader.gates.pow(2).sum()) / D
    # the same n positive squares summed in another order (torch's kernels pick it by CPU:
    # with ATEN_CPU_CAPABILITY=default the expected sum rounds the other way): each sum
    # is within (n - 1) u of the exact one (u = eps / 2), so the two within n eps
    n_terms = sum(t.numel() for t in (w0, b0, w2, leader.gates))
    eps = torch.finfo(torch.float64).eps
    torch.testing.assert_close(penalty(net), expected, rtol=n_terms * eps, atol=0)


def test_closed_form_gradients_equal_autograd_for_the_tie():
    net, _ = _tied_net()
    params = list(net.parameters())
    autograd = torch.autograd.grad(penalty(net), params, allow_unused=True)
    for p in params:
        p.grad = None
    from sksparse_nn.sparsifiers import closed_form_penalties

    for sparsifier, original in closed_form_penalties(net):
        sparsifier.add_penalty_grad_(original, 1.0)
    for p, g in zip(params, autograd, strict=True):
        expected = torch.zeros_like(p) if g is None else g
        got = torch.zeros_like(p) if p.grad is None else p.grad
        torch.testing.assert_close(got, expected, rtol=1e-14, atol=1e-15)


def test_group_norms_of_a_tie_span_all_its_tensors():
    net, _ = _tied_net()
    w0, b0, w2 = net[0].weight, net[0].bias, net[2].weight
    joint = (w0.pow(2).sum(1) + b0.pow(2) + w2.pow(2).sum(0)).sqrt().detach()
    norms = group_norms(net)
    assert set(norms) == {"0.weight", "0.bias", "2.weight"}
    for value in norms.values():
        torch.testing.assert_close(value, joint, rtol=1e-14, atol=0)


def test_induced_penalty_and_misalignment_read_the_tie_as_one_group():
    net, leader = _tied_net()
    joint = group_norms(net)["0.weight"]
    torch.testing.assert_close(induced_penalty(net), joint.pow(2 / D).sum(), rtol=1e-14, atol=0)
    assert float(misalignment(net).detach()) >= 0.0
    # balanced factors (every factor's norm ||w_j||^(1/D), over the whole tie): the
    # smooth penalty equals the induced one and the gap closes
    owners = [(net[0], "weight"), (net[0], "bias"), (net[2], "weight")]
    weights = [getattr(m, n).detach().clone() for m, n in owners]
    with torch.no_grad():
        scale = joint.pow(1 / D)
        leader.gates.copy_(scale.expand(D - 1, -1))
        for (module, name), weight in zip(owners, weights, strict=True):
            grouping = module.parametrizations[name][0].grouping
            module.parametrizations[name].original.copy_(weight / grouping.expand(scale.pow(D - 1)))
    for (module, name), weight in zip(owners, weights, strict=True):  # the same weights
        torch.testing.assert_close(getattr(module, name), weight, rtol=1e-13, atol=1e-15)
    assert abs(float(misalignment(net).detach())) < 1e-13


def test_a_dead_group_is_exactly_zero_in_every_tensor_of_the_tie():
    net, leader = _tied_net()
    with torch.no_grad():
        leader.gates[:, 1] = 1e-30  # neuron 1 dies: its row, bias and column together
    keep = support(net, zero_tol=1e-7)
    for value in keep.values():
        np.testing.assert_array_equal(value.numpy(), [True, False, True])
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    collapse(net, zero_tol=1e-7)
    assert float(net[0].weight[1].abs().max()) == 0.0
    assert float(net[0].bias[1]) == 0.0
    assert float(net[2].weight[:, 1].abs().max()) == 0.0
    assert float(net[0].weight[0].abs().min()) > 0.0 and float(net[2].weight[:, 2].abs().min()) > 0
    assert any(k.endswith("original") for k in before)  # it was parametrized


def test_a_tie_keeps_a_group_whose_slice_alone_is_small():
    # the group's norm over all its tensors decides, not one slice's
    net, _ = _tied_net()
    with torch.no_grad():
        net[0].parametrizations.bias.original[0] = 1e-12
    assert bool(support(net, zero_tol=1e-7)["0.bias"][0])


def test_the_step_caps_see_the_shared_gates_once():
    net, leader = _tied_net()
    names = [name for name, _, _ in penalty_curvatures(net)]
    assert len(names) == len(set(names)) == 4  # three originals, one set of gates


def test_a_copy_keeps_its_tie():
    net, _ = _tied_net()
    twin = copy.deepcopy(net)
    leader = twin[0].parametrizations.weight[0]
    assert twin[2].parametrizations.weight[0].gates is leader.gates
    assert twin[2].parametrizations.weight[0].leader is leader


def test_training_removes_whole_neurons_across_the_tie():
    # y depends on x0 only: with a large lam the tie removes whole neurons
    torch.manual_seed(1)
    X = torch.randn(256, 4, dtype=torch.float64)
    y = torch.relu(X[:, :1]) @ torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    net, _ = _tied_net(seed=1)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3000):
        opt.zero_grad()
        loss = (net(X) - y).pow(2).mean() / 2 + 0.02 * penalty(net)
        loss.backward()
        opt.step()
    norms = group_norms(net)["0.weight"]
    dead = norms < 1e-7
    assert 0 < int(dead.sum()) < 3
    assert float(norms[~dead].min()) > 1e3 * float(norms[dead].max() + 1e-300)
    collapse(net, zero_tol=1e-7)
    for j in np.flatnonzero(dead.numpy()):
        assert float(net[0].weight[j].abs().max()) == float(net[0].bias[j]) == 0.0
        assert float(net[2].weight[:, j].abs().max()) == 0.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"groups": "in"}, "onto the tie's 3 groups"),
        ({"groups": AxisGroups(0), "init": "balanced"}, "init='identity'"),
        ({"groups": AxisGroups(0), "D": 4}, "options"),
    ],
)
def test_a_bad_tie_is_a_clear_error(kwargs, message):
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(5, 2))
    sparsify(net[0], "weight", groups="out", D=D)
    leader = net[0].parametrizations.weight[0]
    target = net[0] if kwargs["groups"] != "in" else net[2]
    name = "bias" if kwargs["groups"] != "in" else "weight"
    with pytest.raises(ValueError, match=message):
        sparsify(target, name, tie=leader, **kwargs)


def test_tying_to_a_trained_leader_keeps_every_output():
    # the leader's gates are not 1 (balanced at attach time): a tied tensor's omega is
    # its value over the gate product, so the module computes what it computed before
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    X = torch.randn(16, 4, dtype=torch.float64)
    before = net(X).detach()
    sparsify(net[0], "weight", groups="out", D=D, init="balanced")
    leader = net[0].parametrizations.weight[0]
    assert not torch.allclose(leader.gates, torch.ones_like(leader.gates))
    sparsify(net[0], "bias", groups=AxisGroups(0), tie=leader)
    sparsify(net[2], "weight", groups="in", tie=leader)
    torch.testing.assert_close(net(X), before, rtol=1e-14, atol=1e-14)


def test_set_weight_refuses_a_tie():
    from sksparse_nn.gating import set_weight

    net, _ = _tied_net()
    for module, name in ((net[0], "weight"), (net[2], "weight")):
        with pytest.raises(ValueError, match="shares its gates"):
            set_weight(module, name, getattr(module, name).detach())


def test_the_induced_penalty_of_a_tie_is_differentiable():
    net, leader = _tied_net()
    value = induced_penalty(net)
    assert value.requires_grad
    (grad,) = torch.autograd.grad(value, [leader.gates])
    assert torch.all(torch.isfinite(grad)) and bool(grad.abs().sum() > 0)


def test_a_method_other_than_the_ties_is_refused():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    sparsify(net[0], "weight", groups="out", D=D)
    with pytest.raises(ValueError, match="differs from the tie"):
        sparsify(net[2], "weight", groups="in", method="ds", tie=net[0].parametrizations.weight[0])


def test_a_method_that_cannot_share_factors_refuses_a_tie():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    sparsify(net[0], "weight", groups="out", method="l21")
    with pytest.raises(ValueError, match="shares factors"):
        sparsify(net[2], "weight", groups="in", tie=net[0].parametrizations.weight[0])
