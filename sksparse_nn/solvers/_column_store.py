"""Sparse CSR ``X`` read by columns without a column-ordered copy of all of it
(:class:`CSRColumns`).

The working sets read their columns in CSC layout (a column's entries contiguous). A
CSC copy of the whole design made that a slice, at the price of one more copy of ``X``
kept along the path. Here the columns a working set asks for are copied out of the
CSR rows by one compiled pass over ``X``'s entries (:func:`._compiled.csr_columns`),
and kept: a later set within the kept columns (the same set's Gram blocks, the next
set of a fit, which mostly repeats the last one) slices them. A request outside them
copies the union of both, while it stays within ``_HELD_FRACTION`` of ``X``'s entries
(a path's sets grow as the penalty falls: one pass each time new columns enter), else
the request's columns alone; the old copy is dropped before the pass, so at most one
copy of the held columns exists at a time.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["CSRColumns"]

# Most entries held, as a fraction of X's: the union of the sets asked for is kept up to
# this, a set larger than it alone.
_HELD_FRACTION = 0.5


class CSRColumns:
    """The columns of a CSR matrix ``X`` as the working sets read them (see the module).

    ``pointers(cols)`` gives ``(lo, hi, indices, data)``: column ``cols[i]`` is the
    entries ``lo[i]:hi[i]`` of ``indices`` (rows, ascending) / ``data``, the layout of
    :class:`~._coordinate_descent.SparseColumns`; ``self[:, cols]`` the same columns as
    a CSC matrix (what slicing a CSC copy of ``X`` gave, the same entries in the same
    order).
    """

    def __init__(self, X):
        self.X = X
        self.shape = X.shape
        # entries per column (int32: half a vector of length p), for the pointers of
        # a copy before the pass that fills it
        self.counts = np.bincount(X.indices, minlength=X.shape[1]).astype(np.int32)
        self.budget = _HELD_FRACTION * X.nnz
        self.held = np.zeros(0, dtype=np.intp)  # sorted column ids
        self.indptr = np.zeros(1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0)
        self.passes = 0  # passes over X's entries made (for tests and benchmarks)

    def _positions(self, cols):
        """Where the columns ``cols`` are among the held ones, copying them first when
        some are not held."""
        held = self.held
        if not cols.size:
            return cols
        if held.size:
            pos = np.minimum(np.searchsorted(held, cols), held.size - 1)
            if np.array_equal(held[pos], cols):
                return pos
        wanted = np.union1d(held, cols)
        if self.counts[wanted].sum(dtype=np.int64) > self.budget:
            wanted = np.unique(cols)
        self._take(wanted)
        return np.searchsorted(self.held, cols)

    def _take(self, cols):
        """Hold the columns ``cols`` (sorted, unique): one pass over ``X``'s entries."""
        from ._compiled import csr_columns

        self.held = self.indptr = self.indices = self.data = None  # the old copy first
        X = self.X
        indptr = np.zeros(cols.size + 1, dtype=np.int64)
        np.cumsum(self.counts[cols], out=indptr[1:])
        where = np.full(self.shape[1], -1, dtype=np.int32)
        where[cols] = np.arange(cols.size, dtype=np.int32)
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        data = np.empty(int(indptr[-1]), dtype=np.result_type(X.dtype, np.float64))
        csr_columns(X.indptr, X.indices, X.data, where, indptr, indices, data)
        self.held, self.indptr, self.indices, self.data = cols, indptr, indices, data
        self.passes += 1

    def pointers(self, cols):
        """``(lo, hi, indices, data)`` of the columns ``cols`` (int64 pointers)."""
        pos = self._positions(np.asarray(cols, dtype=np.intp))
        return self.indptr[pos], self.indptr[pos + 1], self.indices, self.data

    def __getitem__(self, key):
        """``self[:, cols]``: the columns ``cols`` as a CSC matrix."""
        rows, cols = key
        if not (isinstance(rows, slice) and rows == slice(None)):
            raise IndexError("CSRColumns takes columns only: self[:, cols]")
        pos = self._positions(np.asarray(cols, dtype=np.intp))
        held = sp.csc_matrix(
            (self.data, self.indices, self.indptr), shape=(self.shape[0], self.held.size)
        )
        return held[:, pos]
