"""The logistic / multinomial group lasso: :func:`~sksparse_nn.solvers.solve_group_logistic`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._coordinate_descent import logistic_ws_cd
from ._data import check_solver_args, extended_groups
from ._logistic_design import LogisticDesign, mean_log_loss
from ._logistic_newton import logistic_ws_newton
from ._penalties import ext_norms
from ._proximal import fista


class GroupLogisticResult(NamedTuple):
    """Output of :func:`~sksparse_nn.solvers.solve_group_logistic`.

    Attributes
    ----------
    coef : ndarray of shape (n_features,) or (n_features, n_classes)
        One column (binary) or one column per class (multinomial).
    intercept : float or ndarray of shape (n_classes,)
        ``0`` without intercept. Multinomial intercepts sum to zero.
    n_iter : int
        Number of proximal-gradient iterations (0 if ``w0`` was already optimal).
    kkt : float
        Final relative KKT violation (see the module docstring).
    converged : bool
        Whether ``kkt <= tol``.
    objective : float
        Final value of the penalized objective (mean log-loss plus penalty).
    """

    coef: np.ndarray
    intercept: float | np.ndarray
    n_iter: int
    kkt: float
    converged: bool
    objective: float


def _logistic_objective(design, x, lam, ext, rho_ext):
    """Mean log-loss plus ``lam sum_g rho_g ||W_g||_F`` at the flat point ``x``."""
    W = x[: design.n_coef].reshape(design.n_columns, design.n_classes)
    norms = ext_norms(W, ext, rho_ext.size)
    penalty = float(lam * (rho_ext @ norms)) if lam > 0 else 0.0
    loss = mean_log_loss(design.scores(x), design.Y, design.binary, design.sample_weight)
    return loss + penalty


def solve_group_logistic(
    X,
    Y,
    lam,
    groups_index,
    rho,
    w0=None,
    tol=1e-8,
    max_iter=10000,
    fit_intercept=True,
    *,
    sample_weight=None,
):
    r"""Solve one group-lasso logistic (or multinomial) problem by proximal gradient.

    Minimizes

    .. math::

        \frac{1}{n} \sum_{i=1}^n \ell_i(X_i W + b) + \lambda \sum_j \rho_j \|W_{G_j}\|_F

    where ``W`` has one column and ``\ell_i(z) = \log(1 + e^{-s_i z})``, ``s_i = 2 y_i - 1``
    (binary), or one column per class and ``\ell_i`` is the softmax cross-entropy
    (multinomial). A group is the rows of its features across all classes, so a feature is
    used for every class or for none. The intercepts ``b`` are not penalized.

    Binary problems with dense ``X`` are solved by working sets and proximal Newton steps
    (see ``logistic_ws_newton``). The others use FISTA with gradient-based adaptive
    restart, constant step ``1/L`` and block soft-thresholding on the mean log-loss, with
    ``L = mu / 4`` (binary) or ``mu / 2`` (multinomial), ``mu`` the largest eigenvalue of
    ``X_c^T X_c / n``. Both stop by the rule of :func:`solve_group_lasso`, checked on all
    groups. The intercepts are unpenalized
    variables of the same proximal-gradient step (through a rescaled constant column,
    see ``LogisticDesign``); they start at their exact optimum for ``w0`` (a few
    Newton steps), so a warm start at a solution needs no iteration. Probabilities,
    ``log(1 + e^z)`` and log-sum-exp are evaluated without overflow.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Design matrix, not modified. Sparse input is never densified (centering is
        implicit).
    Y : ndarray of shape (n_samples,) or (n_samples, n_classes)
        1-d: binary labels in ``{0, 1}`` (one column of coefficients). 2-d with
        ``n_classes >= 2`` columns: one-hot rows (multinomial; class probabilities are
        accepted too). With ``fit_intercept`` every class must occur.
    lam : float
        Penalty level ``>= 0``.
    groups_index : ndarray of int of shape (n_features,)
        Group label of every feature in ``-1..J-1`` (``-1``: unpenalized), as returned by
        ``check_groups``.
    rho : ndarray of shape (J,)
        Non-negative group weights (``0``: unpenalized group).
    w0 : ndarray of shape (n_features,) or (n_features, n_classes), default=None
        Starting coefficients (warm start); zeros if None.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation (see the module docstring).
    max_iter : int, default=10000
        Maximum number of proximal-gradient iterations.
    fit_intercept : bool, default=True
        Fit unpenalized intercepts.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights, rescaled to sum to ``n_samples``: the loss is the
        weighted mean ``sum_i s_i l_i / n`` (with a penalty ``lam`` this is
        :class:`sklearn.linear_model.LogisticRegression` with ``C = 1 / (lam sum_i s_i)``
        for the raw weights). Integer weights are the same as repeating rows.

    Returns
    -------
    result : GroupLogisticResult
        Named tuple ``(coef, intercept, n_iter, kkt, converged, objective)``.
    """
    check_solver_args(lam, tol, max_iter)
    design = LogisticDesign(X, Y, fit_intercept, sample_weight=sample_weight)
    ext, rho_ext = extended_groups(groups_index, rho)
    if ext.shape != (design.n_columns,):
        raise ValueError(f"groups_index must have shape ({design.n_columns},), got {ext.shape}.")
    K, n_ext = design.n_classes, rho_ext.shape[0]
    # every coefficient of a feature belongs to the feature's group; the intercepts form
    # one more group, of weight 0
    ext_x = np.repeat(ext, K)
    rho_x = rho_ext
    if design.fit_intercept:
        ext_x = np.concatenate((ext_x, np.full(K, n_ext, dtype=np.intp)))
        rho_x = np.concatenate((rho_ext, [0.0]))
    x0 = design.start(w0)
    if design.route == "newton":
        x, n_iter, kkt = logistic_ws_newton(design, float(lam), ext_x, rho_x, x0, tol, max_iter)
    elif design.route == "cd":
        x, n_iter, kkt = logistic_ws_cd(
            design, design._X_sparse, float(lam), ext_x, rho_x, x0, tol, max_iter
        )
    else:
        x, n_iter, kkt = fista(design, float(lam), ext_x, rho_x, x0, tol, max_iter)
    W, b = design.unpack(x)
    objective = _logistic_objective(design, x, float(lam), ext, rho_ext)
    if design.binary:
        coef, intercept = W[:, 0] + 0.0, float(b[0])
    else:
        coef, intercept = W + 0.0, b + 0.0
    return GroupLogisticResult(coef, intercept, n_iter, kkt, bool(kkt <= tol), objective)
