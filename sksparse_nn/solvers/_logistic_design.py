"""The logistic / multinomial design: targets, probabilities, log-loss, the intercept's
Newton fit and the flat variable the iterations work on."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.special
from sklearn.utils.extmath import safe_sparse_dot

from ..utils.validation import check_sample_weight
from ._data import as_float_matrix
from ._lipschitz import top_eigenvalue
from ._threads import SMALL_WORK


def as_logistic_targets(Y, n_samples, fit_intercept):
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


def probabilities(Z, binary):
    """Class probabilities from scores ``Z`` of shape (n, K), stably (expit / softmax)."""
    return scipy.special.expit(Z) if binary else scipy.special.softmax(Z, axis=1)


def mean_log_loss(Z, Y, binary, weights=None):
    """Mean log-loss (weighted by ``weights`` summing to n), with ``log(1 + e^z)`` and
    log-sum-exp computed without overflow."""
    if binary:
        losses = (np.logaddexp(0.0, Z) - Y * Z)[:, 0]
    else:
        losses = scipy.special.logsumexp(Z, axis=1) - np.einsum("ij,ij->i", Y, Z)
    if weights is None:
        return float(np.mean(losses))
    return float(weights @ losses) / Z.shape[0]


def wmean(A, weights):
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
    freq = wmean(Y, weights)
    if binary:
        c = np.log(freq) - np.log1p(-freq)
    else:
        c = np.log(freq)
        c -= c.mean()
    f = mean_log_loss(Z0 + c, Y, binary, weights)
    for _ in range(max_steps):
        P = probabilities(Z0 + c, binary)
        g = wmean(P, weights) - freq
        if not np.max(np.abs(g)) > 1e-15:
            break
        if binary:
            step = g / max(float(wmean(P * (1.0 - P), weights)[0]), 1e-300)
        else:
            PW = P if weights is None else P * weights[:, None]
            H = np.diag(wmean(P, weights)) - PW.T @ P / n + 1.0 / K
            try:
                step = np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                step = np.linalg.lstsq(H, g, rcond=None)[0]
        t = 1.0
        while True:
            c_new = c - t * step
            f_new = mean_log_loss(Z0 + c_new, Y, binary, weights)
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


class LogisticDesign:
    r"""Logistic data and everything :func:`fista` needs for it, computed once.

    The variable of the iterations is the flat vector ``x = [W.ravel(), beta]``: the
    coefficients ``W`` of shape ``(p, K)`` row by row (a group is then the rows of its
    features, across all classes) and, with an intercept, ``K`` unpenalized variables
    ``beta`` that enter the scores through a constant column of value ``s``:

    .. math::

        Z = X_c W + s \mathbf{1} \beta^T, \qquad b = s \beta - \bar{x}^T W .

    ``X_c`` is ``X`` centered (implicitly when sparse, as in :class:`Design`) when
    fitting an intercept. As ``X_c^T 1 = 0`` the Gram matrix of ``[X_c, s 1] / sqrt(n)``
    is block diagonal; with ``s^2 = mu``, the largest eigenvalue of ``X_c^T X_c / n``,
    its largest eigenvalue stays ``mu``. So the intercept is an ordinary unpenalized
    variable of the proximal-gradient step, updated exactly by it, adds nothing to the
    Lipschitz constant ``L = mu / 4`` (binary: the logistic curvature is at most 1/4) or
    ``mu / 2`` (multinomial: ``||diag(p) - p p^T||_2 <= 1/2``), and is as well scaled as
    the coefficients whatever the units of ``X``. That holds on the plain route
    (``route == "fista"``: multinomial, or ``X_c = 0``); the binary working-set routes
    (``"newton"`` dense, ``"cd"`` sparse) scale by their sets' own curvature, and take
    ``s^2`` = the largest centred mean square of a column instead (``mu`` is a power
    iteration, most of a fit's cost on small data).

    ``grad(x)`` is the gradient of the mean log-loss in ``x``, ``c`` is minus the
    gradient at the null model (``W = 0``, intercept fitted), which sets the KKT scale.
    """

    def __init__(self, X, Y, fit_intercept=True, sample_weight=None):
        X = as_float_matrix(X)
        n, p = X.shape
        if n == 0:
            raise ValueError("X has no samples.")
        Y, binary = as_logistic_targets(Y, n, fit_intercept)
        K = Y.shape[1]
        self.Y, self.binary = Y, binary
        self.n_samples, self.n_columns, self.n_classes = n, p, K
        self.fit_intercept = bool(fit_intercept)
        self.n_coef = p * K
        self.n_features = p * K + (K if self.fit_intercept else 0)
        sw = check_sample_weight(sample_weight, n)  # summing to n, or None
        self.sample_weight = sw
        if sw is not None and fit_intercept:
            freq = wmean(Y, sw)
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
        self._X_sparse = X if sparse else None  # the user's sparse X (uncopied)
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
        X2 = X.multiply(X) if sparse else None
        sq = np.asarray(X2.sum(axis=0)).ravel() if sparse else np.einsum("ij,ij->j", X, X)
        ref = float(sq.max()) / n if p else 0.0

        def compute_mu():
            """Largest eigenvalue of X_c^T X_c / n (in the smaller dimension)."""
            if n < p:
                if sw is None:
                    mu = top_eigenvalue(lambda v: xc_dot(xct_dot(v)) / n, n)
                else:
                    r = np.sqrt(sw)
                    mu = top_eigenvalue(lambda v: r * xc_dot(xct_dot(r * v)) / n, n)
            elif sw is None:
                mu = top_eigenvalue(lambda v: xct_dot(xc_dot(v)) / n, p)
            else:
                mu = top_eigenvalue(lambda v: xct_dot(sw * xc_dot(v)) / n, p)
            if not np.isfinite(mu) or mu <= 1e-24 * ref or mu <= 0:
                mu = 0.0  # X_c = 0 up to rounding (e.g. constant columns)
            return mu

        # the centred (weighted) mean square of each column: whether X_c = 0 up to
        # rounding (sparse: ``sq / n - m^2`` cancels to ~eps of the squares, hence the
        # looser rule), and the intercept column's scale on the working-set routes
        if sparse:
            wsq = (sq if sw is None else np.asarray(X2.T @ sw).ravel()) / n
            spread = np.maximum(wsq - m * m, 0.0) if fit_intercept else wsq
        elif sw is None and not fit_intercept:  # X_c = X: the squares above
            spread = sq / n
        else:
            Xs = self._Xc
            spread = (np.einsum("ij,ij->j", Xs, Xs) if sw is None
                      else np.einsum("i,ij,ij->j", sw, Xs, Xs)) / n  # fmt: skip
        rel = 1e-12 if sparse else 1e-24
        # whether X_c = 0 up to rounding
        self.degenerate = p == 0 or not float(spread.max(initial=0.0)) > rel * ref
        self.route = "fista"  # the plain iterations (multinomial, or X_c = 0)
        if binary and not self.degenerate:
            self.route = "cd" if sparse else "newton"
        # mu: the plain iterations' step (and the intercept column's scale there, so that
        # the column adds nothing to L); computed on first use: the working-set routes
        # never need it (a power iteration: most of a fit's cost on small data)
        self._compute_mu = compute_mu
        self._mu = None
        self._curvature = 0.25 if binary else 0.5
        s = 0.0
        if self.fit_intercept:  # the column's scale: the plain step's mu, else the columns'
            scale = self.mu if self.route == "fista" else float(spread.max())
            s = math.sqrt(scale) if scale > 0 else 1.0
        self.s = s
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
        R0 = (wmean(Y, sw) if fit_b else np.full(K, 0.5 if binary else 1.0 / K)) - Y
        if sw is not None:
            R0 = R0 * sw[:, None]
        c = -(xct_dot(R0) * inv_n).ravel()
        self.c = concatenate((c, np.zeros(K))) if fit_b else c
        self.small = 2 * n * p * K <= SMALL_WORK

    @property
    def mu(self):
        """Largest eigenvalue of ``X_c^T X_c / n`` (computed on first use)."""
        if self._mu is None:
            self._mu = self._compute_mu()
        return self._mu

    @property
    def L(self):
        """Lipschitz constant of ``grad``; 0 if the loss does not depend on ``x``."""
        if self.fit_intercept:  # block diagonal: [X_c, s 1] / sqrt(n) has max(mu, s^2)
            return self._curvature * max(self.s * self.s, self.mu)
        return self._curvature * self.mu

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
