"""Proximal-Newton steps on the D-gated logistic objective (pure numpy): the quadratic
models are minimized by :class:`GatedLeastSquares`' exact block steps, on working sets of
groups when the data are wide (:class:`GatedLogisticProblem`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, logsumexp

from ..groups import penalty_value
from ._coordinate_descent import SparseColumns, solve_set_cd
from ._gated_least_squares import GatedLeastSquares
from ._gated_setup import BLOCK_STEPS_PATIENCE, BLOCK_STEPS_TOL, NEWTON_MAX_SIZE
from ._gated_working_sets import working_set_rounds
from ._lipschitz import BlockLipschitz
from ._logistic_newton import _signed_gram, update_hessian

__all__ = ["GatedLogistic", "GatedLogisticProblem"]

# Entries of the design (0.5 MB) copied at a time into a working set's matrix.
_COPY_ENTRIES = 1 << 16
# Most coordinate-descent sweeps and Newton steps on one sparse working set.
_CD_MAX_ITER = 20000


class _Groups:
    """What the group arithmetic of :class:`GatedLeastSquares` needs of a curvature: it
    is used here for group norms and KKT violations only."""

    mean_diagonal = 1.0


def _group_shape(labels, rho, lam, D, nonneg, scale=None):
    """The groups, norms and stopping rule of a problem (no curvature)."""
    return GatedLeastSquares(_Groups(), None, 0.0, labels, rho, lam, D, nonneg, scale)


def _targets(codes, n_outputs):
    """``(C, Q)``: class codes as a column (binary) or one-hot rows, and an orthonormal
    basis ``Q`` of the coefficients' free directions (the zero-sum vectors, multiclass)."""
    if n_outputs == 1:
        return codes.astype(np.float64)[:, None], np.ones((1, 1))
    centred = np.eye(n_outputs) - 1.0 / n_outputs
    return np.eye(n_outputs)[codes], np.linalg.qr(centred[:, :-1])[0]


def _log_loss(Z, C, s):
    """Mean log-loss of the scores ``Z``, the weighted residuals ``P - C`` and ``P``."""
    if Z.shape[1] == 1:
        z = Z[:, 0]
        per_sample = np.logaddexp(0.0, z) - C[:, 0] * z
        P = expit(z)[:, None]
    else:
        lse = logsumexp(Z, axis=1)
        per_sample = lse - (C * Z).sum(axis=1)
        P = np.exp(Z - lse[:, None])
    R = P - C
    if s is not None:
        per_sample, R = per_sample * s, R * s[:, None]
    return float(np.mean(per_sample)), R, P


class GatedLogistic:
    r"""Proximal-Newton steps on the D-gated logistic objective of a prepared design.

    ``A`` (dense or sparse, (n, m)) holds the columns the steps work on: centred
    features and, with an intercept, a column of ones (label -1, unpenalized); ``C`` and
    ``Q`` come from :func:`_targets`. Each outer step replaces the mean log-loss at
    ``V`` by a quadratic model and hands it, with the penalty, to
    :class:`GatedLeastSquares`, whose exact block steps (with the revival of KKT-violating
    zero groups at ``D = 2``) minimize the model; at ``D = 2`` with one column and no
    constraint the reference solver's inner iterations solve the model instead
    (:meth:`GatedLeastSquares.proximal_finish`), to a tolerance that shrinks with the
    violation (an inexact proximal Newton method). A step first tries the true
    Hessian (binary ``A^T diag(p (1 - p)) A / n``, updated only on the samples whose
    curvature moved; multiclass only up to ``NEWTON_MAX_SIZE`` coefficients); when that
    does not lower the objective, the model uses Böhning's bound (``A^T A / (4n)``
    binary, ``A^T A / (2n)`` per class multinomial), which majorizes the loss, so the
    step is a majorize-minimize step and the objective decreases. At ``D = 2`` the
    problem is convex and the steps stop when the relative KKT violation (largest
    distance of ``-grad`` to the penalty's subdifferential, over groups, divided by
    ``kkt_scale``) is below ``tol``.

    Multinomial coefficients ``W`` (one column per class) are only defined up to a
    constant per row, along which the loss is flat; the penalty picks rows that sum to
    zero. The steps therefore work in ``V = W Q`` with ``Q`` an orthonormal basis of the
    zero-sum vectors (``W = V Q^T``, group norms unchanged), where Böhning's bound is
    ``A^T A / (2n)`` for every column and the loss has no flat direction.
    """

    def __init__(self, A, C, Q, labels, rho, lam, D, sample_weight, nonneg, kkt_scale):
        self.X, self.n, self.C, self.Q = A, A.shape[0], C, Q
        self.k = 1 if Q.shape == (1, 1) else Q.shape[0]
        self.s = sample_weight  # mean 1, or None
        self.labels, self.rho, self.lam, self.D = labels, rho, lam, D
        self.nonneg = None if nonneg is None or not np.any(nonneg) else nonneg
        self.shape = _group_shape(labels, rho, lam, D, self.nonneg)
        self.kkt_scale = kkt_scale
        self._bound = None
        self._hess = (None, None)  # (Hessian, sample curvatures it was formed with)
        self._lipschitz = BlockLipschitz()  # of the successive models' curvatures

    @property
    def bound(self):
        """Böhning's bound (formed on first use: the Hessian usually serves)."""
        if self._bound is None:
            self._bound = self._weighted_gram(None) * (0.25 if self.k == 1 else 0.5)
        return self._bound

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
        if weights is None:
            return X.T @ X / self.n
        return _signed_gram(X, weights) / self.n  # no weighted copy of X

    def loss_grad(self, V):
        """Mean log-loss, its gradient in ``V`` and the class probabilities."""
        loss, R, P = _log_loss(np.asarray(self.X @ self.to_full(V)), self.C, self.s)
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
        ``X^T diag(p (1 - p)) X / n`` (dense: updated on the samples that moved). Binary
        Hessians have the size of Böhning's bound, which the steps use otherwise: no
        limit; multinomial ones (``K - 1`` times larger per side) up to
        ``NEWTON_MAX_SIZE`` coefficients.
        """
        width = self.Q.shape[1]
        if self.k > 1 and self.X.shape[1] * width > NEWTON_MAX_SIZE:
            return None
        if self.k == 1:
            d = P[:, 0] * (1.0 - P[:, 0])
        else:
            d = np.einsum("ik,ka,kb->iab", P, self.Q, self.Q)  # Q^T diag(p_i) Q
            PQ = P @ self.Q
            d -= PQ[:, :, None] * PQ[:, None, :]
        weight = np.full(self.n, 1.0 / self.n) if self.s is None else self.s / self.n
        d = d * weight.reshape(-1, *[1] * (d.ndim - 1))  # the weights of the mean
        if not sp.issparse(self.X):
            self._hess = update_hessian(self.X, d, *self._hess)
            return self._hess[0]
        # sparse: one weighted Gram matrix per pair of reduced classes
        X = self.X
        if self.k == 1:
            return np.asarray((X.T @ sp.diags(d) @ X).todense())
        p = X.shape[1]
        H = np.empty((p, width, p, width))
        for a in range(width):
            for b in range(a, width):
                block = np.asarray((X.T @ sp.diags(d[:, a, b]) @ X).todense())
                H[:, a, :, b] = block
                H[:, b, :, a] = block
        return H.reshape(p * width, p * width)

    def _model_step(self, V, loss, G, H, inner_steps, inner_tol):
        """Minimize the quadratic model of the loss at ``V`` plus the penalty.

        ``H`` is either a (p, p) curvature shared by every column of ``V`` (Böhning's
        bound) or the Hessian in ``vec(V)``; the latter is solved as one column whose
        entries carry their feature's group label. ``inner_tol``: the model's relative
        KKT tolerance (D = 2).
        """
        shape, labels = V.shape, self.labels
        if H.shape[0] != V.shape[0]:  # vec form
            V, G = V.reshape(-1, 1), G.reshape(-1, 1)
            labels = np.repeat(labels, shape[1])
        const = loss - float((G * V).sum()) + 0.5 * float((V * (H @ V)).sum())
        model = GatedLeastSquares(
            H, H @ V - G, const, labels, self.rho, self.lam, self.D, self.nonneg, self.kkt_scale
        )
        if self.D > 2:  # until the model's objective settles
            return model.minimize(V, inner_steps, BLOCK_STEPS_TOL)[0].reshape(shape)
        # D = 2: one column without constraints: the reference solver's inner iterations
        # (as the regressor's working sets); else block steps
        if V.shape[1] == 1 and self.nonneg is None:
            if model.relative_kkt(V) <= inner_tol:
                return V.reshape(shape)
            V = model.proximal_finish(V, inner_tol * self.kkt_scale, self._lipschitz)
            return V.reshape(shape)
        V_new, _, _ = model.minimize(V, inner_steps, BLOCK_STEPS_TOL, kkt_tol=inner_tol)
        return V_new.reshape(shape)

    def _backtrack(self, W, V, f, max_halvings=30):
        """The first of ``W + t (V - W)``, ``t = 1/2, 1/4, ...``, whose objective is below
        ``f``: ``(V_t, loss, gradient, probabilities, objective)``, or Nones. The model's
        minimizer ``V`` lowers the model (a convex one at D = 2), so its direction is a
        descent direction of the objective and a small enough step lowers it."""
        D = V - W
        t = 0.5
        for _ in range(max_halvings):
            V_t = W + t * D
            loss, G, P = self.loss_grad(V_t)
            f_t = self.objective(V_t, loss)
            if f_t < f:
                return V_t, loss, G, P, f_t
            t *= 0.5
        return None, None, None, None, None

    def minimize(self, W, max_steps, tol, inner_steps=20, patience=BLOCK_STEPS_PATIENCE):
        """Outer steps from ``W`` (shape (m, k)); returns ``(W, objective, n_steps)``.

        D = 2: until the relative KKT violation is at most ``tol``; each model is solved
        to ``max(kkt min(0.1, kkt), tol / 4)`` (relative): loosely far from the solution,
        superlinearly tighter near it.
        """
        loss, G, P = self.loss_grad(W)
        f = self.objective(W, loss)
        n_steps = slow = 0
        for n_steps in range(1, max_steps + 1):  # noqa: B007 (used after the loop)
            kkt = self.kkt(W, G) if self.D == 2 else None
            if self.D == 2 and kkt <= tol:
                break
            inner_tol = None if kkt is None else max(kkt * min(0.1, kkt), 0.25 * tol)
            accepted = False
            for use_bound in (False, True):  # the Hessian first, else Böhning's bound
                H = self.bound if use_bound else self._hessian(P)
                if H is None:
                    continue
                V = self._model_step(W, loss, G, H, inner_steps, inner_tol)
                loss_new, G_new, P_new = self.loss_grad(V)
                f_new = self.objective(V, loss_new)
                # near the solution a step changes the objective by ~ KKT^2, below its
                # rounding: there a smaller KKT violation decides (D = 2)
                flat = self.D == 2 and f_new <= f + 1e-13 * abs(f)
                accepted = f_new < f or (flat and self.kkt(V, G_new) < kkt)
                if not accepted and not use_bound:
                    # the Newton model overshoots (far from the solution, nearly
                    # separable data): back along its direction
                    V, loss_new, G_new, P_new, f_new = self._backtrack(W, V, f)
                    accepted = V is not None
                if accepted:
                    break
            if not accepted:
                break  # no decrease from either model: converged to rounding
            decrease = f - f_new
            W, f, loss, G, P = V, f_new, loss_new, G_new, P_new
            slow = slow + 1 if decrease <= BLOCK_STEPS_TOL * abs(f) else 0
            if self.D > 2 and slow >= patience:
                break
        self.gradient = G
        return W, f, n_steps


class GatedLogisticProblem:
    r"""The D-gated logistic objective on the user's data: the classifiers' block steps.

    ``X`` (dense or sparse) is never copied as a whole: with an intercept, dense columns
    are centred implicitly (``X_c = X - 1 m^T``, ``m`` the weighted column means; the
    intercept absorbs the means, else a column far from zero is nearly parallel to the
    intercept's column of ones) and sparse ones are not centred. The variable is ``V``,
    of shape (p [+ 1], k): the coefficients in the reduced class coordinates of
    :class:`GatedLogistic` and, with an intercept, the intercept of the centred columns
    as a last, unpenalized row.

    :meth:`minimize` hands a set of columns to :class:`GatedLogistic`: all of them on
    narrow data, else (``working_sets``) the working sets of
    :func:`~sksparse_nn.estimators._gated_least_squares.working_set_rounds` at D = 2
    (the live and unpenalized groups plus the worst KKT violators of the full gradient;
    unlike the reference solver's logistic sets, no zero groups that only come near
    violating: a set's models cost dense solves of its size, so a smaller set saves more
    than the extra rounds cost), whose block steps then cost what the active set
    costs; at D > 2 the live groups only (zero groups are stationary). A set's columns
    are copied once (at most the columns of ``X``: one extra copy). The stopping rule
    is the reference solver's (:mod:`sksparse_nn.solvers`): the relative KKT violation
    on all groups, scaled by the largest group norm of the gradient at the null model
    (zero coefficients, the intercept fitted).
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
        by_columns=None,
    ):
        n, p = X.shape
        self.X, self.n, self.p, self.k = X, n, p, n_outputs
        # X as working sets read their columns (sparse: CSC), products use X itself
        self.X_cols = X if by_columns is None else by_columns
        self.s = sample_weight  # mean 1, or None
        self.fit_intercept = fit_intercept
        self.x_mean = None
        if fit_intercept and not sp.issparse(X):
            self.x_mean = X.mean(axis=0) if self.s is None else self.s @ X / n
        self.C, self.Q = _targets(codes, n_outputs)
        self.labels = np.append(labels, -1) if fit_intercept else labels
        self.rho, self.lam, self.D = rho, lam, D
        # binary only (the caller checks): V = W, the intercept's row stays free
        self.nonneg = None
        if positive:
            self.nonneg = np.arange(self.labels.size) < p
        # the stopping rule's scale: -grad at the null model (class frequencies with an
        # intercept, uniform probabilities without)
        if fit_intercept:
            freq = self.C.mean(axis=0) if self.s is None else self.s @ self.C / n
        else:
            freq = np.full(self.C.shape[1], 0.5 if n_outputs == 1 else 1.0 / n_outputs)
        R0 = freq - self.C
        if self.s is not None:
            R0 = R0 * self.s[:, None]
        shape = _group_shape(self.labels, rho, lam, D, self.nonneg)
        G0 = self._gradient(R0)
        self.kkt_scale = max(float(shape.norms(G0).max(initial=0.0)), 1e-300)
        self.shape = _group_shape(self.labels, rho, lam, D, self.nonneg, self.kkt_scale)
        self._last_loss_grad = None  # (V, loss, gradient) of the last loss_grad call

    def to_reduced(self, W):
        """``V = W Q``: drops the flat direction (never raises the penalty)."""
        return W @ self.Q

    def to_full(self, V):
        return V @ self.Q.T

    def _scores(self, V):
        """``X_c W + b``, shape (n, K), using only the columns of the live rows."""
        W = self.to_full(V)
        Wx = W[: self.p]
        nz = np.flatnonzero(np.any(Wx != 0, axis=1))
        if sp.issparse(self.X) or 4 * nz.size >= self.p:
            Z = np.asarray(self.X @ Wx)
        else:
            Z = self.X[:, nz] @ Wx[nz]
        if self.x_mean is not None:
            Z -= self.x_mean[nz] @ Wx[nz]
        if self.fit_intercept:
            Z += W[self.p]
        return Z

    def _gradient(self, R):
        """The gradient in ``V`` for the weighted residuals ``R`` (n, K)."""
        G = np.asarray(self.X.T @ R)
        total = R.sum(axis=0)
        if self.x_mean is not None:
            G -= np.outer(self.x_mean, total)
        if self.fit_intercept:
            G = np.vstack([G, total])
        return G @ self.Q / self.n

    def loss_grad(self, V):
        """Mean log-loss and its gradient in ``V`` (the last point's kept: the rounds'
        final gradient, which certified it, is the one the fit reports)."""
        last = self._last_loss_grad
        if last is not None and np.array_equal(last[0], V):
            return last[1], last[2]
        loss, R, _ = _log_loss(self._scores(V), self.C, self.s)
        G = self._gradient(R)
        self._last_loss_grad = (V.copy(), loss, G)
        return loss, G

    def objective(self, V):
        return self.loss_grad(V)[0] + self.lam * penalty_value(
            self.shape.norms(V), self.rho, self.D
        )

    def kkt(self, V, G):
        """Relative KKT violation of the D = 2 (convex) problem."""
        return self.shape.kkt_violation(V, G) / self.kkt_scale

    def _columns(self, idx):
        """The matrix of the columns ``idx`` (``p``: the intercept's ones), centred."""
        feats = idx[idx < self.p]
        ones = feats.size < idx.size
        if sp.issparse(self.X):
            A = self.X_cols[:, feats]
            return sp.hstack([A, np.ones((self.n, 1))], format="csr") if ones else A.tocsr()
        A = np.empty((self.n, idx.size))
        step = max(_COPY_ENTRIES // max(self.n, 1), 1)
        for start in range(0, feats.size, step):  # no temporary of the set's size
            cols = feats[start : start + step]
            part = slice(start, start + cols.size)
            A[:, part] = self.X_cols[:, cols]
            if self.x_mean is not None:
                A[:, part] -= self.x_mean[cols]
        if ones:
            A[:, -1] = 1.0
        return A

    def restricted(self, idx):
        """The problem on the columns ``idx`` (the others held at zero): the same
        objective there, the same stopping-rule scale."""
        labels = self.shape.group[idx]
        pen = labels >= 0
        groups, compact = np.unique(labels[pen], return_inverse=True)
        sub_labels = np.full(idx.size, -1)
        sub_labels[pen] = compact
        nonneg = None if self.nonneg is None else self.nonneg[idx]
        return GatedLogistic(
            self._columns(idx),
            self.C,
            self.Q,
            sub_labels,
            self.rho[groups],
            self.lam,
            self.D,
            self.s,
            nonneg,
            self.kkt_scale,
        )

    @property
    def _sparse_cd(self):
        """Whether working sets are solved by coordinate descent on their sparse columns
        (binary, D = 2, sparse X): no Hessian of the set is formed."""
        return sp.issparse(self.X) and self.k == 1 and self.D == 2

    def _solve_set_cd(self, idx, V, tol_in):
        """The D = 2 problem on the features ``idx`` (sparse X, binary) to the absolute
        KKT tolerance ``tol_in``, by :func:`~sksparse_nn.solvers._coordinate_descent.solve_set_cd`
        on the set's CSC columns (the intercept's column of ones implicit); the steps
        counted are its Newton steps (its models, as :class:`GatedLogistic`'s)."""
        groups, ext_ws = np.unique(self.shape.ext[idx], return_inverse=True)
        feats = idx[idx < self.p]
        const = 1.0 if feats.size < idx.size else None
        cols = SparseColumns(self.X_cols, feats, ext_ws, None, const)
        wn = np.full(self.n, 1.0 / self.n) if self.s is None else self.s / self.n
        x, _, _, _, steps = solve_set_cd(
            cols, self.C[:, 0], wn, V[idx, 0], ext_ws, self.shape.lam_rho[groups], groups.size,
            tol_in, self.kkt_scale, _CD_MAX_ITER,
            None if self.nonneg is None else self.nonneg[idx],
        )  # fmt: skip
        V = np.zeros_like(V)
        V[idx, 0] = x
        return V, steps, False

    def minimize(self, V, max_steps, tol, working_sets=False):
        """Block steps from ``V``; returns ``(V, objective, n_steps)``.

        D = 2: until the relative KKT violation on all groups is at most ``tol``.
        ``self.gradient`` is the full gradient at the result.
        """

        def solve_set(idx, V, tol_in):
            if self._sparse_cd and tol_in is not None:
                return self._solve_set_cd(idx, V, tol_in)
            sub = self.restricted(idx)
            rel = tol if tol_in is None else tol_in / self.kkt_scale
            V_ws, _, steps = sub.minimize(V[idx], max_steps, rel)
            V = np.zeros_like(V)
            V[idx] = V_ws
            return V, steps, False

        everything = np.arange(self.labels.size)
        if not working_sets:
            V, _, n_steps = solve_set(everything, V, None)
        elif self.D == 2:
            V, n_steps = working_set_rounds(
                V,
                lambda V: self.loss_grad(V)[1],
                self.shape.group_violations,
                solve_set,
                self.shape.ext,
                self.shape.lam_rho,
                tol * self.kkt_scale,
            )
        else:  # zero groups are stationary: the live groups only
            live = self.shape._per_feature(self.shape.norms(V) > 0, True)
            V, _, n_steps = solve_set(np.flatnonzero(live), V, None)
        loss, self.gradient = self.loss_grad(V)
        f = loss + self.lam * penalty_value(self.shape.norms(V), self.rho, self.D)
        return V, f, n_steps
