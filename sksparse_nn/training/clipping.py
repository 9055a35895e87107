"""Gradient clipping that leaves the penalty's own pull unclipped."""

from __future__ import annotations

import numpy as np
import torch
from skorch.callbacks import Callback

from ..sparsifiers import (
    penalty_curvatures,
)


def _norms(tensors):
    """The 2-norms of ``tensors`` as a float64 array (one fused kernel)."""
    return torch.stack(torch._foreach_norm(tensors)).double().numpy()


class PenaltyAwareClipping(Callback):
    """Clip the gradient norm at ``max_norm`` plus the norm of the penalty's own gradient.

    Plain norm clipping would also clip the pull of ``lam * penalty`` on the D-Gating
    factors (``lam * curvature * factor``, plus the net's ``ridge`` on the weights it
    names), so unused groups would shrink at the clip rate instead of geometrically.
    Only the data's share of the gradient is bounded.

    Parameters
    ----------
    max_norm : float
        Largest norm of the data's share of the gradient.
    """

    def __init__(self, max_norm):
        self.max_norm = max_norm

    def on_train_begin(self, net, **kwargs):
        factors = list(penalty_curvatures(net.module_))
        self.factors_ = [param for _, param, _ in factors]
        self.curvatures_ = np.array([curvature for _, _, curvature in factors])
        self.ridged_ = bool(getattr(net, "ridge_", ()))
        # listed once: walking the module every step costs as much as the clipping
        self.params_ = [param for _, param in net.get_all_learnable_params()]

    def on_grad_computed(self, net, named_parameters, **kwargs):
        # the gradient's norm in one fused kernel (as torch's own clipping); the
        # penalty's pull only when that norm exceeds max_norm (below it no step is
        # clipped, whatever the pull)
        with torch.no_grad():
            grads = [p.grad for p in self.params_ if p.grad is not None]
            if not grads:
                return
            total = float(np.hypot.reduce(_norms(grads)))
            if not np.isfinite(total):  # float32 overflow: the same norm in float64
                norms = [float(torch.linalg.vector_norm(g, dtype=torch.float64)) for g in grads]
                total = float(np.hypot.reduce(norms, initial=0.0))
            if total + 1e-6 <= self.max_norm:
                return
            # in float64, as the total: at a huge lam the pull's square overflows float32
            # and an inf / inf coefficient would turn every gradient into NaN
            pull = 0.0
            if self.factors_:
                norms = _norms(self.factors_)
                pull = float(np.hypot.reduce(net.lam * self.curvatures_ * norms))
            if self.ridged_:  # and the ridge's pull on the weights it names
                pull = float(np.hypot(pull, np.hypot.reduce(_norms(net.ridge_pulls()))))
            coef = (self.max_norm + pull) / (total + 1e-6)
            if coef < 1.0:
                torch._foreach_mul_(grads, coef)
