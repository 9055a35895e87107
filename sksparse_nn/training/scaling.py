"""Standardization of inputs and targets, and its folding into a fitted module."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..utils.columns import column_moments

__all__ = ["Scaling"]

#: Largest |shift| / scale folded into float32 weights (see Scaling.needs_float64).
_FLOAT32_OFFSET = 1e3


class Scaling:
    """Standardization of the inputs and/or float targets, and its folding into a module.

    Sparse inputs are scaled but not centred (centring would densify them), as
    ``StandardScaler(with_mean=False)`` does. Constant columns keep scale 1.
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
            out.x_scale = Scaling._scale(mean, var)
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
