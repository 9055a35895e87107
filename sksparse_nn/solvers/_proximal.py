"""Plain FISTA with adaptive restart on a whole design (least squares or logistic)."""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np

from ._kkt import kkt_scale, kkt_violation
from ._threads import single_blas_thread


def fista(design, lam, ext, rho_ext, w0, tol, max_iter, check_every=10, positive=False):
    """FISTA with gradient-based adaptive restart (O'Donoghue & Candes, 2015).

    The KKT violation is evaluated at the start and every ``check_every`` iterations (it
    needs one extra gradient); returns ``(w, n_iter, relative kkt)``.
    """
    p = design.n_features
    n_ext = rho_ext.shape[0]
    lam_rho = lam * rho_ext
    scale = kkt_scale(design.c, ext, n_ext)
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
        return x, 0, kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive) / scale
    kkt = kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
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
    limit = single_blas_thread() if design.small else nullcontext()
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
                kkt = kkt_violation(x, grad(x), ext, lam_rho, n_ext, positive)
                if kkt <= abs_tol:
                    break
    return x + 0.0, n_iter, kkt / scale  # + 0.0 turns -0.0 into 0.0
