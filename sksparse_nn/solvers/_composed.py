"""The solver any datafit x penalty pair runs on: proximal gradient
(:func:`proximal_gradient`), accelerated with adaptive restart when the penalty is
convex, monotone otherwise; it stops on the penalty's relative KKT violation.

It is the composition's reference: it reads nothing of a datafit but ``value``,
``gradient`` and ``lipschitz`` (:mod:`._datafits`) and nothing of a penalty but
``value``, ``prox``, ``violations``, ``kkt_scale`` and ``convex`` (:mod:`._penalties`),
so every pair can be checked against the specialised solvers of the package (working
sets, coordinate descent, Newton steps: the presets of the estimators), which solve the
same problems faster.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["ComposedResult", "proximal_gradient"]


class ComposedResult(NamedTuple):
    """``W`` (the coefficients, the datafit's rows), ``n_iter``, ``kkt`` (the final
    relative KKT violation of the penalty's rule) and ``converged`` (``kkt <= tol``)."""

    W: np.ndarray
    n_iter: int
    kkt: float
    converged: bool


def proximal_gradient(datafit, penalty, W0=None, *, tol=1e-8, max_iter=20000):
    """Minimize ``datafit.value(W) + penalty.value(W)`` by proximal-gradient steps.

    Steps of ``1 / L`` (``L = datafit.lipschitz()``). A convex penalty gets FISTA's
    momentum, restarted whenever a step goes against the last one (gradient-based
    adaptive restart); a non-convex one plain steps, which never increase the
    objective. Stops when the largest ``penalty.violations`` over groups, divided by
    ``penalty.kkt_scale`` of the gradient at zero, is at most ``tol``.

    Parameters
    ----------
    datafit : LeastSquares, Logistic or Multinomial
        The data term (:mod:`sksparse_nn.solvers._datafits`).
    penalty : GroupNorm or GatedGroupNorm
        The penalty on the datafit's rows (:mod:`sksparse_nn.solvers._penalties`).
    W0 : ndarray of shape (n_coef, n_outputs), default=None
        The start (zeros when None; made feasible by the penalty's prox at step 0).
    tol : float, default=1e-8
        Relative KKT tolerance: the package's default stopping rule.
    max_iter : int, default=20000
        Most steps: enough for the small problems this reference is for.

    Returns
    -------
    ComposedResult
    """
    W = np.zeros((datafit.n_coef, _n_outputs(datafit))) if W0 is None else np.array(W0, float)
    W = penalty.prox(W, 0.0)
    step = 1.0 / max(datafit.lipschitz(), np.finfo(float).tiny)
    scale = penalty.kkt_scale(datafit.gradient(np.zeros_like(W)))
    Y, t, kkt = W.copy(), 1.0, np.inf
    n_iter = 0
    for n_iter in range(max_iter + 1):  # noqa: B007 (used after the loop)
        G = datafit.gradient(W)
        kkt = float(penalty.violations(W, G).max(initial=0.0)) / scale
        if kkt <= tol or n_iter == max_iter:
            break
        if not penalty.convex:
            W = penalty.prox(W - step * G, step)
            continue
        W_new = penalty.prox(Y - step * datafit.gradient(Y), step)
        if float(((Y - W_new) * (W_new - W)).sum()) > 0:  # against the last step: restart
            t, Y = 1.0, W
            W_new = penalty.prox(W - step * G, step)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        Y = W_new + ((t - 1.0) / t_new) * (W_new - W)
        W, t = W_new, t_new
    return ComposedResult(W, n_iter, kkt, kkt <= tol)


def _n_outputs(datafit):
    """The datafit's number of output columns."""
    return datafit.n_outputs
