"""Proximal-Newton steps on the D-gated logistic objective (pure numpy): the quadratic
models are minimized by :class:`GatedLeastSquares`' exact block steps."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, logsumexp

from ..penalties import penalty_value
from ._gated_least_squares import (
    BLOCK_STEPS_PATIENCE,
    BLOCK_STEPS_TOL,
    KKT_TOL,
    NEWTON_MAX_SIZE,
    GatedLeastSquares,
)

__all__ = ["GatedLogistic"]


class GatedLogistic:
    r"""Proximal-Newton steps on the D-gated logistic objective (the classifiers' start).

    Each outer step replaces the mean log-loss at ``W`` by a quadratic model and hands
    it, with the penalty, to :class:`GatedLeastSquares`, whose exact block steps (with
    the revival of KKT-violating zero groups at ``D = 2``) minimize the model. A step
    first tries the true Hessian (a proximal Newton step; binary ``X^T diag(p (1 - p)) X
    / n``; multiclass only up to ``NEWTON_MAX_SIZE`` coefficients); when that does not
    lower the objective, the model uses Böhning's bound (``X^T X / (4n)`` binary,
    ``X^T X / (2n)`` per class multinomial), which majorizes the loss, so the step is a
    majorize-minimize step and the objective decreases. At ``D = 2`` the problem is
    convex and the steps stop when the relative KKT violation (largest distance of
    ``-grad`` to the penalty's subdifferential, over groups, divided by the largest group
    norm of the gradient at zero) is below ``tol``.

    The intercept is an unpenalized column of ones; ``codes`` are class indices.

    Multinomial coefficients ``W`` (one column per class) are only defined up to a
    constant per row, along which the loss is flat; the penalty picks rows that sum to
    zero. The steps therefore work in ``V = W Q`` with ``Q`` an orthonormal basis of the
    zero-sum vectors (``W = V Q^T``, group norms unchanged), where Böhning's bound is
    ``X^T X / (2n)`` for every column and the loss has no flat direction.
    """

    def __init__(
        self,
        X,
        codes,
        n_outputs,
        labels,
        rho,
        lam,
        D,
        fit_intercept,
        sample_weight=None,
        positive=False,
    ):
        n = X.shape[0]
        self.s = sample_weight  # mean 1, or None
        # dense inputs are centred (the intercept absorbs the means): a column far from
        # zero is otherwise nearly parallel to the intercept's column of ones
        self.x_mean = None
        if fit_intercept and not sp.issparse(X):
            self.x_mean = X.mean(axis=0) if self.s is None else self.s @ X / n
            X = X - self.x_mean
        if fit_intercept:
            ones = np.ones((n, 1))
            X = sp.hstack([X, ones], format="csr") if sp.issparse(X) else np.hstack([X, ones])
            labels = np.append(labels, -1)
        self.X, self.n, self.k = X, n, n_outputs
        self.C = codes.astype(np.float64)[:, None] if n_outputs == 1 else np.eye(n_outputs)[codes]
        if n_outputs == 1:
            self.Q = np.ones((1, 1))
        else:  # orthonormal basis of the vectors summing to zero, (K, K - 1)
            centred = np.eye(n_outputs) - 1.0 / n_outputs
            self.Q = np.linalg.qr(centred[:, :-1])[0]
        self.labels, self.rho, self.lam, self.D = labels, rho, lam, D
        # binary only (the caller checks): V = W, the intercept's column stays free
        self.nonneg = None
        if positive:
            self.nonneg = np.arange(X.shape[1]) < X.shape[1] - int(fit_intercept)
        gram = self._weighted_gram(None)
        self.bound = gram * (0.25 if n_outputs == 1 else 0.5)
        zero = np.zeros((X.shape[1], self.Q.shape[1]))
        self.shape = GatedLeastSquares(gram, zero, 0.0, labels, rho, lam, D, self.nonneg)
        _, G0, _ = self.loss_grad(zero)
        self.kkt_scale = max(float(self.shape.norms(G0).max(initial=0.0)), 1e-300)

    def to_reduced(self, W):
        """``V = W Q``: drops the flat direction (never raises the penalty)."""
        return W @ self.Q

    def to_full(self, V):
        return V @ self.Q.T

    def _weighted_gram(self, weights):
        """``X^T diag(weights * s) X / n`` (``s``: the sample weights)."""
        if self.s is not None:
            weights = self.s if weights is None else weights * self.s
        X = self.X
        if sp.issparse(X):
            Xw = X if weights is None else sp.diags(weights) @ X
            return np.asarray((X.T @ Xw).todense()) / self.n
        Xw = X if weights is None else X * weights[:, None]
        return X.T @ Xw / self.n

    def loss_grad(self, V):
        """Mean log-loss, its gradient in ``V`` and the class probabilities."""
        Z = np.asarray(self.X @ self.to_full(V))
        if self.k == 1:
            z = Z[:, 0]
            per_sample = np.logaddexp(0.0, z) - self.C[:, 0] * z
            P = expit(z)[:, None]
        else:
            lse = logsumexp(Z, axis=1)
            per_sample = lse - (self.C * Z).sum(axis=1)
            P = np.exp(Z - lse[:, None])
        R = P - self.C
        if self.s is not None:
            per_sample, R = per_sample * self.s, R * self.s[:, None]
        loss = float(np.mean(per_sample))
        return loss, np.asarray(self.X.T @ R) @ self.Q / self.n, P

    def objective(self, W, loss=None):
        loss = self.loss_grad(W)[0] if loss is None else loss
        norms = self.shape.norms(W)
        return loss + self.lam * penalty_value(norms, self.rho, self.D)

    def kkt(self, V, G):
        """Relative KKT violation of the D = 2 (convex) problem."""
        return self.shape.kkt_violation(V, G) / self.kkt_scale

    def _hessian(self, P):
        """Hessian of the mean log-loss in ``vec(V)`` (row-major), or None when too large.

        ``sum_i x_i x_i^T (x) Q^T (diag(p_i) - p_i p_i^T) Q / n``; binary: the familiar
        ``X^T diag(p (1 - p)) X / n``.
        """
        width = self.Q.shape[1]
        if self.X.shape[1] * width > NEWTON_MAX_SIZE:
            return None
        if self.k == 1:
            return self._weighted_gram(P[:, 0] * (1.0 - P[:, 0]))
        R = np.einsum("ik,ka,kb->iab", P, self.Q, self.Q)  # Q^T diag(p_i) Q
        PQ = P @ self.Q
        R -= PQ[:, :, None] * PQ[:, None, :]
        # one weighted Gram matrix (a BLAS product) per pair of reduced classes
        # (_weighted_gram applies the sample weights)
        p = self.X.shape[1]
        H = np.empty((p, width, p, width))
        for a in range(width):
            for b in range(a, width):
                block = self._weighted_gram(R[:, a, b])
                H[:, a, :, b] = block
                H[:, b, :, a] = block
        return H.reshape(p * width, p * width)

    def _model_step(self, V, loss, G, H, inner_steps):
        """Minimize the quadratic model of the loss at ``V`` plus the penalty.

        ``H`` is either a (p, p) curvature shared by every column of ``V`` (Böhning's
        bound) or the Hessian in ``vec(V)``; the latter is solved as one column whose
        entries carry their feature's group label.
        """
        shape, labels = V.shape, self.labels
        if H.shape[0] != V.shape[0]:  # vec form
            V, G = V.reshape(-1, 1), G.reshape(-1, 1)
            labels = np.repeat(labels, shape[1])
        const = loss - float((G * V).sum()) + 0.5 * float((V * (H @ V)).sum())
        model = GatedLeastSquares(
            H, H @ V - G, const, labels, self.rho, self.lam, self.D, self.nonneg
        )
        # D = 2: solve the model to the KKT tolerance (with Newton polishing), so the
        # outer steps can reach it too; D > 2: until the model's objective settles
        kkt_tol = 0.1 * KKT_TOL if self.D == 2 else None
        V_new, _, _ = model.minimize(V, inner_steps, BLOCK_STEPS_TOL, kkt_tol=kkt_tol)
        return V_new.reshape(shape)

    def minimize(self, W, max_steps, tol, inner_steps=20, patience=BLOCK_STEPS_PATIENCE):
        """Outer steps from ``W`` (shape (p [+ 1], k)); returns ``(W, objective, n_steps)``."""
        loss, G, P = self.loss_grad(W)
        f = self.objective(W, loss)
        n_steps = slow = 0
        for n_steps in range(1, max_steps + 1):  # noqa: B007 (used after the loop)
            if self.D == 2 and self.kkt(W, G) <= tol:
                break
            curvatures = [self._hessian(P), self.bound]
            for H in (h for h in curvatures if h is not None):
                V = self._model_step(W, loss, G, H, inner_steps)
                loss_new, G_new, P_new = self.loss_grad(V)
                f_new = self.objective(V, loss_new)
                if f_new < f:
                    break
                # near the solution a step changes the objective by ~ KKT^2, below its
                # rounding: there a smaller KKT violation decides (D = 2)
                flat = f_new <= f + 1e-13 * abs(f)
                if self.D == 2 and flat and self.kkt(V, G_new) < self.kkt(W, G):
                    break
            else:
                break  # no decrease from either model: converged to rounding
            decrease = f - f_new
            W, f, loss, G, P = V, f_new, loss_new, G_new, P_new
            slow = slow + 1 if decrease <= BLOCK_STEPS_TOL * abs(f) else 0
            if self.D > 2 and slow >= patience:
                break
        self.gradient = G
        return W, f, n_steps
