"""The least-squares group lasso: one problem (:func:`solve_group_lasso`) and a path of
them with warm starts (:func:`group_lasso_path`)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import NamedTuple

import numpy as np

from ._coordinate_descent import least_squares_cd, wide_set
from ._data import check_solver_args, extended_groups
from ._design import Design
from ._lipschitz import BlockLipschitz
from ._penalties import group_violations, kkt_setup
from ._proximal import fista, start_coef
from ._threads import single_blas_thread
from ._working_set import inner_tolerance, working_set, ws_fista


class GroupLassoResult(NamedTuple):
    """Output of :func:`solve_group_lasso`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
    intercept : float
    n_iter : int
        Number of proximal-gradient iterations (0 if ``w0`` was already optimal).
    kkt : float
        Final relative KKT violation (see the module docstring).
    converged : bool
        Whether ``kkt <= tol``.
    """

    coef: np.ndarray
    intercept: float
    n_iter: int
    kkt: float
    converged: bool


def _solve_ls(design, lam, ext, rho_ext, w0, tol, max_iter, positive=False, lipschitz=None):
    """Group lasso by working sets (restricted FISTA + Newton), certified on all groups.

    Outer loop: the full gradient gives every group's KKT violation; if the largest is
    at most ``tol`` times the scale the solution is certified. Otherwise the working
    set is the live groups (and the unpenalized ones) plus the worst violators (as many
    as live groups, at least ``_WS_MIN_GROUPS``), and the problem restricted to it is
    solved by :func:`ws_fista` on its Gram block to a tolerance below the violation
    left outside the set. Returns ``(w, n_iter, relative kkt)``.
    """
    p = design.n_features
    n_ext, lam_rho, scale, abs_tol = kkt_setup(design.c, ext, rho_ext, lam, tol)
    w = start_coef(w0, p, positive)
    if design.degenerate:
        return fista(design, lam, ext, rho_ext, w, tol, max_iter, positive=positive)
    if lipschitz is None:  # the working sets' Lipschitz constants (shared along a path)
        lipschitz = BlockLipschitz(p)
    free = rho_ext == 0
    n_iter = stalled = 0
    kkt = np.inf
    limit = single_blas_thread() if design.small else nullcontext()
    with limit:
        while True:
            nz = np.flatnonzero(w)
            g = design.full_grad(w, nz)
            viol, live = group_violations(w, g, ext, lam_rho, n_ext, positive)
            kkt = float(viol.max())
            if kkt <= abs_tol or n_iter >= max_iter:
                break
            idx, outside = working_set(ext, viol, live, free, abs_tol)
            groups_ws, ext_ws = np.unique(ext[idx], return_inverse=True)
            cacheable, cols = design.cacheable(idx), None
            if wide_set(idx.size, design.entries) or not cacheable:
                cols = design.set_columns(idx, ext_ws)
            if cols is None and not cacheable:  # no Gram block: plain FISTA
                w, it, rel = fista(
                    design, lam, ext, rho_ext, w, tol, max_iter - n_iter, positive=positive
                )
                return w, n_iter + it, rel
            if cols is not None:  # columns sparser than the Gram block: coordinate descent
                tol_in = inner_tolerance(abs_tol, outside, stalled)
                if tol_in is None:
                    break
                held = np.ones(idx.size, dtype=bool) if positive else None
                x, it, _ = least_squares_cd(
                    cols, design.c[idx], w[idx], ext_ws, lam_rho[groups_ws], groups_ws.size,
                    tol_in, max(1, max_iter - n_iter), held,
                )  # fmt: skip
                n_iter += it
                stalled = stalled + 1 if it == 0 else 0
                w = np.zeros(p)
                w[idx] = x
                continue
            G = design.gram_block(idx)
            cap = float(design.diag[idx].sum())  # trace: an upper bound
            if design._L is not None:
                cap = min(cap, design._L)
            L = lipschitz(G, idx, cap)
            tol_in = inner_tolerance(abs_tol, outside, stalled)
            if tol_in is None:
                break
            x, it, _, L = ws_fista(
                G,
                design.c[idx],
                lam_rho[groups_ws],
                ext_ws,
                groups_ws.size,
                w[idx],
                L,
                tol_in,
                max_iter - n_iter,
                positive,
            )
            lipschitz.update(L)
            n_iter += it
            stalled = stalled + 1 if it == 0 else 0
            w = np.zeros(p)
            w[idx] = x
    return w + 0.0, min(n_iter, max_iter), kkt / scale


def solve_group_lasso(
    X,
    y,
    lam,
    groups_index,
    rho,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    *,
    precompute="auto",
    lipschitz=None,
    positive=False,
    sample_weight=None,
):
    r"""Solve one group-lasso problem by working sets and accelerated proximal gradient.

    Minimizes :math:`\frac{1}{2n}\sum_i s_i (y_i - x_i w - b)^2 + \lambda \sum_j \rho_j
    \|w_{G_j}\|_2` (``s_i = 1`` without sample weights), optionally subject to
    ``w >= 0``. Outer loop: the full gradient gives the KKT violation of every group;
    the working set is the live groups plus the worst violators (growing with the
    support). Inner loop: FISTA with gradient-based adaptive restart and block
    soft-thresholding on the Gram block of the working set (step ``1/L_W``, ``L_W`` its
    largest eigenvalue), with Newton steps on the support once it stops changing (the
    objective is smooth on the live groups). The stopping rule is checked on *all*
    groups at the end (see the module docstring), so the result is certified whatever
    the working set did.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Design matrix, not modified. Sparse input is never densified (centering is
        implicit); dense input is centered in a copy when ``fit_intercept``.
    y : ndarray of shape (n_samples,)
    lam : float
        Penalty level ``>= 0``.
    groups_index : ndarray of int of shape (n_features,)
        Group label of every feature in ``-1..J-1`` (``-1``: unpenalized), as returned by
        ``check_groups``.
    rho : ndarray of shape (J,)
        Non-negative group weights (``0``: unpenalized group).
    w0 : ndarray of shape (n_features,), default=None
        Starting point (warm start); zeros if None.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation (see the module docstring).
    max_iter : int, default=10000
        Maximum number of proximal-gradient iterations.
    fit_intercept : bool, default=True
        Fit an unpenalized intercept (by centering ``X`` and ``y``).
    precompute : "auto" or bool, default="auto"
        Iterate with the Gram matrix ``X_c^T X_c / n``. "auto" uses it when
        ``n_features <= n_samples`` (and ``n_features <= 4096``).
    lipschitz : float, default=None
        Known Lipschitz constant ``L`` of the whole problem (e.g. from a previous call on
        the same data); an upper bound for the working sets' constants.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (as ``Lasso(positive=True)``). The
        proximal step is then block soft-thresholding of the positive part, and the KKT
        violation uses the constrained optimality conditions (see
        ``group_violations``).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights, rescaled to sum to ``n_samples`` (the convention of
        :class:`sklearn.linear_model.Lasso`): the loss is ``sum_i s_i (y_i - x_i w -
        b)^2 / (2 n)`` and the intercept comes from weighted means. Sparse ``X`` stays
        sparse (implicit weighted centering).

    Returns
    -------
    result : GroupLassoResult
        Named tuple ``(coef, intercept, n_iter, kkt, converged)``; ``n_iter`` counts
        proximal-gradient iterations and Newton steps.
    """
    check_solver_args(lam, tol, max_iter)
    design = Design(
        X,
        y,
        fit_intercept,
        precompute=precompute,
        lipschitz=lipschitz,
        sample_weight=sample_weight,
    )
    ext, rho_ext = extended_groups(groups_index, rho)
    if ext.shape != (design.n_features,):
        raise ValueError(f"groups_index must have shape ({design.n_features},), got {ext.shape}.")
    w, n_iter, kkt = _solve_ls(
        design, float(lam), ext, rho_ext, w0, tol, max_iter, positive=bool(positive)
    )
    return GroupLassoResult(w, design.intercept(w), n_iter, kkt, bool(kkt <= tol))


def group_lasso_path(
    X,
    y,
    lams,
    groups_index,
    rho,
    *,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    precompute="auto",
    positive=False,
    sample_weight=None,
):
    """Solve the group lasso for a sequence of penalties with warm starts.

    The centering, the Gram matrix (or the Gram blocks of the working sets) and the
    Lipschitz constants are computed once and shared; each problem starts from the
    solution of the previous one (so give ``lams`` in decreasing order). Parameters are
    those of :func:`solve_group_lasso` (``positive`` and ``sample_weight`` included).

    Returns
    -------
    coefs : ndarray of shape (n_lams, n_features)
    intercepts : ndarray of shape (n_lams,)
    n_iters : ndarray of int of shape (n_lams,)
    kkts : ndarray of shape (n_lams,)
        Final relative KKT violations; a problem converged iff its value is ``<= tol``.
    """
    lams = np.asarray(lams, dtype=np.float64).reshape(-1)
    for lam in lams:
        check_solver_args(float(lam), tol, max_iter)
    design = Design(X, y, fit_intercept, precompute=precompute, sample_weight=sample_weight)
    ext, rho_ext = extended_groups(groups_index, rho)
    if ext.shape != (design.n_features,):
        raise ValueError(f"groups_index must have shape ({design.n_features},), got {ext.shape}.")
    coefs = np.zeros((lams.size, design.n_features))
    intercepts = np.zeros(lams.size)
    n_iters = np.zeros(lams.size, dtype=int)
    kkts = np.zeros(lams.size)
    w = w0
    lipschitz = BlockLipschitz(design.n_features)  # shared along the path
    for k, lam in enumerate(lams):
        w, n_iters[k], kkts[k] = _solve_ls(
            design, float(lam), ext, rho_ext, w, tol, max_iter, bool(positive), lipschitz
        )
        coefs[k] = w
        intercepts[k] = design.intercept(w)
    return coefs, intercepts, n_iters, kkts
