"""The NAM's fused training step (one compiled call) against autograd's step."""

import numpy as np
import pytest
import torch

from sksparse_nn.estimators._nam_step import nam_training_step
from sksparse_nn.estimators._tasks import _BinaryLoss, _CrossEntropy, _HalfSquaredError
from sksparse_nn.estimators.nam import DGatedNAMClassifier
from sksparse_nn.gating import dgate
from sksparse_nn.groups import AxisGroups
from sksparse_nn.nn import NAM, NAMTrainingStep
from sksparse_nn.sparsifiers import sparsify
from sksparse_nn.training import PenalizedNet

TERMS = [[0, 1], [2], [3, 4, 5], [6]]


def _net(module, criterion, ridge, lam=0.07):
    net = PenalizedNet(
        module,
        criterion=criterion,
        lam=lam,
        ridge=ridge,
        optimizer=torch.optim.SGD,
        lr=0.1,
        batch_size=32,
        train_split=None,
        max_epochs=1,
        fused_step=nam_training_step,
    )
    return net.initialize()


def _module(terms, k, D, labels, rho):
    torch.manual_seed(0)
    module = NAM(7, (8,), n_outputs=k, terms=terms).double()
    with torch.no_grad():
        module.intercept.normal_()
        module.centers.normal_()  # a warm start's centres enter the output
    groups = AxisGroups(0, np.asarray(labels)) if labels is not None else AxisGroups(0)
    dgate(module, "first", groups=groups, D=D, group_weights=rho)
    with torch.no_grad():  # gates away from 1, group 0 (term 0) at exactly zero
        gates = module.parametrizations.first[0].gates
        gates.uniform_(0.5, 1.5)
        gates[:, 0] = 0.0
        module.parametrizations.first.original[0] = 0.0
    return module


CASES = {
    # one column per term, logistic loss, D = 3, a number as ridge
    "plain-logistic": (None, 1, 3, None, None, _BinaryLoss(), 0.02, False),
    # terms, one of them ungated (label -1) with no ridge, group weights, two outputs,
    # sample weights, D = 2
    "terms-squared": (
        TERMS, 2, 2, [0, 1, -1, 2], [1.0, 2.0, 0.5], _HalfSquaredError(), "mask", True
    ),
    # terms, softmax cross-entropy over three classes, D = 4
    "terms-entropy": (TERMS, 3, 4, None, None, _CrossEntropy(), 0.05, True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_fused_step_is_autograds_step(case):
    # the same objective and gradients as backward through the gated module plus the
    # closed-form pulls; float64, so that reassociated sums (the kernels') differ by
    # rounding only: relative 1e-10 leaves a margin of ~1e4 over eps times the sums' sizes
    terms, k, D, labels, rho, criterion, ridge, weighted = CASES[case]
    module = _module(terms, k, D, labels, rho)
    if ridge == "mask":  # no ridge on the ungated term
        ridge = 0.03 * torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64).view(-1, 1, 1)
    net = _net(module, criterion, {"out": ridge})
    step = nam_training_step(net)
    assert isinstance(step, NAMTrainingStep)
    gen = torch.Generator().manual_seed(1)
    n = 23
    x = torch.randn(n, 7, generator=gen, dtype=torch.float64)
    if k == 2:
        y = torch.randn(n, k, generator=gen, dtype=torch.float64)
    else:
        y = torch.randint(0, max(k, 2), (n,), generator=gen)
    targets = (y, torch.rand(n, generator=gen, dtype=torch.float64) * 2) if weighted else y
    objective, z = step(x, targets, net.lam)
    fused = {name: p.grad.clone() for name, p in module.named_parameters()}
    for p in module.parameters():
        p.grad = None
    net.__dict__["fused_step_"] = None  # autograd's step
    ref = net.train_step_single((x, targets))
    assert len(fused) == 4  # omega, gates, out, intercept
    for name, p in module.named_parameters():
        torch.testing.assert_close(fused[name], p.grad, rtol=1e-10, atol=1e-12, msg=name)
    torch.testing.assert_close(objective, ref["loss"].detach(), rtol=1e-10, atol=0)
    torch.testing.assert_close(z, ref["y_pred"].detach(), rtol=1e-10, atol=1e-12)
    # a group at zero gets exactly zero gradients: it stays at zero
    assert torch.all(fused["parametrizations.first.original"][0] == 0.0)
    assert torch.all(fused["parametrizations.first.0.gates"][:, 0] == 0.0)


def test_fused_step_declines_what_it_does_not_compute():
    def step_of(module, criterion=None, sparsifier=None):
        if sparsifier is None:
            dgate(module, "first", groups=AxisGroups(0), D=3)
        else:
            sparsify(module, "first", method=sparsifier, groups=AxisGroups(0))
        return nam_training_step(_net(module, criterion or _BinaryLoss(), None))

    assert isinstance(step_of(NAM(4, (8,))), NAMTrainingStep)
    assert step_of(NAM(4, (8, 4))) is None  # two hidden layers
    assert step_of(NAM(4, (8,), dropout=0.1)) is None
    assert step_of(NAM(4, (8,), pairs=[([0], [1])])) is None  # interaction terms
    assert step_of(NAM(4, (8,), activation="tanh")) is None
    assert step_of(NAM(4, (8,)), sparsifier="dam") is None  # another method
    assert step_of(NAM(4, (8,)), criterion=torch.nn.BCEWithLogitsLoss()) is None
    # a batch the compiled loops do not take: nothing done, autograd's step runs
    step = step_of(NAM(4, (8,)))
    assert step(torch.randn(5, 4, dtype=torch.float64), torch.zeros(5), 0.1) is None
    assert all(p.grad is None for p in step.params)


@pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")
def test_a_nam_fit_trains_with_the_fused_step(monkeypatch):
    # the default classifier takes the fused step on every batch, and trains the model
    # autograd's step trains: float32 over a few epochs, where rounding grows slowly
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] + np.sin(2 * X[:, 1]) > 0).astype(int)
    calls = []
    original = NAMTrainingStep.__call__

    def counted(self, *args):
        out = original(self, *args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(NAMTrainingStep, "__call__", counted)
    params = dict(lam=0.02, max_epochs=4, random_state=0)
    fused = DGatedNAMClassifier(**params).fit(X, y)
    assert len(calls) == fused.n_iter_ * 2 and all(calls)  # 2 batches of 64 per epoch
    monkeypatch.setattr(PenalizedNet, "fit_loop", _without_fused_step(PenalizedNet.fit_loop))
    plain = DGatedNAMClassifier(**params).fit(X, y)
    assert len(calls) == fused.n_iter_ * 2  # no further fused step
    np.testing.assert_allclose(
        fused.decision_function(X), plain.decision_function(X), rtol=1e-4, atol=1e-4
    )


def _without_fused_step(fit_loop):
    def loop(self, *args, **kwargs):
        self.fused_step = None
        return fit_loop(self, *args, **kwargs)

    return loop
