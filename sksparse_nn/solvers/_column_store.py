"""Sparse CSR ``X`` read by columns without a column-ordered copy of all of it
(:class:`CSRColumns`).

The working sets read their columns in CSC layout (a column's entries contiguous). A
CSC copy of the whole design made that a slice, at the price of one more copy of ``X``
kept along the path. Here the columns a working set asks for are copied out of the
CSR rows by one compiled pass over ``X``'s entries (:func:`._kernels.csr_columns`),
and kept: a later set within the kept columns (the same set's Gram blocks, the next
set of a fit, which mostly repeats the last one) reads them in place. A request
outside them adds its new columns (a path's sets grow as the penalty falls: one pass
each time new columns enter, which writes only them), while the held entries stay
within ``_HELD_FRACTION`` of ``X``'s; beyond that the request's columns alone are
held.
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
    order). The held columns lie in ``indices`` / ``data`` in the order they were
    copied (new ones appended: a pass that copies only them costs the read of ``X``'s
    column indices, not a write of every held entry).
    """

    def __init__(self, X):
        self.X = X
        self.shape = X.shape
        # entries per column (int32: half a vector of length p), for the pointers of
        # a copy before the pass that fills it
        self.counts = np.bincount(X.indices, minlength=X.shape[1]).astype(np.int32)
        self.budget = _HELD_FRACTION * X.nnz
        self.passes = 0  # passes over X's entries made (for tests and benchmarks)
        self._clear()

    def _clear(self):
        """Hold no column."""
        self.held = np.zeros(0, dtype=np.intp)  # sorted column ids
        self.lo = self.hi = np.zeros(0, dtype=np.int64)  # their entries, per held column
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0, dtype=np.result_type(self.X.dtype, np.float64))

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
        wanted = np.zeros(self.shape[1], dtype=bool)
        wanted[cols] = True
        wanted[held] = False
        new = np.flatnonzero(wanted)
        if self.indices.size + self.counts[new].sum(dtype=np.int64) > self.budget:
            self._clear()  # over the budget: the request's columns alone
            new = np.unique(cols)
        self._append(new)
        return np.searchsorted(self.held, cols)

    def _append(self, new):
        """Hold the columns ``new`` too (sorted, none held): one pass over ``X``'s
        entries copies them after the held ones."""
        from ._kernels import csr_columns

        X = self.X
        start = self.indices.size
        ptr = np.empty(new.size + 1, dtype=np.int64)
        ptr[0] = start
        np.cumsum(self.counts[new], out=ptr[1:])
        ptr[1:] += start
        self._grow("indices", int(ptr[-1]))
        self._grow("data", int(ptr[-1]))
        indices, data = self.indices, self.data
        where = np.full(self.shape[1], -1, dtype=np.int32)
        where[new] = np.arange(new.size, dtype=np.int32)
        csr_columns(X.indptr, X.indices, X.data, where, ptr, indices, data)
        ids = np.concatenate([self.held, new])
        order = np.argsort(ids, kind="stable")
        self.held = ids[order]
        self.lo = np.concatenate([self.lo, ptr[:-1]])[order]
        self.hi = np.concatenate([self.hi, ptr[1:]])[order]
        self.passes += 1

    def _grow(self, name, size):
        """The array ``name`` with room for ``size`` entries, its own kept: grown in
        place where nothing else holds it (a reallocation: no second copy of the held
        entries at any time), else copied into a new one."""
        a = getattr(self, name)
        setattr(self, name, None)
        try:
            a.resize(size, refcheck=True)
        except ValueError:  # referenced elsewhere (a set still reading it)
            out = np.empty(size, dtype=a.dtype)
            out[: a.size] = a
            a = out
        setattr(self, name, a)

    def pointers(self, cols):
        """``(lo, hi, indices, data)`` of the columns ``cols`` (int64 pointers)."""
        pos = self._positions(np.asarray(cols, dtype=np.intp))
        return self.lo[pos], self.hi[pos], self.indices, self.data

    def __getitem__(self, key):
        """``self[:, cols]``: the columns ``cols`` as a CSC matrix (a copy of them)."""
        rows, cols = key
        if not (isinstance(rows, slice) and rows == slice(None)):
            raise IndexError("CSRColumns takes columns only: self[:, cols]")
        lo, hi, indices, data = self.pointers(cols)
        sizes = hi - lo
        indptr = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        # the entries of the columns in turn: lo[i] + 0, 1, ..., sizes[i] - 1
        take = np.arange(indptr[-1], dtype=np.int64) + np.repeat(lo - indptr[:-1], sizes)
        return sp.csc_matrix(
            (data[take], indices[take], indptr), shape=(self.shape[0], sizes.size)
        )
