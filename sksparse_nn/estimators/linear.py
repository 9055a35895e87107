r"""Group-sparse linear models trained by D-Gating.

``SparseLinearRegressor`` minimizes

.. math::

    \frac{1}{2n}\|y - Xw - b\|_2^2 + \lambda \sum_j \rho_j \|w_j\|_2^{2/D}

(at ``D=2`` the group lasso, the objective of :class:`~sksparse_nn.GroupLassoRegressor`;
``D=3, 4`` the sparser non-convex penalties no proximal library offers).
``SparseLinearClassifier`` replaces the squared error by the mean logistic loss; a group
then spans its features' coefficients across all classes.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch
from scipy.special import expit, logsumexp
from sklearn.base import is_classifier, is_regressor
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.sparsefuncs import mean_variance_axis
from skorch.callbacks import Callback

from ..gating import ZERO_TOL, dgate, gated_tensors, set_weight
from ..groups import AxisGroups
from ..solvers import _check_groups, _resolve_group_weights
from ._base import BaseDGated, ClassifierTaskMixin, RegressorTaskMixin
from ._curvature import DenseCurvature, DesignCurvature, solve_pos
from ._docs import fill
from ._training import as_numpy

__all__ = ["SparseLinearClassifier", "SparseLinearRegressor"]

_RIDGE_INIT_MAX_FEATURES = 4000
# Widest problem on which a fit first runs exact block steps (each costs one solve of the
# size of the live features, or of n_samples when that is smaller). Beyond it the steps
# would need working sets (near the KKT boundary they need many steps at D = 2).
_BLOCK_STEPS_MAX_FEATURES = 2000
# Widest problem whose block steps use the p x p Gram matrix (else the design itself).
_DENSE_GRAM_MAX_FEATURES = 4000
# Most block steps before L-BFGS takes over, and their stopping tolerance (relative
# decrease of the objective per step).
_BLOCK_STEPS_MAX = 100
_BLOCK_STEPS_TOL = 1e-10
_BLOCK_STEPS_PATIENCE = 3
# Relative KKT violation at which the block steps stop (D = 2): that of the proximal
# solver's default tol, so coefficients are certified, not only the objective.
_KKT_TOL = 1e-9
# Largest number of coefficients (features x free class columns) for Newton steps on the
# logistic loss; beyond it only Böhning's bound (one p x p matrix) is used.
_NEWTON_MAX_SIZE = 2000
# Relative KKT violation of a zero group beyond which L-BFGS may revive it (D = 2).
_REVIVE_MARGIN = 1e-9


def _is_wide(X):
    """Whether the block steps work on the design (Woodbury) instead of a Gram matrix."""
    n, p = X.shape
    return p > n or p > _DENSE_GRAM_MAX_FEATURES


def _weights(dataset):
    """The dataset's sample weights (mean 1) as float64 numpy, or None."""
    return None if dataset.weight is None else as_numpy(dataset.weight)


def _row_scaled(X, sample_weight):
    """``(diag(sqrt(s)) X, sqrt(s))``: weighted least squares as plain least squares on
    scaled rows (``X`` itself without weights; sparse stays sparse)."""
    if sample_weight is None:
        return X, None
    root = np.sqrt(sample_weight)
    return (sp.diags(root) @ X if sp.issparse(X) else X * root[:, None]), root


def _centered_moments(X, Y, fit_intercept, with_gram=True, sample_weight=None):
    """``(gram, rhs, x_mean, y_mean, const)`` of the centered least-squares problem.

    ``gram = X_c^T S X_c / n``, ``rhs = X_c^T S Y_c / n`` and
    ``const = ||S^(1/2) Y_c||^2 / (2n)``, with ``S`` the sample weights (mean 1; identity
    when None) and ``X_c``, ``Y_c`` centred at the weighted means, so that
    ``1/(2n) sum_i s_i ||y_i - W^T x_i - b||^2`` at the best intercept equals
    ``const - <rhs, W> + <W, gram W> / 2``.
    """
    n, p = X.shape
    s = np.ones(n) if sample_weight is None else sample_weight
    x_mean = np.asarray(X.T @ s).ravel() / n if fit_intercept else np.zeros(p)
    y_mean = s @ Y / n if fit_intercept else np.zeros(Y.shape[1])
    Xs, _ = _row_scaled(X, sample_weight)
    gram = None
    if with_gram:
        gram = np.asarray((Xs.T @ Xs).todense() if sp.issparse(Xs) else Xs.T @ Xs) / n
        gram -= np.outer(x_mean, x_mean)
    rhs = np.asarray(X.T @ (s[:, None] * Y)) / n - np.outer(x_mean, y_mean)
    const = 0.5 * float((s @ (Y - y_mean) ** 2).sum()) / n
    return gram, rhs, x_mean, y_mean, const


def _curvature(X, x_mean, group, wide, gram, sample_weight):
    """The curvature operator of the (weighted) centred design: the Gram matrix, or the
    design itself when it is wide."""
    if not wide:
        return DenseCurvature(gram, group)
    Xs, root = _row_scaled(X, sample_weight)
    return DesignCurvature(Xs, x_mean, group, row_scale=root)


class _GatedLeastSquares:
    r"""Exact block steps on the D-gated least-squares objective (the linear models' start).

    With the gates held at their balanced values the D-gated objective is a ridge problem
    in ``omega``, so one linear solve gives its exact minimizer; re-balancing the factors
    then minimizes exactly over how each group's product is split. In terms of the
    effective weight ``W`` this is the majorize-minimize (reweighted ridge) iteration of
    the induced penalty, and the objective decreases at every step. The solve is written
    in the scaled variables (matrix ``S G S + I`` on the live features, well conditioned
    however small the gates): groups at zero stay at zero, groups the data do not need
    shrink geometrically (superlinearly for ``D > 2``). That shrinking never reaches zero,
    and at ``D = 2`` it is slow near the KKT boundary, so a step also sets to zero the
    groups whose block minimizer is zero (see ``_doomed``) when that lowers the objective.
    Steps are Anderson-extrapolated (memory 5) when that lowers the objective further.

    ``gram = X_c^T X_c / n``, ``rhs = X_c^T Y_c / n`` (p, k) and ``const = ||Y_c||^2/(2n)``
    (see ``_centered_moments``): objective values include the best intercept.
    """

    def __init__(self, gram, rhs, const, labels, rho, lam, D, nonnegative=None):
        self.rhs, self.const = rhs, const
        self.rho, self.lam, self.D = rho, lam, D
        # features whose coefficients are constrained to be >= 0 (bool (p,)), or None
        self.nonneg = None if nonnegative is None or not np.any(nonnegative) else nonnegative
        in_group = self.penalized_groups(labels, rho, lam)
        self.penalized = in_group >= 0
        self.index = in_group[self.penalized]
        self.p = labels.shape[0]
        # the curvature: a (p, p) matrix, or an operator on the design (wide problems)
        self.curv = DenseCurvature(gram, in_group) if isinstance(gram, np.ndarray) else gram
        self.free_ridge = 1e-12 * max(self.curv.mean_diagonal, 1e-12)
        self.kkt_scale = None

    @staticmethod
    def penalized_groups(labels, rho, lam):
        """Each feature's penalized group, -1 for free features (all free at lam = 0)."""
        group = np.where(labels >= 0, labels, -1)
        grouped = group >= 0
        group[grouped] = np.where(rho[labels[grouped]] > 0, labels[grouped], -1)
        return group if lam > 0 else np.full_like(group, -1)

    def norms(self, W):
        weights = (W[self.penalized] ** 2).sum(1)
        return np.sqrt(np.bincount(self.index, weights=weights, minlength=self.rho.size))

    def objective(self, W):
        norms = self.norms(W)
        data = self.const - float((self.rhs * W).sum()) + 0.5 * float((W * self.curv.dot(W)).sum())
        return data + self.lam * float(self.rho @ norms ** (2.0 / self.D)), norms

    def _per_feature(self, per_group, free_value):
        out = np.full(self.p, free_value, dtype=per_group.dtype)
        out[self.penalized] = per_group[self.index]
        return out

    def _ascent(self, G):
        """The part of ``-gradient`` ``G`` that can move the coefficients: all of it, or
        its positive part under ``positive`` (a zero coefficient cannot decrease)."""
        if self.nonneg is None:
            return G
        return np.where(self.nonneg[:, None], np.maximum(G, 0.0), G)

    def _nonnegative_solve(self, support, ss, B, diag, V, bounded):
        """Minimize ``v^T A v / 2 - b^T v`` over ``v_i >= 0`` (``i`` in ``bounded``) for
        every column, with ``A = S G S + diag(diag)`` on the support: the constrained
        omega-step, from the unconstrained solution ``V``.

        Lawson and Hanson's active-set method: solve on the passive set (the free and
        the positive variables), step back to the boundary when the solution leaves the
        feasible set, and release the bound variable with the most negative gradient
        until none is left. It ends after finitely many solves at the exact minimizer
        (``A`` is positive definite), so the step keeps its majorize-minimize guarantee.
        """
        idx = np.flatnonzero(support)
        A = ss[:, None] * self.curv.submatrix(idx) * ss[None, :]
        A[np.diag_indices_from(A)] += diag
        scale = max(float(np.abs(B).max(initial=0.0)), 1e-300)
        out = np.zeros_like(V)
        for col in range(V.shape[1]):
            b = B[:, col]
            x = np.where(bounded, np.maximum(V[:, col], 0.0), V[:, col])
            passive = (x > 0) | ~bounded
            for _ in range(10 * idx.size + 10):
                z = np.zeros_like(x)
                if passive.any():
                    z[passive] = solve_pos(A[np.ix_(passive, passive)], b[passive])
                bad = passive & bounded & (z <= 0)
                if bad.any():  # back to the boundary along x -> z, and bind what hit it
                    alpha = np.min(x[bad] / (x[bad] - z[bad]))
                    x = x + alpha * (z - x)
                    hit = bounded & (x <= 1e-15 * scale)
                    passive &= ~hit
                    x[hit] = 0.0
                    continue
                x = z
                descent = b - A @ x  # minus the gradient
                candidates = np.where(passive, -np.inf, descent)
                j = int(np.argmax(candidates))
                if not candidates[j] > 1e-13 * scale:
                    break
                passive[j] = True
            out[:, col] = x
        return out

    def _doomed(self, W, norms):
        """Live groups to set to zero: their block minimizer (others fixed) is, or tends to, 0.

        With ``c_j = ||X_j^T r_{-j}|| / n`` (the residual without group ``j``), the next
        step shrinks group ``j`` at least by the factor ``q_j = D c_j ||w_j||^(1-2/D) /
        (2 lam rho_j)``. At ``D = 2``, ``q_j <= 1`` means the block minimizer is exactly
        zero. At ``D > 2`` zero is always a local block minimizer and ``q_j`` falls with
        the norm, so once ``q_j <= 1/2`` the steps drive the group to zero superlinearly;
        a group is also dropped when zero is simply better (others fixed), which lets the
        steps leave the flat region around a saddle at once instead of creeping.
        """
        D, lam, rho = self.D, self.lam, self.rho
        live = (norms > 0) & (rho > 0)
        if not live.any():
            return live
        block = self.curv.block_dot(W)
        partial = self.rhs - self.curv.dot(W) + block  # X_j^T r_{-j} / n
        corr = self.norms(self._ascent(partial))
        if D == 2:
            return live & (corr <= lam * rho)
        shrink = np.full(rho.size, np.inf)
        shrink[live] = D * corr[live] * norms[live] ** (1.0 - 2.0 / D) / (2.0 * lam * rho[live])
        # objective change when group j alone is set to zero
        quad = (W * block).sum(1)
        fit = (partial * W).sum(1) - 0.5 * quad
        gain = np.bincount(self.index, weights=fit[self.penalized], minlength=rho.size)
        gain -= lam * rho * norms ** (2.0 / D)
        return live & ((shrink <= 0.5) | (gain < 0))

    def step(self, W, norms):
        """One exact omega-step (with re-balancing) from ``W``, then zeroing doomed groups."""
        D, lam, rho = self.D, self.lam, self.rho
        live = (norms > 0) & (rho > 0)
        scale = np.zeros(rho.size)
        scale[live] = np.sqrt(D / (2.0 * lam * rho[live])) * norms[live] ** (1.0 - 1.0 / D)
        s = self._per_feature(scale, 1.0)
        support = s > 0
        W_new = np.zeros_like(W)
        if support.any():
            ss = s[support]
            diag = np.where(self.penalized[support], 1.0, self.free_ridge)
            B = ss[:, None] * self.rhs[support]
            V = self.curv.scaled_solve(support, ss, B, diag)
            if self.nonneg is not None:
                bounded = self.nonneg[support]
                if np.any(V[bounded] < 0):
                    V = self._nonnegative_solve(support, ss, B, diag, V, bounded)
            W_new[support] = ss[:, None] * V
        f_new, norms_new = self.objective(W_new)
        dead = self._doomed(W_new, norms_new)
        if dead.any():
            W_try = np.where(self._per_feature(dead, False)[:, None], 0.0, W_new)
            f_try, norms_try = self.objective(W_try)
            if f_try <= f_new:
                W_new, f_new, norms_new = W_try, f_try, norms_try
        if D == 2:
            W_new, f_new, norms_new = self._revive(W_new, f_new, norms_new)
        return W_new, f_new, norms_new

    def _revive(self, W, f, norms):
        """At D = 2, restart the zero groups that violate their KKT condition.

        A zero group with ``||X_j^T r|| / n > lam rho_j`` lowers the objective along
        ``u = X_j^T r / ||X_j^T r||``; it gets the best step ``t u`` on that line (the
        steps above keep zero groups at zero, so without this they could never return).
        """
        lam, rho = self.lam, self.rho
        grad = self._ascent(self.rhs - self.curv.dot(W))  # X^T r / n, (p, k)
        corr = self.norms(grad)
        excess = np.where((norms == 0) & (rho > 0), corr - lam * rho, 0.0)
        if not np.any(excess > 0):
            return W, f, norms
        candidates = [excess > 0, excess == excess.max()]  # all, else the worst alone
        for revive in candidates:
            rows = self._per_feature(revive, False)
            U = np.where(
                rows[:, None], grad / self._per_feature(np.maximum(corr, 1e-300), 1.0)[:, None], 0.0
            )
            curvature = np.bincount(
                self.index,
                weights=(U * self.curv.block_dot(U)).sum(1)[self.penalized],
                minlength=rho.size,
            )
            ok = revive & (curvature > 0)
            if not ok.any():
                continue
            step = np.zeros(rho.size)
            step[ok] = excess[ok] / curvature[ok]
            W_try = W + self._per_feature(step, 0.0)[:, None] * U
            f_try, norms_try = self.objective(W_try)
            if f_try < f:
                return W_try, f_try, norms_try
        return W, f, norms

    def kkt_violation(self, W, G):
        """Largest distance of ``-G`` to the D = 2 penalty's subdifferential, over groups.

        ``G`` is the gradient of the smooth part at ``W``; free (unpenalized) features
        count with ``|G|``. Zero at the group-lasso solution.
        """
        norms = self.norms(W)
        lam_rho = self.lam * self.rho
        unit = np.zeros_like(norms)
        np.divide(lam_rho, norms, out=unit, where=norms > 0)
        D = np.array(G, dtype=np.float64)
        D[self.penalized] += unit[self.index][:, None] * W[self.penalized]
        if self.nonneg is not None:  # at w = 0 the constraint absorbs any G >= 0
            held = self.nonneg[:, None] & (W <= 0)
            D = np.where(held, np.minimum(D, 0.0), D)
        dist = self.norms(D)
        viol = np.where(norms > 0, dist, np.maximum(dist - lam_rho, 0.0))
        free = np.abs(D[~self.penalized])
        return max(float(viol.max(initial=0.0)), float(free.max(initial=0.0)))

    def relative_kkt(self, W):
        """:meth:`kkt_violation` over the largest group norm of the gradient at zero
        (the stopping rule of the proximal solver in :mod:`sksparse_nn.solvers`)."""
        if self.kkt_scale is None:
            scale = float(self.norms(self.rhs).max(initial=0.0))
            free = float(np.abs(self.rhs[~self.penalized]).max(initial=0.0))
            self.kkt_scale = max(scale, free, 1e-300)
        return self.kkt_violation(W, self.curv.dot(W) - self.rhs) / self.kkt_scale

    def polish(self, W, max_iter=20):
        """Newton steps on the live groups' smooth problem (the support held fixed).

        Away from zero the penalty ``lam rho_j ||w_j||^q`` (``q = 2/D``) is smooth, so on
        a fixed support the objective is smooth and Newton's method converges
        quadratically where the block steps (a majorize-minimize scheme) slow down near
        the solution. A step that does not lower the objective, or would turn a live
        group through zero (the support is changing), ends the polishing; under the
        non-negativity constraint a step that crosses it is projected and ends it.
        """
        norms = self.norms(W)
        live_feature = self._per_feature(norms > 0, True) | ~self.penalized
        if self.nonneg is not None:  # entries held at zero by the constraint stay out
            live_feature &= np.all(W > 0, axis=1) | ~self.nonneg
        idx = np.flatnonzero(live_feature)
        if not idx.size or idx.size * W.shape[1] > _NEWTON_MAX_SIZE:
            return W
        k, q = W.shape[1], 2.0 / self.D
        G = np.kron(self.curv.submatrix(idx), np.eye(k))
        pen = self.penalized[idx]
        group = np.where(pen, self._per_feature(np.arange(self.rho.size), -1)[idx], -1)

        def gradient(W):
            w, n_g = W[idx], self.norms(W)
            coef = np.zeros_like(n_g)
            live = n_g > 0
            coef[live] = self.lam * self.rho[live] * q * n_g[live] ** (q - 2.0)
            grad = (G @ w.ravel()).reshape(w.shape) - self.rhs[idx]
            grad[pen] += coef[group[pen]][:, None] * w[pen]
            return grad, coef, n_g

        f, _ = self.objective(W)
        grad, coef, n_g = gradient(W)
        for _ in range(max_iter):
            w, live = W[idx], n_g > 0
            H = G.copy()
            for g in np.unique(group[pen]):
                rows = np.flatnonzero(group == g)
                vec = (rows[:, None] * k + np.arange(k)[None, :]).ravel()
                u = w[rows].ravel() / n_g[g]
                H[np.ix_(vec, vec)] += coef[g] * (np.eye(vec.size) + (q - 2.0) * np.outer(u, u))
            step = solve_pos(H, -grad.ravel()).reshape(w.shape)
            W_try = W.copy()
            W_try[idx] = w + step
            f_try, _ = self.objective(W_try)
            grad_try, coef_try, n_try = gradient(W_try)
            # near the solution the objective stops resolving progress (a gradient g
            # changes it by ~g^2): there a smaller gradient decides
            flat = f_try <= f + 1e-14 * abs(f)
            better = f_try < f or (flat and np.abs(grad_try).max() < np.abs(grad).max())
            crossed = self.nonneg is not None and np.any(W_try[idx][self.nonneg[idx]] < 0)
            if crossed:  # the support shrinks: go as far as the constraint allows, stop
                return self._step_to_boundary(W, W_try, f)
            # a live group that turned through zero (its direction reversed) means the
            # support is wrong: Newton's model no longer holds
            turned = np.bincount(
                self.index, weights=(W_try * W).sum(1)[self.penalized], minlength=self.rho.size
            )
            if not better or np.any(turned[live] <= 0):
                break
            W, f, grad, coef, n_g = W_try, f_try, grad_try, coef_try, n_try
        return W

    def minimize(self, W, max_steps, tol, memory=5, patience=_BLOCK_STEPS_PATIENCE, kkt_tol=None):
        """Steps from ``W`` until ``patience`` steps in a row lower the objective by at
        most ``tol`` (relative): non-convex problems can creep through flat regions.
        With ``kkt_tol`` (D = 2, convex) the steps instead run until the relative KKT
        violation is at most ``kkt_tol``, which certifies the coefficients and not only
        the objective (or until rounding stops the objective from decreasing).

        Returns ``(W, objective, n_steps)``.
        """
        f, norms = self.objective(W)
        history = []  # (iterate, its step) pairs for Anderson extrapolation
        n_steps = slow = 0
        certify = kkt_tol is not None and self.D == 2
        polished = False  # a polish without block-step progress since ends the loop
        last_support, same = None, 0  # steps in a row with the same nonzero pattern
        for n_steps in range(1, max_steps + 1):  # noqa: B007 (used after the loop)
            if certify and self.relative_kkt(W) <= kkt_tol:
                break
            W_new, f_new, norms_new = self.step(W, norms)
            history = [*history[-memory:], (W.ravel(), W_new.ravel())]
            if len(history) >= 3:
                W_acc = self._anderson(history, norms_new)
                if W_acc is not None:
                    f_acc, norms_acc = self.objective(W_acc)
                    if f_acc < f_new:
                        W_new, f_new, norms_new = W_acc, f_acc, norms_acc
            stalled = not f_new <= f  # rounding noise at convergence: keep the better point
            if not stalled:
                support = self._support(W_new)
                same = same + 1 if np.array_equal(support, last_support) else 0
                last_support = support
                decrease, W, f, norms = f - f_new, W_new, f_new, norms_new
                slow = slow + 1 if decrease <= tol * abs(f) else 0
            # the support has settled while the steps still creep (ill-conditioned live
            # block): Newton on it now rather than after many slow steps
            settled = certify and not polished and same >= 2 * patience
            if stalled or slow >= patience or settled:
                if not certify or polished:
                    break
                # slow or stalled short of the KKT tolerance: Newton on the current
                # support, then on with the block steps (which revive or drop groups if
                # the support was wrong)
                W_pol, polished = self.polish(W), True
                f_pol, norms_pol = self.objective(W_pol)
                if not f_pol <= f:
                    break
                W, f, norms, history, slow, same = W_pol, f_pol, norms_pol, [], 0, 0
            else:
                polished = False
        return W, f, n_steps

    def _step_to_boundary(self, W, W_try, f):
        """The point where the segment from ``W`` to ``W_try`` leaves ``w >= 0``, with the
        coefficients that reach the boundary set to zero; ``W`` if that is not better.
        On a fixed support the objective is convex along the Newton direction, so the
        part of the step inside the constraint lowers it."""
        bounded = self.nonneg[:, None] & np.ones_like(W, dtype=bool)
        leaving = bounded & (W_try < 0)
        t = float(np.min(W[leaving] / (W[leaving] - W_try[leaving])))
        W_t = W + t * (W_try - W)
        W_t[bounded & (W_t <= 1e-15 * max(float(np.abs(W).max()), 1e-300))] = 0.0
        W_t[leaving & (W_t < 0)] = 0.0
        f_t, _ = self.objective(W_t)
        return W_t if f_t < f else W

    def _support(self, W):
        """The nonzero pattern that Newton's method holds fixed: live groups, and under
        the constraint, the positive entries."""
        live = self._per_feature(self.norms(W) > 0, True)
        if self.nonneg is not None:
            return live[:, None] & ((W > 0) | ~self.nonneg[:, None])
        return live

    def _anderson(self, history, norms_new):
        """Extrapolated point from the last steps; zero groups of the last step stay zero."""
        steps = np.array([after for _, after in history]).T
        residuals = steps - np.array([before for before, _ in history]).T
        d_res, d_steps = np.diff(residuals, axis=1), np.diff(steps, axis=1)
        try:
            coef = np.linalg.lstsq(d_res, residuals[:, -1], rcond=None)[0]
        except np.linalg.LinAlgError:
            return None
        W_acc = (steps[:, -1] - d_steps @ coef).reshape(-1, self.rhs.shape[1])
        if not np.all(np.isfinite(W_acc)):
            return None
        dead = self._per_feature((norms_new == 0) & (self.rho > 0), False)
        W_acc[dead] = 0.0
        if self.nonneg is not None:
            W_acc[self.nonneg] = np.maximum(W_acc[self.nonneg], 0.0)
        return W_acc


class _GatedLogistic:
    r"""Proximal-Newton steps on the D-gated logistic objective (the classifiers' start).

    Each outer step replaces the mean log-loss at ``W`` by a quadratic model and hands
    it, with the penalty, to :class:`_GatedLeastSquares`, whose exact block steps (with
    the revival of KKT-violating zero groups at ``D = 2``) minimize the model. A step
    first tries the true Hessian (a proximal Newton step; binary ``X^T diag(p (1 - p)) X
    / n``; multiclass only up to ``_NEWTON_MAX_SIZE`` coefficients); when that does not
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
        self.shape = _GatedLeastSquares(gram, zero, 0.0, labels, rho, lam, D, self.nonneg)
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
        return loss + self.lam * float(self.rho @ norms ** (2.0 / self.D))

    def kkt(self, V, G):
        """Relative KKT violation of the D = 2 (convex) problem."""
        return self.shape.kkt_violation(V, G) / self.kkt_scale

    def _hessian(self, P):
        """Hessian of the mean log-loss in ``vec(V)`` (row-major), or None when too large.

        ``sum_i x_i x_i^T (x) Q^T (diag(p_i) - p_i p_i^T) Q / n``; binary: the familiar
        ``X^T diag(p (1 - p)) X / n``.
        """
        width = self.Q.shape[1]
        if self.X.shape[1] * width > _NEWTON_MAX_SIZE:
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
        model = _GatedLeastSquares(
            H, H @ V - G, const, labels, self.rho, self.lam, self.D, self.nonneg
        )
        # D = 2: solve the model to the KKT tolerance (with Newton polishing), so the
        # outer steps can reach it too; D > 2: until the model's objective settles
        kkt_tol = 0.1 * _KKT_TOL if self.D == 2 else None
        V_new, _, _ = model.minimize(V, inner_steps, _BLOCK_STEPS_TOL, kkt_tol=kkt_tol)
        return V_new.reshape(shape)

    def minimize(self, W, max_steps, tol, inner_steps=20, patience=_BLOCK_STEPS_PATIENCE):
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
            slow = slow + 1 if decrease <= _BLOCK_STEPS_TOL * abs(f) else 0
            if self.D > 2 and slow >= patience:
                break
        self.gradient = G
        return W, f, n_steps


class _ProjectNonNegative(Callback):
    """``positive=True``: after every optimizer step, negative coefficients are set to
    zero (a projected gradient step; the factors are re-balanced)."""

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        module = net.module_
        with torch.no_grad():
            weight = module.weight
            if not bool((weight < 0).any()):
                return
            if any(True for _ in gated_tensors(module)):
                set_weight(module, "weight", weight.clamp(min=0.0))
            else:
                weight.clamp_(min=0.0)


class _SparseLinearModel(BaseDGated):
    """The linear model family: one ``nn.Linear``, groups of input features gated."""

    _torch_dtype = torch.float64  # small problems, compared against exact solvers
    _fresh_init = "balanced"  # the ridge start, split into balanced factors
    _block_steps = False  # exact block steps before L-BFGS (squared error only)

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "groups": [None, Integral, "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "fit_intercept": ["boolean"],
        "positive": ["boolean"],
    }

    def __init__(
        self,
        lam=1.0,
        *,
        D=3,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        positive=False,
        optimizer="lbfgs",
        lr=1.0,
        max_epochs=200,
        batch_size=None,
        lr_schedule="constant",
        tol=1e-12,
        zero_tol=ZERO_TOL,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        warm_start=False,
        random_state=None,
        device="cpu",
        n_threads=None,
        verbose=0,
    ):
        self.lam = lam
        self.D = D
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.positive = positive
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr_schedule = lr_schedule
        self.tol = tol
        self.zero_tol = zero_tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None):
        """Fit the model at ``lam``; groups the data do not need end exactly at zero.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (sparse input is never densified as a whole).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (class labels for the classifier).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples, rescaled to sum to ``n_samples`` as in
            scikit-learn's Lasso: the loss becomes ``sum_i s_i loss_i / n``, so an
            integer weight equals repeating the row and a zero weight equals dropping it,
            and ``lam`` keeps its scale.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        TrainingDivergedError
            When the training loss becomes non-finite or explodes.
        KeyboardInterrupt
            On Ctrl-C, once training has stopped; the estimator is then not fitted.
        """
        warm = getattr(self, "module_", None) if self.warm_start else None
        return self._fit(X, y, warm_module=warm, sample_weight=sample_weight)

    def _build_module(self, n_features, n_outputs):
        return torch.nn.Linear(n_features, n_outputs, bias=self.fit_intercept)

    def _init_module(self, module, dataset, targets):
        """Start from a ridge solution: dense, at the right scale.

        The ridge strength ``alpha = lam * s^(2/D - 2)`` makes ``alpha ||w||^2`` match
        ``lam ||w||^(2/D)`` at the coefficients' typical size ``s`` (``_weight_scale``):
        ``alpha = lam`` on standardized data or at ``D = 2``, and the same start in any
        units of X and y. For D > 2 zero is a trap, so a fit starts dense and lets the
        penalty remove groups (the same reason paths run from dense to sparse).
        Classifiers regress the one-hot (binary: 0/1) targets. Skipped for very wide
        data, which keeps the default init.
        """
        X = dataset.X if dataset.sparse else dataset.X.cpu().numpy()
        p = X.shape[1]
        if p > _RIDGE_INIT_MAX_FEATURES:
            return
        Y = targets.double().numpy() if targets.dtype.is_floating_point else None
        if Y is None:  # class codes
            codes = targets.numpy()
            Y = np.eye(module.out_features + (module.out_features == 1))[codes]
            Y = Y[:, 1:] if module.out_features == 1 else Y
        wide, weight = _is_wide(X), _weights(dataset)
        gram, rhs, x_mean, y_mean, _ = _centered_moments(
            X, Y, self.fit_intercept, with_gram=not wide, sample_weight=weight
        )
        curv = _curvature(X, x_mean, np.full(p, -1), wide, gram, weight)
        size = self._weight_scale(X, Y if is_regressor(self) else np.zeros(0))
        alpha = self.lam * size ** (2.0 / self.D - 2.0) + 1e-6 * curv.mean_diagonal
        alpha = max(alpha, np.finfo(np.float64).tiny)
        W = curv.scaled_solve(np.ones(p, dtype=bool), np.ones(p), rhs, np.full(p, alpha))
        if self.positive:
            W = np.maximum(W, 0.0)
        with torch.no_grad():
            module.weight.copy_(torch.as_tensor(W.T))
            if self.fit_intercept:
                module.bias.copy_(torch.as_tensor(y_mean - x_mean @ W))

    def _make_net(self, module, dataset, seed):
        """The skorch net, after exact block steps from the module's start (regression).

        The block steps (see ``_block_descent``) bring the D-gated factors close to a
        stationary point at the cost of one linear solve each; L-BFGS then finishes the
        smooth D-gated problem. L-BFGS stops when one of its iterations lowers the
        objective by less than ``tol`` (relative), not only at the end of an epoch.
        """
        if self.positive and module.out_features > 1 and is_classifier(self):
            raise ValueError(
                "positive=True is supported for binary problems only: multinomial "
                f"coefficients ({module.out_features} classes) are defined up to a "
                "constant per feature and cannot all be made non-negative."
            )
        objective, certified = None, False
        if (
            self._block_steps
            and not self.early_stopping
            and dataset.X.shape[1] <= _BLOCK_STEPS_MAX_FEATURES
            and any(True for _ in gated_tensors(module))
        ):
            objective, certified = self._run_block_steps(module, dataset)
        net = super()._make_net(module, dataset, seed)
        # Nothing left for gradient steps when the block steps certified the D = 2
        # solution (relative KKT violation below _KKT_TOL), nor after the constrained
        # block steps with L-BFGS, whose projected steps would only undo their work.
        positive_done = self.positive and objective is not None and self.optimizer == "lbfgs"
        if certified or positive_done:
            net.set_params(max_epochs=0)
        # skorch's PrintLog formats a table row every epoch even when nothing is printed
        net.set_params(callbacks__print_log=None)
        if objective is not None and self.optimizer == "lbfgs" and self.tol is not None:
            net.set_params(optimizer__tolerance_change=self.tol * abs(objective))
        if self.positive:
            net.callbacks.append(("nonnegative", _ProjectNonNegative()))
        return net

    @torch.no_grad()
    def _run_block_steps(self, module, dataset):
        """Exact block steps from the module's start; write the result as balanced factors.

        Groups at zero get zero factors (a stationary point L-BFGS need not move away
        from), except at D = 2 those whose KKT condition is violated, which can grow.
        """
        X = dataset.X if dataset.sparse else dataset.X.cpu().numpy()
        labels, rho = self._penalty_groups(X.shape[1])
        weight = as_numpy(module.weight).T
        bias = as_numpy(module.bias) if self.fit_intercept else None
        W, b, objective, gradient, norms, certified = self._block_solve(
            X, dataset.y, labels, rho, weight, bias, _weights(dataset)
        )
        revive = None
        if self.D == 2:
            if self.positive:  # only a positive gradient can grow a coefficient from 0
                gradient = np.maximum(gradient, 0.0)
            grad_norms = np.sqrt(
                np.bincount(
                    labels[labels >= 0],
                    weights=(gradient[labels >= 0] ** 2).sum(1),
                    minlength=rho.size,
                )
            )
            # strictly violated only: at equality (lam = lam_max) zero is the solution,
            # and gates of 1 would let L-BFGS creep away from it
            violated = grad_norms > self.lam * rho * (1.0 + _REVIVE_MARGIN)
            revive = torch.as_tensor((norms == 0) & violated)
        set_weight(module, "weight", torch.as_tensor(W.T), revive=revive)
        if self.fit_intercept:
            module.bias.copy_(torch.as_tensor(b, dtype=module.bias.dtype))
        return objective, certified

    def _penalty_groups(self, n_features):
        labels = _check_groups(self.groups, n_features)
        return labels, _resolve_group_weights(self.group_weights, labels)

    def _gate_module(self, module, init):
        labels, rho = self._penalty_groups(module.in_features)
        if not np.any(labels >= 0):  # nothing penalized: plain (logistic) least squares
            return
        dgate(
            module, "weight", groups=AxisGroups(1, labels), D=self.D, init=init, group_weights=rho
        )

    def _input_weight(self, module):
        return module.weight

    def _weight_scale(self, X, y):
        """``std(y) / std(X)`` (medians over columns): the size of coefficients in the
        user's units, so that ``zero_tol`` removes only numerical dust whatever the
        units of X (a model fitted to ``X * 1e9`` keeps its coefficients of ~1e-9)."""
        if sp.issparse(X):
            _, var = mean_variance_axis(X.tocsc(), axis=0)
        else:
            var = np.var(X, axis=0, dtype=np.float64)
        x_std = np.sqrt(var[var > 0])
        if not x_std.size:
            return 1.0
        y_std = 1.0
        if np.issubdtype(np.asarray(y).dtype, np.floating) and is_regressor(self):
            y_std = float(np.median(np.std(np.asarray(y).reshape(len(y), -1), axis=0)))
        return (y_std if y_std > 0 else 1.0) / float(np.median(x_std))

    def _after_fit(self, X, y, sample_weight=None):
        labels, rho = self._penalty_groups(X.shape[1])
        self.group_labels_ = labels
        weight = as_numpy(self.module_.weight)
        bias = as_numpy(self.module_.bias) if self.fit_intercept else np.zeros(weight.shape[0])
        sq = np.bincount(
            labels[labels >= 0], weights=(weight[:, labels >= 0] ** 2).sum(0), minlength=rho.size
        )
        self.group_norms_ = np.sqrt(sq)
        self.selected_groups_ = np.flatnonzero(self.group_norms_)
        self.coef_, self.intercept_ = self._coef_shape(weight, bias)
        penalty = float(rho @ self.group_norms_ ** (2.0 / self.D))
        self.objective_ = self._data_loss(X, y, sample_weight) + self.lam * penalty


class SparseLinearRegressor(RegressorTaskMixin, _SparseLinearModel):
    r"""Group-sparse least squares with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Trained by D-Gating: each group's coefficients are a vector times ``D-1`` scalar gates
    with plain L2 on all factors. From the start (ridge at ``alpha = lam``, or the previous
    solution along a path) a fit first takes exact block steps on this smooth problem:
    with the gates fixed it is a ridge problem in the vectors, solved exactly, after which
    the factors are re-balanced (one ``p x p`` solve per step; skipped with early stopping
    or more than 2000 features). Full-batch L-BFGS in float64 (closure steps through
    skorch) then finishes the D-gated problem. Groups the data do not need reach exact
    zero during training; the final ``zero_tol`` threshold only removes numerical dust
    (``sparsity_gap_`` shows it).

    Parameters
    ----------
    lam : float, default=1.0
        Penalty strength; at ``D=2`` the same as ``GroupLassoRegressor(lam=...)`` and,
        for singleton groups and 1-d ``y``, scikit-learn's ``Lasso(alpha=...)``. A 2-d
        ``y`` is fitted as one multi-task group lasso (a feature's coefficients across
        outputs form one group, as ``MultiTaskLasso``); to fit the columns independently,
        as ``Lasso`` does with 2-d ``y``, wrap the estimator in
        ``sklearn.multioutput.MultiOutputRegressor``.
    $D
    groups : None, int, list of index lists or array of labels, default=None
        ``None``: each feature alone; ``k``: consecutive groups of ``k`` features; lists
        of feature indices (features in no list are unpenalized); or one integer label per
        feature (``-1`` = unpenalized). Contiguous group *sizes* (``[1, 3, 2]``, the form
        of skglm and celer) are not labels: convert them with
        :func:`~sksparse_nn.groups.group_labels_from_sizes`.
    group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
        ``rho_j``: ones, square root of group sizes, or explicit non-negative weights.
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (the intercept stays free), as
        scikit-learn's ``Lasso(positive=True)``; at ``D = 2`` the model is then the
        non-negative group lasso. The block steps solve the constrained problem exactly
        (an active-set solve per step); gradient steps after them are projected onto
        the constraint. The classifier accepts it for binary problems only.
    optimizer : {"lbfgs", "sgd", "adam", "adamw"} or torch optimizer class, default="lbfgs"
        Optimizer after the block steps; from their end L-BFGS usually needs a handful of
        closure evaluations.
    lr : float, default=1.0
        Learning rate (L-BFGS with a Wolfe line search uses 1).
    max_epochs : int, default=200
        Maximum number of optimizer steps over the data.
        $max_epochs_warning
    batch_size : int or None, default=None
        ``None`` trains on the full batch.
    lr_schedule : {"constant", "cosine"}, default="constant"
    tol : float or None, default=1e-12
        Stop when an epoch lowers the objective by less than ``tol`` (relative); L-BFGS
        also ends an epoch early when one of its iterations does.
    zero_tol : float, default=float32 eps (1.2e-7)
        Groups with a smaller norm after training, in units of ``std(y) / std(X)``
        (medians over columns; classifiers: ``1 / std(X)``), are set to exactly 0:
        numerical dust only, whatever the units of X (dropped groups typically end far
        below it, see ``sparsity_gap_``).
    $early_stopping
    $validation_fraction
    $n_iter_no_change
    $warm_start
    $random_state
    $device
    $n_threads
    $verbose

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    selected_features_ : ndarray of int
        Sorted indices of features with a non-zero coefficient.
    selected_groups_ : ndarray of int
        Indices of the non-zero groups.
    $group_norms_
    group_labels_ : ndarray of shape (n_features,)
        Group of each feature (-1: unpenalized).
    feature_importances_ : ndarray of shape (n_features,)
        ``|coef_|`` (norm over outputs); exactly 0 outside the support.
    objective_ : float
        The non-smooth objective at the final (thresholded) coefficients.
    $sparsity_gap_
    $n_iter_
    $history_
    $n_features_in_

    Examples
    --------
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> est = SparseLinearRegressor(lam=0.3, D=3, groups=5).fit(data.X, data.y)
    >>> est.selected_groups_  # doctest: +SKIP
    """

    __doc__ = fill(__doc__)

    _block_steps = True

    def _block_solve(self, X, targets, labels, rho, weight, bias, sample_weight=None):
        """Gated least squares: ``(W, intercept, objective, gradient, norms, certified)``."""
        Y = targets.cpu().double().numpy()
        wide = _is_wide(X)
        gram, rhs, x_mean, y_mean, const = _centered_moments(
            X, Y, self.fit_intercept, with_gram=not wide, sample_weight=sample_weight
        )
        if wide:  # never form the p x p Gram matrix: Woodbury solves on the design
            group = _GatedLeastSquares.penalized_groups(labels, rho, self.lam)
            gram = _curvature(X, x_mean, group, True, None, sample_weight)
        nonneg = np.ones(X.shape[1], dtype=bool) if self.positive else None
        problem = _GatedLeastSquares(gram, rhs, const, labels, rho, self.lam, self.D, nonneg)
        W, objective, self._n_block_steps = problem.minimize(
            weight, _BLOCK_STEPS_MAX, _BLOCK_STEPS_TOL, kkt_tol=_KKT_TOL
        )
        intercept = y_mean - x_mean @ W
        certified = self.D == 2 and problem.relative_kkt(W) <= _KKT_TOL
        gradient = rhs - problem.curv.dot(W)
        return W, intercept, objective, gradient, problem.norms(W), certified

    def _coef_shape(self, weight, bias):
        if self._y_1d:
            return weight[0], float(bias[0])
        return weight, bias

    def _data_loss(self, X, y, sample_weight=None):
        resid = y.reshape(len(y), -1) - self._module_output(X)
        return 0.5 * float(np.average((resid**2).sum(axis=1), weights=sample_weight))


class SparseLinearClassifier(ClassifierTaskMixin, _SparseLinearModel):
    r"""Group-sparse logistic regression with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Binary problems use one logit (logistic loss), multiclass problems a softmax over
    ``n_classes`` logits; a group spans its features' coefficients across all classes, so
    a feature is either used for every class or removed. The loss is the mean log-loss.
    Parameters, training and attributes are those of :class:`SparseLinearRegressor`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    selected_features_, selected_groups_, group_norms_, group_labels_,
    feature_importances_, objective_, sparsity_gap_, n_iter_, history_

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn import SparseLinearClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = make_pipeline(StandardScaler(), SparseLinearClassifier(lam=0.02, D=3))
    >>> model.fit(X, y).score(X, y) > 0.9
    True
    """

    _block_steps = True

    def _block_solve(self, X, targets, labels, rho, weight, bias, sample_weight=None):
        """Gated logistic: ``(W, intercept, objective, gradient, norms, certified)``."""
        codes = targets.cpu().numpy()
        k = weight.shape[1]
        problem = _GatedLogistic(
            X,
            codes,
            k,
            labels,
            rho,
            self.lam,
            self.D,
            self.fit_intercept,
            sample_weight,
            positive=self.positive,
        )
        if bias is not None and problem.x_mean is not None:
            bias = bias + problem.x_mean @ weight  # the intercept of the centred columns
        start = weight if bias is None else np.vstack([weight, bias[None, :]])
        V, objective, self._n_block_steps = problem.minimize(
            problem.to_reduced(start), _BLOCK_STEPS_MAX, _KKT_TOL
        )
        W, p = problem.to_full(V), X.shape[1]
        gradient = -problem.gradient[:p]  # the descent direction, as the regressor's
        b = None
        if self.fit_intercept:
            b = W[p] if problem.x_mean is None else W[p] - problem.x_mean @ W[:p]
        certified = self.D == 2 and problem.kkt(V, problem.gradient) <= _KKT_TOL
        return W[:p], b, objective, gradient, problem.shape.norms(V), certified

    def _coef_shape(self, weight, bias):
        return weight, bias

    def _data_loss(self, X, y, sample_weight=None):
        logits = self._module_output(X)
        index = np.searchsorted(self.classes_, y)
        if logits.shape[1] == 1:  # binary: log(1 + exp(-s * z)) with s = +-1
            sign = np.where(index == 1, 1.0, -1.0)
            per_sample = np.logaddexp(0.0, -sign * logits[:, 0])
        else:
            log_norm = np.logaddexp.reduce(logits, axis=1)
            per_sample = log_norm - logits[np.arange(len(y)), index]
        return float(np.average(per_sample, weights=sample_weight))
