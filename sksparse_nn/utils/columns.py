"""Column statistics of a dense or sparse ``X`` (numpy/scipy only, float64).

:func:`column_squares` (sum of squares of every column) and :func:`column_moments` (mean
and variance of every column), :func:`column_range` (smallest and largest values):
``O(nnz)`` on sparse ``X``, without a temporary of the size
of ``X``. The solvers' designs, the linear family's block steps and the training engine's
standardization read them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.sparsefuncs import mean_variance_axis

__all__ = ["column_moments", "column_range", "column_squares"]


def _canonical(X):
    """A CSR/CSC ``X`` without duplicate entries (summed on a copy when it has any)."""
    X = X if X.format in ("csr", "csc") else X.tocsr()
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


# Stored entries per chunk of column_squares on sparse X (64 kB of floats: a few
# hundred chunks for millions of entries, milliseconds of overhead).
_SQUARES_CHUNK = 1 << 13


def column_squares(X):
    """Sum of squares of every column of a dense or sparse ``X`` (float64): ``O(nnz)``
    and without a temporary of the size of ``X`` (sparse: a chunk of entries at a
    time, each added to its column's sum in storage order, as one ``bincount`` over
    all of them would: the same sums to the bit for any chunk)."""
    if not sp.issparse(X):
        return np.einsum("ij,ij->j", X, X, dtype=np.float64)
    X = _canonical(X)
    p = X.shape[1]
    out = np.zeros(p)
    if X.format == "csr":
        for a in range(0, X.nnz, _SQUARES_CHUNK):
            data = X.data[a : a + _SQUARES_CHUNK].astype(np.float64, copy=False)
            np.add.at(out, X.indices[a : a + _SQUARES_CHUNK], data * data)
        return out
    ptr = X.indptr
    lo = 0
    while lo < p:  # CSC: chunks of whole columns, each summed from zero in its order
        hi = int(np.searchsorted(ptr, ptr[lo] + _SQUARES_CHUNK, side="right")) - 1
        hi = min(max(hi, lo + 1), p)
        data = X.data[ptr[lo] : ptr[hi]].astype(np.float64, copy=False)
        cols = np.repeat(np.arange(hi - lo), np.diff(ptr[lo : hi + 1]))
        out[lo:hi] = np.bincount(cols, weights=data * data, minlength=hi - lo)
        lo = hi
    return out


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


def column_range(X):
    """Smallest and largest value of every column of a dense or sparse ``X`` (float64).

    A sparse column with fewer stored entries than rows holds zeros (scipy's ``min`` /
    ``max`` count them): ``O(nnz)``, no dense copy.
    """
    low, high = X.min(axis=0), X.max(axis=0)
    if sp.issparse(X):
        low, high = low.toarray(), high.toarray()
    return (
        np.asarray(low, dtype=np.float64).ravel(),
        np.asarray(high, dtype=np.float64).ravel(),
    )
