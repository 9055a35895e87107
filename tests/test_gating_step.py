"""The D-gated training step's fast routes give the numbers of the reference ones.

DGate's forward composes torch's own autograd nodes for D <= 3 on a grouping of one gate
per slice or entry (else the one-node ``_GatedWeight``, which can add the step's penalty
gradient during backward: ``fold_penalty_grad``). Each route is compared with the route it
replaces on the same numbers: bit for bit where the same kernels run in the same order
(float32, where rounding would show), to float64 rounding where a sum is regrouped.
"""

import pytest
import torch
from torch import nn

from sksparse_nn.gating import dgate
from sksparse_nn.groups import AxisGroups
from sksparse_nn.sparsifiers import closed_form_penalties, sparsify


def _gated(shape=(7, 9), groups="in", D=3, rho=None, dtype=torch.float32, seed=0):
    """A gated Linear with random omega and gates (none at 1: every product matters)."""
    torch.manual_seed(seed)
    layer = nn.Linear(shape[1], shape[0]).to(dtype)
    dgate(layer, "weight", groups=groups, D=D, group_weights=rho)
    gate = layer.parametrizations.weight[0]
    with torch.no_grad():
        gate.gates.uniform_(0.5, 1.5)
    return layer, gate, layer.parametrizations.weight.original


def _grads(*tensors):
    grads = tuple(t.grad.clone() for t in tensors)
    for t in tensors:
        t.grad = None
    return grads


@pytest.mark.parametrize("D", [2, 3])
@pytest.mark.parametrize(
    "module, name, groups",
    [
        (lambda: nn.Linear(23, 40), "weight", "in"),  # the gates broadcast along the last axis
        (lambda: nn.Linear(23, 40), "weight", "out"),  # expanded to a column
        (lambda: nn.Linear(23, 40), "weight", "element"),
        (lambda: nn.Linear(23, 40), "bias", "out"),  # a vector: one gate per entry
        (lambda: nn.Conv1d(5, 6, 3), "weight", "in"),  # the middle axis of three
    ],
    ids=["in", "out", "element", "vector", "conv"],
)
def test_direct_route_gives_the_one_node_functions_bits(module, name, groups, D):
    """For D <= 3 on a grouping of one gate per slice (or entry), the weight and both
    gradients are bit for bit those of ``_GatedWeight`` (float32)."""
    from sksparse_nn.sparsifiers._dgating import _GatedWeight

    torch.manual_seed(0)
    module = module()
    dgate(module, name, groups=groups, D=D)
    gate, omega = module.parametrizations[name][0], module.parametrizations[name].original
    with torch.no_grad():
        gate.gates.uniform_(0.5, 1.5)
    grad = torch.randn(omega.shape)
    weight = getattr(module, name)
    weight.backward(grad)
    direct = (weight.detach(), *_grads(omega, gate.gates))
    reference = _GatedWeight.apply(omega, gate.gates, gate.grouping)
    reference.backward(grad)
    for a, b in zip(direct, (reference.detach(), *_grads(omega, gate.gates)), strict=True):
        assert a.shape == b.shape
        assert torch.equal(a, b)
    assert gate.fold_penalty_grad(1.0) is False  # nothing to fold on this route


def _step(layer, gate, omega, x, scale, fold):
    """One step's gradients and penalty value: data loss backward, then the closed form
    (folded into the backward pass when ``fold``)."""
    if fold:
        assert gate.fold_penalty_grad(scale)
    layer(x).pow(2).sum().backward()
    value = gate.add_penalty_grad_(omega, scale)
    return (value, *_grads(omega, gate.gates))


@pytest.mark.parametrize(
    "groups, D, rho",
    [
        ("in", 4, None),  # more gates: the one-node route
        (AxisGroups(1, [0, 0, 1, -1, 2, 2, 3, 3, 1]), 3, None),  # shared groups, one free
        (AxisGroups(1, [0, 0, 1, -1, 2, 2, 3, 3, 1]), 2, [1.0, 2.0, 0.0, 0.5]),
    ],
)
def test_folded_penalty_gradient_gives_the_same_bits(groups, D, rho):
    """With the penalty gradient added during backward, the gradients and the value are
    bit for bit those of add_penalty_grad_ after backward (float32), step after step."""
    rho = None if rho is None else torch.tensor(rho)
    x = torch.randn(5, 9)
    runs = []
    for fold in (False, True):
        layer, gate, omega = _gated(groups=groups, D=D, rho=rho)
        runs.append([_step(layer, gate, omega, x, 0.37, fold) for _ in range(2)])
    for plain, folded in zip(*runs, strict=True):
        for a, b in zip(plain, folded, strict=True):
            assert torch.equal(a, b)


def test_fold_without_backward_or_withdrawn_adds_after():
    """A fold no backward pass consumed, or one withdrawn, leaves add_penalty_grad_ to add
    the whole penalty gradient itself; the request lasts one step."""
    layer, gate, omega = _gated(D=4)
    (0.5 * gate.penalty(omega)).backward()
    expected = _grads(omega, gate.gates)
    for withdraw in (False, True):
        assert gate.fold_penalty_grad(0.5)
        if withdraw:
            assert gate.fold_penalty_grad(None) is False
        gate.add_penalty_grad_(omega, 0.5)  # no forward / backward in between
        for a, b in zip(_grads(omega, gate.gates), expected, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=0)  # float32 rounding
    assert gate._fold is None


def test_fold_adds_once_when_the_weight_is_read_twice():
    """A weight read twice in a step (two backward nodes) gets the penalty gradient
    once: the gradients are autograd's of the whole objective (float64, a regrouped sum:
    rounding only)."""
    layer, gate, omega = _gated(D=4, dtype=torch.float64)
    x = torch.randn(5, 9, dtype=torch.float64)

    def data_loss():
        return layer(x).pow(2).sum() + layer(2 * x).sum()

    (data_loss() + 0.3 * gate.penalty(omega)).backward()
    expected = _grads(omega, gate.gates)
    assert gate.fold_penalty_grad(0.3)
    data_loss().backward()
    value = gate.add_penalty_grad_(omega, 0.3)
    torch.testing.assert_close(value, gate.penalty(omega).detach(), rtol=1e-14, atol=0)
    for a, b in zip(_grads(omega, gate.gates), expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)


def test_tied_gates_are_not_folded():
    """Tied tensors share gates that collect several backward passes: no fold."""
    first, second = nn.Linear(6, 4), nn.Linear(4, 3)
    dgate(first, "weight", groups="out", D=4)
    leader = first.parametrizations.weight[0]
    sparsify(second, "weight", groups="in", tie=leader)
    follower = second.parametrizations.weight[0]
    assert leader.fold_penalty_grad(1.0) is False
    assert follower.fold_penalty_grad(1.0) is False


def test_fold_at_another_scale_is_an_error():
    """add_penalty_grad_ at a scale other than the folded one says so."""
    layer, gate, omega = _gated(D=4)
    gate.fold_penalty_grad(0.5)
    layer(torch.randn(3, 9)).sum().backward()
    with pytest.raises(ValueError, match="scale 0.25 after a backward pass"):
        gate.add_penalty_grad_(omega, 0.25)


def test_estimator_net_step_folds_and_matches_the_unfolded_step():
    """The training net folds the penalty gradient of a one-node gate (D = 4) and its
    step gives the unfolded step's bits: same parameters after two SGD steps."""
    from sksparse_nn.training import PenalizedNet

    def net_after_steps(fold):
        torch.manual_seed(0)
        module = nn.Sequential(nn.Linear(9, 6), nn.ReLU(), nn.Linear(6, 2))
        dgate(module[0], "weight", groups="in", D=4)
        net = PenalizedNet(
            module,
            criterion=nn.MSELoss,
            lam=0.2,
            optimizer=torch.optim.SGD,
            lr=0.05,
            train_split=None,
            max_epochs=1,
        ).initialize()
        ((gate, _),) = closed_form_penalties(net.module_)
        offer = gate.fold_penalty_grad
        gate.fold_penalty_grad = lambda scale: folds.append(fold and offer(scale)) or fold
        X, y = torch.randn(8, 9), torch.randn(8, 2)
        losses = [float(net.train_step((X, y))["loss"].detach()) for _ in range(2)]
        return losses, [p.detach().clone() for p in net.module_.parameters()]

    folds = []
    plain = net_after_steps(False)  # the route before folding: the gate declines
    assert folds == [False, False]
    folded = net_after_steps(True)
    assert folds[2:] == [True, True]  # asked before each step
    assert plain[0] == folded[0]
    for a, b in zip(plain[1], folded[1], strict=True):
        assert torch.equal(a, b)


def test_net_epoch_loop_writes_skorchs_history_and_events():
    """PenalizedNet's own epoch loop: the same parameters, history rows (loss and size of
    every batch, batch counts, train and valid) and per-batch events as skorch's loop,
    which a net overriding ``on_batch_begin`` still gets."""
    from skorch.callbacks import Callback
    from skorch.dataset import ValidSplit

    from sksparse_nn.training import PenalizedNet

    class Count(Callback):
        def initialize(self):
            self.seen = []
            return self

        def on_batch_begin(self, net, batch=None, training=False, **kwargs):
            self.seen.append(("begin", training, len(batch[0])))

        def on_batch_end(self, net, batch=None, training=False, loss=None, **kwargs):
            self.seen.append(("end", training, float(loss.detach())))

    class SkorchLoop(PenalizedNet):
        def on_batch_begin(self, net, **kwargs):  # skorch's own loop runs
            super().on_batch_begin(net, **kwargs)

    def train(net_class):
        torch.manual_seed(0)
        module = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 1))
        dgate(module[0], "weight", groups="in", D=2)
        net = net_class(
            module,
            criterion=nn.MSELoss,
            lam=0.1,
            optimizer=torch.optim.SGD,
            lr=0.05,
            batch_size=7,  # a short last batch
            train_split=ValidSplit(4, stratified=False),
            max_epochs=2,
            callbacks=[("count", Count())],
        )
        generator = torch.Generator().manual_seed(1)
        X, y = torch.randn(40, 5, generator=generator), torch.randn(40, 1, generator=generator)
        net.fit(X, y)
        return net

    ours, theirs = train(PenalizedNet), train(SkorchLoop)
    for a, b in zip(ours.module_.parameters(), theirs.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    assert len(ours.history) == len(theirs.history) == 2
    for a, b in zip(ours.history, theirs.history, strict=True):
        assert a["batches"] == b["batches"]
        assert a["train_batch_count"] == b["train_batch_count"] == 5
        assert a["valid_batch_count"] == b["valid_batch_count"] == 2
        assert a["train_loss"] == b["train_loss"] and a["valid_loss"] == b["valid_loss"]
    seen = dict(ours.callbacks_)["count"].seen
    assert seen == dict(theirs.callbacks_)["count"].seen
    assert len(seen) == 2 * 2 * (5 + 2)  # begin and end, every batch, both epochs
