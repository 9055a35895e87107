"""Working sets of both losses: the choice of the next set, and FISTA with Newton steps on
its Gram block (the inner solver)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..groups import same_group_pairs
from ._penalties import ext_norms, ext_penalty, group_violations
from ._proximal import fista_steps

# Smallest working set, in groups.
_WS_MIN_GROUPS = 10
# Halvings of a Newton step before it is given up (the objective did not decrease).
_NEWTON_HALVINGS = 10


def working_set(ext, viol, live, free, abs_tol, ratio=None, near=None):
    """Features of the next working set, and the largest violation left outside it.

    The set holds the live and the unpenalized (``free``) groups, plus the violators
    (``viol > abs_tol``) among the ``max(_WS_MIN_GROUPS, live penalized groups)`` other
    groups of largest ``viol``. With ``ratio`` (one value per group, ``-1`` for the kept
    ones), those groups are the ones of largest ``ratio`` instead, and the groups among
    them with ``ratio >= near`` join too.
    """
    n_ext = viol.shape[0]
    keep = live | free
    n_live = int(np.count_nonzero(live & ~free))
    out = np.where(keep, -1.0, viol)
    rank = out if ratio is None else ratio
    n_add = max(_WS_MIN_GROUPS, n_live)
    if n_add < n_ext:
        top = np.argpartition(rank, n_ext - n_add - 1)
        add = top[n_ext - n_add :]
        rest = out[top[: n_ext - n_add]]
        outside = float(rest.max()) if rest.size else 0.0
    else:
        add = np.arange(n_ext)
        outside = 0.0
    chosen = out[add] > abs_tol
    if ratio is not None:
        chosen |= ratio[add] >= near
    in_ws = keep.copy()
    in_ws[add[chosen]] = True
    return np.flatnonzero(in_ws[ext]), outside


def gradient_ranked_working_set(ext, g, viol, live, free, lam_rho, abs_tol, near):
    """:func:`working_set` with the zero groups ranked by ``||g_j|| / (lam rho_j)``: the
    violators, and next the groups close to violating (the support moves as the set is
    solved; taking the near ones at once saves the outer rounds that would add them)."""
    n_ext = viol.shape[0]
    gn = ext_norms(g, ext, n_ext)
    ratio = np.full(n_ext, -1.0)
    np.divide(gn, lam_rho, out=ratio, where=~(live | free) & (lam_rho > 0))
    return working_set(ext, viol, live, free, abs_tol, ratio, near)


def inner_tolerance(abs_tol, outside, stalled):
    """Absolute KKT tolerance of a working set's inner solve: a fraction of the largest
    violation left outside the set (no tighter than half the outer one), the outer one
    once two rounds ran no inner iteration, and None (stop) after four such rounds."""
    if stalled >= 4:
        return None
    if stalled >= 2:
        return 0.5 * abs_tol
    return max(0.5 * abs_tol, 0.3 * outside)


def _gram_forward(G, c, L):
    """``y -> y - (G y - c) / L``, the gradient step on the block (``G`` read as it is:
    no scaled copy of the block)."""
    inv_l, cs = 1.0 / L, c / L

    def forward(y):
        Gy = G @ y
        Gy *= inv_l
        return y - Gy + cs

    return forward


def _newton_support(G, c, lam_rho, ext, n_ext, x, positive, kkt, tol_in, max_steps):
    """Newton steps on the smooth problem of the current support (restricted block).

    On its live groups the objective ``w^T G w / 2 - c^T w + sum lam rho_j ||w_j||`` is
    smooth, with gradient ``G w - c + lam rho_j w_j / ||w_j||`` and Hessian ``G +
    blockdiag(lam rho_j (I - u_j u_j^T) / ||w_j||)`` (``u_j = w_j / ||w_j||``). Under
    ``positive`` the support is the positive coordinates. A group that a step turns
    through zero (a coordinate, under ``positive``) is set to zero instead: the support
    shrinks. Steps are halved until the objective decreases (on a nearly singular block
    the full step can overshoot along the flat directions, where the objective still
    falls but the KKT violation first rises); where the objective no longer resolves
    progress (a rounding-level change) a smaller KKT violation decides.

    Returns ``(x, kkt, n_steps, viol)`` (``viol`` the per-group violations at ``x``, or
    None if no step was taken).
    """
    viol = None
    steps = 0
    g = G @ x - c
    f = _block_objective(x, g, c, lam_rho, ext, n_ext)
    flat = 64 * np.finfo(np.float64).eps
    for steps in range(1, max_steps + 1):  # noqa: B007
        nw = ext_norms(x, ext, n_ext)
        S = np.flatnonzero(x > 0) if positive else np.flatnonzero(nw[ext] > 0)
        if S.size == 0:
            return x, kkt, steps - 1, viol
        eS = ext[S]
        xS = x[S]
        nS = nw[eS]
        a = lam_rho[eS] / nS
        u = xS / nS
        # G[S, S] in Fortran order, factorized in place: no second copy in the solve
        H = G.T[np.ix_(S, S)].T
        F = g[S] + a * xS
        rows, cols = same_group_pairs(eS)
        H[rows, cols] -= a[rows] * u[rows] * u[cols]
        H.flat[:: S.size + 1] += a
        try:
            d = scipy.linalg.solve(H, F, assume_a="pos", check_finite=False, overwrite_a=True)
        except (np.linalg.LinAlgError, ValueError):
            return x, kkt, steps - 1, viol
        if not np.all(np.isfinite(d)):
            return x, kkt, steps - 1, viol
        for _ in range(_NEWTON_HALVINGS):
            xn_S = xS - d
            if positive:
                xn_S[xn_S <= 0] = 0.0
            else:
                xn_S[np.bincount(eS, weights=xS * xn_S, minlength=n_ext)[eS] <= 0] = 0.0
            xn = x.copy()
            xn[S] = xn_S
            gn = G @ xn - c
            fn = _block_objective(xn, gn, c, lam_rho, ext, n_ext)
            if fn < f - flat * abs(f):
                break
            if fn <= f + flat * abs(f):  # no resolvable change: the KKT violation decides
                vn, _ = group_violations(xn, gn, ext, lam_rho, n_ext, positive)
                if float(vn.max()) < kkt:
                    break
            d = 0.5 * d
        else:
            return x, kkt, steps - 1, viol
        vn, _ = group_violations(xn, gn, ext, lam_rho, n_ext, positive)
        x, g, f, kkt, viol = xn, gn, fn, float(vn.max()), vn
        if kkt <= tol_in:
            break
    return x, kkt, steps, viol


def _block_objective(x, g, c, lam_rho, ext, n_ext):
    """``x^T G x / 2 - c^T x + sum_j lam rho_j ||x_j||`` from the gradient ``g = G x -
    c`` (no second product with ``G``)."""
    return 0.5 * float(x @ (g - c)) + ext_penalty(x, ext, lam_rho, n_ext)


def ws_fista(G, c, lam_rho, ext, n_ext, x, L, tol_in, max_iter, positive, check_every=10):
    """FISTA with restart on a restricted block (Gram form), with Newton acceleration.

    Every ``check_every`` iterations the KKT violation of the block is evaluated; when the
    support has not changed since the previous check, Newton steps on it are tried
    (:func:`_newton_support`). The curvature of the iterates' displacement between two
    checks is compared with ``L``; a larger one raises ``L`` (``L`` from power iterations
    may be slightly low). Returns ``(x, n_iter, kkt, L)``.
    """
    viol, live = group_violations(x, G @ x - c, ext, lam_rho, n_ext, positive)
    kkt = float(viol.max())
    n_iter = 0
    if kkt <= tol_in:
        return x, n_iter, kkt, L
    x_chk, g_chk = x, None
    forward = _gram_forward(G, c, L)
    thr = lam_rho / L
    y, t = x, 1.0
    prev_live = live
    newton_ok = True
    while n_iter < max_iter:
        steps = min(check_every, max_iter - n_iter)
        x, y, t = fista_steps(forward, x, y, t, steps, ext, n_ext, thr, positive)
        n_iter += steps
        g = G @ x - c
        viol, live = group_violations(x, g, ext, lam_rho, n_ext, positive)
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
                    forward = _gram_forward(G, c, L)
                    thr = lam_rho / L
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
