"""Exact block steps on the D-gated least-squares objective (pure numpy).

The linear estimators' solver: with the gates held at their balanced values the D-gated
objective is a ridge problem, so each step is one linear solve (see
:class:`GatedLeastSquares`). Nothing here knows torch, skorch or scikit-learn; the
linear family hands it moments of its data (:mod:`._gated_setup`) and writes its result
back into the gated module.
"""

from __future__ import annotations

import numpy as np

from ..groups import count_groups, norms_by_label, penalty_value
from ..utils.digest import array_key
from ._curvature import DenseCurvature, DesignCurvature, solve_pos
from ._data import extended_groups
from ._gated_setup import BLOCK_STEPS_PATIENCE, NEWTON_MAX_SIZE
from ._gated_working_sets import WorkingSetSteps
from ._penalties import group_violations, kkt_scale
from ._proximal import anderson_extrapolation

__all__ = ["GatedLeastSquares"]


class GatedLeastSquares(WorkingSetSteps):
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
    (see ``centered_moments``): objective values include the best intercept.
    """

    def __init__(
        self, gram, rhs, const, labels, rho, lam, D, nonnegative=None, scale=None, gradient=None,
        group=None,
    ):  # fmt: skip
        self.rhs, self.const = rhs, const
        self.rho, self.lam, self.D = rho, lam, D
        # features whose coefficients are constrained to be >= 0 (bool (p,)), or None
        self.nonneg = None if nonnegative is None or not np.any(nonnegative) else nonnegative
        # ``group``: penalized_groups(labels, rho, lam) when the caller has it (shared,
        # read only: the design's curvature holds the same array)
        in_group = self.penalized_groups(labels, rho, lam) if group is None else group
        self.group = in_group
        self.penalized = in_group >= 0
        # the penalized features' groups (``in_group`` itself when every feature is one's)
        self.index = in_group if self.penalized.all() else in_group[self.penalized]
        self.p = labels.shape[0]
        # the curvature: a (p, p) matrix, or an operator on the design (wide problems)
        if isinstance(gram, tuple):  # a working set's Gram block and its design solves
            self.curv = DenseCurvature(gram[0], in_group, *gram[1:])
        elif isinstance(gram, np.ndarray):
            self.curv = DenseCurvature(gram, in_group)
        else:
            self.curv = gram
        self.free_ridge = 1e-12 * max(self.curv.mean_diagonal, 1e-12)
        # the stopping rule's groups: free features alone, with lam rho_j = 0
        n_pen = count_groups(in_group)
        self.ext, rho_ext = extended_groups(in_group, np.zeros(n_pen))
        self.lam_rho = np.concatenate([lam * rho[:n_pen], rho_ext[n_pen:]])
        self.kkt_scale = scale
        # (W, G W - rhs) of the last gradient asked for; ``gradient``: one known for this
        # problem's data and targets (a warm start's, from the fit it starts from)
        self._last_gradient = gradient

    @staticmethod
    def penalized_groups(labels, rho, lam):
        """Each feature's penalized group, -1 for free features (all free at lam = 0):
        ``labels`` itself (no copy; read only) where every feature is in a group of
        positive weight."""
        if lam > 0 and labels.size and labels.min() >= 0 and rho.min(initial=1.0) > 0:
            return labels
        group = np.where(labels >= 0, labels, -1)
        grouped = group >= 0
        group[grouped] = np.where(rho[labels[grouped]] > 0, labels[grouped], -1)
        return group if lam > 0 else np.full_like(group, -1)

    def norms(self, W):
        return norms_by_label(W, self.group, self.rho.size)

    def objective(self, W):
        """The objective at ``W`` and its group norms; the data term from the kept
        gradient when it is at ``W`` (``W^T G W / 2 - rhs^T W`` is ``W^T (g - rhs) / 2``
        with ``g = G W - rhs``: on wide data a pass over the design saved)."""
        norms = self.norms(W)
        kept = self._kept_gradient(W)
        if kept is not None:
            data = self.const + 0.5 * float((W * (kept - self.rhs)).sum())
        else:
            data = self.const - float((self.rhs * W).sum()) + 0.5 * float(
                (W * self.curv.dot(W)).sum()
            )  # fmt: skip
        return data + self.lam * penalty_value(norms, self.rho, self.D), norms

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
        """Largest distance of ``-G`` to the D = 2 penalty's subdifferential, over groups
        (:func:`~sksparse_nn.solvers._penalties.group_violations`, the reference solver's rule).

        ``G`` is the gradient of the smooth part at ``W``; free (unpenalized) features
        count alone, with ``|G|``. Zero at the group-lasso solution.
        """
        return float(self.group_violations(W, G)[0].max(initial=0.0))

    def group_violations(self, W, G):
        """Per stopping-rule group (``self.ext``): KKT violations and the live mask."""
        positive = False if self.nonneg is None else self.nonneg
        return group_violations(W, G, self.ext, self.lam_rho, self.lam_rho.size, positive)

    def relative_kkt(self, W):
        """:meth:`kkt_violation` over the largest group norm of the gradient at zero
        (the stopping rule of the proximal solver in :mod:`sksparse_nn.solvers`)."""
        return self.kkt_violation(W, self.gradient(W)) / self.scale

    def gradient(self, W):
        """``G W - rhs``, the smooth part's gradient; the last one is kept (a fit's final
        certification and its caller ask for the gradient at the same point: on wide
        data each is a pass over the design)."""
        kept = self._kept_gradient(W)
        if kept is not None:
            return kept
        G = self.curv.dot(W) - self.rhs
        self._last_gradient = (_point_key(W), G)  # W's key, not a copy of W
        return G

    def _kept_gradient(self, W):
        """The kept gradient if it is at ``W``, else None."""
        last = self._last_gradient
        if last is not None and last[0] == _point_key(W):
            return last[1]
        return None

    @property
    def last_gradient(self):
        """``(key, G W - rhs)``: the last gradient computed and the key of the ``W``
        it is at (:func:`_point_key`), or None."""
        return self._last_gradient

    @property
    def scale(self):
        """The stopping rule's scale: the largest group norm of the gradient at zero."""
        if self.kkt_scale is None:
            self.kkt_scale = kkt_scale(self.rhs, self.ext, self.lam_rho.size)
        return self.kkt_scale

    def restricted(self, idx, gram):
        """The problem on the features ``idx`` (the others held at zero), with their
        Gram block ``gram``: the same objective there, the same stopping-rule scale.
        Solves on more features than samples go through the design (Woodbury)."""
        labels = self.group[idx]
        pen = labels >= 0
        groups, compact = np.unique(labels[pen], return_inverse=True)
        sub_labels = np.full(idx.size, -1)
        sub_labels[pen] = compact
        nonneg = None if self.nonneg is None else self.nonneg[idx]
        rhs, rho = self.rhs[idx], self.rho[groups]
        if isinstance(self.curv, DesignCurvature):
            gram = (gram, self.curv.columns_solve(idx), self.curv.n)
        return GatedLeastSquares(
            gram, rhs, self.const, sub_labels, rho, self.lam, self.D, nonneg, self.scale
        )

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
        if not idx.size or idx.size * W.shape[1] > NEWTON_MAX_SIZE:
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

    def minimize(self, W, max_steps, tol, memory=5, patience=BLOCK_STEPS_PATIENCE, kkt_tol=None):
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
                # a polish that took no step returns W itself: its objective is f, not
                # f recomputed by the other formula of objective() (which may round
                # 1 ulp above and decide the tie below by rounding alone)
                if np.array_equal(W_pol, W):
                    f_pol, norms_pol = f, norms
                else:
                    f_pol, norms_pol = self.objective(W_pol)
                if not f_pol <= f:
                    # At the optimum the two objectives differ only by rounding (seen:
                    # 2e-15 relative, the polished point at KKT 1e-16, the steps' at
                    # 2.5e-9): keep the point that certifies the coefficients when its
                    # objective ties within the objective's rounding (64 eps relative).
                    ties = f_pol <= f + 64 * np.finfo(float).eps * abs(f)
                    if certify and ties and self.relative_kkt(W_pol) < self.relative_kkt(W):
                        W, f = W_pol, f_pol
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
        W_acc = anderson_extrapolation(history)
        if W_acc is None:
            return None
        W_acc = W_acc.reshape(-1, self.rhs.shape[1])
        dead = self._per_feature((norms_new == 0) & (self.rho > 0), False)
        W_acc[dead] = 0.0
        if self.nonneg is not None:
            W_acc[self.nonneg] = np.maximum(W_acc[self.nonneg], 0.0)
        return W_acc


def _point_key(W):
    """The key of a point ``W`` (:func:`~sksparse_nn.utils.digest.array_key` of its
    values, ``-0.0`` taken as ``0.0``, as ``np.array_equal`` has them): whether a kept
    gradient is at ``W`` is known without holding a copy of it."""
    return array_key(W + 0.0)
