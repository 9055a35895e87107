"""Binary logistic group lasso on dense ``X`` by working sets and proximal Newton steps."""

from __future__ import annotations

import numpy as np
import scipy.linalg.blas
import scipy.special

from ._lipschitz import BlockLipschitz
from ._penalties import ext_penalty, group_violations, kkt_setup
from ._working_set import gradient_ranked_working_set, inner_tolerance, ws_fista

_EPS = float(np.finfo(np.float64).eps)
# Zero groups with ||g_j|| >= this fraction of lam rho_j join the logistic working sets.
_NEAR_VIOLATION = 0.8
# Relative change of a sample's curvature p (1 - p) that triggers its Hessian update.
_HESSIAN_RTOL = 1e-2


# Entries of the columns (256 kB) weighted at a time for a Hessian: no weighted copy of a
# working set's columns, whatever its size (at least _ROWS_MIN rows a slice).
_HESSIAN_ENTRIES = 1 << 15
_ROWS_MIN = 32


def _row_slices(n_rows, width):
    """Slices of the rows, ``_HESSIAN_ENTRIES`` entries of ``width`` columns each."""
    step = max(_HESSIAN_ENTRIES // max(width, 1), _ROWS_MIN)
    return [slice(i, i + step) for i in range(0, n_rows, step)]


def _mirror_upper(U, chunk=128):
    """``U``'s upper triangle copied onto its lower one, in place, a column block at a
    time (no temporary of ``U``'s size)."""
    m = U.shape[0]
    for j in range(0, m, chunk):
        block = slice(j, j + chunk)
        D = U[block, block]
        D[...] = np.triu(D) + np.triu(D, 1).T
        U[j + chunk :, block] = U[block, j + chunk :].T
    return U


def _weighted_gram(A, d, n, out=None):
    """``A^T diag(d) A / n`` for ``d >= 0``, by symmetric rank-k updates (half a GEMM),
    the weighted rows formed ``_HESSIAN_ENTRIES`` entries at a time; written into
    ``out`` (a Fortran-ordered matrix of that shape) when given."""
    m = A.shape[1]
    if m <= 1:
        B = A * np.sqrt(d)[:, None]
        return B.T @ B / n
    if out is not None and out.shape == (m, m) and out.flags.f_contiguous:
        U = out
        U[...] = 0.0
    else:
        U = np.zeros((m, m), order="F")
    for part in _row_slices(A.shape[0], m):
        B = A[part] * np.sqrt(d[part])[:, None]
        U = scipy.linalg.blas.dsyrk(1.0 / n, B.T, beta=1.0, c=U, trans=0, overwrite_c=1)
    return _mirror_upper(U)


def _signed_gram(A, d, rows=None, out=None):
    """``A[rows]^T diag(d) A[rows]`` for any sign of ``d`` (a Hessian's update), a slice
    of rows at a time, accumulated by GEMM into ``out`` (in place; Fortran-ordered, or
    copied once) when given, else into a new matrix: no product of ``out``'s size."""
    m = A.shape[1]
    count = A.shape[0] if rows is None else rows.size
    out = np.zeros((m, m), order="F") if out is None else np.asfortranarray(out)
    gemm = scipy.linalg.blas.dgemm
    for part in _row_slices(count, m):
        B = A[part] if rows is None else A[rows[part]]
        Bd = B * d[part][:, None]
        # B^T Bd as (B^T)(Bd^T)^T: both operands Fortran-ordered views (no copies)
        out = gemm(1.0, B.T, Bd.T, beta=1.0, c=out, trans_b=1, overwrite_c=1)
    return out


def _curvature_gram(A, d, signed=False, rows=None, out=None):
    """``sum_i a_i a_i^T (x) d_i`` over the rows ``rows`` of ``A`` (all without them;
    ``d`` one entry per row taken): ``A^T diag(d) A`` for ``d`` of shape (n,), or for
    per-sample (w, w) curvatures ``d`` of shape (n, w, w) the Hessian in ``vec(V)``
    (row-major, (m w, m w)); the diagonal pairs by rank-k updates unless ``signed``
    (``d`` may then be negative: an update; with ``rows``). ``out``: a binary Hessian
    to overwrite (no second array of its size)."""

    def gram(weights, out=None):
        if signed:
            return _signed_gram(A, weights, rows)
        # a PSD curvature's diagonal, >= 0 up to rounding (seen: -3e-18)
        return _weighted_gram(A, np.maximum(weights, 0.0), 1.0, out)

    if d.ndim == 1:
        return gram(d, out)
    m, w = A.shape[1], d.shape[1]
    H = np.empty((m, w, m, w))
    for a in range(w):
        H[:, a, :, a] = gram(d[:, a, a])
        for b in range(a + 1, w):
            block = _signed_gram(A, d[:, a, b], rows)
            H[:, a, :, b] = block
            H[:, b, :, a] = block.T
    return H.reshape(m * w, m * w)


def update_hessian(A, d, H=None, d_model=None):
    """The logistic Hessian of dense columns ``A`` at sample curvatures ``d`` (weights of
    the mean included): ``A^T diag(d) A`` for ``d >= 0`` of shape (n,) (binary), or the
    multinomial Hessian in ``vec(V)`` for per-sample PSD (w, w) curvatures (see
    :func:`_curvature_gram`); returns ``(H, d_model)``, ``d_model`` the curvatures it
    was formed with.

    Formed once (``H`` None), then updated only on the samples whose curvature moved by
    more than ``_HESSIAN_RTOL`` relative (multinomial: of its largest diagonal entry)
    since: the model Hessian stays within that factor of the exact one in the PSD order
    (a linear rate of that size near the optimum), for a fraction of the cost once the
    steps are small. A binary ``H`` is updated in place (the callers keep no other
    reference to it).
    """
    if H is None:
        return _curvature_gram(A, d), d
    change = np.abs(d - d_model)
    if d.ndim == 1:
        moved = np.flatnonzero(change > _HESSIAN_RTOL * d)
    else:
        size = np.einsum("iaa->ia", d).max(axis=1)
        moved = np.flatnonzero(change.max(axis=(1, 2)) > _HESSIAN_RTOL * size)
    if moved.size > A.shape[0] // 2:
        return _curvature_gram(A, d, out=H if d.ndim == 1 else None), d
    if moved.size:
        delta = d[moved] - d_model[moved]
        if d.ndim == 1:  # in place: no second array of H's size
            H = _signed_gram(A, delta, moved, out=H)
        else:
            H = H + _curvature_gram(A, delta, signed=True, rows=moved)
        d_model = d_model.copy()
        d_model[moved] = d[moved]
    return H, d_model


def backtrack(x, z, f, d, Ad, delta, wn, y, penalty):
    """Damped step of a proximal Newton method on the binary mean log-loss plus
    ``penalty``: from ``x`` (scores ``z``, objective ``f``) along ``d`` (``Ad`` its
    scores), halving the step until the objective falls by a quarter of the model's
    predicted decrease ``delta`` times the step (as in *Proximal Newton-type methods for
    minimizing composite functions*).

    When ``-delta`` is below the objective's rounding the full step is taken unchecked
    and flagged (the caller judges it by the KKT violation). Returns ``(x, z, f,
    unchecked)`` of the accepted step, or None when 30 halvings did not decrease ``f``.
    """
    logaddexp = np.logaddexp
    t = 1.0
    for _ in range(30):
        zt = z + t * Ad
        xt = x + t * d
        ft = float(wn @ (logaddexp(0.0, zt) - y * zt)) + penalty(xt)
        if ft <= f + 0.25 * t * delta or ft <= f and t < 1e-6:
            return xt, zt, ft, False
        if t == 1.0 and -delta <= 64 * _EPS * max(abs(f), 1.0):
            return xt, zt, ft, True
        t *= 0.5
    return None


def logistic_ws_newton(design, lam, ext, rho_ext, x, tol, max_iter):
    """Binary logistic group lasso by working sets and proximal Newton steps (dense X).

    Outer loop as in :func:`_solve_ls` (full gradient, violations of all groups, working
    set = live and unpenalized groups plus the worst violators). Inner loop on the
    working set's columns ``A`` (with the rescaled constant column of the intercept): the
    quadratic model ``g^T d + d^T H d / 2`` with ``H = A^T diag(p (1 - p)) A / n`` plus the
    penalty is minimized by :func:`ws_fista` (its Newton steps included), and the step
    to that minimizer is damped by backtracking until the objective decreases by a
    fraction of the model's decrease (proximal Newton, as in *Proximal Newton-type
    methods for minimizing composite functions*). Returns ``(x, n_iter, relative kkt)``
    with the stopping rule of :func:`fista`, checked on all groups.
    """
    n_ext, lam_rho, scale, abs_tol = kkt_setup(design.c, ext, rho_ext, lam, tol)
    Xc, y = design._Xc, design.Y[:, 0]
    n, p = Xc.shape
    sw = design.sample_weight
    wn = np.full(n, 1.0 / n) if sw is None else sw / n  # the weights of the mean
    s = design.s
    free = rho_ext == 0
    lipschitz = BlockLipschitz()  # the Hessians change: only the eigenvector is reused
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
        viol, live = group_violations(x, g, ext, lam_rho, n_ext)
        kkt = float(viol.max())
        if kkt <= abs_tol or n_iter >= max_iter:
            break
        # the near violators join at once: fewer outer rounds, and Hessians
        idx, outside = gradient_ranked_working_set(
            ext, g, viol, live, free, lam_rho, abs_tol, _NEAR_VIOLATION
        )
        groups_ws, ext_ws = np.unique(ext[idx], return_inverse=True)
        lr = lam_rho[groups_ws]
        tol_in = inner_tolerance(abs_tol, outside, stalled)
        if tol_in is None:
            break
        A = columns(idx)
        xw = x[idx]
        z = A @ xw
        it_ws = 0
        H = d_model = None  # the Hessian and the sample curvatures it was formed with
        ext_nw = groups_ws.size

        def penalty(v, lr=lr, ext_ws=ext_ws, ext_nw=ext_nw):
            return ext_penalty(v, ext_ws, lr, ext_nw)

        f = float(wn @ (logaddexp(0.0, z) - y * z)) + penalty(xw)
        blind = None  # the point before a step the objective was too flat to check
        while n_iter + it_ws < max_iter:
            P = expit(z)
            gw = A.T @ (wn * (P - y))
            vw, _ = group_violations(xw, gw, ext_ws, lr, ext_nw)
            kkt_w = float(vw.max())
            if blind is not None and not kkt_w < blind[3]:
                xw, z, f = blind[:3]  # the unchecked step did not help: undo it, stop
                break
            blind = None
            if kkt_w <= tol_in:
                break
            H, d_model = update_hessian(A, wn * P * (1.0 - P), H, d_model)
            L = lipschitz(H)
            v, it, _, _ = ws_fista(
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
            step = backtrack(xw, z, f, d, A @ d, delta, wn, y, penalty)
            if step is None:
                break
            if step[3]:
                blind = (xw, z, f, kkt_w)
            xw, z, f = step[:3]
        n_iter += it_ws
        stalled = stalled + 1 if it_ws == 0 else 0
        x = np.zeros_like(x)
        x[idx] = xw
        z_full = z
    return x + 0.0, min(n_iter, max_iter), kkt / scale
