"""The package's one ``lambda_max``: the smallest penalty at which every penalized group
is zero, for both losses."""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.sparse as sp
from sklearn.utils.extmath import safe_sparse_dot

from ..utils.convergence import warn_convergence
from ..utils.validation import check_sample_weight
from ._data import as_float_matrix, extended_groups
from ._logistic import solve_group_logistic
from ._logistic_design import as_logistic_targets, probabilities, wmean


def lambda_max(
    X,
    y,
    labels,
    rho,
    fit_intercept=True,
    *,
    loss="squared_error",
    positive=False,
    sample_weight=None,
):
    """Smallest penalty at which every penalized group of the solution is zero.

    It is ``max_j ||G_j|| / rho_j`` over the groups with ``rho_j > 0``, where ``G`` is
    the gradient of the loss with respect to the coefficients at the best model whose
    penalized groups are all zero (the intercept and the unpenalized features fitted,
    everything else zero): by the KKT conditions that model is the solution exactly when
    ``lam rho_j >= ||G_j||`` for every group.

    * ``loss="squared_error"`` (:func:`solve_group_lasso`): without unpenalized features
      ``G = -X_c^T y_c / n`` (weighted centering and ``S^{1/2}`` scaling with
      ``sample_weight``). Unpenalized features (label ``-1`` or weight ``0``) are first
      fitted by least squares (non-negative least squares under ``positive``; on their
      centered columns, densified: there are usually few) and their residual ``r``
      replaces ``y_c``; this is exact, because ``r`` is the residual at every solution
      whose penalized groups are all zero. A 2-d ``y`` (several targets sharing the
      groups, as the multi-output estimators of the package) gives one column of ``G``
      per target and Frobenius group norms over the group's features and columns. With
      ``positive`` only the positive part of ``-G`` counts (a zero group with ``-G_j <=
      0`` is optimal under ``w >= 0`` whatever ``lam``).
    * ``loss="log_loss"`` (:func:`solve_group_logistic`): ``G = X_c^T (P - Y) / n`` with
      ``P`` the predicted probabilities of the intercept-only model (the class
      frequencies; ``1/2`` or ``1/K`` without intercept). Unpenalized features are first
      fitted, with the intercept, by unpenalized logistic regression
      (:func:`solve_group_logistic` at ``lam=0``, ``tol=1e-12``); this is exact up to that
      tolerance, and fails to converge (ConvergenceWarning) if the classes are separable
      on the unpenalized features alone, where that fit has no finite solution.

    This is the package's one ``lambda_max``: the estimators' default grids use it too
    (the squared-error form on their targets).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Targets: real values for ``"squared_error"`` (one column per target when 2-d);
        for ``"log_loss"`` labels in ``{0, 1}`` (binary) or one-hot rows (multinomial),
        as for :func:`solve_group_logistic`.
    labels : ndarray of int of shape (n_features,)
        Output of ``check_groups``.
    rho : ndarray of shape (J,)
        Group weights.
    fit_intercept : bool, default=True
    loss : {"squared_error", "log_loss"}, default="squared_error"
    positive : bool, default=False
        For non-negative coefficients (``solve_group_lasso(..., positive=True)``);
        squared error only.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, rescaled to sum to ``n_samples`` (as in
        :func:`solve_group_lasso` and :func:`solve_group_logistic`).

    Returns
    -------
    lam_max : float
        ``0.0`` if no group is penalized.
    """
    if loss not in ("squared_error", "log_loss"):
        raise ValueError(f'loss must be "squared_error" or "log_loss", got {loss!r}.')
    if loss == "log_loss":
        if positive:
            raise ValueError('positive is supported with loss="squared_error" only.')
        X = as_float_matrix(X)
        y, _ = as_logistic_targets(y, X.shape[0], fit_intercept)
    else:
        X = as_float_matrix(X)
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 1:
            y = y[:, None]
        if y.ndim != 2 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"y must have shape ({X.shape[0]},) or ({X.shape[0]}, n_targets), "
                f"got {np.shape(y)}."
            )
    n, p = X.shape
    labels = np.asarray(labels, dtype=np.intp)
    if labels.shape != (p,):
        raise ValueError(f"labels must have shape ({p},), got {labels.shape}.")
    ext, rho_ext = extended_groups(labels, rho)
    penalized = rho_ext[ext] > 0
    if not penalized.any():
        return 0.0
    free = np.flatnonzero(~penalized)
    if loss == "log_loss":
        s = check_sample_weight(sample_weight, n)
        r = _logistic_null_residual(X, y, free, fit_intercept, s)  # (n, K): P - Y
        if not fit_intercept:
            x_mean = np.zeros(p)
        elif s is None:
            x_mean = np.asarray(X.mean(axis=0)).reshape(-1)
        else:
            x_mean = np.asarray(safe_sparse_dot(s, X)).reshape(-1) / n
        if s is not None:
            r = r * s[:, None]
        z = (safe_sparse_dot(X.T, r) - np.outer(x_mean, r.sum(axis=0))) / n
    else:
        s = check_sample_weight(sample_weight, n)
        sw = np.ones(n) if s is None else np.sqrt(s)
        if not fit_intercept:
            x_mean = np.zeros(p)
            r = y * sw[:, None]
        elif s is None:
            x_mean = np.asarray(X.mean(axis=0)).reshape(-1)
            r = y - y.mean(axis=0)
        else:
            x_mean = np.asarray(safe_sparse_dot(s, X)).reshape(-1) / n
            r = (y - s @ y / n) * sw[:, None]
        if free.size:  # residual of the unpenalized features' (weighted) fit
            XU = X[:, free]
            XU = XU.toarray() if sp.issparse(XU) else np.array(XU)
            XU = (XU - x_mean[free]) * sw[:, None]
            if positive:
                beta = np.column_stack(
                    [scipy.optimize.nnls(XU, r[:, k])[0] for k in range(r.shape[1])]
                )
            else:
                beta = np.linalg.lstsq(XU, r, rcond=None)[0]
            r = r - XU @ beta
        # minus the gradient: X_c^T r / n with X_c = S^{1/2} (X - 1 m^T)
        rw = r * sw[:, None]
        z = (safe_sparse_dot(X.T, rw) - np.outer(x_mean, sw @ r)) / n
        if positive:
            z = np.maximum(z, 0.0)
    z2 = np.einsum("ij,ij->i", z, z)
    norms = np.sqrt(np.bincount(ext, weights=np.where(penalized, z2, 0.0)))
    pos = rho_ext > 0
    return float(np.max(norms[pos] / rho_ext[pos]))


def _logistic_null_residual(X, Y, free, fit_intercept, sample_weight=None):
    """``P - Y`` at the best model using only the intercept and the features ``free``
    (``sample_weight`` summing to n, or None)."""
    n, K = Y.shape
    binary = K == 1
    if free.size == 0:
        if fit_intercept:
            return wmean(Y, sample_weight) - Y
        return np.full(K, 0.5 if binary else 1.0 / K) - Y
    Xf = X[:, free]
    res = solve_group_logistic(
        Xf,
        Y,
        0.0,
        np.full(free.size, -1, dtype=np.intp),
        np.zeros(0),
        tol=1e-12,
        max_iter=100000,
        fit_intercept=fit_intercept,
        sample_weight=sample_weight,
    )
    if not res.converged:
        warn_convergence(
            "lambda_max: the logistic fit of the unpenalized features did not converge "
            f"(relative KKT violation {res.kkt:.3g}); are the classes separable on them?",
            stacklevel=3,
        )
    Z = np.asarray(safe_sparse_dot(Xf, res.coef.reshape(free.size, K))) + res.intercept
    return probabilities(Z, binary) - Y
