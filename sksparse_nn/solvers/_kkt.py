"""The stopping rule: per-group KKT violations and their scale (see
:mod:`sksparse_nn.solvers`)."""

from __future__ import annotations

import numpy as np


def row_squares(a):
    """Squared norm of each row of ``a`` (its squares when ``a`` is 1-d): a feature's
    coefficients across outputs count together."""
    return a * a if a.ndim == 1 else np.einsum("ij,ij->i", a, a)


def group_violations(w, g, ext, lam_rho, n_ext, positive=False):
    """Distance of ``-g`` to the subdifferential of the penalty (and, with ``positive``,
    plus the normal cone of ``w >= 0``), per group; also returns the live-group mask.

    For a live group ``j`` the distance is the norm of ``g_j + lam rho_j w_j / ||w_j||``,
    where with ``positive`` a coordinate at zero contributes only ``min(g_i, 0)`` (the
    normal cone of ``w_i >= 0`` at ``w_i = 0`` absorbs any ``g_i >= 0``). For a zero
    group it is ``max(0, ||g_j|| - lam rho_j)``, with ``min(g_j, 0)`` in place of ``g_j``
    under ``positive`` (only the positive part of ``-g_j`` pulls the group away from 0).

    ``w`` and ``g`` are ``(p,)``, or ``(p, k)`` with a feature's ``k`` coefficients in its
    group (multi-output); ``positive`` is a bool, or a ``(p,)`` mask of the constrained
    features.
    """
    nw = np.sqrt(np.bincount(ext, weights=row_squares(w), minlength=n_ext))
    live = nw > 0
    coef = np.zeros(n_ext)
    np.divide(lam_rho, nw, out=coef, where=live)
    per_row = coef[ext] if w.ndim == 1 else coef[ext][:, None]
    d = g + per_row * w  # for live groups: g_j + lam rho_j w_j / ||w_j||; else g_j
    if np.any(positive):
        held = ~(w > 0)
        if np.ndim(positive):  # a mask of the constrained features
            held &= positive if w.ndim == 1 else positive[:, None]
        d = np.where(held, np.minimum(d, 0.0), d)
    nd = np.sqrt(np.bincount(ext, weights=row_squares(d), minlength=n_ext))
    return np.where(live, nd, np.maximum(nd - lam_rho, 0.0)), live


def kkt_violation(w, g, ext, lam_rho, n_ext, positive=False):
    """Largest distance of ``-g`` to the subdifferential of the penalty, over groups."""
    viol, _ = group_violations(w, g, ext, lam_rho, n_ext, positive)
    return float(viol.max()) if viol.size else 0.0


def kkt_scale(c, ext, n_ext):
    """KKT scale: largest group norm of ``c = -grad(0)`` (1 if it is zero)."""
    scale = 0.0
    if c.size:
        scale = float(np.sqrt(np.bincount(ext, weights=row_squares(c), minlength=n_ext)).max())
    return scale if scale > 0 else 1.0


def kkt_setup(c, ext, rho_ext, lam, tol):
    """``(n_ext, lam_rho, scale, abs_tol)``: the number of groups, ``lam rho_j``, the KKT
    scale of ``c = -grad(0)`` and the absolute tolerance ``tol * scale``."""
    n_ext = rho_ext.shape[0]
    scale = kkt_scale(c, ext, n_ext)
    return n_ext, lam * rho_ext, scale, tol * scale
