"""FISTA with adaptive restart: its iterations (shared by the working sets) and plain FISTA
on a whole design (least squares or logistic); Anderson extrapolation of fixed-point
iterates (the block steps of the gated models, coordinate descent on sparse X)."""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np

from ._penalties import kkt_setup, kkt_violation
from ._threads import single_blas_thread


def anderson_weights(history):
    """Affine weights ``a`` (summing to one) of Anderson extrapolation from the last
    steps of a fixed-point iteration ``[(before, after), ...]`` (arrays of any one shape):
    ``sum_i a_i after_i`` is the combination whose residuals ``after - before``
    extrapolate to zero in least squares. Anything affine in the iterate (a residual
    ``X w``, say) extrapolates with the same weights. None when they are not finite or
    the residuals' differences are linearly dependent.

    The least squares (a few unknowns) are solved by their normal equations, as in
    *Anderson acceleration of coordinate descent*: the extrapolation is a candidate the
    caller keeps only if its objective falls, so the squared conditioning costs nothing
    but a rejected candidate."""
    m = len(history)
    residuals = np.empty((np.size(history[0][1]), m))
    for i, (before, after) in enumerate(history):
        np.subtract(np.ravel(after), np.ravel(before), out=residuals[:, i])
    dres = np.diff(residuals, axis=1)
    try:
        coef = np.linalg.solve(dres.T @ dres, dres.T @ residuals[:, -1])
    except np.linalg.LinAlgError:
        return None
    # steps[:, -1] - diff(steps) @ coef, written as weights on the steps
    a = np.zeros(m)
    a[-1] = 1.0
    a[:-1] += coef
    a[1:] -= coef
    return a if np.all(np.isfinite(a)) else None


def anderson_extrapolation(history):
    """Anderson extrapolation of a fixed-point iteration from its last steps
    ``[(before, after), ...]`` (see :func:`anderson_weights`), flat; None when that is
    not finite (the caller keeps it only if its objective falls)."""
    a = anderson_weights(history)
    if a is None:
        return None
    out = np.array([np.ravel(after) for _, after in history]).T @ a
    return out if np.all(np.isfinite(out)) else None


def start_coef(w0, p, positive):
    """Starting point of shape ``(p,)``: a copy of ``w0`` (zeros if None), its positive
    part under ``positive``."""
    x = np.zeros(p) if w0 is None else np.array(w0, dtype=np.float64).reshape(-1)
    if x.shape != (p,):
        raise ValueError(f"w0 must have shape ({p},), got {x.shape}.")
    if positive:
        x = np.maximum(x, 0.0)
    return x


def fista_steps(forward, x, y, t, n_steps, ext, n_ext, thr, positive):
    """``n_steps`` FISTA iterations with gradient-based adaptive restart from ``(x, y, t)``.

    Each is the gradient step ``v = forward(y)`` (step ``1/L``), its positive part under
    ``positive``, block soft-thresholding by ``thr`` (``lam rho_j / L`` per group) and the
    momentum step, restarted when the momentum points uphill. Returns ``(x, y, t)``.
    """
    has_thr = bool(np.any(thr > 0))
    singletons = n_ext == x.shape[0]  # every group has one feature: plain soft-thresholding
    thr_feat = thr[ext]
    sqrt, bincount, maximum, divide, dot = np.sqrt, np.bincount, np.maximum, np.divide, np.dot
    clip = np.clip
    for _ in range(n_steps):
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
    return x, y, t


def fista(design, lam, ext, rho_ext, w0, tol, max_iter, check_every=10, positive=False):
    """FISTA with gradient-based adaptive restart (O'Donoghue & Candes, 2015).

    The KKT violation is evaluated at the start and every ``check_every`` iterations (it
    needs one extra gradient); returns ``(w, n_iter, relative kkt)``.
    """
    p = design.n_features
    n_ext, lam_rho, scale, abs_tol = kkt_setup(design.c, ext, rho_ext, lam, tol)
    x = start_coef(w0, p, positive)
    grad = design.grad
    if design.L == 0.0:
        # The loss is constant in w: zero every penalized group, keep the others.
        x = np.where(rho_ext[ext] > 0, 0.0, x)
        return x, 0, kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive) / scale
    kkt = kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
    if kkt <= abs_tol:
        return x, 0, kkt / scale
    forward = design.forward
    thr = lam_rho / design.L
    y, t = x, 1.0
    n_iter = 0
    # Small problems are overhead-bound: extra BLAS threads only add synchronization.
    limit = single_blas_thread() if design.small else nullcontext()
    with limit:
        while n_iter < max_iter:
            steps = min(check_every, max_iter - n_iter)
            x, y, t = fista_steps(forward, x, y, t, steps, ext, n_ext, thr, positive)
            n_iter += steps
            kkt = kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
            if kkt <= abs_tol:
                break
    return x + 0.0, n_iter, kkt / scale  # + 0.0 turns -0.0 into 0.0
