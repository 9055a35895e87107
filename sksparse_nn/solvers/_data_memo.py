"""What every fit of the gated linear solvers on one data set needs (:class:`DataMemo`),
kept along a warm-started path, and the key that recognizes the data set
(:func:`data_key`)."""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import scipy.sparse as sp

from ._column_store import CSRColumns
from ._gated_setup import centered_moments

__all__ = ["DataMemo", "data_key", "same_key"]


def same_key(a, b):
    """Whether two data keys (tuples of arrays, shapes, flags, None) are equal."""
    return len(a) == len(b) and all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else x == y
        for x, y in zip(a, b, strict=True)
    )


@functools.lru_cache(maxsize=8)
def _probe(n):
    """The fixed random vector of length ``n`` that data memos recognize data by
    (read-only; cached, as drawing it costs about as much as the product it probes)."""
    v = np.random.RandomState(0).standard_normal(n)
    v.flags.writeable = False
    return v


def data_key(X, fit_intercept, sample_weight):
    """The key of a data set: its shape, ``fit_intercept``, the sample weights and the
    digest of a probe ``X^T v`` for a fixed random ``v`` (one product with ``X``, no copy
    of it; the digest, not the probe's ``p`` floats, is kept along a path)."""
    probe = np.ascontiguousarray(np.asarray(X.T @ _probe(X.shape[0])).ravel())
    return (
        X.shape,
        fit_intercept,
        hashlib.sha256(probe.view(np.uint8)).digest(),
        None if sample_weight is None else np.asarray(sample_weight),
    )


class DataMemo:
    """Statistics of one data set that every fit on it needs, kept along a warm-started
    path: the Gram-block cache of the working sets, the squared column norms of the
    (row-scaled) design, the median column standard deviation of ``zero_tol``'s scale
    and sparse CSR ``X``'s columns that the working sets read. Filled on first use."""

    def __init__(self):
        self.gram = None
        self.squares = None
        self.x_std = None
        self.columns = None  # sparse X by columns (CSRColumns)
        self.moments = None  # (Y, centered_moments without the Gram matrix)
        self.gradient = None  # (key of W, gradient) at the last solution, for those targets

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
        """``X`` as the working sets read it: dense or CSC ``X`` itself (a set's columns
        are slices), other sparse ``X`` through a :class:`~._column_store.CSRColumns`
        (the sets' columns copied out of its rows and kept along the path, never a
        column-ordered copy of all of ``X``)."""
        if not sp.issparse(X) or X.format == "csc":
            return X
        if self.columns is None:
            self.columns = CSRColumns(X if X.format == "csr" else X.tocsr())
        return self.columns
