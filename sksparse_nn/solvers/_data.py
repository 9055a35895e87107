"""Input conversion and argument checks shared by the solvers: float matrices, group
labels extended by the unpenalized features. (Sample weights:
:func:`sksparse_nn.utils.validation.check_sample_weight`.)"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils.sparsefuncs import mean_variance_axis

from ..groups import count_groups


def extended_groups(labels, rho):
    """Give each unpenalized feature its own weight-0 group.

    Returns ``(ext, rho_ext)``: labels in ``0..K-1`` for every feature (groups ``0..J-1``
    keep their number, features in no group get ``J, J+1, ...``) and the weights of the
    ``K`` groups. The solver then needs no special case for unpenalized features.
    """
    labels = np.asarray(labels, dtype=np.intp)
    n_groups = count_groups(labels)
    rho = np.asarray(rho, dtype=np.float64).reshape(-1)
    if rho.shape != (n_groups,):
        raise ValueError(f"rho must have shape ({n_groups},), got {rho.shape}.")
    ext = labels.copy()
    free = ext < 0
    ext[free] = n_groups + np.arange(int(free.sum()))
    rho_ext = np.concatenate([rho, np.zeros(int(free.sum()))])
    return ext, rho_ext


def as_float_matrix(X):
    """``X`` as a float64 ndarray or CSR/CSC matrix (no copy when it already is one)."""
    if sp.issparse(X):
        if X.format not in ("csr", "csc"):
            X = X.tocsr()
        if X.dtype != np.float64:
            X = X.astype(np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-d, got shape {X.shape}.")
    return X


def _canonical(X):
    """A CSR/CSC ``X`` without duplicate entries (summed on a copy when it has any)."""
    X = X if X.format in ("csr", "csc") else X.tocsr()
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _sparse_columns(X):
    """``(column index of every stored entry, entries)`` of a sparse matrix."""
    X = _canonical(X)
    if X.format == "csr":
        return X.indices, X.data
    return np.repeat(np.arange(X.shape[1]), np.diff(X.indptr)), X.data


def column_squares(X):
    """Sum of squares of every column of a dense or sparse ``X`` (float64): ``O(nnz)``
    and without a temporary of the size of ``X``."""
    if not sp.issparse(X):
        return np.einsum("ij,ij->j", X, X, dtype=np.float64)
    cols, data = _sparse_columns(X)
    data = data.astype(np.float64, copy=False)
    return np.bincount(cols, weights=data * data, minlength=X.shape[1])


def column_moments(X):
    """Mean and variance of every column of a dense or sparse ``X`` (float64).

    Sparse ``X`` costs ``O(nnz)`` and no copy of a CSR/CSC matrix without duplicate
    entries (scikit-learn's ``mean_variance_axis``, which accumulates deviations: no
    cancellation). Dense ``X``: ``mean(x^2) - mean(x)^2`` without a temporary of the
    size of ``X``, and ``np.var`` on the columns where that difference cancels (spread
    below 1e-3 of the mean: its rounding is then beyond ``1e6 eps`` relative) or is zero
    (constant columns, exactly).
    """
    n = X.shape[0]
    if sp.issparse(X):
        mean, var = mean_variance_axis(_canonical(X), axis=0)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    mean = X.mean(axis=0, dtype=np.float64)
    var = column_squares(X) / n - mean**2
    exact = ~(var > 1e-6 * mean**2)
    if exact.any():
        var[exact] = np.var(X[:, exact], axis=0, dtype=np.float64)
    return mean, var


def check_solver_args(lam, tol, max_iter):
    if not (isinstance(lam, Real) and np.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}.")
    if not (isinstance(tol, Real) and tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}.")
