"""Standardization of inputs and targets, and its folding into a fitted module."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..utils.columns import column_moments, column_range

__all__ = ["MAX_STANDARDIZED", "Scaling", "bounded_scale"]

#: Largest |shift| / scale folded into float32 weights (see Scaling.needs_float64).
_FLOAT32_OFFSET = 1e3

#: Largest magnitude a standardized training input can take (see :func:`bounded_scale`).
#: A Gaussian column of 10^4 rows reaches ~4 standard deviations from its mean, so
#: ordinary columns keep their standard deviation; a rare level's indicator (one 1 in
#: ``n`` rows reaches ``sqrt(n)`` standard deviations: 45 at n = 2,000) or a heavy tail
#: is scaled down to this reach, where SGD at the default rate stays stable.
MAX_STANDARDIZED = 8.0


def bounded_scale(mean, var, low, high):
    """Scale of each column: its standard deviation, widened where needed so that no
    training value lies more than :data:`MAX_STANDARDIZED` scales from the mean.

    ``(x - mean) / scale`` is then the usual standardization for ordinary columns and is
    bounded by ``MAX_STANDARDIZED`` for all, which only the column's smallest and largest
    values decide (one pass over a stream, unlike quantiles). Columns constant up to
    float64 rounding keep scale 1.

    Parameters
    ----------
    mean, var, low, high : ndarray
        Mean, variance, smallest and largest value of each column.

    Returns
    -------
    scale : ndarray of float64
    """
    mean = np.asarray(mean, dtype=np.float64)
    std = np.sqrt(np.asarray(var, dtype=np.float64))
    constant = ~(std > 1e-12 * np.maximum(np.abs(mean), 1.0))
    reach = np.maximum(np.asarray(high) - mean, mean - np.asarray(low))
    return np.where(constant, 1.0, np.maximum(std, reach / MAX_STANDARDIZED))


class Scaling:
    """Standardization of the inputs and/or float targets, and its folding into a module.

    Inputs are centred and scaled by :func:`bounded_scale` (the standard deviation, or
    more for a column whose extremes lie beyond :data:`MAX_STANDARDIZED` deviations: a
    rare level's indicator, a heavy tail), so no training input exceeds that magnitude.
    Sparse inputs are only scaled here (centring would densify them; the training
    batches are centred as they are densified). Targets are standardized. Constant
    columns keep scale 1.
    """

    def __init__(self, x_shift=None, x_scale=None, y_shift=None, y_scale=None):
        self.x_shift, self.x_scale = x_shift, x_scale
        self.y_shift, self.y_scale = y_shift, y_scale

    @classmethod
    def fit(cls, X=None, targets=None):
        out = cls()
        if X is not None:
            mean, var = column_moments(X)  # sparse X: O(nnz), no copy
            out.x_shift = np.asarray(mean, dtype=np.float64)
            out.x_scale = bounded_scale(mean, var, *column_range(X))
        if targets is not None:
            t = targets.double().numpy().reshape(len(targets), -1)
            out.y_shift = t.mean(axis=0)
            out.y_scale = Scaling._scale(out.y_shift, t.var(axis=0))
        return out

    @staticmethod
    def _scale(mean, var):
        """Standard deviations, 1 for columns constant up to float64 rounding."""
        std = np.sqrt(np.asarray(var, dtype=np.float64))
        return np.where(std > 1e-12 * np.maximum(np.abs(mean), 1.0), std, 1.0)

    def transform(self, X, targets):
        """Standardized copies of ``X`` (float64) and ``targets`` (the inputs when unset).

        Sparse ``X`` is only scaled (its centring would densify it; the training batches
        are centred as they are densified).
        """
        if self.x_scale is not None and X is not None:
            if sp.issparse(X):  # scaled only
                X = (X @ sp.diags(1.0 / self.x_scale)).tocsr()
            else:
                X = (X - self.x_shift) / self.x_scale
        if self.y_scale is not None:
            t = (targets.double().reshape(len(targets), -1).numpy() - self.y_shift) / self.y_scale
            targets = torch.as_tensor(t.reshape(tuple(targets.shape)), dtype=targets.dtype)
        return X, targets

    def needs_float64(self):
        """Whether folding this map into float32 weights would lose the model.

        An offset ``|shift|`` far beyond the spread ``scale`` cancels in the folded
        weights: a float32 affine map of ``x`` (or to ``y``) then rounds at ``eps32 *
        |shift| / scale``, 6e-5 of the spread beyond ``_FLOAT32_OFFSET`` (a column of
        timestamps or a target of 1e9 +- 1 would come back as noise). Such modules are
        folded, and kept, in float64.
        """
        ratios = [
            np.max(np.abs(shift) / scale, initial=0.0)
            for shift, scale in ((self.x_shift, self.x_scale), (self.y_shift, self.y_scale))
            if scale is not None
        ]
        return max(ratios, default=0.0) > _FLOAT32_OFFSET

    def fold(self, estimator, module):
        """Make ``module`` (trained on standardized data) take and return the user's units."""
        if self.x_scale is not None:
            estimator._rescale_inputs(module, self.x_shift, self.x_scale)
        if self.y_scale is not None:
            estimator._rescale_outputs(module, self.y_shift, self.y_scale)

    def unfold(self, estimator, module):
        """Inverse of :meth:`fold`: a fitted module back into standardized units."""
        if self.x_scale is not None:
            estimator._rescale_inputs(module, -self.x_shift / self.x_scale, 1.0 / self.x_scale)
        if self.y_scale is not None:
            estimator._rescale_outputs(module, -self.y_shift / self.y_scale, 1.0 / self.y_scale)
