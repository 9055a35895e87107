"""What the linear family adds to training: the block-step trainer (exact steps that may
certify a fit before any gradient step), the data memo of warm starts, and the
projection of ``positive=True``.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import is_classifier
from skorch.callbacks import Callback
from skorch.history import History

from ..sparsifiers import gated_tensors, set_weight
from ..training import GradientTrainer, Trained, as_numpy
from ..utils.convergence import warn_convergence
from ._gated_least_squares import (
    KKT_TOL,
    centered_moments,
)


def _same_key(a, b):
    """Whether two data keys (tuples of arrays, shapes, flags, None) are equal."""
    return len(a) == len(b) and all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else x == y
        for x, y in zip(a, b, strict=True)
    )


class _DataMemo:
    """Statistics of one data set that every fit on it needs, kept along a warm-started
    path (see ``_SparseLinearModel._data_memo``): the Gram-block cache of the working
    sets, the squared column norms of the (row-scaled) design, the median column
    standard deviation of ``zero_tol``'s scale and sparse ``X`` by columns. Filled on
    first use."""

    def __init__(self):
        self.gram = None
        self.squares = None
        self.x_std = None
        self.csc = None
        self.moments = None  # (Y, centered_moments without the Gram matrix)
        self.gradient = None  # (W, gradient) at the last solution, for those targets

    def targets_moments(self, X, Y, fit_intercept, sample_weight):
        """``centered_moments`` of the targets ``Y`` without the Gram matrix, kept while
        the targets are the same (a path: one product with ``X`` per point saved); new
        targets drop the kept gradient too."""
        kept = self.moments
        if kept is None or not (kept[0].shape == Y.shape and np.array_equal(kept[0], Y)):
            moments = centered_moments(X, Y, fit_intercept, False, sample_weight)
            self.moments, self.gradient = (Y.copy(), moments), None
        return self.moments[1]

    def by_columns(self, X):
        """``X`` as the working sets read it: sparse ``X`` in CSC (one copy, made once
        per data set: a working set's columns are then slices, where CSR columns cost a
        pass over all of ``X``'s nonzeros per set: 0.3 ms against 0.04 ms on a
        2000 x 10000 text-like design), dense ``X`` itself."""
        if not sp.issparse(X) or X.format == "csc":
            return X
        if self.csc is None:
            self.csc = X.tocsc()
        return self.csc


@functools.lru_cache(maxsize=8)
def _probe(n):
    """The fixed random vector of length ``n`` that data memos recognize data by
    (read-only; drawing it cost as much as the probe's product on a path's data)."""
    v = np.random.RandomState(0).standard_normal(n)
    v.flags.writeable = False
    return v


def _is_gated(module):
    """Whether the module's weight is D-gated (certified D = 2 fits never gate it)."""
    return any(True for _ in gated_tensors(module))


def _weights(dataset):
    """The dataset's sample weights (mean 1) as float64 numpy, or None."""
    return None if dataset.weight is None else as_numpy(dataset.weight)


class _ProjectNonNegative(Callback):
    """``positive=True``: after every optimizer step, negative coefficients are set to
    zero (a projected gradient step; the factors are re-balanced)."""

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        module = net.module_
        with torch.no_grad():
            weight = module.weight
            if not bool((weight < 0).any()):
                return
            if _is_gated(module):
                set_weight(module, "weight", weight.clamp(min=0.0))
            else:
                weight.clamp_(min=0.0)


class _BlockStepTrainer(GradientTrainer):
    """The linear family's trainer: exact block steps from the module's start (see
    ``_gated_least_squares``), then the engine's gradient steps (L-BFGS finishes the
    smooth D-gated problem), unless the block steps certified the solution (relative KKT
    violation below ``KKT_TOL``): such a fit ends there, with no epoch trained.

    L-BFGS stops when one of its iterations lowers the objective by less than ``tol``
    (relative to the block steps' objective), not only at the end of an epoch.
    """

    def train(self, est, module, dataset, **kwargs):
        if est.positive and module.out_features > 1 and is_classifier(est):
            raise ValueError(
                "positive=True is supported for binary problems only: multinomial "
                f"coefficients ({module.out_features} classes) are defined up to a "
                "constant per feature and cannot all be made non-negative."
            )
        objective, certified = None, False
        est._fit_memo = None  # set by the block steps on working sets (_data_memo)
        if est._runs_block_steps(dataset.X) and est._penalizes(module):
            objective, certified = est._run_block_steps(module, dataset)
        if certified:  # nothing left to train (nor gates, see _gate_module)
            return Trained(module, History(), {})
        options, callbacks = {}, []
        # Nothing left for gradient steps after the constrained block steps with L-BFGS,
        # whose projected steps would only undo their work.
        if est.positive and objective is not None and est.optimizer == "lbfgs":
            options["max_epochs"] = 0
            if est.D == 2:  # convex: the steps should have certified the solution
                warn_convergence(
                    f"{type(est).__name__}(positive=True, D=2): the block steps stopped "
                    f"before the KKT conditions held to the relative tolerance {KKT_TOL:g} "
                    "(their working sets stalled), and no gradient training follows "
                    "under the constraint: the coefficients are a feasible point near "
                    "the solution, not the certified solution.",
                    stacklevel=4,
                )
        if objective is not None and est.optimizer == "lbfgs" and est.tol is not None:
            options["optimizer__tolerance_change"] = est.tol * abs(objective)
        if est.positive:
            callbacks.append(("nonnegative", _ProjectNonNegative()))
        return super().train(
            est, module, dataset, net_options=options, callbacks=callbacks, **kwargs
        )
