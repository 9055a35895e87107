r"""Direct group lasso: ``sum_j rho_j ||w_j||_2`` trained by plain (sub)gradient steps.

The naive baseline of the D-Gating papers. A subgradient step never lands on a group's
zero (it oscillates around it at the scale of the step), so this method has no exact
zeros: its selection is the groups whose norm is at least a stated magnitude
``threshold``, and :func:`~sksparse_nn.sparsifiers.collapse` sets the others to 0.
"""

from __future__ import annotations

from ._base import Sparsifier

__all__ = ["L21"]

#: Below this squared norm a group's penalty has zero gradient (its subgradient at 0).
_TINY = 1e-30


class L21(Sparsifier):
    """The group-lasso penalty on the weight itself (an identity parametrization).

    The ``"l21"`` method of :func:`~sksparse_nn.sparsifiers.sparsify`.

    Parameters
    ----------
    grouping : Grouping
    group_weights : tensor of shape (J,) or None
        Per-group penalty weights ``rho_j``.
    threshold : float, default=1e-3
        Groups with a smaller norm count as removed (magnitude pruning at the end of
        training; in the weight's units).
    """

    method = "l21"
    exact_zeros = False

    def __init__(self, grouping, group_weights=None, *, threshold=1e-3):
        super().__init__(grouping, group_weights)
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {threshold!r}.")
        self.threshold = float(threshold)

    def forward(self, original):
        return original

    def penalty(self, original):
        """``sum_j rho_j ||w_j||``, with subgradient 0 at a zero group."""
        return self._weighted(self.grouping.group_sum(original.pow(2)).clamp_min(_TINY).sqrt())

    def keep(self, weight, zero_tol):
        return self.group_norms(weight) >= max(zero_tol, self.threshold)

    def initialize(self, original, init):
        """Nothing to set: the stored tensor is the weight."""

    def extra_repr(self):
        return f"threshold={self.threshold}"
