"""The NAM family's fused training step: which D-Gating factors, penalty weights, ridge
and loss a net trains, handed to :class:`~sksparse_nn.nn.NAMTrainingStep`.

Declared as the family's ``Traits.fused_step``; the net calls :func:`nam_training_step`
when training starts. Anything it does not recognize (another sparsifier, a tied gate,
interaction terms, dropout, a loss of a subclass) gives None: autograd's step runs, with
the same objective.
"""

from __future__ import annotations

import numpy as np
import torch

from ..nn import NAM, NAMTrainingStep
from ..sparsifiers import DGate, sparsified_tensors
from ._tasks import _BinaryLoss, _CrossEntropy, _HalfSquaredError, task_loss

__all__ = ["nam_training_step"]

_LOSSES = {
    _HalfSquaredError: "squared_error",
    _BinaryLoss: "logistic",
    _CrossEntropy: "cross_entropy",
}


def nam_training_step(net):
    """The :class:`~sksparse_nn.nn.NAMTrainingStep` of ``net`` (an initialized
    ``PenalizedNet`` of a D-gated NAM), or None where it does not apply."""
    module = net.module_
    loss = _LOSSES.get(type(task_loss(net.criterion_)))  # a NAM has no members
    # (a parametrized module is of a subclass torch made; one that computes otherwise
    # has a forward of its own)
    plain_nam = isinstance(module, NAM) and type(module).forward is NAM.forward
    if not plain_nam or loss is None or not NAMTrainingStep.applies(module):
        return None
    gated = list(sparsified_tensors(module))
    if len(gated) != 1 or len(net.direct_penalties_) != 1:
        return None
    (_, owner, name, gate), (_, omega) = gated[0], net.direct_penalties_[0]
    if (
        type(gate) is not DGate
        or owner is not module
        or name != "first"
        or gate.tied
        or getattr(gate, "n_tied", 0)
        or len(module.parametrizations["first"]) != 1
    ):
        return None
    group = _term_groups(gate.grouping, module.n_terms)
    ridge = _term_ridge(net.ridge_, module)
    if group is None or ridge is None:
        return None
    rho = gate.group_weights
    rho = np.ones(gate.grouping.n_groups) if rho is None else rho.detach().double().numpy()
    return NAMTrainingStep(module, omega, gate.gates, group, rho, ridge, loss)


def _term_groups(grouping, n_terms):
    """The gate column of each term (-1: ungated), or None when a term's entries are not
    all in one group."""
    J = grouping.n_groups
    # groups as negative markers (-J - 1 .. -2); entries in no group expand to 1
    marks = grouping.expand(torch.arange(J, dtype=torch.float64) - J - 1).reshape(n_terms, -1)
    if not bool(torch.all(marks == marks[:, :1])):
        return None
    first = marks[:, 0].numpy()
    return np.where(first < 0, first + J + 1, -1).astype(np.int64)


def _term_ridge(ridge, module):
    """The ridge coefficient on each term's output weights (zeros without a ridge), or
    None when the ridge names another parameter or varies within a term."""
    coef = np.zeros(module.n_terms)
    for param, c in ridge:
        if param is not module.out:
            return None
        if not torch.is_tensor(c):
            coef += float(c)
            continue
        per_term = c.detach().double().reshape(module.n_terms, -1)
        if not bool(torch.all(per_term == per_term[:, :1])):
            return None
        coef += per_term[:, 0].numpy()
    return coef
