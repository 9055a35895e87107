r"""Reference group-lasso solver (numpy/scipy only, no torch).

The problem solved is the (weighted) group lasso for least-squares regression

.. math::

    \min_{w, b}\; \frac{1}{2n}\,\|y - Xw - b\mathbf{1}\|_2^2
        \;+\; \lambda \sum_{j=1}^{J} \rho_j \,\|w_{G_j}\|_2 ,

optionally with sample weights (the loss ``sum_i s_i (y_i - x_i w - b)^2 / (2n)``, ``s``
rescaled to sum to ``n``) and non-negative coefficients (``positive``),
where ``G_1, ..., G_J`` are disjoint groups of features, ``rho_j >= 0`` are group weights
(``rho_j = 1`` by default, like skglm and celer) and features in no group are not
penalized. The intercept ``b`` is optional and never penalized.

The same penalty with the logistic loss (binary) or the softmax cross-entropy
(multinomial; a group is then its features' coefficients across all classes) is solved by
:func:`solve_group_logistic` with the same stopping rule (proximal Newton steps on working
sets for binary problems with dense ``X``, FISTA otherwise).

It is meant as an exact, dependency-light reference for the D-Gating estimators of this
package (which solve the same problem by smooth gradient descent): it reaches the optimum
to a certified KKT tolerance.

Contents
--------
:func:`solve_group_lasso`
    one problem: working sets (the live groups plus the worst violators of the KKT
    conditions) solved on their Gram blocks by FISTA with adaptive restart and Newton
    steps on the identified support; the stopping rule is checked on all groups.
    Options: non-negative coefficients (``positive``) and ``sample_weight``.
:func:`group_lasso_path`
    a sequence of penalties with warm starts, sharing the precomputations.
:func:`lambda_max`
    the smallest penalty at which every penalized group is zero.
:class:`GroupLassoRegressor`
    the scikit-learn estimator.
:func:`solve_group_logistic`, :class:`GroupLassoClassifier`
    the logistic / multinomial counterparts (``lambda_max(..., loss="log_loss")``).
``check_groups`` / ``resolve_group_weights``
    validation of group specifications and group weights, shared with the estimators of
    the library.

Stopping rule
-------------
The solver stops when the *relative KKT violation* is at most ``tol``. With
``g = X_c^T (y_c - X_c w) / n`` (``X_c``, ``y_c`` centered when ``fit_intercept``; with
sample weights, weighted-centered and scaled by ``sqrt(s)``) the violation of group ``j``
is its distance to the subdifferential of the penalty,

* ``max(0, ||g_j|| - lam rho_j)`` if ``w_j = 0``,
* ``||g_j - lam rho_j w_j / ||w_j||||`` if ``w_j != 0``,

(with ``positive``, the distance to the subdifferential plus the normal cone of
``w >= 0``: a coordinate at zero only counts ``max(g_i, 0)``, and a zero group
``max(0, ||max(g_j, 0)|| - lam rho_j)``), and unpenalized features (in no group, or in a
group of weight 0) count as groups with
``rho = 0`` (violation ``|g_i|``, respectively ``||g_j||``). The maximum over groups is
divided by the scale ``max_j ||X_{c,j}^T y_c|| / n`` (the same maximum at ``w = 0`` and
``lam = 0``, i.e. ``lambda_max`` for unit weights without unpenalized features; ``1`` if it
is zero), which makes ``tol`` independent of the units of ``y``.

For the logistic loss (:func:`solve_group_logistic`) ``g`` is minus the gradient of the
mean log-loss, ``X_c^T (Y - P) / n`` (``P`` the predicted probabilities; one column per
class, and group norms are Frobenius norms over the rows of the group's features), and the
scale is the same maximum at the null model (intercept fitted, every coefficient zero:
``P`` = the class frequencies; ``1/2`` or ``1/K`` without intercept). The intercepts are
not exact by construction there; they count as one more unpenalized group with violation
``s ||mean(P - Y)||``, where ``s = ||X_c||_2 / sqrt(n)`` (``1`` if ``X_c = 0``) gives them
the units of the columns of ``X_c`` (see :class:`_LogisticDesign`). Hence ``tol`` means the
same for both losses: the largest KKT violation relative to the largest gradient group
norm at the null model.
"""

from __future__ import annotations

import math
import warnings
from contextlib import nullcontext
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.optimize
import scipy.sparse as sp
import scipy.special
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import ThreadpoolController

from ._labels import check_groups, count_groups, resolve_group_weights
from ._validation import check_range, check_warm_start_targets, value_limit

__all__ = [
    "GroupLassoClassifier",
    "GroupLassoRegressor",
    "GroupLassoResult",
    "GroupLogisticResult",
    "group_lasso_path",
    "lambda_max",
    "solve_group_lasso",
    "solve_group_logistic",
]

# Largest problem for which the Gram matrix X^T X / n is precomputed ("auto").
_GRAM_MAX_FEATURES = 4096
# Per-iteration flop count below which the iterations run with single-threaded BLAS.
_SMALL_WORK = 2**20
# Largest dimension for which the Lipschitz constant is computed by a dense eigensolver.
_DENSE_EIG_MAX = 64


_CONTROLLER = []


def _single_blas_thread():
    """Context limiting BLAS to one thread, with a controller built once per process
    (``threadpool_limits`` rescans the loaded libraries on every call, which costs
    milliseconds in a process with many of them, e.g. with torch imported)."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def _extended_groups(labels, rho):
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


# --------------------------------------------------------------------------------------
# Data preparation
# --------------------------------------------------------------------------------------


def _as_float_matrix(X):
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


def _as_float_data(X, y):
    X = _as_float_matrix(X)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}.")
    return X, y


def _top_eigenvalue(matvec, dim):
    """Largest eigenvalue of a symmetric PSD operator, rounded up to be an upper bound.

    Small operators are formed explicitly and solved by LAPACK; larger ones use a few
    Lanczos (ARPACK) iterations with a fixed starting vector (deterministic).
    """
    if dim == 0:
        return 0.0
    if dim <= _DENSE_EIG_MAX:
        M = np.column_stack([matvec(e) for e in np.eye(dim)])
        return float(scipy.linalg.eigvalsh(0.5 * (M + M.T))[-1])
    op = LinearOperator((dim, dim), matvec=matvec, dtype=np.float64)
    v0 = np.random.RandomState(0).standard_normal(dim)
    tol = 1e-8
    val = eigsh(op, k=1, which="LA", tol=tol, v0=v0, return_eigenvectors=False)[0]
    # ARPACK guarantees an eigenvalue within tol * |val| of val: round up.
    return float(val) * (1.0 + 10 * tol)


def _check_sample_weight_ls(sample_weight, n):
    """Sample weights rescaled to sum to ``n`` (None: all ones, returned as None)."""
    if sample_weight is None:
        return None
    from sklearn.utils.validation import _check_sample_weight

    s = _check_sample_weight(
        sample_weight, np.empty((n, 0)), dtype=np.float64, ensure_non_negative=True
    )
    total = float(s.sum())
    if not total > 0:
        raise ValueError("sample_weight must have a positive sum.")
    return s * (n / total)


class _Design:
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
        s = _check_sample_weight_ls(sample_weight, n)
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
            diag = np.asarray(Xs.multiply(Xs).sum(axis=0)).reshape(-1) / n - m * m
        else:
            diag = np.einsum("ij,ij->j", Xc, Xc) / n
        self.diag = np.maximum(diag, 0.0)
        sq = np.asarray(X.multiply(X).sum(axis=0)) if sparse else np.einsum("ij,ij->j", X, X)
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
        self.small = (p * p if use_gram else 2 * n * p) <= _SMALL_WORK
        # cache of Gram blocks (when the Gram matrix is not precomputed)
        self._cache_pos = np.full(p, -1, dtype=np.intp)
        self._cache_idx = np.zeros(0, dtype=np.intp)
        self._cache = np.zeros((0, 0))

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
                L = _top_eigenvalue(lambda v: G @ v, p)
            elif n < p:  # the nonzero spectrum of X_c X_c^T / n, in the smaller dimension
                L = _top_eigenvalue(lambda v: xc_dot(xct_dot(v)) / n, n)
            else:
                L = _top_eigenvalue(lambda v: xct_dot(xc_dot(v)) / n, p)
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
        if self.gram is not None:
            return True
        new = int(np.count_nonzero(self._cache_pos[idx] < 0))
        return self._cache_idx.size + new <= _GRAM_MAX_FEATURES

    def gram_block(self, idx):
        """``X_c^T X_c / n`` restricted to the (sorted) features ``idx``."""
        if self.gram is not None:
            return self.gram[np.ix_(idx, idx)]
        pos = self._cache_pos
        new = idx[pos[idx] < 0]
        if new.size:
            n = self.n_samples
            old = self._cache_idx
            cols = self._cols
            Xn = cols[:, new]
            if self.sparse:
                m = self.x_mean
                Xo = cols[:, old]
                B = np.asarray((Xo.T @ Xn).todense()) / n
                C = np.asarray((Xn.T @ Xn).todense()) / n
                if self.fit_intercept:
                    B -= np.outer(m[old], m[new])
                    C -= np.outer(m[new], m[new])
            else:
                Xn = np.asarray(Xn)
                B = cols[:, old].T @ Xn / n if old.size else np.zeros((0, new.size))
                C = Xn.T @ Xn / n
            k = old.size
            G = np.empty((k + new.size, k + new.size))
            G[:k, :k] = self._cache
            G[:k, k:] = B
            G[k:, :k] = B.T
            G[k:, k:] = 0.5 * (C + C.T)
            self._cache = G
            self._cache_idx = np.concatenate((old, new))
            pos[new] = k + np.arange(new.size)
        q = pos[idx]
        return self._cache[np.ix_(q, q)]

    def intercept(self, w):
        return self.y_mean - float(self.x_mean @ w) if self.fit_intercept else 0.0


# --------------------------------------------------------------------------------------
# Solver
# --------------------------------------------------------------------------------------


class GroupLassoResult(NamedTuple):
    """Output of :func:`solve_group_lasso`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
    intercept : float
    n_iter : int
        Number of proximal-gradient iterations (0 if ``w0`` was already optimal).
    kkt : float
        Final relative KKT violation (see the module docstring).
    converged : bool
        Whether ``kkt <= tol``.
    """

    coef: np.ndarray
    intercept: float
    n_iter: int
    kkt: float
    converged: bool


def _group_violations(w, g, ext, lam_rho, n_ext, positive=False):
    """Distance of ``-g`` to the subdifferential of the penalty (and, with ``positive``,
    plus the normal cone of ``w >= 0``), per group; also returns the live-group mask.

    For a live group ``j`` the distance is the norm of ``g_j + lam rho_j w_j / ||w_j||``,
    where with ``positive`` a coordinate at zero contributes only ``min(g_i, 0)`` (the
    normal cone of ``w_i >= 0`` at ``w_i = 0`` absorbs any ``g_i >= 0``). For a zero
    group it is ``max(0, ||g_j|| - lam rho_j)``, with ``min(g_j, 0)`` in place of ``g_j``
    under ``positive`` (only the positive part of ``-g_j`` pulls the group away from 0).
    """
    nw = np.sqrt(np.bincount(ext, weights=w * w, minlength=n_ext))
    live = nw > 0
    coef = np.zeros(n_ext)
    np.divide(lam_rho, nw, out=coef, where=live)
    d = g + coef[ext] * w  # for live groups: g_j + lam rho_j w_j / ||w_j||; else g_j
    if positive:
        d = np.where(w > 0, d, np.minimum(d, 0.0))
    nd = np.sqrt(np.bincount(ext, weights=d * d, minlength=n_ext))
    return np.where(live, nd, np.maximum(nd - lam_rho, 0.0)), live


def _kkt_violation(w, g, ext, lam_rho, n_ext, positive=False):
    """Largest distance of ``-g`` to the subdifferential of the penalty, over groups."""
    viol, _ = _group_violations(w, g, ext, lam_rho, n_ext, positive)
    return float(viol.max()) if viol.size else 0.0


def _kkt_scale(c, ext, n_ext):
    """KKT scale: largest group norm of ``c = -grad(0)`` (1 if it is zero)."""
    scale = 0.0
    if c.size:
        scale = float(np.sqrt(np.bincount(ext, weights=c * c, minlength=n_ext)).max())
    return scale if scale > 0 else 1.0


def _fista(design, lam, ext, rho_ext, w0, tol, max_iter, check_every=10, positive=False):
    """FISTA with gradient-based adaptive restart (O'Donoghue & Candes, 2015).

    The KKT violation is evaluated at the start and every ``check_every`` iterations (it
    needs one extra gradient); returns ``(w, n_iter, relative kkt)``.
    """
    p = design.n_features
    n_ext = rho_ext.shape[0]
    lam_rho = lam * rho_ext
    scale = _kkt_scale(design.c, ext, n_ext)
    abs_tol = tol * scale
    x = np.zeros(p) if w0 is None else np.array(w0, dtype=np.float64).reshape(-1)
    if x.shape != (p,):
        raise ValueError(f"w0 must have shape ({p},), got {x.shape}.")
    if positive:
        x = np.maximum(x, 0.0)
    grad = design.grad
    if design.L == 0.0:
        # The loss is constant in w: zero every penalized group, keep the others.
        x = np.where(rho_ext[ext] > 0, 0.0, x)
        return x, 0, _kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive) / scale
    kkt = _kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
    if kkt <= abs_tol:
        return x, 0, kkt / scale
    forward = design.forward
    thr = lam_rho / design.L
    has_thr = bool(np.any(thr > 0))
    singletons = n_ext == p  # every group has one feature: plain soft-thresholding
    thr_feat = thr[ext]
    y, t = x, 1.0
    sqrt, bincount, maximum, divide, dot = np.sqrt, np.bincount, np.maximum, np.divide, np.dot
    clip = np.clip
    n_iter = 0
    # Small problems are overhead-bound: extra BLAS threads only add synchronization.
    limit = _single_blas_thread() if design.small else nullcontext()
    with limit:
        for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is used after the loop)
            v = forward(y)
            if positive:
                v = maximum(v, 0.0)
            if singletons:
                x_new = v - clip(v, -thr_feat, thr_feat)
            elif has_thr:  # block soft-thresholding, vectorized over groups
                nv = sqrt(bincount(ext, weights=v * v, minlength=n_ext))
                s = maximum(nv - thr, 0.0)
                divide(s, nv, out=s, where=nv > 0)
                x_new = v * s[ext]
            else:
                x_new = v
            dx = x_new - x
            if dot(y - x_new, dx) > 0.0:  # momentum points uphill: restart
                t = 1.0
                y = x_new
            else:
                t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
                y = x_new + ((t - 1.0) / t_new) * dx
                t = t_new
            x = x_new
            if n_iter % check_every == 0 or n_iter == max_iter:
                kkt = _kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
                if kkt <= abs_tol:
                    break
    return x + 0.0, n_iter, kkt / scale  # + 0.0 turns -0.0 into 0.0


_EPS = float(np.finfo(np.float64).eps)
# Zero groups with ||g_j|| >= this fraction of lam rho_j join the logistic working sets.
_NEAR_VIOLATION = 0.8
# Relative change of a sample's curvature p (1 - p) that triggers its Hessian update.
_HESSIAN_RTOL = 1e-2
# Smallest working set, in groups, and the number of power iterations that estimate the
# Lipschitz constant of a working set's Gram block (see _restricted_lipschitz).
_WS_MIN_GROUPS = 10
_POWER_STEPS = 30


def _restricted_lipschitz(G, v0, cap):
    """Largest eigenvalue of the PSD block ``G``, and its eigenvector estimate.

    Exact (LAPACK) for small blocks. Larger blocks use power iterations from ``v0`` (the
    previous block's eigenvector, so few are needed along a path) and a 5% margin; the
    value is a lower bound in theory, so the iterations that use it check it (the
    curvature of each step must not exceed it, see :func:`_ws_fista`). Capped by
    ``cap``, an upper bound (the whole problem's constant, or the trace of ``G``).
    """
    k = G.shape[0]
    if k <= _DENSE_EIG_MAX:
        vals, vecs = scipy.linalg.eigh(G, check_finite=False)
        return min(float(vals[-1]) * (1.0 + 1e-12) + 1e-300, cap), vecs[:, -1]
    v = v0 if v0 is not None and v0.shape == (k,) and np.any(v0) else np.ones(k)
    v = v / np.linalg.norm(v)
    theta = 0.0
    for _ in range(_POWER_STEPS):
        z = G @ v
        theta_new = float(v @ z)
        nz = np.linalg.norm(z)
        if not nz > 0:
            break
        v = z / nz
        done = theta_new - theta <= 1e-3 * theta_new
        theta = theta_new
        if done:
            break
    return min(1.05 * theta + 1e-300, cap), v


def _newton_support(G, c, lam_rho, ext, n_ext, x, positive, kkt, tol_in, max_steps):
    """Newton steps on the smooth problem of the current support (restricted block).

    On its live groups the objective ``w^T G w / 2 - c^T w + sum lam rho_j ||w_j||`` is
    smooth, with gradient ``G w - c + lam rho_j w_j / ||w_j||`` and Hessian ``G +
    blockdiag(lam rho_j (I - u_j u_j^T) / ||w_j||)`` (``u_j = w_j / ||w_j||``). Under
    ``positive`` the support is the positive coordinates. A step is kept only if every
    support coordinate keeps its group's direction (no group crosses zero, positive
    coordinates stay positive) and the KKT violation of the block decreases.

    Returns ``(x, kkt, n_steps, viol)`` (``viol`` the per-group violations at ``x``, or
    None if no step was taken).
    """
    viol = None
    steps = 0
    for steps in range(1, max_steps + 1):  # noqa: B007
        nw = np.sqrt(np.bincount(ext, weights=x * x, minlength=n_ext))
        S = np.flatnonzero(x > 0) if positive else np.flatnonzero(nw[ext] > 0)
        if S.size == 0:
            return x, kkt, steps - 1, viol
        eS = ext[S]
        xS = x[S]
        nS = nw[eS]
        a = lam_rho[eS] / nS
        u = xS / nS
        GS = G[S]
        F = GS @ x - c[S] + a * xS
        H = GS[:, S]
        au = a * u
        H -= (eS[:, None] == eS[None, :]) * np.multiply.outer(au, u)
        H.flat[:: S.size + 1] += a
        try:
            d = scipy.linalg.solve(H, F, assume_a="pos", check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return x, kkt, steps - 1, viol
        if not np.all(np.isfinite(d)):
            return x, kkt, steps - 1, viol
        xn_S = xS - d
        if positive:
            if np.any(xn_S <= 0):
                return x, kkt, steps - 1, viol
        elif np.any(np.bincount(eS, weights=xS * xn_S, minlength=n_ext)[eS] <= 0):
            return x, kkt, steps - 1, viol  # a group would cross zero
        xn = x.copy()
        xn[S] = xn_S
        vn, _ = _group_violations(xn, G @ xn - c, ext, lam_rho, n_ext, positive)
        kn = float(vn.max())
        if not kn < kkt:
            return x, kkt, steps - 1, viol
        x, kkt, viol = xn, kn, vn
        if kkt <= tol_in:
            break
    return x, kkt, steps, viol


def _ws_fista(G, c, lam_rho, ext, n_ext, x, L, tol_in, max_iter, positive, check_every=10):
    """FISTA with restart on a restricted block (Gram form), with Newton acceleration.

    Every ``check_every`` iterations the KKT violation of the block is evaluated; when the
    support has not changed since the previous check, Newton steps on it are tried
    (:func:`_newton_support`). The curvature of the iterates' displacement between two
    checks is compared with ``L``; a larger one raises ``L`` (``L`` from power iterations
    may be slightly low). Returns ``(x, n_iter, kkt, L)``.
    """
    k = x.shape[0]
    singletons = n_ext == k
    sqrt, bincount, maximum, divide, dot = np.sqrt, np.bincount, np.maximum, np.divide, np.dot
    clip = np.clip
    viol, live = _group_violations(x, G @ x - c, ext, lam_rho, n_ext, positive)
    kkt = float(viol.max())
    n_iter = 0
    if kkt <= tol_in:
        return x, n_iter, kkt, L
    x_chk, g_chk = x, None
    Gs, cs = G / L, c / L
    thr = lam_rho / L
    thr_feat = thr[ext]
    has_thr = bool(np.any(thr > 0))
    y, t = x, 1.0
    prev_live = live
    newton_ok = True
    while n_iter < max_iter:
        for _ in range(min(check_every, max_iter - n_iter)):
            v = y - Gs @ y + cs
            if positive:
                v = maximum(v, 0.0)
            if singletons:
                x_new = v - clip(v, -thr_feat, thr_feat)
            elif has_thr:
                nv = sqrt(bincount(ext, weights=v * v, minlength=n_ext))
                s = maximum(nv - thr, 0.0)
                divide(s, nv, out=s, where=nv > 0)
                x_new = v * s[ext]
            else:
                x_new = v
            dx = x_new - x
            if dot(y - x_new, dx) > 0.0:
                t = 1.0
                y = x_new
            else:
                t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
                y = x_new + ((t - 1.0) / t_new) * dx
                t = t_new
            x = x_new
            n_iter += 1
        g = G @ x - c
        viol, live = _group_violations(x, g, ext, lam_rho, n_ext, positive)
        kkt = float(viol.max())
        if kkt <= tol_in:
            break
        # curvature check of L between two checks: (dx^T G dx) / ||dx||^2 <= L
        if g_chk is not None:
            dxc = x - x_chk
            den = float(dxc @ dxc)
            if den > 0:
                curv = float(dxc @ (g - g_chk)) / den
                if curv > L:
                    L = 1.5 * curv
                    Gs, cs = G / L, c / L
                    thr = lam_rho / L
                    thr_feat = thr[ext]
                    y, t = x, 1.0
        x_chk, g_chk = x, g
        if newton_ok and np.array_equal(live, prev_live) and live.any():
            x_n, kkt_n, steps, viol_n = _newton_support(
                G, c, lam_rho, ext, n_ext, x, positive, kkt, tol_in, 20
            )
            n_iter += steps
            if steps:
                x, kkt = x_n, kkt_n
                y, t = x, 1.0
                x_chk, g_chk = x, None
                if kkt <= tol_in:
                    break
            else:
                newton_ok = False  # no progress on this support: wait for it to change
        if not np.array_equal(live, prev_live):
            newton_ok = True
        prev_live = live
    return x, n_iter, kkt, L


def _solve_ls(design, lam, ext, rho_ext, w0, tol, max_iter, positive=False, state=None):
    """Group lasso by working sets (restricted FISTA + Newton), certified on all groups.

    Outer loop: the full gradient gives every group's KKT violation; if the largest is
    at most ``tol`` times the scale the solution is certified. Otherwise the working
    set is the live groups (and the unpenalized ones) plus the worst violators (as many
    as live groups, at least ``_WS_MIN_GROUPS``), and the problem restricted to it is
    solved by :func:`_ws_fista` on its Gram block to a tolerance below the violation
    left outside the set. Returns ``(w, n_iter, relative kkt)``.
    """
    p = design.n_features
    n_ext = rho_ext.shape[0]
    lam_rho = lam * rho_ext
    scale = _kkt_scale(design.c, ext, n_ext)
    abs_tol = tol * scale
    w = np.zeros(p) if w0 is None else np.array(w0, dtype=np.float64).reshape(-1)
    if w.shape != (p,):
        raise ValueError(f"w0 must have shape ({p},), got {w.shape}.")
    if positive:
        w = np.maximum(w, 0.0)
    if design.degenerate:
        return _fista(design, lam, ext, rho_ext, w, tol, max_iter, positive=positive)
    if state is None:
        state = {}
    free = rho_ext == 0
    n_iter = stalled = 0
    kkt = np.inf
    limit = _single_blas_thread() if design.small else nullcontext()
    with limit:
        while True:
            nz = np.flatnonzero(w)
            g = design.full_grad(w, nz)
            viol, live = _group_violations(w, g, ext, lam_rho, n_ext, positive)
            kkt = float(viol.max())
            if kkt <= abs_tol or n_iter >= max_iter:
                break
            keep = live | free
            n_live = int(np.count_nonzero(live & ~free))
            out = np.where(keep, -1.0, viol)
            n_add = max(_WS_MIN_GROUPS, n_live)
            if n_add < n_ext:
                top = np.argpartition(out, n_ext - n_add - 1)
                add = top[n_ext - n_add :]
                rest = out[top[: n_ext - n_add]]
                outside = float(rest.max()) if rest.size else 0.0
            else:
                add = np.arange(n_ext)
                outside = 0.0
            add = add[out[add] > abs_tol]
            in_ws = keep.copy()
            in_ws[add] = True
            idx = np.flatnonzero(in_ws[ext])
            if not design.cacheable(idx):  # too large for Gram blocks: plain FISTA
                w, it, rel = _fista(
                    design, lam, ext, rho_ext, w, tol, max_iter - n_iter, positive=positive
                )
                return w, n_iter + it, rel
            groups_ws, ext_ws = np.unique(ext[idx], return_inverse=True)
            G = design.gram_block(idx)
            key = idx.tobytes()
            if state.get("key") == key:
                L = state["L"]
            else:
                vec = state.get("vec")
                cap = float(design.diag[idx].sum())  # trace: an upper bound
                if design._L is not None:
                    cap = min(cap, design._L)
                L, v = _restricted_lipschitz(G, None if vec is None else vec[idx], cap)
                vec = np.zeros(p)
                vec[idx] = v
                state.update(key=key, L=L, vec=vec)
            tol_in = max(0.5 * abs_tol, 0.3 * outside)
            if stalled >= 2:  # no inner iteration twice in a row: ask for the full tol
                tol_in = 0.5 * abs_tol
            if stalled >= 4:
                break
            x, it, _, L = _ws_fista(
                G,
                design.c[idx],
                lam_rho[groups_ws],
                ext_ws,
                groups_ws.size,
                w[idx],
                L,
                tol_in,
                max_iter - n_iter,
                positive,
            )
            state["L"] = L
            n_iter += it
            stalled = stalled + 1 if it == 0 else 0
            w = np.zeros(p)
            w[idx] = x
    return w + 0.0, min(n_iter, max_iter), kkt / scale


def _check_solver_args(lam, tol, max_iter):
    if not (isinstance(lam, Real) and np.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}.")
    if not (isinstance(tol, Real) and tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}.")


def solve_group_lasso(
    X,
    y,
    lam,
    groups_index,
    rho,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    *,
    precompute="auto",
    lipschitz=None,
    positive=False,
    sample_weight=None,
):
    r"""Solve one group-lasso problem by working sets and accelerated proximal gradient.

    Minimizes :math:`\frac{1}{2n}\sum_i s_i (y_i - x_i w - b)^2 + \lambda \sum_j \rho_j
    \|w_{G_j}\|_2` (``s_i = 1`` without sample weights), optionally subject to
    ``w >= 0``. Outer loop: the full gradient gives the KKT violation of every group;
    the working set is the live groups plus the worst violators (growing with the
    support). Inner loop: FISTA with gradient-based adaptive restart and block
    soft-thresholding on the Gram block of the working set (step ``1/L_W``, ``L_W`` its
    largest eigenvalue), with Newton steps on the support once it stops changing (the
    objective is smooth on the live groups). The stopping rule is checked on *all*
    groups at the end (see the module docstring), so the result is certified whatever
    the working set did.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Design matrix, not modified. Sparse input is never densified (centering is
        implicit); dense input is centered in a copy when ``fit_intercept``.
    y : ndarray of shape (n_samples,)
    lam : float
        Penalty level ``>= 0``.
    groups_index : ndarray of int of shape (n_features,)
        Group label of every feature in ``-1..J-1`` (``-1``: unpenalized), as returned by
        :func:`check_groups`.
    rho : ndarray of shape (J,)
        Non-negative group weights (``0``: unpenalized group).
    w0 : ndarray of shape (n_features,), default=None
        Starting point (warm start); zeros if None.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation (see the module docstring).
    max_iter : int, default=10000
        Maximum number of proximal-gradient iterations.
    fit_intercept : bool, default=True
        Fit an unpenalized intercept (by centering ``X`` and ``y``).
    precompute : "auto" or bool, default="auto"
        Iterate with the Gram matrix ``X_c^T X_c / n``. "auto" uses it when
        ``n_features <= n_samples`` (and ``n_features <= 4096``).
    lipschitz : float, default=None
        Known Lipschitz constant ``L`` of the whole problem (e.g. from a previous call on
        the same data); an upper bound for the working sets' constants.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (as ``Lasso(positive=True)``). The
        proximal step is then block soft-thresholding of the positive part, and the KKT
        violation uses the constrained optimality conditions (see
        :func:`_group_violations`).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights, rescaled to sum to ``n_samples`` (the convention of
        :class:`sklearn.linear_model.Lasso`): the loss is ``sum_i s_i (y_i - x_i w -
        b)^2 / (2 n)`` and the intercept comes from weighted means. Sparse ``X`` stays
        sparse (implicit weighted centering).

    Returns
    -------
    result : GroupLassoResult
        Named tuple ``(coef, intercept, n_iter, kkt, converged)``; ``n_iter`` counts
        proximal-gradient iterations and Newton steps.
    """
    _check_solver_args(lam, tol, max_iter)
    design = _Design(
        X,
        y,
        fit_intercept,
        precompute=precompute,
        lipschitz=lipschitz,
        sample_weight=sample_weight,
    )
    ext, rho_ext = _extended_groups(groups_index, rho)
    if ext.shape != (design.n_features,):
        raise ValueError(f"groups_index must have shape ({design.n_features},), got {ext.shape}.")
    w, n_iter, kkt = _solve_ls(
        design, float(lam), ext, rho_ext, w0, tol, max_iter, positive=bool(positive)
    )
    return GroupLassoResult(w, design.intercept(w), n_iter, kkt, bool(kkt <= tol))


def group_lasso_path(
    X,
    y,
    lams,
    groups_index,
    rho,
    *,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    precompute="auto",
    positive=False,
    sample_weight=None,
):
    """Solve the group lasso for a sequence of penalties with warm starts.

    The centering, the Gram matrix (or the Gram blocks of the working sets) and the
    Lipschitz constants are computed once and shared; each problem starts from the
    solution of the previous one (so give ``lams`` in decreasing order). Parameters are
    those of :func:`solve_group_lasso` (``positive`` and ``sample_weight`` included).

    Returns
    -------
    coefs : ndarray of shape (n_lams, n_features)
    intercepts : ndarray of shape (n_lams,)
    n_iters : ndarray of int of shape (n_lams,)
    kkts : ndarray of shape (n_lams,)
        Final relative KKT violations; a problem converged iff its value is ``<= tol``.
    """
    lams = np.asarray(lams, dtype=np.float64).reshape(-1)
    for lam in lams:
        _check_solver_args(float(lam), tol, max_iter)
    design = _Design(X, y, fit_intercept, precompute=precompute, sample_weight=sample_weight)
    ext, rho_ext = _extended_groups(groups_index, rho)
    if ext.shape != (design.n_features,):
        raise ValueError(f"groups_index must have shape ({design.n_features},), got {ext.shape}.")
    coefs = np.zeros((lams.size, design.n_features))
    intercepts = np.zeros(lams.size)
    n_iters = np.zeros(lams.size, dtype=int)
    kkts = np.zeros(lams.size)
    w = w0
    state = {}  # the working set's Lipschitz constant, shared along the path
    for k, lam in enumerate(lams):
        w, n_iters[k], kkts[k] = _solve_ls(
            design, float(lam), ext, rho_ext, w, tol, max_iter, bool(positive), state
        )
        coefs[k] = w
        intercepts[k] = design.intercept(w)
    return coefs, intercepts, n_iters, kkts


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
        Output of :func:`check_groups`.
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
        X = _as_float_matrix(X)
        y, _ = _as_logistic_targets(y, X.shape[0], fit_intercept)
    else:
        X = _as_float_matrix(X)
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
    ext, rho_ext = _extended_groups(labels, rho)
    penalized = rho_ext[ext] > 0
    if not penalized.any():
        return 0.0
    free = np.flatnonzero(~penalized)
    if loss == "log_loss":
        s = _check_sample_weight_ls(sample_weight, n)
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
        s = _check_sample_weight_ls(sample_weight, n)
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


# --------------------------------------------------------------------------------------
# Logistic loss
# --------------------------------------------------------------------------------------


class GroupLogisticResult(NamedTuple):
    """Output of :func:`solve_group_logistic`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,) or (n_features, n_classes)
        One column (binary) or one column per class (multinomial).
    intercept : float or ndarray of shape (n_classes,)
        ``0`` without intercept. Multinomial intercepts sum to zero.
    n_iter : int
        Number of proximal-gradient iterations (0 if ``w0`` was already optimal).
    kkt : float
        Final relative KKT violation (see the module docstring).
    converged : bool
        Whether ``kkt <= tol``.
    objective : float
        Final value of the penalized objective (mean log-loss plus penalty).
    """

    coef: np.ndarray
    intercept: float | np.ndarray
    n_iter: int
    kkt: float
    converged: bool
    objective: float


def _as_logistic_targets(Y, n_samples, fit_intercept):
    """``(Y, binary)``: targets as a float ``(n, K)`` array (``K = 1`` when binary)."""
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != n_samples or Y.shape[1] < 1:
        raise ValueError(
            f"Y must have shape ({n_samples},) (binary labels in {{0, 1}}) or "
            f"({n_samples}, n_classes) (one-hot rows), got {np.shape(Y)}."
        )
    binary = Y.shape[1] == 1
    if not np.all(np.isfinite(Y)) or np.any(Y < 0) or np.any(Y > 1):
        raise ValueError("Y must hold labels (probabilities) in [0, 1].")
    if not binary and not np.allclose(Y.sum(axis=1), 1.0, rtol=0.0, atol=1e-10):
        raise ValueError("Every row of a 2-d Y must sum to 1 (one-hot or class probabilities).")
    if fit_intercept and n_samples:
        freq = Y.mean(axis=0)
        if binary and not 0.0 < freq[0] < 1.0:
            raise ValueError(
                "Binary Y needs both classes (labels 0 and 1) to fit an intercept; "
                "with one class the intercept is infinite."
            )
        if not binary and np.any(freq <= 0.0):
            raise ValueError(
                f"Class (column) {int(np.argmin(freq))} of Y never occurs; its intercept "
                "would be -infinity. Drop the column."
            )
    return Y, binary


def _probabilities(Z, binary):
    """Class probabilities from scores ``Z`` of shape (n, K), stably (expit / softmax)."""
    return scipy.special.expit(Z) if binary else scipy.special.softmax(Z, axis=1)


def _mean_log_loss(Z, Y, binary, weights=None):
    """Mean log-loss (weighted by ``weights`` summing to n), with ``log(1 + e^z)`` and
    log-sum-exp computed without overflow."""
    if binary:
        losses = (np.logaddexp(0.0, Z) - Y * Z)[:, 0]
    else:
        losses = scipy.special.logsumexp(Z, axis=1) - np.einsum("ij,ij->i", Y, Z)
    if weights is None:
        return float(np.mean(losses))
    return float(weights @ losses) / Z.shape[0]


def _wmean(A, weights):
    """Column means of ``A`` weighted by ``weights`` (summing to n; None: plain means)."""
    return A.mean(axis=0) if weights is None else weights @ A / A.shape[0]


def _newton_intercept(Z0, Y, binary, max_steps=100, weights=None):
    """Intercept ``c`` of shape (K,) minimizing the mean log-loss of ``Z0 + c``.

    Damped Newton (step halving on the loss) from the closed form for ``Z0 = 0`` (the
    logit / log of the class frequencies). Multinomial: the Hessian is singular along
    ``(1, ..., 1)`` (the softmax ignores a common shift), which is fixed by adding
    ``11^T / K``; steps then stay in the zero-sum subspace. Needs every class present.
    ``weights`` (summing to n) weight the samples.
    """
    n, K = Y.shape
    freq = _wmean(Y, weights)
    if binary:
        c = np.log(freq) - np.log1p(-freq)
    else:
        c = np.log(freq)
        c -= c.mean()
    f = _mean_log_loss(Z0 + c, Y, binary, weights)
    for _ in range(max_steps):
        P = _probabilities(Z0 + c, binary)
        g = _wmean(P, weights) - freq
        if not np.max(np.abs(g)) > 1e-15:
            break
        if binary:
            step = g / max(float(_wmean(P * (1.0 - P), weights)[0]), 1e-300)
        else:
            PW = P if weights is None else P * weights[:, None]
            H = np.diag(_wmean(P, weights)) - PW.T @ P / n + 1.0 / K
            try:
                step = np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                step = np.linalg.lstsq(H, g, rcond=None)[0]
        t = 1.0
        while True:
            c_new = c - t * step
            f_new = _mean_log_loss(Z0 + c_new, Y, binary, weights)
            if f_new <= f:
                break
            t *= 0.5
            if t < 1e-10:
                return c  # no decrease visible in float64: c is optimal to rounding
        done = np.max(np.abs(c_new - c)) <= 1e-15 * (1.0 + np.max(np.abs(c)))
        c, f = c_new, f_new
        if done:
            break
    return c


class _LogisticDesign:
    r"""Logistic data and everything :func:`_fista` needs for it, computed once.

    The variable of the iterations is the flat vector ``x = [W.ravel(), beta]``: the
    coefficients ``W`` of shape ``(p, K)`` row by row (a group is then the rows of its
    features, across all classes) and, with an intercept, ``K`` unpenalized variables
    ``beta`` that enter the scores through a constant column of value ``s``:

    .. math::

        Z = X_c W + s \mathbf{1} \beta^T, \qquad b = s \beta - \bar{x}^T W .

    ``X_c`` is ``X`` centered (implicitly when sparse, as in :class:`_Design`) when
    fitting an intercept. As ``X_c^T 1 = 0`` the Gram matrix of ``[X_c, s 1] / sqrt(n)``
    is block diagonal; with ``s^2 = mu``, the largest eigenvalue of ``X_c^T X_c / n``,
    its largest eigenvalue stays ``mu``. So the intercept is an ordinary unpenalized
    variable of the proximal-gradient step, updated exactly by it, adds nothing to the
    Lipschitz constant ``L = mu / 4`` (binary: the logistic curvature is at most 1/4) or
    ``mu / 2`` (multinomial: ``||diag(p) - p p^T||_2 <= 1/2``), and is as well scaled as
    the coefficients whatever the units of ``X``.

    ``grad(x)`` is the gradient of the mean log-loss in ``x``, ``c`` is minus the
    gradient at the null model (``W = 0``, intercept fitted), which sets the KKT scale.
    """

    def __init__(self, X, Y, fit_intercept=True, sample_weight=None):
        X = _as_float_matrix(X)
        n, p = X.shape
        if n == 0:
            raise ValueError("X has no samples.")
        Y, binary = _as_logistic_targets(Y, n, fit_intercept)
        K = Y.shape[1]
        self.Y, self.binary = Y, binary
        self.n_samples, self.n_columns, self.n_classes = n, p, K
        self.fit_intercept = bool(fit_intercept)
        self.n_coef = p * K
        self.n_features = p * K + (K if self.fit_intercept else 0)
        sw = _check_sample_weight_ls(sample_weight, n)  # summing to n, or None
        self.sample_weight = sw
        if sw is not None and fit_intercept:
            freq = _wmean(Y, sw)
            if (freq[0] <= 0.0 or freq[0] >= 1.0) if binary else np.any(freq <= 0.0):
                raise ValueError(
                    "A class of Y has zero total sample weight; its intercept would be "
                    "infinite. Give every class some weight or drop the class."
                )
        if not fit_intercept:
            m = None
        elif sw is None:
            m = np.asarray(X.mean(axis=0), dtype=np.float64).reshape(-1)
        else:  # weighted centering keeps X_c^T S 1 = 0 (block-diagonal curvature)
            m = np.asarray(safe_sparse_dot(sw, X), dtype=np.float64).reshape(-1) / n
        self.x_mean = m if fit_intercept else np.zeros(p)
        self._Xc = None  # the centered dense design (dense X only)
        sparse = sp.issparse(X)
        if sparse:
            Xt = X.T

            if fit_intercept:

                def xc_dot(W):
                    return X @ W - m @ W

                def xct_dot(R):
                    return Xt @ R - np.multiply.outer(m, R.sum(axis=0))

            else:

                def xc_dot(W):
                    return X @ W

                def xct_dot(R):
                    return Xt @ R

        else:
            Xc = X - m if fit_intercept else X
            self._Xc = Xc

            def xc_dot(W):
                return Xc @ W

            def xct_dot(R):
                return Xc.T @ R

        self.xc_dot = xc_dot
        sq = np.asarray(X.multiply(X).sum(axis=0)) if sparse else np.einsum("ij,ij->j", X, X)
        ref = float(sq.max()) / n if p else 0.0

        def compute_mu():
            """Largest eigenvalue of X_c^T X_c / n (in the smaller dimension)."""
            if n < p:
                if sw is None:
                    mu = _top_eigenvalue(lambda v: xc_dot(xct_dot(v)) / n, n)
                else:
                    r = np.sqrt(sw)
                    mu = _top_eigenvalue(lambda v: r * xc_dot(xct_dot(r * v)) / n, n)
            elif sw is None:
                mu = _top_eigenvalue(lambda v: xct_dot(xc_dot(v)) / n, p)
            else:
                mu = _top_eigenvalue(lambda v: xct_dot(sw * xc_dot(v)) / n, p)
            if not np.isfinite(mu) or mu <= 1e-24 * ref or mu <= 0:
                mu = 0.0  # X_c = 0 up to rounding (e.g. constant columns)
            return mu

        # mu is needed at once for the intercept's column (s = sqrt(mu)); otherwise only
        # by the plain iterations (L), so it is computed on first use.
        self._compute_mu = compute_mu
        self._mu = compute_mu() if self.fit_intercept else None
        self._col_ref = (sq, ref)
        self._curvature = 0.25 if binary else 0.5
        s = math.sqrt(self._mu) if self.fit_intercept and self._mu > 0 else 1.0
        self.s = s if self.fit_intercept else 0.0
        pK, inv_n = self.n_coef, 1.0 / n
        fit_b = self.fit_intercept
        probabilities = scipy.special.expit if binary else None
        softmax = scipy.special.softmax
        concatenate = np.concatenate

        def residual(x):
            Z = xc_dot(x[:pK].reshape(p, K))
            if fit_b:
                Z += s * x[pK:]
            P = probabilities(Z) if binary else softmax(Z, axis=1)
            P -= Y
            if sw is not None:
                P *= sw[:, None]
            return P

        def grad(x):
            R = residual(x)
            gW = xct_dot(R) * inv_n
            if fit_b:
                return concatenate((gW.ravel(), (s * inv_n) * R.sum(axis=0)))
            return gW.ravel()

        self.grad = grad
        # c = -grad at the null model: probabilities = class frequencies with an intercept,
        # uniform without.
        R0 = (_wmean(Y, sw) if fit_b else np.full(K, 0.5 if binary else 1.0 / K)) - Y
        if sw is not None:
            R0 = R0 * sw[:, None]
        c = -(xct_dot(R0) * inv_n).ravel()
        self.c = concatenate((c, np.zeros(K))) if fit_b else c
        self.small = 2 * n * p * K <= _SMALL_WORK

    @property
    def mu(self):
        """Largest eigenvalue of ``X_c^T X_c / n`` (computed on first use)."""
        if self._mu is None:
            self._mu = self._compute_mu()
        return self._mu

    @property
    def L(self):
        """Lipschitz constant of ``grad``; 0 if the loss does not depend on ``x``."""
        if self.fit_intercept:
            return self._curvature * self.s * self.s
        return self._curvature * self.mu

    @property
    def degenerate(self):
        """Whether ``X_c = 0`` up to rounding (cheap unless the columns are tiny)."""
        sq, ref = self._col_ref
        if self.n_columns == 0:
            return True
        if (
            self._mu is None
            and not self.fit_intercept
            and float(sq.max()) / self.n_samples > 1e-12 * ref
        ):
            return False
        return self.mu == 0.0

    @property
    def forward(self):
        """``x -> x - grad(x) / L``, the step of the plain iterations."""
        L, grad = self.L, self.grad
        inv_L = 1.0 / L if L > 0 else 1.0 / self.n_samples

        def forward(x):
            return x - grad(x) * inv_L

        return forward

    def scores(self, x):
        """Scores ``Z`` of shape (n, K) at ``x``."""
        pK = self.n_coef
        Z = self.xc_dot(x[:pK].reshape(self.n_columns, self.n_classes))
        if self.fit_intercept:
            Z = Z + self.s * x[pK:]
        return Z

    def start(self, w0):
        """Flat starting point: ``w0`` and the best intercept for it (by Newton)."""
        p, K = self.n_columns, self.n_classes
        if w0 is None:
            W = np.zeros((p, K))
        else:
            W = np.array(w0, dtype=np.float64)
            if W.shape != (p, K) and not (K == 1 and W.shape == (p,)):
                shape = f"({p},)" if K == 1 else f"({p}, {K})"
                raise ValueError(f"w0 must have shape {shape}, got {W.shape}.")
            W = W.reshape(p, K)
        if not self.fit_intercept:
            return W.ravel()
        Z0 = self.xc_dot(W) if np.any(W) else np.zeros((self.n_samples, K))
        beta = _newton_intercept(Z0, self.Y, self.binary, weights=self.sample_weight) / self.s
        return np.concatenate((W.ravel(), beta))

    def unpack(self, x):
        """``(W, b)``: coefficients of shape (p, K) and intercepts of shape (K,)."""
        pK = self.n_coef
        W = x[:pK].reshape(self.n_columns, self.n_classes)
        if not self.fit_intercept:
            return W, np.zeros(self.n_classes)
        b = self.s * x[pK:] - self.x_mean @ W
        if not self.binary:
            b = b - b.mean()  # the softmax ignores a common shift: report zero-sum
        return W, b


def _logistic_objective(design, x, lam, ext, rho_ext):
    """Mean log-loss plus ``lam sum_g rho_g ||W_g||_F`` at the flat point ``x``."""
    W = x[: design.n_coef].reshape(design.n_columns, design.n_classes)
    norms = np.sqrt(np.bincount(ext, weights=np.einsum("ij,ij->i", W, W), minlength=rho_ext.size))
    penalty = float(lam * (rho_ext @ norms)) if lam > 0 else 0.0
    loss = _mean_log_loss(design.scores(x), design.Y, design.binary, design.sample_weight)
    return loss + penalty


def _weighted_gram(A, d, n):
    """``A^T diag(d) A / n`` for ``d >= 0``, by a symmetric rank-k update (half a GEMM)."""
    B = A * np.sqrt(d)[:, None]
    if B.flags.c_contiguous and B.shape[1] > 1:
        U = scipy.linalg.blas.dsyrk(1.0 / n, B.T, trans=0)  # B.T is Fortran-ordered
        return np.triu(U) + np.triu(U, 1).T
    return B.T @ B / n


def _logistic_ws_newton(design, lam, ext, rho_ext, x, tol, max_iter):
    """Binary logistic group lasso by working sets and proximal Newton steps (dense X).

    Outer loop as in :func:`_solve_ls` (full gradient, violations of all groups, working
    set = live and unpenalized groups plus the worst violators). Inner loop on the
    working set's columns ``A`` (with the rescaled constant column of the intercept): the
    quadratic model ``g^T d + d^T H d / 2`` with ``H = A^T diag(p (1 - p)) A / n`` plus the
    penalty is minimized by :func:`_ws_fista` (its Newton steps included), and the step
    to that minimizer is damped by backtracking until the objective decreases by a
    fraction of the model's decrease (proximal Newton, as in *Proximal Newton-type
    methods for minimizing composite functions*). Returns ``(x, n_iter, relative kkt)``
    with the stopping rule of :func:`_fista`, checked on all groups.
    """
    n_ext = rho_ext.shape[0]
    lam_rho = lam * rho_ext
    scale = _kkt_scale(design.c, ext, n_ext)
    abs_tol = tol * scale
    Xc, y = design._Xc, design.Y[:, 0]
    n, p = Xc.shape
    sw = design.sample_weight
    wn = np.full(n, 1.0 / n) if sw is None else sw / n  # the weights of the mean
    s = design.s
    free = rho_ext == 0
    state = {}
    n_iter = stalled = 0
    z_full = None
    expit, logaddexp = scipy.special.expit, np.logaddexp

    def columns(idx):
        cols = idx[idx < p]
        A = Xc[:, cols]
        if cols.size < idx.size:  # the intercept column
            A = np.column_stack((A, np.full(n, s)))
        return A

    while True:
        if z_full is None:
            g = design.grad(x)
        else:  # the scores of the last working set are the full scores (x = 0 outside)
            R = wn * (expit(z_full) - y)
            g = Xc.T @ R
            if p < x.size:  # the intercept's variable
                g = np.append(g, s * R.sum())
        viol, live = _group_violations(x, g, ext, lam_rho, n_ext)
        kkt = float(viol.max())
        if kkt <= abs_tol or n_iter >= max_iter:
            break
        keep = live | free
        n_live = int(np.count_nonzero(live & ~free))
        # zero groups by ||g_j|| / (lam rho_j): the violators, and next the groups close
        # to violating (the support moves as the working set is solved; taking the near
        # ones at once saves the outer rounds, and Hessians, that would add them later)
        gn = np.sqrt(np.bincount(ext, weights=g * g, minlength=n_ext))
        ratio = np.full(n_ext, -1.0)
        np.divide(gn, lam_rho, out=ratio, where=~keep & (lam_rho > 0))
        n_add = max(_WS_MIN_GROUPS, n_live)
        out = np.where(keep, -1.0, viol)
        if n_add < n_ext:
            top = np.argpartition(ratio, n_ext - n_add - 1)
            add = top[n_ext - n_add :]
            rest = out[top[: n_ext - n_add]]
            outside = float(rest.max()) if rest.size else 0.0
        else:
            add = np.arange(n_ext)
            outside = 0.0
        add = add[(out[add] > abs_tol) | (ratio[add] >= _NEAR_VIOLATION)]
        in_ws = keep.copy()
        in_ws[add] = True
        idx = np.flatnonzero(in_ws[ext])
        groups_ws, ext_ws = np.unique(ext[idx], return_inverse=True)
        lr = lam_rho[groups_ws]
        tol_in = max(0.5 * abs_tol, 0.3 * outside)
        if stalled >= 2:
            tol_in = 0.5 * abs_tol
        if stalled >= 4:
            break
        A = columns(idx)
        xw = x[idx]
        z = A @ xw
        it_ws = 0
        d_model = None  # the sample curvatures the Hessian H was formed with
        ext_nw = groups_ws.size

        def penalty(v, lr=lr, ext_ws=ext_ws, ext_nw=ext_nw):
            return float(lr @ np.sqrt(np.bincount(ext_ws, weights=v * v, minlength=ext_nw)))

        f = float(wn @ (logaddexp(0.0, z) - y * z)) + penalty(xw)
        blind = None  # the point before a step the objective was too flat to check
        while n_iter + it_ws < max_iter:
            P = expit(z)
            gw = A.T @ (wn * (P - y))
            vw, _ = _group_violations(xw, gw, ext_ws, lr, ext_nw)
            kkt_w = float(vw.max())
            if blind is not None and not kkt_w < blind[3]:
                xw, z, f = blind[:3]  # the unchecked step did not help: undo it, stop
                break
            blind = None
            if kkt_w <= tol_in:
                break
            dcur = wn * P * (1.0 - P)
            if d_model is None:
                H, d_model = _weighted_gram(A, dcur, 1.0), dcur
            else:
                # Update the Hessian only on the samples whose curvature moved by more
                # than _HESSIAN_RTOL relative: the model Hessian stays within that factor
                # of the exact one in the PSD order (a linear rate of that size near the
                # optimum), for a fraction of the cost once the steps are small.
                moved = np.flatnonzero(np.abs(dcur - d_model) > _HESSIAN_RTOL * dcur)
                if moved.size > n // 2:
                    H, d_model = _weighted_gram(A, dcur, 1.0), dcur
                elif moved.size:
                    Am = A[moved]
                    H += Am.T @ (Am * (dcur[moved] - d_model[moved])[:, None])
                    d_model = d_model.copy()
                    d_model[moved] = dcur[moved]
            L, vec = _restricted_lipschitz(
                H, state.get("vec") if state.get("k") == idx.size else None, np.inf
            )
            state.update(vec=vec, k=idx.size)
            v, it, _, _ = _ws_fista(
                H,
                H @ xw - gw,
                lr,
                ext_ws,
                ext_nw,
                xw,
                L,
                max(kkt_w * min(0.1, kkt_w / scale), 0.25 * tol_in),
                max(1, max_iter - n_iter - it_ws),
                False,
            )
            it_ws += it + 1
            d = v - xw
            if not np.any(d):
                break
            pen0 = penalty(xw)
            delta = float(gw @ d) + penalty(v) - pen0  # the model's predicted decrease
            Ad = A @ d
            t = 1.0
            accepted = False
            for _ in range(30):
                zt = z + t * Ad
                xt = xw + t * d
                ft = float(wn @ (logaddexp(0.0, zt) - y * zt)) + penalty(xt)
                if ft <= f + 0.25 * t * delta or ft <= f and t < 1e-6:
                    accepted = True
                    break
                if t == 1.0 and -delta <= 64 * _EPS * max(abs(f), 1.0):
                    # the predicted decrease is below the rounding of the objective: take
                    # the full step and judge it by the KKT violation instead
                    blind = (xw, z, f, kkt_w)
                    zt, xt, accepted = z + Ad, xw + d, True
                    ft = float(wn @ (logaddexp(0.0, zt) - y * zt)) + penalty(xt)
                    break
                t *= 0.5
            if not accepted:
                break
            xw, z, f = xt, zt, ft
        n_iter += it_ws
        stalled = stalled + 1 if it_ws == 0 else 0
        x = np.zeros_like(x)
        x[idx] = xw
        z_full = z
    return x + 0.0, min(n_iter, max_iter), kkt / scale


def solve_group_logistic(
    X,
    Y,
    lam,
    groups_index,
    rho,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    *,
    sample_weight=None,
):
    r"""Solve one group-lasso logistic (or multinomial) problem by proximal gradient.

    Minimizes

    .. math::

        \frac{1}{n} \sum_{i=1}^n \ell_i(X_i W + b) + \lambda \sum_j \rho_j \|W_{G_j}\|_F

    where ``W`` has one column and ``\ell_i(z) = \log(1 + e^{-s_i z})``, ``s_i = 2 y_i - 1``
    (binary), or one column per class and ``\ell_i`` is the softmax cross-entropy
    (multinomial). A group is the rows of its features across all classes, so a feature is
    used for every class or for none. The intercepts ``b`` are not penalized.

    Binary problems with dense ``X`` are solved by working sets and proximal Newton steps
    (see :func:`_logistic_ws_newton`). The others use FISTA with gradient-based adaptive
    restart, constant step ``1/L`` and block soft-thresholding on the mean log-loss, with
    ``L = mu / 4`` (binary) or ``mu / 2`` (multinomial), ``mu`` the largest eigenvalue of
    ``X_c^T X_c / n``. Both stop by the rule of :func:`solve_group_lasso`, checked on all
    groups. The intercepts are unpenalized
    variables of the same proximal-gradient step (through a rescaled constant column,
    see :class:`_LogisticDesign`); they start at their exact optimum for ``w0`` (a few
    Newton steps), so a warm start at a solution needs no iteration. Probabilities,
    ``log(1 + e^z)`` and log-sum-exp are evaluated without overflow.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Design matrix, not modified. Sparse input is never densified (centering is
        implicit).
    Y : ndarray of shape (n_samples,) or (n_samples, n_classes)
        1-d: binary labels in ``{0, 1}`` (one column of coefficients). 2-d with
        ``n_classes >= 2`` columns: one-hot rows (multinomial; class probabilities are
        accepted too). With ``fit_intercept`` every class must occur.
    lam : float
        Penalty level ``>= 0``.
    groups_index : ndarray of int of shape (n_features,)
        Group label of every feature in ``-1..J-1`` (``-1``: unpenalized), as returned by
        :func:`check_groups`.
    rho : ndarray of shape (J,)
        Non-negative group weights (``0``: unpenalized group).
    w0 : ndarray of shape (n_features,) or (n_features, n_classes), default=None
        Starting coefficients (warm start); zeros if None.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation (see the module docstring).
    max_iter : int, default=10000
        Maximum number of proximal-gradient iterations.
    fit_intercept : bool, default=True
        Fit unpenalized intercepts.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights, rescaled to sum to ``n_samples``: the loss is the
        weighted mean ``sum_i s_i l_i / n`` (with a penalty ``lam`` this is
        :class:`sklearn.linear_model.LogisticRegression` with ``C = 1 / (lam sum_i s_i)``
        for the raw weights). Integer weights are the same as repeating rows.

    Returns
    -------
    result : GroupLogisticResult
        Named tuple ``(coef, intercept, n_iter, kkt, converged, objective)``.
    """
    _check_solver_args(lam, tol, max_iter)
    design = _LogisticDesign(X, Y, fit_intercept, sample_weight=sample_weight)
    ext, rho_ext = _extended_groups(groups_index, rho)
    if ext.shape != (design.n_columns,):
        raise ValueError(f"groups_index must have shape ({design.n_columns},), got {ext.shape}.")
    K, n_ext = design.n_classes, rho_ext.shape[0]
    # every coefficient of a feature belongs to the feature's group; the intercepts form
    # one more group, of weight 0
    ext_x = np.repeat(ext, K)
    rho_x = rho_ext
    if design.fit_intercept:
        ext_x = np.concatenate((ext_x, np.full(K, n_ext, dtype=np.intp)))
        rho_x = np.concatenate((rho_ext, [0.0]))
    x0 = design.start(w0)
    if design.binary and design._Xc is not None and not design.degenerate:
        x, n_iter, kkt = _logistic_ws_newton(design, float(lam), ext_x, rho_x, x0, tol, max_iter)
    else:
        x, n_iter, kkt = _fista(design, float(lam), ext_x, rho_x, x0, tol, max_iter)
    W, b = design.unpack(x)
    objective = _logistic_objective(design, x, float(lam), ext, rho_ext)
    if design.binary:
        coef, intercept = W[:, 0] + 0.0, float(b[0])
    else:
        coef, intercept = W + 0.0, b + 0.0
    return GroupLogisticResult(coef, intercept, n_iter, kkt, bool(kkt <= tol), objective)


def _logistic_null_residual(X, Y, free, fit_intercept, sample_weight=None):
    """``P - Y`` at the best model using only the intercept and the features ``free``
    (``sample_weight`` summing to n, or None)."""
    n, K = Y.shape
    binary = K == 1
    if free.size == 0:
        if fit_intercept:
            return _wmean(Y, sample_weight) - Y
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
        warnings.warn(
            "lambda_max: the logistic fit of the unpenalized features did not converge "
            f"(relative KKT violation {res.kkt:.3g}); are the classes separable on them?",
            ConvergenceWarning,
            stacklevel=3,
        )
    Z = np.asarray(safe_sparse_dot(Xf, res.coef.reshape(free.size, K))) + res.intercept
    return _probabilities(Z, binary) - Y


# --------------------------------------------------------------------------------------
# Estimator
# --------------------------------------------------------------------------------------


class GroupLassoRegressor(RegressorMixin, BaseEstimator):
    r"""Group lasso for least-squares regression (exact reference solver).

    Solves

    .. math::

        \min_{w, b}\; \frac{1}{2n}\,\|y - Xw - b\mathbf{1}\|_2^2
            + \mathrm{lam} \sum_{j=1}^{J} \rho_j \|w_{G_j}\|_2

    (optionally with ``w >= 0``) by working sets, FISTA with adaptive restart and Newton
    steps on the support until the relative KKT violation of every group is below
    ``tol`` (see :mod:`sksparse_nn.solvers`). Whole groups of coefficients are exactly
    zero.
    With singleton groups and unit weights this is :class:`sklearn.linear_model.Lasso`
    with ``alpha=lam``.

    Parameters
    ----------
    lam : float, default=1.0
        Penalty level, ``>= 0``.
    groups : None, int, list of list of int or array-like of int, default=None
        Group structure: None (every feature alone), a group size ``k`` (consecutive
        groups), a list of feature-index lists (unlisted features are unpenalized) or a
        label per feature (``-1``: unpenalized). See ``check_groups``.
    group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
        Weights ``rho_j``: 1, ``sqrt(group size)`` or explicit non-negative values
        (``0`` leaves a group unpenalized).
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation.
    max_iter : int, default=10000
        Maximum number of iterations.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (as ``Lasso(positive=True)``).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Iterations of the last fit.
    kkt_ : float
        Final relative KKT violation.
    group_labels_ : ndarray of int of shape (n_features,)
        Resolved group of every feature, ``-1`` for unpenalized ones.
    group_weights_ : ndarray of shape (n_groups,)
        Resolved weights ``rho``.
    selected_groups_ : ndarray of int
        Groups with a non-zero coefficient; groups of weight 0 always count as selected.
    selected_features_ : ndarray of int
        Sorted features of the selected groups, plus all unpenalized features.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.solvers import GroupLassoRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((100, 6))
    >>> y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.standard_normal(100)
    >>> model = GroupLassoRegressor(lam=0.1, groups=[[0, 1], [2, 3], [4, 5]]).fit(X, y)
    >>> model.selected_groups_
    array([0])
    >>> model.coef_[2:]
    array([0., 0., 0., 0.])
    """

    _parameter_constraints: dict = {
        "lam": [Interval(Real, 0, None, closed="left")],
        "groups": [None, Interval(Integral, 1, None, closed="left"), "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "positive": ["boolean"],
    }

    def __init__(
        self,
        lam=1.0,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        tol=1e-8,
        max_iter=10000,
        warm_start=False,
        positive=False,
    ):
        self.lam = lam
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.positive = positive

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (CSR/CSC sparse input is used without densifying).
        y : array-like of shape (n_samples,)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights, rescaled to sum to ``n_samples`` (the objective
            of :class:`sklearn.linear_model.Lasso` with ``sample_weight``): the loss is
            ``sum_i s_i (y_i - x_i w - b)^2 / (2 n)`` and the intercept comes from
            weighted means. Integer weights are the same as repeating rows.

        Returns
        -------
        self : GroupLassoRegressor
        """
        warm = self.warm_start and getattr(self, "coef_", None) is not None
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc"],
            dtype=np.float64,
            y_numeric=True,
            reset=not warm,  # a warm start keeps the features (checked here)
        )
        limit = value_limit(np.float64, X.shape[0])
        check_range(X, limit, "X", "float64")
        check_range(y, limit, "y", "float64")
        n_features = X.shape[1]
        labels = check_groups(self.groups, n_features)
        rho = resolve_group_weights(self.group_weights, labels)
        w0 = self.coef_ if warm else None
        result = solve_group_lasso(
            X,
            y,
            float(self.lam),
            labels,
            rho,
            w0=w0,
            tol=self.tol,
            max_iter=self.max_iter,
            fit_intercept=self.fit_intercept,
            positive=self.positive,
            sample_weight=sample_weight,
        )
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__} did not converge: relative KKT violation "
                f"{result.kkt:.3g} > tol after {result.n_iter} iterations; increase "
                f"max_iter (currently {self.max_iter}) or loosen tol (currently {self.tol}).",
                ConvergenceWarning,
                stacklevel=2,
            )
        coef = result.coef
        n_groups = rho.shape[0]
        grouped = labels >= 0
        norms = np.sqrt(
            np.bincount(labels[grouped], weights=coef[grouped] ** 2, minlength=n_groups)
        )
        selected = (norms > 0) | (rho == 0)
        self.coef_ = coef
        self.intercept_ = float(result.intercept)
        self.n_iter_ = int(result.n_iter)
        self.kkt_ = float(result.kkt)
        self.group_labels_ = labels
        self.group_weights_ = rho
        self.selected_groups_ = np.flatnonzero(selected)
        in_selected = np.zeros(n_features, dtype=bool)
        in_selected[grouped] = selected[labels[grouped]]
        self.selected_features_ = np.flatnonzero(~grouped | in_selected)
        return self

    def predict(self, X):
        """Predict with the fitted linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        return np.asarray(safe_sparse_dot(X, self.coef_)).reshape(-1) + self.intercept_


class GroupLassoClassifier(ClassifierMixin, BaseEstimator):
    r"""Group-lasso logistic regression (exact reference solver).

    Solves

    .. math::

        \min_{W, b}\; \frac{1}{n} \sum_{i=1}^n \ell_i(X_i W + b)
            + \mathrm{lam} \sum_{j=1}^{J} \rho_j \|W_{G_j}\|_F

    with the logistic loss (two classes, one column of coefficients) or the softmax
    cross-entropy (``K >= 3`` classes, one column per class) by proximal Newton steps on
    working sets (two classes, dense ``X``) or FISTA with adaptive restart until the
    relative KKT violation is below ``tol`` (see :mod:`sksparse_nn.solvers` and
    :func:`solve_group_logistic`). A group holds its features' coefficients for every
    class, so whole features (or groups of features) are exactly zero for all classes.
    With two classes, singleton groups and unit weights this is
    :class:`sklearn.linear_model.LogisticRegression` with an L1 penalty and
    ``C = 1 / (n_samples * lam)`` (unpenalized intercept).

    Parameters
    ----------
    lam : float, default=1.0
        Penalty level, ``>= 0``. Everything penalized is zero from
        ``lambda_max(X, Y, labels, rho, loss="log_loss")`` on; with standardized features
        and singleton groups it is at most ``1/2`` for two classes and below ``1`` for
        more, so useful values of ``lam`` are well below the default (kept for symmetry
        with the other estimators of the package).
    groups : None, int, list of list of int or array-like of int, default=None
        Group structure: None (every feature alone), a group size ``k`` (consecutive
        groups), a list of feature-index lists (unlisted features are unpenalized) or a
        label per feature (``-1``: unpenalized). See ``check_groups``.
    group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
        Weights ``rho_j``: 1, ``sqrt(group size)`` or explicit non-negative values
        (``0`` leaves a group unpenalized).
    fit_intercept : bool, default=True
        Fit unpenalized intercepts.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation.
    max_iter : int, default=10000
        Maximum number of iterations.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting (same features and classes).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        One row for two classes (the scores of ``classes_[1]``), one row per class
        otherwise, as in :class:`sklearn.linear_model.LogisticRegression`.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Multiclass intercepts sum to zero.
    group_norms_ : ndarray of shape (n_groups,)
        Norm of every group's coefficients over all classes (what is penalized).
    n_iter_ : int
        Iterations of the last fit.
    objective_ : float
        Penalized objective at the solution (mean log-loss plus penalty).
    kkt_ : float
        Final relative KKT violation.
    group_labels_ : ndarray of int of shape (n_features,)
        Resolved group of every feature, ``-1`` for unpenalized ones.
    group_weights_ : ndarray of shape (n_groups,)
        Resolved weights ``rho``.
    selected_groups_ : ndarray of int
        Groups with a non-zero coefficient; groups of weight 0 always count as selected.
    selected_features_ : ndarray of int
        Sorted features of the selected groups, plus all unpenalized features.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string column names.

    See Also
    --------
    GroupLassoRegressor : the same penalty with the squared loss.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.solvers import GroupLassoClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((200, 6))
    >>> y = (X[:, 0] - 2 * X[:, 1] + 0.5 * rng.standard_normal(200) > 0).astype(int)
    >>> model = GroupLassoClassifier(lam=0.05, groups=[[0, 1], [2, 3], [4, 5]]).fit(X, y)
    >>> model.selected_groups_
    array([0])
    >>> model.coef_.round(2)
    array([[ 1.24, -2.4 ,  0.  ,  0.  ,  0.  ,  0.  ]])
    >>> model.predict_proba(X[:2]).round(3)
    array([[0.21 , 0.79 ],
           [0.162, 0.838]])
    """

    _parameter_constraints: dict = {
        k: v for k, v in GroupLassoRegressor._parameter_constraints.items() if k != "positive"
    }

    def __init__(
        self,
        lam=1.0,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        tol=1e-8,
        max_iter=10000,
        warm_start=False,
    ):
        self.lam = lam
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (CSR/CSC sparse input is used without densifying).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights, rescaled to sum to ``n_samples``: the loss is
            the weighted mean of the log-losses (integer weights are the same as
            repeating rows).

        Returns
        -------
        self : GroupLassoClassifier
        """
        warm = self.warm_start and getattr(self, "coef_", None) is not None
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc"],
            dtype=np.float64,
            reset=not warm,  # a warm start keeps the features (checked here)
        )
        check_classification_targets(y)
        if warm:  # before anything changes: a refused fit keeps the fitted model
            check_warm_start_targets(self, y, classifier=True)
        check_range(X, value_limit(np.float64, X.shape[0]), "X", "float64")
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"The training data contain only one class ({classes[0]!r}); "
                f"{type(self).__name__} needs at least two classes."
            )
        n_features, n_classes = X.shape[1], classes.size
        Y = codes.astype(np.float64) if n_classes == 2 else np.eye(n_classes)[codes]
        labels = check_groups(self.groups, n_features)
        rho = resolve_group_weights(self.group_weights, labels)
        w0 = None
        if warm:
            w0 = self.coef_[0] if n_classes == 2 else self.coef_.T
        result = solve_group_logistic(
            X,
            Y,
            float(self.lam),
            labels,
            rho,
            w0=w0,
            tol=self.tol,
            max_iter=self.max_iter,
            fit_intercept=self.fit_intercept,
            sample_weight=sample_weight,
        )
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__} did not converge: relative KKT violation "
                f"{result.kkt:.3g} > tol after {result.n_iter} iterations; increase "
                f"max_iter (currently {self.max_iter}) or loosen tol (currently {self.tol}).",
                ConvergenceWarning,
                stacklevel=2,
            )
        coef = result.coef.reshape(n_features, -1).T  # (1, p) or (K, p)
        n_groups = rho.shape[0]
        grouped = labels >= 0
        sq = np.einsum("kj,kj->j", coef, coef)
        norms = np.sqrt(np.bincount(labels[grouped], weights=sq[grouped], minlength=n_groups))
        selected = (norms > 0) | (rho == 0)
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(coef)
        self.intercept_ = np.atleast_1d(np.asarray(result.intercept, dtype=np.float64))
        self.group_norms_ = norms
        self.n_iter_ = int(result.n_iter)
        self.objective_ = float(result.objective)
        self.kkt_ = float(result.kkt)
        self.group_labels_ = labels
        self.group_weights_ = rho
        self.selected_groups_ = np.flatnonzero(selected)
        in_selected = np.zeros(n_features, dtype=bool)
        in_selected[grouped] = selected[labels[grouped]]
        self.selected_features_ = np.flatnonzero(~grouped | in_selected)
        return self

    def decision_function(self, X):
        """Scores of the linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Two classes: the score of ``classes_[1]`` (positive: predicted). Otherwise one
            score per class.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        scores = np.asarray(safe_sparse_dot(X, self.coef_.T)) + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X):
        """Class probabilities (``expit`` / ``softmax`` of the scores, without overflow).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([scipy.special.expit(-scores), scipy.special.expit(scores)])
        return scipy.special.softmax(scores, axis=1)

    def predict_log_proba(self, X):
        """Logarithms of the class probabilities, computed directly (no ``log(0)``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            log_expit = scipy.special.log_expit
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return scipy.special.log_softmax(scores, axis=1)

    def predict(self, X):
        """Predict class labels (the class of largest score).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        index = (scores > 0).astype(np.intp) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[index]
