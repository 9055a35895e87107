"""What the exact block steps of the gated linear models share: their tolerances and
size limits, and the least-squares data term's moments (centred, row-scaled by the sample
weights) with the curvature operator that holds them (the Gram matrix, or the design on
wide data)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._curvature import DenseCurvature, DesignCurvature
from ._design import GramCache

__all__ = [
    "BLOCK_STEPS_PATIENCE",
    "BLOCK_STEPS_TOL",
    "KKT_TOL",
    "NEWTON_MAX_SIZE",
    "centered_moments",
    "curvature_operator",
    "gram_cache",
    "is_wide",
    "row_scaled",
    "uses_working_sets",
]

# Widest problem whose block steps use the p x p Gram matrix (else the design itself).
DENSE_GRAM_MAX_FEATURES = 4000
# Narrowest problem whose block steps run on working sets of groups.
WORKING_SET_MIN_FEATURES = 100
# Stopping tolerance of the block steps (relative decrease of the objective per step,
# for so many steps in a row).
BLOCK_STEPS_TOL = 1e-10
BLOCK_STEPS_PATIENCE = 3
# Relative KKT violation at which the block steps stop (D = 2): the proximal solver's
# default tol (GroupLassoRegressor / GroupLassoClassifier, 1e-8), so the two certify their
# coefficients by the same rule, not only the objective.
KKT_TOL = 1e-8
# Largest number of coefficients (features x free class columns) for Newton steps;
# beyond it only cheaper curvature models are used.
NEWTON_MAX_SIZE = 2000


def is_wide(X):
    """Whether the block steps work on the design (Woodbury) instead of a Gram matrix."""
    n, p = X.shape
    return p > n or p > DENSE_GRAM_MAX_FEATURES


def uses_working_sets(X):
    """Whether the block steps on ``X`` run on working sets of groups: wide data, or more
    than ``WORKING_SET_MIN_FEATURES`` features (narrower: the whole Gram matrix costs
    less than the working sets' bookkeeping)."""
    return is_wide(X) or X.shape[1] > WORKING_SET_MIN_FEATURES


def row_scaled(X, sample_weight):
    """``(diag(sqrt(s)) X, sqrt(s))``: weighted least squares as plain least squares on
    scaled rows (``X`` itself without weights; sparse stays sparse)."""
    if sample_weight is None:
        return X, None
    root = np.sqrt(sample_weight)
    return (sp.diags(root) @ X if sp.issparse(X) else X * root[:, None]), root


def centered_moments(X, Y, fit_intercept, with_gram=True, sample_weight=None):
    """``(gram, rhs, x_mean, y_mean, const)`` of the centered least-squares problem.

    ``gram = X_c^T S X_c / n``, ``rhs = X_c^T S Y_c / n`` and
    ``const = ||S^(1/2) Y_c||^2 / (2n)``, with ``S`` the sample weights (mean 1; identity
    when None) and ``X_c``, ``Y_c`` centred at the weighted means, so that
    ``1/(2n) sum_i s_i ||y_i - W^T x_i - b||^2`` at the best intercept equals
    ``const - <rhs, W> + <W, gram W> / 2``.
    """
    n, p = X.shape
    s = np.ones(n) if sample_weight is None else sample_weight
    x_mean = np.asarray(X.T @ s).ravel() / n if fit_intercept else np.zeros(p)
    y_mean = s @ Y / n if fit_intercept else np.zeros(Y.shape[1])
    Xs, _ = row_scaled(X, sample_weight)
    gram = None
    if with_gram:
        gram = np.asarray((Xs.T @ Xs).todense() if sp.issparse(Xs) else Xs.T @ Xs) / n
        gram -= np.outer(x_mean, x_mean)
    rhs = np.asarray(X.T @ (s[:, None] * Y)) / n - np.outer(x_mean, y_mean)
    const = 0.5 * float((s @ (Y - y_mean) ** 2).sum()) / n
    return gram, rhs, x_mean, y_mean, const


def gram_cache(curv):
    """An empty cache of the Gram blocks of ``curv`` (a :class:`DesignCurvature`) holding
    at most ``sqrt(n p)`` features: no more memory than one copy of the design."""
    n, p = curv.n, curv.n_features
    return GramCache(curv.products, p, min(p, max(int(np.sqrt(float(n) * p)), 64)))


def curvature_operator(X, x_mean, group, wide, gram, sample_weight, squares=None, by_columns=None):
    """The curvature operator of the (weighted) centred design: the Gram matrix, or the
    design itself when it is wide (``squares``: the squared column norms of the
    row-scaled design, when known; ``by_columns``: ``X`` in CSC, without sample
    weights, see :class:`DesignCurvature`)."""
    if not wide:
        return DenseCurvature(gram, group)
    Xs, root = row_scaled(X, sample_weight)
    return DesignCurvature(
        Xs, x_mean, group, row_scale=root, squares=squares, by_columns=by_columns
    )
