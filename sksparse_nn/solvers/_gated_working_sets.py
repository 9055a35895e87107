"""The working-set driver of the gated block steps (D = 2: certified on all groups): the
rounds shared by both losses (:func:`working_set_rounds`) and the least-squares steps'
solves of one set (:class:`WorkingSetSteps`, a mixin of :class:`GatedLeastSquares`: FISTA
on a set's Gram block, coordinate descent on its columns when it is wider than the
samples, whole-design steps while it does not fit the Gram cache)."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ._coordinate_descent import least_squares_cd, wide_set
from ._lipschitz import BlockLipschitz
from ._penalties import ext_norms
from ._working_set import working_set, ws_fista

__all__ = ["WorkingSetSteps", "working_set_rounds"]

# Most working-set rounds of one fit (each: a full gradient, then block steps on the set).
_WS_MAX_ROUNDS = 50
# Most inner proximal iterations on one working set.
_WS_PROXIMAL_MAX_ITER = 20000
# Most coordinate-descent sweeps on one working set wider than the samples.
_WS_CD_MAX_SWEEPS = 20000
# Whole-design block steps taken, on wide data, while a working set is too large for the
# Gram cache (after them the support has usually shrunk enough).
_WHOLE_DESIGN_STEPS = 10


def working_set_rounds(W, gradient, violations, solve_set, ext, lam_rho, abs_tol, near=None):
    """The D = 2 working-set rounds of the block steps (both losses).

    Each round takes the full gradient (``gradient(W)``) and every group's KKT violation
    (``violations(W, G) -> (viol, live)``, per stopping-rule group ``ext``); when the
    largest is at most ``abs_tol`` the point is certified on all groups. Otherwise the
    set is the live and free groups plus the worst violators
    (:func:`~sksparse_nn.solvers._working_set.working_set`; with ``near``, the zero groups
    with ``||G_j|| >= near lam rho_j`` too, ranked by that ratio), and
    ``solve_set(idx, W, tol_in) -> (W, n_steps, stop)`` solves the problem on its
    features to the absolute tolerance ``tol_in``, below the violation left outside
    (after two rounds without progress: half of ``abs_tol``). Returns ``(W, n_steps)``.
    """
    free = lam_rho == 0
    n_steps = stalled = 0
    for _ in range(_WS_MAX_ROUNDS):
        G = gradient(W)
        viol, live = violations(W, G)
        if viol.max(initial=0.0) <= abs_tol:
            break
        ratio = None
        if near is not None:
            norms = ext_norms(G, ext, lam_rho.size)
            ratio = np.full(lam_rho.size, -1.0)
            np.divide(norms, lam_rho, out=ratio, where=~(live | free) & (lam_rho > 0))
        idx, outside = working_set(ext, viol, live, free, abs_tol, ratio, near)
        del G, viol, live, ratio  # the round's vectors are not held through the solve
        tol_in = max(0.5 * abs_tol, 0.3 * outside) if stalled < 2 else 0.5 * abs_tol
        W_new, steps, stop = solve_set(idx, W, tol_in)
        n_steps += steps
        stalled = stalled + 1 if np.array_equal(W_new, W) else 0
        W = W_new
        if stop or stalled >= 4:
            break
    return W, n_steps


class WorkingSetSteps:
    """The working-set solves of :class:`GatedLeastSquares` (which supplies
    ``restricted``, ``minimize``, ``gradient``, ``group_violations``, ``relative_kkt``,
    ``objective``, ``norms`` and the problem's arrays)."""

    def proximal_finish(self, W, abs_tol, lipschitz=None, idx=None):
        """The D = 2 minimizer from ``W`` (one output) to the absolute KKT tolerance
        ``abs_tol``, by the reference solver's inner iterations (FISTA with restarts and
        Newton steps on the support, :func:`~sksparse_nn.solvers._working_set.ws_fista`)
        on this problem's Gram block: the convex problem the block steps also solve.
        ``lipschitz``: the :class:`~sksparse_nn.solvers._lipschitz.BlockLipschitz` of the
        sequence of blocks this one belongs to, ``idx`` its features there."""
        G = self.curv.gram
        if lipschitz is None:
            lipschitz = BlockLipschitz()
        L = lipschitz(G, idx, max(float(np.trace(G)), 1e-300))
        with warnings.catch_warnings():  # ill-conditioned Newton steps are checked there
            warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
            x, _, _, L = ws_fista(
                G,
                self.rhs[:, 0],
                self.lam_rho,
                self.ext,
                self.lam_rho.size,
                W[:, 0].copy(),
                L,
                abs_tol,
                _WS_PROXIMAL_MAX_ITER,
                self.nonneg is not None,
            )
        lipschitz.update(L)
        return x[:, None]

    def coordinate_finish(self, idx, W, abs_tol):
        """The D = 2 minimizer on the features ``idx`` (one output, from their values
        ``W``), the others held at zero, to the absolute KKT tolerance ``abs_tol``: block
        coordinate descent on the set's centred columns (``least_squares_cd`` of
        :mod:`sksparse_nn.solvers._coordinate_descent`). For a set wider than the
        samples, where the Gram block's Newton factorizations cost ``|set|^3``; needs the
        design (:class:`DesignCurvature`); None where its columns cannot be held
        (:meth:`DesignCurvature.set_columns`)."""
        groups, labels = np.unique(self.ext[idx], return_inverse=True)
        cols = self.curv.set_columns(idx, labels)
        if cols is None:
            return None
        positive = None if self.nonneg is None else self.nonneg[idx]
        x, _, _ = least_squares_cd(
            cols, self.rhs[idx, 0], W[:, 0], labels, self.lam_rho[groups], groups.size,
            abs_tol, _WS_CD_MAX_SWEEPS, positive,
        )  # fmt: skip
        return x[:, None]

    def minimize_working_sets(self, W, cache, max_steps, tol, kkt_tol=None):
        """:meth:`minimize` at the active set's cost: block steps on working sets of
        groups, their Gram blocks from ``cache`` (a :class:`GramCache` of this problem's
        design, a :class:`DesignCurvature`).

        D = 2: the rounds of :func:`working_set_rounds` (shared with the logistic
        model); the problem on a set is solved with one output by :meth:`proximal_finish`
        alone (block steps before it cost a solve each and bought nothing once its
        Newton steps handle nearly singular sets), else by up to ``max_steps`` block
        steps per set.
        D > 2: zero groups are stationary (their factors get no gradient), so one run
        on the live groups is the whole-design run at the live set's cost. A set too
        large for the cache gets whole-design steps (Woodbury solves) until the support
        has shrunk.

        Returns ``(W, objective, n_steps)`` as :meth:`minimize`.
        """
        certify = kkt_tol is not None and self.D == 2
        whole = [False]  # whether the last solve_set took whole-design steps

        def solve_set(idx, W, tol_in):
            """Block steps on the set ``idx``: ``(W, n_steps, stop)``."""
            wide = wide_set(idx.size, self.curv.entries) or idx.size > cache.max_features
            if certify and W.shape[1] == 1 and wide and self.curv.holds_set_columns:
                # columns sparser than the Gram block (a set too large for the cache
                # always is, at most sqrt(n p) >= n features): coordinate descent on
                # them, and the cached Gram blocks dropped (a path's sets grow: the
                # next ones are as wide; memory for the columns instead)
                cache.keep(idx[:0])
                x = self.coordinate_finish(idx, W[idx], tol_in)
                if x is not None:  # None: sparse X with sample weights (Gram route)
                    W_new = np.zeros_like(W)
                    W_new[idx] = x
                    return W_new, 0, False
            if not cache.cacheable(idx) and idx.size <= cache.max_features:
                cache.keep(idx)  # make room: drop the blocks of features left behind
            whole[0] = not cache.cacheable(idx)
            if whole[0]:
                W, _, steps = self.minimize(W, _WHOLE_DESIGN_STEPS, tol, kkt_tol=kkt_tol)
                # converged, or stalled, on the whole design
                return W, steps, steps < _WHOLE_DESIGN_STEPS
            sub = self.restricted(idx, cache.block(idx))
            inner = tol_in / self.scale if certify else None
            if certify and W.shape[1] == 1:
                W_ws, steps = W[idx], 0
                if sub.relative_kkt(W_ws) > inner:
                    W_ws = sub.proximal_finish(W_ws, tol_in, cache.lipschitz, idx)
            else:
                W_ws, _, steps = sub.minimize(W[idx], max_steps, tol, kkt_tol=inner)
            W = np.zeros_like(W)
            W[idx] = W_ws
            return W, steps, False

        if certify:
            W, n_steps = working_set_rounds(
                W,
                self.gradient,
                self.group_violations,
                solve_set,
                self.ext,
                self.lam_rho,
                kkt_tol * self.scale,
            )
        else:
            n_steps = 0
            for _ in range(_WS_MAX_ROUNDS):  # the live set, once it fits in the cache
                live = np.flatnonzero(self._per_feature(self.norms(W) > 0, True))
                W, steps, stop = solve_set(live, W, None)
                n_steps += steps
                if stop or not whole[0]:
                    break
        return W, self.objective(W)[0], n_steps
