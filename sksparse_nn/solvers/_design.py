"""The centered (weighted) least-squares design: gradients, Lipschitz constant and Gram
blocks, computed once per data set."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import safe_sparse_dot

from ..utils.columns import column_squares
from ..utils.validation import check_sample_weight
from ._coordinate_descent import column_entries
from ._data import as_float_matrix
from ._lipschitz import BlockLipschitz, top_eigenvalue
from ._threads import SMALL_WORK

# Largest problem for which the Gram matrix X^T X / n is precomputed ("auto").
_GRAM_MAX_FEATURES = 4096


def _as_float_data(X, y):
    X = as_float_matrix(X)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}.")
    return X, y


class GramCache:
    """Gram blocks ``X_c[:, idx]^T X_c[:, idx] / n`` of the last working set.

    ``products(a, b)`` returns ``X_c[:, a]^T X_c[:, b] / n`` (dense). ``block(idx)``
    returns the block of the (sorted) features ``idx``: the cache keeps the products of
    the features ``idx`` shares with the previous block, drops those of the features
    ``idx`` left (before adding any: the cache is never larger than the blocks before
    and after), and computes those of the new ones with themselves and with the kept
    ones. Its features are held in sorted order, so the block it returns is the cache
    itself, never a copy (the callers only read it): one array of ``|idx|^2`` entries,
    at most ``max_features`` features (its memory bound, ``8 max_features^2`` bytes).
    Shared by the reference solver's working sets and the linear estimators' block
    steps on wide data.
    """

    def __init__(self, products, n_features, max_features):
        self.products = products
        self.max_features = max_features
        self._pos = np.full(n_features, -1, dtype=np.intp)
        self._idx = np.zeros(0, dtype=np.intp)
        self._gram = np.zeros((0, 0))
        # the Lipschitz constants of the blocks solved (kept with the blocks along a path)
        self.lipschitz = BlockLipschitz(n_features)

    def __len__(self):
        return self._idx.size

    def cacheable(self, idx, max_features=None):
        """Whether the block of ``idx`` fits in the cache."""
        limit = self.max_features if max_features is None else max_features
        return idx.size <= limit

    def keep(self, idx):
        """Drop the cached features not in ``idx``."""
        inside = np.isin(self._idx, idx)
        if inside.all():
            return
        held = self._idx[inside]
        q = self._pos[held]
        self._gram = self._gram[np.ix_(q, q)]
        self._pos[self._idx] = -1
        self._pos[held] = np.arange(held.size)
        self._idx = held

    def block(self, idx):
        """The Gram block of the (sorted) features ``idx``, computing what is missing;
        the cache itself (read only)."""
        self.keep(idx)
        pos = self._pos
        new = idx[pos[idx] < 0]
        if new.size:
            old = self._idx
            if old.size:
                # sorted order: where the kept and the new features go in idx
                at_old = np.searchsorted(idx, old)
                at_new = np.searchsorted(idx, new)
                G = np.empty((idx.size, idx.size))
                G[np.ix_(at_old, at_old)] = self._gram
                self._gram = None  # released before the new products are formed
                B = self.products(old, new)
                G[np.ix_(at_old, at_new)] = B
                G[np.ix_(at_new, at_old)] = B.T
                del B
                G[np.ix_(at_new, at_new)] = _symmetrized(self.products(new, new))
            else:  # the first block is the cache itself: no second array of its size
                G = _symmetrized(self.products(new, new))
            self._gram = G
            self._idx = idx.copy()
            pos[idx] = np.arange(idx.size)
        return self._gram


def _symmetrized(C, chunk=512):
    """``(C + C^T) / 2`` written into ``C``, a tile pair at a time (temporaries of
    ``chunk^2`` entries, not of ``C``'s size)."""
    m = C.shape[0]
    for i in range(0, m, chunk):
        for j in range(i, m, chunk):
            a, b = C[i : i + chunk, j : j + chunk], C[j : j + chunk, i : i + chunk]
            mean = 0.5 * (a + b.T)
            a[...] = mean
            b[...] = mean.T
    return C


class Design:
    """Centered (weighted) least-squares data and everything the iterations need.

    With sample weights ``s`` (rescaled to sum to ``n``) the loss is
    ``sum_i s_i (y_i - x_i w - b)^2 / (2n)``; writing ``X_c = S^{1/2} (X - 1 m^T)`` and
    ``y_c = S^{1/2} (y - ybar)`` with the weighted means ``m``, ``ybar`` it is the
    unweighted loss ``||y_c - X_c w||^2 / (2n)`` after the intercept is profiled out
    (``b = ybar - m^T w``). ``grad(w)`` is the gradient ``X_c^T (X_c w - y_c) / n``,
    ``c = X_c^T y_c / n`` (``-grad(0)``) and ``L`` the Lipschitz constant of ``grad``.
    Sparse ``X`` is never densified nor explicitly centered: ``X_c w = S^{1/2} (X w -
    m^T w)`` and ``X_c^T r = X^T S^{1/2} r - m (1^T S^{1/2} r)``. ``gram_block(idx)`` is
    the Gram matrix ``X_c^T X_c / n`` restricted to the features ``idx``, taken from the
    precomputed Gram matrix or from a cache of the blocks computed so far.
    """

    def __init__(
        self, X, y, fit_intercept=True, precompute="auto", lipschitz=None, sample_weight=None
    ):
        X, y = _as_float_data(X, y)
        n, p = X.shape
        self.n_samples, self.n_features = n, p
        self.fit_intercept = bool(fit_intercept)
        s = check_sample_weight(sample_weight, n)
        sw = None if s is None else np.sqrt(s)
        self.sw = sw
        if self.fit_intercept:
            if s is None:
                self.x_mean = np.asarray(X.mean(axis=0), dtype=np.float64).reshape(-1)
                self.y_mean = float(y.mean())
            else:
                self.x_mean = np.asarray(safe_sparse_dot(s, X), dtype=np.float64).reshape(-1) / n
                self.y_mean = float(s @ y) / n
        else:
            self.x_mean = np.zeros(p)
            self.y_mean = 0.0
        yc = y - self.y_mean
        if sw is not None:
            yc = sw * yc
        sparse = sp.issparse(X)
        self.sparse = sparse
        self.entries = column_entries(X)  # per column: the working sets' route
        if precompute == "auto":
            use_gram = p <= n and p <= _GRAM_MAX_FEATURES
        elif isinstance(precompute, (bool, np.bool_)):
            use_gram = bool(precompute)
        else:
            raise ValueError(f'precompute must be "auto", True or False, got {precompute!r}.')
        self.gram = None
        m = self.x_mean
        if sparse:
            Xs = X if sw is None else sp.diags(sw) @ X  # S^{1/2} X, same sparsity
            Xs = Xs.tocsc()
            Xt = Xs.T
            self._cols = Xs
            if sw is None:
                ones = np.ones(n)
            else:
                ones = sw

            def xc_dot(w):
                return Xs @ w - (m @ w) * ones

            def xct_dot(r):
                return Xt @ r - m * (ones @ r)

        else:
            Xc = X - m if self.fit_intercept else X
            if sw is not None:
                Xc = Xc * sw[:, None]
            self._cols = Xc

            def xc_dot(w):
                return Xc @ w

            def xct_dot(r):
                return Xc.T @ r

        self.xc_dot, self.xct_dot = xc_dot, xct_dot
        self.c = xct_dot(yc) / n
        self.yc = yc
        if use_gram:
            if sparse:
                G = Xt @ Xs
                G = G.toarray() if sp.issparse(G) else np.array(G, dtype=np.float64)
                G /= n
                if self.fit_intercept:
                    G -= np.outer(m, m)
            else:
                G = Xc.T @ Xc / n
            G = 0.5 * (G + G.T)
            self.gram = G
        # Diagonal of X_c^T X_c / n (column variances), O(nnz): its sum bounds L above,
        # and it tells whether X_c = 0 up to rounding (e.g. constant columns).
        if sparse:
            diag = column_squares(Xs) / n - m * m
        else:
            diag = np.einsum("ij,ij->j", Xc, Xc) / n
        self.diag = np.maximum(diag, 0.0)
        sq = column_squares(X)
        self._ref = float(sq.max()) / n if n and p else 0.0
        self._L = None if lipschitz is None else float(lipschitz)
        self._use_gram = use_gram
        c = self.c
        if use_gram:

            def grad(w):
                return G @ w - c

        else:

            def grad(w):
                return xct_dot(xc_dot(w)) / n - c

        self.grad = grad
        # per-iteration work small enough for single-threaded BLAS to be fastest
        self.small = (p * p if use_gram else 2 * n * p) <= SMALL_WORK
        # cache of Gram blocks (when the Gram matrix is not precomputed)
        self._cache = GramCache(self._products, p, _GRAM_MAX_FEATURES)

    @property
    def degenerate(self):
        """Whether ``X_c = 0`` up to rounding (the loss does not depend on ``w``)."""
        if self.n_features == 0 or self.n_samples == 0:
            return True
        if float(self.diag.max()) > 1e-12 * self._ref:
            return False
        return self.L == 0.0

    @property
    def L(self):
        """Lipschitz constant of ``grad`` (largest eigenvalue of ``X_c^T X_c / n``).

        Computed on first use: the working-set iterations only need the constants of
        their blocks.
        """
        if self._L is None:
            n, p = self.n_samples, self.n_features
            xc_dot, xct_dot = self.xc_dot, self.xct_dot
            if self._use_gram:
                G = self.gram
                L = top_eigenvalue(lambda v: G @ v, p)
            elif n < p:  # the nonzero spectrum of X_c X_c^T / n, in the smaller dimension
                L = top_eigenvalue(lambda v: xc_dot(xct_dot(v)) / n, n)
            else:
                L = top_eigenvalue(lambda v: xct_dot(xc_dot(v)) / n, p)
            # Treat X_c = 0 up to rounding (e.g. constant columns) as exactly 0.
            if not np.isfinite(L) or L <= 1e-24 * self._ref or L <= 0:
                L = 0.0  # the smooth part does not depend on w
            self._L = L
        return self._L

    @property
    def forward(self):
        """``w -> w - grad(w) / L``, the gradient step of the plain iterations."""
        L, c, n = self.L, self.c, self.n_samples
        if self._use_gram:
            G = self.gram
            Gs = G / L if L > 0 else G
            cs = c / L if L > 0 else c

            def forward(w):
                return w - Gs @ w + cs

        else:
            xc_dot, xct_dot = self.xc_dot, self.xct_dot
            inv_nl = 1.0 / (n * L) if L > 0 else 1.0 / n
            cs = c * (n * inv_nl)

            def forward(w):
                return w - xct_dot(xc_dot(w)) * inv_nl + cs

        return forward

    def full_grad(self, w, nz=None):
        """Gradient at ``w``, using only the columns ``nz`` where ``w`` is non-zero."""
        if self.gram is not None:
            if nz is not None and 4 * nz.size < self.n_features:
                return self.gram[:, nz] @ w[nz] - self.c
            return self.gram @ w - self.c
        if nz is not None and 4 * nz.size < self.n_features and not self.sparse:
            z = self._cols[:, nz] @ w[nz]
        else:
            z = self.xc_dot(w)
        return self.xct_dot(z) / self.n_samples - self.c

    def cacheable(self, idx):
        """Whether the Gram block of ``idx`` is available without the cache of blocks
        outgrowing ``_GRAM_MAX_FEATURES`` features (its memory bound)."""
        return self.gram is not None or self._cache.cacheable(idx, _GRAM_MAX_FEATURES)

    def _products(self, a, b):
        """``X_c[:, a]^T X_c[:, b] / n`` (dense) from the design's columns."""
        n, cols = self.n_samples, self._cols
        if self.sparse:
            out = np.asarray((cols[:, a].T @ cols[:, b]).todense()) / n
            if self.fit_intercept:
                out -= np.outer(self.x_mean[a], self.x_mean[b])
            return out
        return cols[:, a].T @ np.asarray(cols[:, b]) / n

    def set_columns(self, idx, ext):
        """The centred columns of the features ``idx`` (set-local group labels ``ext``)
        for coordinate descent (:class:`~._coordinate_descent.SparseColumns`; sparse ``X``
        centred implicitly), or None for sparse ``X`` with sample weights (its centring
        is along their square roots, which the columns do not hold)."""
        from ._coordinate_descent import SparseColumns

        if not self.sparse:
            return SparseColumns(self._cols, idx, ext)
        if self.sw is not None:
            return None
        return SparseColumns(self._cols, idx, ext, self.x_mean if self.fit_intercept else None)

    def gram_block(self, idx):
        """``X_c^T X_c / n`` restricted to the (sorted) features ``idx``."""
        if self.gram is not None:
            return self.gram[np.ix_(idx, idx)]
        return self._cache.block(idx)

    def intercept(self, w):
        return self.y_mean - float(self.x_mean @ w) if self.fit_intercept else 0.0
