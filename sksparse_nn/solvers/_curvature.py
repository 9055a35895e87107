"""Curvature operators of quadratic models ``<W, G W> / 2``: the linear block steps' algebra.

The exact block steps of the linear models (``GatedLeastSquares``) need five things of
the curvature ``G`` (p x p): products ``G W``, products with its diagonal blocks (one
block per penalized group), and solves of the scaled system ``(S G S + diag(a)) V = B``
on the live features. Two operators provide them:

- :class:`DenseCurvature` holds ``G`` (and its block diagonal) as matrices: the choice
  for narrow problems and for the Hessians of the logistic loss.
- :class:`DesignCurvature` never forms ``G = X_c^T X_c / n``: products cost ``O(n p)``
  with the (implicitly centred, possibly sparse) design, and a scaled system on ``m``
  live features larger than ``n`` is solved in its ``n x n`` Woodbury form, so wide
  problems (``p`` in the thousands, ``p > n``) cost what the active set costs.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..groups import same_group_pairs
from ..utils.columns import column_squares
from ._coordinate_descent import SparseColumns, column_entries

__all__ = ["DenseCurvature", "DesignCurvature", "solve_pos"]

# Columns of the design sliced at a time for Gram-cache products.
_PRODUCT_CHUNK = 512
# Entries of the design (2 MB) copied at a time for a Gram-cache product: two such
# slices, whatever the block's size (at least _PRODUCT_MIN_COLUMNS columns each).
_PRODUCT_ENTRIES = 1 << 18
_PRODUCT_MIN_COLUMNS = 32


def solve_pos(A, B, rebuild=None):
    """Solve the symmetric positive (semi-)definite system ``A V = B``; least norm when
    it is (nearly) singular. With ``rebuild`` (a function returning ``A`` anew) ``A`` is
    the caller's scratch copy and is factorized in place (no second ``A``-sized array),
    and rebuilt for the least-norm solve if the factorization fails."""
    try:
        if rebuild is not None:
            return _cholesky_solve_in_place(A, B)
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
            return scipy.linalg.solve(A, B, assume_a="pos", check_finite=False)
    except (np.linalg.LinAlgError, ValueError, scipy.linalg.LinAlgWarning):
        A = A if rebuild is None else rebuild()
        return np.linalg.lstsq(A, B, rcond=None)[0]


def _cholesky_solve_in_place(A, B):
    """``A^{-1} B`` by a Cholesky factorization written over ``A`` (symmetric: its
    transpose is the Fortran-ordered view LAPACK takes without a copy; scipy's ``solve``
    made two copies of ``A``). Raises ``LinAlgError`` when ``A`` is not positive definite
    or its reciprocal condition number is below float64 eps (as ``solve`` warns)."""
    # the 1-norm (= the inf-norm: A is symmetric), a block of rows at a time: np.abs(A)
    # whole would be one more array of A's size, the copy this function exists to avoid
    anorm = max(
        (
            float(np.abs(A[i : i + _PRODUCT_CHUNK]).sum(axis=1).max())
            for i in range(0, len(A), _PRODUCT_CHUNK)
        ),
        default=0.0,
    )
    factor, lower = scipy.linalg.cho_factor(A.T, overwrite_a=True, check_finite=False)
    rcond, info = scipy.linalg.lapack.dpocon(factor, anorm, uplo="L" if lower else "U")
    if info != 0 or not rcond >= np.finfo(np.float64).eps:
        raise np.linalg.LinAlgError("ill-conditioned")
    return scipy.linalg.cho_solve((factor, lower), B, check_finite=False)


def _group_of(labels, penalized):
    group = np.full(labels.shape[0], -1)
    group[penalized] = labels[penalized]
    return group


class DenseCurvature:
    """``G`` given as a (p, p) matrix; ``group`` is each feature's penalized group or -1.

    ``design_solve`` (optional) solves the scaled systems on supports of more than
    ``rank`` features in the design's low-rank (Woodbury) form instead: a working set's
    Gram block of rank ``n`` wider than ``n``.
    """

    def __init__(self, gram, group, design_solve=None, rank=None):
        self.gram, self.group = gram, group
        self.design_solve, self.rank = design_solve, rank
        self.n_features = gram.shape[0]
        self.mean_diagonal = float(np.trace(gram)) / max(self.n_features, 1)

    @functools.cached_property
    def block(self):
        """The diagonal blocks of the penalized groups as a sparse matrix (sum of squared
        group sizes entries), formed on first use: only block steps need it, not the
        proximal iterations that solve most D = 2 working sets."""
        rows = np.flatnonzero(self.group >= 0)
        I, J = (rows[k] for k in same_group_pairs(self.group[rows]))
        shape = (self.n_features, self.n_features)
        return sp.csr_matrix((self.gram[I, J], (I, J)), shape=shape)

    def dot(self, W):
        return self.gram @ W

    def block_dot(self, W):
        """``G_b W`` with ``G_b`` the diagonal blocks of the penalized groups."""
        return np.asarray(self.block @ W)

    def submatrix(self, idx):
        """``G[idx][:, idx]`` as a dense matrix."""
        return self.gram[np.ix_(idx, idx)]

    def scaled_solve(self, support, s, B, diag):
        """Solve ``(S G S + diag(diag)) V = B`` on the ``support`` features (``S = diag(s)``)."""
        if self.design_solve is not None and s.size > self.rank:
            return self.design_solve(support, s, B, diag)

        def build():
            A = self.gram[np.ix_(support, support)]  # one copy, scaled in place
            A *= s[:, None]
            A *= s[None, :]
            A[np.diag_indices_from(A)] += diag
            return A

        return solve_pos(build(), B, rebuild=build)


class DesignCurvature:
    """``G = X_c^T X_c / n`` through the design ``X`` and its column means (centring is
    implicit, so sparse ``X`` stays sparse).

    With ``row_scale`` ``u`` the centred design is ``X_c = X - u m^T``: sample weights
    ``s`` enter as ``X = diag(sqrt(s)) X_user``, ``u = sqrt(s)`` and ``m`` the weighted
    means (``u^T u = n``), so ``G`` is the weighted centred Gram matrix. ``squares``:
    the squared column norms of ``X`` when already known (a path's fits share them);
    ``by_columns``: the same design as the working sets read its columns when ``X`` is
    sparse CSR (a :class:`~._column_store.CSRColumns`: slices of the columns it holds).
    """

    def __init__(self, X, x_mean, group, row_scale=None, squares=None, by_columns=None):
        self.X, self.x_mean, self.group = X, np.asarray(x_mean, dtype=np.float64), group
        # X as its columns are sliced (sparse: CSC), the products use X itself
        self.X_cols = X if by_columns is None else by_columns
        self.u = None if row_scale is None else np.asarray(row_scale, dtype=np.float64)
        self.n, self.n_features = X.shape
        self.entries = column_entries(X)  # per column: the working sets' route
        self.penalized = group >= 0
        self.n_groups = int(group.max(initial=-1)) + 1
        # squared column norms (dense: no temporary of the size of X), unless given
        squares = column_squares(X) if squares is None else squares
        diag = squares / self.n - self.x_mean**2
        self.mean_diagonal = float(diag.sum()) / max(self.n_features, 1)
        self._rows_index = None
        self._X_rows_copy = None

    @property
    def _rows(self):
        """The penalized features' indices (on first use: the working sets do not ask)."""
        if self._rows_index is None:
            self._rows_index = np.flatnonzero(self.penalized)
        return self._rows_index

    @property
    def _X_rows(self):
        """The penalized columns, sliced once on first use (a copy of most of ``X``:
        only the whole-design block steps need it, not the working sets)."""
        if self._X_rows_copy is None:
            self._X_rows_copy = self.X[:, self._rows]
        return self._X_rows_copy

    def _shift(self, row):
        """``u row^T`` (the centring of the design's rows), broadcastable against (n, k)."""
        return row if self.u is None else np.outer(self.u, row)

    def _u_dot(self, R):
        """``u^T R`` (column sums when ``u`` is all ones)."""
        return R.sum(axis=0) if self.u is None else self.u @ R

    def _xc(self, W):
        """``X_c W``, shape (n, k); only the columns of the nonzero rows of a sparse ``W``
        (dense designs: a working set's cost, not the whole design's)."""
        nz = np.flatnonzero(np.any(W != 0, axis=1))
        if 4 * nz.size < self.n_features and not sp.issparse(self.X):
            XW = self.X[:, nz] @ W[nz]
        else:
            XW = np.asarray(self.X @ W)
        return XW - self._shift(self.x_mean[nz] @ W[nz])

    def _xct(self, R):
        """``X_c^T R``, shape (p, k)."""
        return np.asarray(self.X.T @ R) - np.outer(self.x_mean, self._u_dot(R))

    def dot(self, W):
        return self._xct(self._xc(W)) / self.n

    def block_dot(self, W):
        out = np.zeros_like(W, dtype=np.float64)
        if not self.n_groups:
            return out
        rows, Xr = self._rows, self._X_rows
        groups = self.group[rows]
        shape = (self.n_features, self.n_groups)
        if sp.issparse(self.X):
            return self._sparse_block_dot(W, out, rows, Xr, groups, shape)
        for j in range(W.shape[1]):  # outputs: few
            # Z[:, g] = X_c[:, g] w_g: each group's contribution to the fit
            M = sp.csr_matrix((W[rows, j], (rows, groups)), shape=shape)
            XM = self.X @ M
            XM = XM.toarray() if sp.issparse(XM) else np.asarray(XM)
            Zf = (XM - self._shift(M.T @ self.x_mean))[:, groups]  # (n, |rows|)
            cross = Xr.multiply(Zf).sum(axis=0) if sp.issparse(Xr) else (Xr * Zf).sum(axis=0)
            centring = self.x_mean[rows] * self._u_dot(Zf)
            out[rows, j] = (np.asarray(cross).ravel() - centring) / self.n
        return out

    def _sparse_block_dot(self, W, out, rows, Xr, groups, shape):
        """:meth:`block_dot` on sparse ``X`` with sparse products only (the dense route
        forms ``n x |groups|`` and ``n x |rows|`` arrays): with ``Z = X M`` (each group's
        fit on the raw columns, sparse) and ``t = M^T m``, the centred fit of feature
        ``k``'s group is ``Z[:, g_k] - u t_{g_k}``, and its product with the centred
        column ``k`` expands into sparse sums and rank-one terms."""
        u = np.ones(self.n) if self.u is None else self.u
        uXr = np.asarray(Xr.T @ u).ravel()  # u^T X[:, k]
        for j in range(W.shape[1]):
            M = sp.csr_matrix((W[rows, j], (rows, groups)), shape=shape)
            Zg = sp.csc_matrix(self.X @ M)[:, groups]  # (n, |rows|), sparse
            t = (M.T @ self.x_mean)[groups]
            raw = np.asarray(Xr.multiply(Zg).sum(axis=0)).ravel()
            cross = raw - uXr * t  # (X[:, k])^T (Z_k - u t_k)
            u_z = np.asarray(Zg.T @ u).ravel() - float(u @ u) * t  # u^T (Z_k - u t_k)
            out[rows, j] = (cross - self.x_mean[rows] * u_z) / self.n
        return out

    def columns(self, idx):
        """``X_c[:, idx]`` as a dense array to read (centred in the slice: no
        cancellation): ``X`` itself when ``idx`` is every column in order and there is
        nothing to centre, else one new array, centred in place (``X[:, idx] - shift``
        held the slice and the result at once: two copies of the design when ``idx`` was
        all of it)."""
        X = self.X_cols
        mean = self.x_mean[idx]
        centre = bool(np.any(mean))
        dense = not sp.issparse(self.X)
        if dense and idx.size == X.shape[1] and np.array_equal(idx, np.arange(idx.size)):
            Xs = X
        else:
            Xs = X[:, idx]
            Xs = Xs.toarray() if sp.issparse(Xs) else np.asarray(Xs)
        if not centre:
            return Xs
        if dense and np.may_share_memory(Xs, X):
            Xs = Xs.copy()
        if self.u is None:
            Xs -= mean
        else:  # u mean^T, a chunk of columns at a time (no n x |idx| temporary)
            for start in range(0, Xs.shape[1], _PRODUCT_CHUNK):
                part = slice(start, start + _PRODUCT_CHUNK)
                Xs[:, part] -= np.outer(self.u, mean[part])
        return Xs

    def products(self, a, b):
        """``X_c[:, a]^T X_c[:, b] / n`` (dense): the entries of a Gram cache.

        Formed a tile at a time from slices of ``_PRODUCT_ENTRIES`` entries of the
        design (two at once, whatever the sizes of ``a`` and ``b``: a block as wide as
        the samples would otherwise copy ``n |a|`` entries), the smaller side in the
        outer loop (the larger one is sliced once per outer slice); for ``a = b`` only
        the tiles on and above the diagonal, mirrored (the cache symmetrizes them).
        """
        if b.size < a.size and a is not b:
            return self.products(b, a).T
        same = a is b or np.array_equal(a, b)
        X = self.X_cols
        if sp.issparse(self.X) and not (np.any(self.x_mean[a]) or np.any(self.x_mean[b])):
            # nothing to centre: the sparse product (no dense slice of the design)
            Xa = X[:, a].tocsc()
            Xb = Xa if same else X[:, b].tocsc()
            out = (Xa.T @ Xb).toarray()
            out /= self.n
            return out
        step = max(_PRODUCT_ENTRIES // max(self.n, 1), _PRODUCT_MIN_COLUMNS)
        out = np.empty((a.size, b.size))
        for i in range(0, a.size, step):
            rows = slice(i, i + step)
            Fa = self.columns(a[rows])
            for j in range(i if same else 0, b.size, step):
                cols = slice(j, j + step)
                tile = Fa.T @ (Fa if same and j == i else self.columns(b[cols]))
                out[rows, cols] = tile
                if same and j != i:
                    out[cols, rows] = tile.T
        out /= self.n
        return out

    def submatrix(self, idx):
        """``G[idx][:, idx] = X_c[:, idx]^T X_c[:, idx] / n`` as a dense matrix."""
        Xs = self.columns(idx)
        return Xs.T @ Xs / self.n

    @property
    def holds_set_columns(self):
        """Whether :meth:`set_columns` gives columns (all but sparse ``X`` with sample
        weights)."""
        return not (sp.issparse(self.X) and self.u is not None)

    def set_columns(self, idx, ext):
        """The centred columns of the features ``idx`` (set-local group labels ``ext``)
        for coordinate descent (:class:`~sksparse_nn.solvers._coordinate_descent.SparseColumns`),
        as the reference solver's design gives them: sparse ``X`` stays sparse, centred
        implicitly (a sweep costs the set's nonzeros), dense columns are copied centred
        (no cancellation). None for sparse ``X`` with sample weights, whose centring is
        along their square roots, which the columns do not hold."""
        if not sp.issparse(self.X):  # one copy of the set's columns, centred in place
            cols = SparseColumns(self.X_cols, idx, ext)
            mean = self.x_mean[idx[cols.order]]
            if np.any(mean):  # as columns() centres them: the same values
                block = cols.data.reshape(idx.size, -1)  # row g: column g, group order
                if self.u is None:
                    block -= mean[:, None]
                else:
                    for start in range(0, idx.size, _PRODUCT_CHUNK):
                        part = slice(start, start + _PRODUCT_CHUNK)
                        block[part] -= np.outer(mean[part], self.u)
            return cols
        if not self.holds_set_columns:
            return None
        return SparseColumns(self.X_cols, idx, ext, self.x_mean)

    def columns_solve(self, idx):
        """:meth:`scaled_solve` for the features ``idx`` (sorted; a working set), given a
        support within them: for a :class:`DenseCurvature` of their Gram block."""

        def solve(support, s, B, diag):
            full = np.zeros(self.n_features, dtype=bool)
            full[idx[support]] = True
            return self.scaled_solve(full, s, B, diag)

        return solve

    def scaled_solve(self, support, s, B, diag):
        """Solve ``(S G S + diag(a)) V = B`` on the support: directly when it has at most
        ``n`` features, else by Woodbury, ``n x n``."""
        idx = np.flatnonzero(support)
        m = idx.size
        direct = m <= self.n or np.any(diag < 1e-6 * max(self.mean_diagonal, 1e-300))
        if not direct and sp.issparse(self.X):
            return self._sparse_woodbury(idx, s, B, diag)
        F = self.columns(idx) * (s / np.sqrt(self.n))  # X_c S / sqrt(n)
        if direct:
            A = F.T @ F
            A[np.diag_indices_from(A)] += diag
            return solve_pos(A, B)
        # (diag(a) + F^T F)^-1 = a^-1 - a^-1 F^T (I + F a^-1 F^T)^-1 F a^-1
        inv = 1.0 / diag
        Fa = F * inv
        K = Fa @ F.T
        K[np.diag_indices_from(K)] += 1.0
        BaT = inv[:, None] * B
        return BaT - Fa.T @ solve_pos(K, F @ BaT)

    def _sparse_woodbury(self, idx, s, B, diag):
        """The Woodbury solve of :meth:`scaled_solve` on sparse ``X`` without densifying
        its columns: ``F = X_c[:, idx] S / sqrt(n) = P - u c^T`` with ``P`` the sparse
        scaled columns and ``c = m_idx s / sqrt(n)`` (the centring, rank one), so that
        ``F a^-1 F^T = P a^-1 P^T - q u^T - u q^T + (c^T a^-1 c) u u^T``, ``q = P a^-1 c``:
        one sparse product of ``n x n`` entries, never ``n x |idx|`` dense ones."""
        scale = s / np.sqrt(self.n)
        P = sp.csc_matrix(self.X_cols[:, idx]) @ sp.diags(scale)
        c = self.x_mean[idx] * scale
        u = np.ones(self.n) if self.u is None else self.u
        inv = 1.0 / diag
        Pa = P @ sp.diags(inv)
        K = np.asarray((Pa @ P.T).todense())
        if np.any(c):
            q = np.asarray(Pa @ c).ravel()
            K -= np.outer(q, u) + np.outer(u, q)
            K += float(c @ (inv * c)) * np.outer(u, u)
        K[np.diag_indices_from(K)] += 1.0
        BaT = inv[:, None] * B
        FB = np.asarray(P @ BaT) - np.outer(u, c @ BaT)  # F a^-1 B
        Y = solve_pos(K, FB)
        FtY = np.asarray(P.T @ Y) - np.outer(c, u @ Y)  # F^T Y
        return BaT - inv[:, None] * FtY
