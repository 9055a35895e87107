r"""Discriminative masking (DAM): an ordered gate with one learnable offset per tensor.

From *Learning Compact Representations of Neural Networks using DiscriminAtive Masking*:
group ``j`` (of ``J``, in a fixed order) is multiplied by

.. math::

    g_j = \mathrm{ReLU}\big(\tanh(\alpha (\mu_j + \beta))\big), \qquad \mu_j = k\, j / J,

with ``alpha`` and ``k`` constants and ``beta`` the only learnable parameter. Lowering
``beta`` closes the gates from the first group on; a closed gate is an exact zero. The
penalty is the continuous count of open gates in units of ``J / k``: ``beta + k``, clamped
at 0 where every gate is closed (the papers' ``lam * beta`` with the same gradient while
any gate is open, and bounded below).

The order means the groups must be interchangeable units, e.g. the neurons of a hidden
layer (gate the outgoing weights, ``groups="in"`` of the next layer, or the rows of a
layer with ``groups="out"``); it cannot choose input features.
"""

from __future__ import annotations

import torch
from torch import nn

from ._base import Sparsifier

__all__ = ["DAM"]


class DAM(Sparsifier):
    """Ordered gates ``relu(tanh(alpha (mu_j + beta)))`` with one learnable ``beta``.

    The ``"dam"`` method of :func:`~sksparse_nn.sparsifiers.sparsify`.

    Parameters
    ----------
    grouping : Grouping
    group_weights : None
        Not used (one offset per tensor); must be None.
    alpha : float, default=1.0
        Steepness of the gate (a constant).
    k : float, default=5.0
        Range of the order numbers ``mu_j = k j / J``.
    beta_init : float, default=1.0
        Starting offset; above 0 every gate starts open, a cold start before pruning.
    order : array-like of int of shape (J,), default=None
        Position of each group in the masking order (a permutation of ``0..J-1``); groups
        at low positions close first. ``None``: the groups' own order.

    Attributes
    ----------
    beta : nn.Parameter
        The offset (0-dim).
    mu : tensor of shape (J,)
        The order numbers.
    """

    method = "dam"
    ordered = True

    def __init__(
        self, grouping, group_weights=None, *, alpha=1.0, k=5.0, beta_init=1.0, order=None
    ):
        super().__init__(grouping, None)
        if group_weights is not None:
            raise ValueError("DAM has one offset per tensor: group_weights do not apply.")
        if not (alpha > 0 and k > 0):
            raise ValueError(f"DAM needs alpha > 0 and k > 0, got alpha={alpha}, k={k}.")
        J = grouping.n_groups
        positions = torch.arange(J) if order is None else torch.as_tensor(order)
        if sorted(positions.tolist()) != list(range(J)):
            raise ValueError(f"order must be a permutation of 0..{J - 1}, got {order!r}.")
        self.alpha, self.k, self.beta_init = float(alpha), float(k), float(beta_init)
        self.register_buffer("mu", self.k * (positions.double() + 1) / J)
        self.beta = nn.Parameter(torch.tensor(self.beta_init))

    def gate(self):
        """The mask of every group, shape ``(J,)``: exactly 0 where closed."""
        return torch.relu(torch.tanh(self.alpha * (self.mu.to(self.beta.dtype) + self.beta)))

    def forward(self, original):
        return original * self.grouping.expand(self.gate())

    def penalty(self, original):
        """``max(beta + k, 0)``: the open gates' count in units of ``J / k``."""
        return (self.beta + self.k).clamp_min(0.0)

    def keep(self, weight, zero_tol):
        return (self.gate() > 0) & (self.group_norms(weight) >= zero_tol)

    def initialize(self, original, init):
        """``"identity"``: offset ``beta_init``; ``"balanced"``: the offset that closes every
        group before the first non-zero one in the order. The stored tensor is divided by
        the open gates so that the effective weight is unchanged."""
        beta = self.beta_init
        if init == "balanced":
            live = self.group_norms(original) > 0
            if not bool(live.any()):
                beta = -self.k
            else:
                first = float(self.mu[live].min())
                below = self.mu[self.mu < first]
                beta = -float(below.max()) if below.numel() else self.beta_init
        self.beta.data.fill_(beta)
        gate = self.gate()
        scale = torch.where(gate > 0, 1.0 / gate.clamp_min(1e-30), torch.zeros_like(gate))
        original.mul_(self.grouping.expand(scale))

    def extra_repr(self):
        return f"alpha={self.alpha}, k={self.k}"
