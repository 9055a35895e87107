r"""Differentiable sparsification (DS): thresholded architecture parameters.

From *Differentiable Sparsification for Deep Neural Networks*: every group ``j`` (a
component of one competition group, here the tensor) gets an architecture parameter
``a_j`` computed from free parameters ``alpha`` (one per group) and ``beta`` (one per
tensor) through a threshold that can be exactly zero:

``form="signed"`` (Eq. 12)
    :math:`a_j = \mathrm{sign}(\alpha_j)\,(|\alpha_j| - \sigma(\beta) \|\alpha\|_1)_+`;
    the effective weight is :math:`w_j = a_j\, \omega_j / \|\omega_j\|`, so that
    :math:`\|w_j\| = |a_j|` (the direction is free, the architecture parameter is the
    group's norm, as the scale of a normalized channel in the paper's channel pruning);
``form="softmax"`` (Eq. 9-11)
    :math:`\gamma_j = e^{\alpha_j}`, :math:`\tilde\gamma_j = (\gamma_j - \sigma(\beta)
    \|\gamma\|_1)_+`, :math:`a_j = \tilde\gamma_j / \sum_i \tilde\gamma_i`; the effective
    weight is :math:`w_j = a_j \omega_j` (the groups compete for a unit budget).

The penalty is a norm of ``a``: ``"l1"`` (the signed form's default: then
``sum_j ||w_j||``, the group lasso's penalty, so ``lam`` means the same as for D-Gating
with ``D=2``), ``"l0.5"`` (:math:`(\sum_j |a_j|^{1/2})^2`, the softmax form's default,
where ``||a||_1 = 1``) or ``"l21"`` (the Euclidean norms of blocks of groups, summed).
With ``rgf=True`` (rectified gradient flow) the threshold's ReLU passes the gradient of an
ELU backwards, so thresholded groups keep receiving a learning signal and can return.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._base import Sparsifier

__all__ = ["DS"]

_TINY = 1e-30


class _ReluEluGrad(torch.autograd.Function):
    """ReLU forwards, the ELU's derivative backwards (the straight-through estimator)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp_min(0.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.where(x > 0, torch.ones_like(x), torch.exp(x.clamp_max(0.0)))


class DS(Sparsifier):
    """Architecture parameters thresholded to exact zeros, with a norm penalty.

    The ``"ds"`` method of :func:`~sksparse_nn.sparsifiers.sparsify`.

    Parameters
    ----------
    grouping : Grouping
    group_weights : tensor of shape (J,) or None
        Per-group weights in the ``"l1"`` and ``"l0.5"`` norms.
    form : {"signed", "softmax"}, default="signed"
        Signed scales (Eq. 12) or normalized non-negative ones (Eq. 9-11).
    norm : {"l1", "l0.5", "l21"} or None, default=None
        The penalty on ``a``; ``None``: ``"l1"`` for the signed form, ``"l0.5"`` for the
        softmax form.
    blocks : array-like of int of shape (J,), default=None
        Block label of each group, for ``norm="l21"`` (``None``: each group alone).
    rgf : bool, default=True
        Rectified gradient flow (ELU gradient through the threshold).

    Attributes
    ----------
    alpha : nn.Parameter of shape (J,)
    beta : nn.Parameter (0-dim)
    """

    method = "ds"

    def __init__(
        self, grouping, group_weights=None, *, form="signed", norm=None, blocks=None, rgf=True
    ):
        super().__init__(grouping, group_weights)
        if form not in ("signed", "softmax"):
            raise ValueError(f"form must be 'signed' or 'softmax', got {form!r}.")
        norm = ("l1" if form == "signed" else "l0.5") if norm is None else norm
        if norm not in ("l1", "l0.5", "l21"):
            raise ValueError(f"norm must be 'l1', 'l0.5' or 'l21', got {norm!r}.")
        if form == "softmax" and norm == "l1":
            raise ValueError(
                "norm='l1' is constant (1) on the softmax form's normalized parameters; "
                "use 'l0.5' or 'l21'."
            )
        J = grouping.n_groups
        labels = np.arange(J) if blocks is None else np.asarray(blocks)
        if labels.shape != (J,) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"blocks must hold one integer label per group ({J}).")
        _, labels = np.unique(labels, return_inverse=True)
        self.form, self.norm, self.rgf = form, norm, bool(rgf)
        self.register_buffer("blocks", torch.as_tensor(labels, dtype=torch.long))
        self.n_blocks = int(labels.max()) + 1 if J else 0
        self.alpha = nn.Parameter(torch.zeros(J))
        # the paper's start: a threshold sigma(beta) = 1 / (J^2 + J)
        self.beta = nn.Parameter(torch.tensor(-math.log(max(J * J + J - 1, 1))))

    def _relu(self, x):
        return _ReluEluGrad.apply(x) if self.rgf else torch.relu(x)

    def architecture(self):
        """The architecture parameters ``a``, shape ``(J,)``: exactly 0 for removed groups."""
        threshold = torch.sigmoid(self.beta)
        if self.form == "signed":
            return torch.sign(self.alpha) * self._relu(
                self.alpha.abs() - threshold * self.alpha.abs().sum()
            )
        gamma = torch.exp(self.alpha)
        kept = self._relu(gamma - threshold * gamma.sum())
        return kept / kept.sum().clamp_min(_TINY)

    def forward(self, original):
        a = self.architecture()
        if self.form == "signed":
            norms = self.grouping.group_sum(original.pow(2)).clamp_min(_TINY).sqrt()
            a = a / norms
        return original * self.grouping.expand(a)

    def penalty(self, original):
        a = self.architecture().abs()
        if self.norm == "l1":
            return self._weighted(a)
        if self.norm == "l0.5":
            return self._weighted(a.clamp_min(_TINY).sqrt()).pow(2)
        per_block = torch.zeros(self.n_blocks, dtype=a.dtype, device=a.device)
        per_block = per_block.index_add(0, self.blocks, a.pow(2))
        return per_block.clamp_min(_TINY).sqrt().sum()

    def initialize(self, original, init):
        """Architecture parameters that reproduce the current weight (both inits: groups
        at zero get ``a_j = 0``)."""
        J = self.n_groups
        threshold = 1.0 / (J * J + J) if J else 0.0
        self.beta.data.fill_(-math.log(max(J * J + J - 1, 1)))
        norms = self.group_norms(original)
        live = norms > 0
        if self.form == "signed":
            # |alpha_j| - s sum|alpha| = ||w_j||  <=>  alpha_j = ||w_j|| + s S / (1 - J s)
            total = float(norms.sum())
            self.alpha.data.copy_(norms + threshold * total / (1.0 - J * threshold))
            return  # the direction is original itself
        # softmax: live groups share the budget equally, omega carries the weight
        n_live = int(live.sum())
        dead = torch.full_like(norms, -30.0)  # far below the threshold
        self.alpha.data.copy_(torch.where(live, torch.zeros_like(norms), dead))
        if n_live:
            a = self.architecture().detach()
            scale = torch.where(a > 0, 1.0 / a.clamp_min(_TINY), torch.zeros_like(a))
            original.mul_(self.grouping.expand(scale))

    def extra_repr(self):
        return f"form={self.form!r}, norm={self.norm!r}, rgf={self.rgf}"
