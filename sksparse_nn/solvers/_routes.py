"""The fast solvers as functions of the pair: a datafit and a penalty object
(:mod:`._datafits`, :mod:`._penalties`) go to the specialised solver of their types,
which reads the data as the datafit was given them (the same bits as calling it
directly); a pair no specialised solver takes goes to the generic
:func:`~._composed.proximal_gradient`.

:func:`solve` (the group lasso, ``D = 2``: ``GroupNorm``, or ``GatedGroupNorm`` at
``D = 2``):

* ``LeastSquares`` with 1-d ``y``: :func:`~._least_squares.solve_group_lasso` (working
  sets: FISTA and Newton steps on Gram blocks, compiled coordinate descent on sets wider
  than a column's entries);
* ``Logistic``, ``Multinomial``: :func:`~._logistic.solve_group_logistic` (binary: Newton
  working sets on dense ``X``, compiled coordinate descent on sparse ``X``; multinomial:
  FISTA);
* any other pair: :func:`~._composed.proximal_gradient` (several least-squares outputs,
  positivity of the log-losses, a mask of constrained features, non-convex ``D``).

:func:`gated_fit` (``GatedGroupNorm``, any ``D``, from a start): ``LeastSquares`` to
:func:`~._gated_fits.gated_least_squares_fit`, the log-losses to
:func:`~._gated_fits.gated_logistic_fit` (exact block steps, working sets, Newton
polish); the estimators of the linear family are presets over it.
"""

from __future__ import annotations

import numpy as np

from ._composed import proximal_gradient
from ._datafits import LeastSquares, Logistic, Multinomial
from ._gated_fits import gated_least_squares_fit, gated_logistic_fit
from ._least_squares import GroupLassoResult, solve_group_lasso
from ._logistic import GroupLogisticResult, solve_group_logistic
from ._penalties import GroupNorm

__all__ = ["gated_fit", "solve"]


def _positive_features(datafit, penalty):
    """The penalty's ``positive`` as the fast solvers take it: True when it holds every
    feature row (and no intercept row) ``>= 0``, False when none, None otherwise."""
    positive = penalty.positive
    if np.ndim(positive) == 0:
        if not positive:
            return False
        return None if datafit.augment else True  # True holds an intercept row too
    mask = np.asarray(positive, dtype=bool).reshape(-1)
    if mask.shape != (datafit.n_coef,):
        raise ValueError(
            f"positive must be a bool or a mask of the datafit's {datafit.n_coef} rows, "
            f"got shape {mask.shape}."
        )
    features = mask[: datafit.p]
    if mask[datafit.p :].any():
        return None
    return True if features.all() else (False if not features.any() else None)


def _feature_labels(datafit, penalty):
    """The features' groups of the penalty's rows (an intercept row left out)."""
    labels = penalty.labels
    if labels.shape != (datafit.n_coef,):
        raise ValueError(
            f"The penalty has {labels.shape[0]} rows, the datafit {datafit.n_coef} "
            "(features, then an intercept row for the log-losses: datafit.row_labels)."
        )
    return labels[: datafit.p]


def _generic(datafit, penalty, w0, tol, max_iter):
    """A pair without a specialised solver: :func:`proximal_gradient`, its result in the
    form of the datafit's fast solver."""
    W0 = None
    if w0 is not None:
        W0 = np.zeros((datafit.n_coef, datafit.n_outputs))
        W0[: datafit.p] = np.reshape(w0, (datafit.p, -1))
    res = proximal_gradient(datafit, penalty, W0, tol=tol, max_iter=max_iter)
    coef, intercept = datafit.coef_intercept(res.W)
    if datafit.n_outputs == 1:
        coef, intercept = coef[:, 0], float(intercept[0])
    if isinstance(datafit, LeastSquares):
        return GroupLassoResult(coef, intercept, res.n_iter, res.kkt, res.converged)
    objective = datafit.value(res.W) + penalty.value(res.W)
    return GroupLogisticResult(coef, intercept, res.n_iter, res.kkt, res.converged, objective)


def solve(datafit, penalty, w0=None, *, tol=1e-8, max_iter=10000):
    """The group lasso of ``datafit`` (least squares, logistic or multinomial) and
    ``penalty`` (``D = 2``) to the relative KKT tolerance ``tol``, by the fast solver of
    the pair's types (see the module docstring).

    ``w0``: the start's coefficients ``(n_features,)`` or ``(n_features, n_outputs)``
    (no intercept row: the fast solvers find the intercept for it). Returns the fast
    solver's result: a :class:`GroupLassoResult` for least squares, a
    :class:`GroupLogisticResult` for the log-losses (the generic route too).
    """
    if not isinstance(penalty, GroupNorm):
        raise TypeError(f"solve takes a GroupNorm penalty, got {type(penalty).__name__}.")
    labels = _feature_labels(datafit, penalty)
    positive = _positive_features(datafit, penalty)
    fast = penalty.D == 2 and positive is not None
    options = {"tol": tol, "max_iter": max_iter, "fit_intercept": datafit.fit_intercept,
               "sample_weight": datafit.sample_weight}  # fmt: skip
    if fast and isinstance(datafit, LeastSquares) and datafit.y.ndim == 1:
        return solve_group_lasso(
            datafit.X_given, datafit.y, penalty.lam, labels, penalty.rho, w0,
            positive=positive, **options,
        )  # fmt: skip
    if fast and not positive and isinstance(datafit, (Logistic, Multinomial)):
        Y = datafit.Y if isinstance(datafit, Multinomial) else datafit.Y[:, 0]
        return solve_group_logistic(
            datafit.X_given, Y, penalty.lam, labels, penalty.rho, w0, **options
        )  # fmt: skip
    return _generic(datafit, penalty, w0, tol, max_iter)


def gated_fit(datafit, penalty, start, bias=None, *, max_steps, memo=None):
    """The D-gated fit of ``datafit`` and ``penalty`` (a ``GatedGroupNorm``: its ``D``)
    from ``start`` ``(n_features, n_outputs)`` and ``bias`` (the start's intercept, the
    log-losses' only; None: none), by exact block steps
    (:func:`~._gated_fits.gated_least_squares_fit` or
    :func:`~._gated_fits.gated_logistic_fit` by the datafit's type); ``memo``: the
    data set's :class:`~._data_memo.DataMemo` along a path. Returns a
    :class:`~._gated_fits.GatedFit`."""
    if not isinstance(penalty, GroupNorm):
        raise TypeError(f"gated_fit takes a GatedGroupNorm, got {type(penalty).__name__}.")
    labels = _feature_labels(datafit, penalty)
    positive = _positive_features(datafit, penalty)
    if positive is None:
        raise ValueError(
            "The gated fits hold every feature >= 0 or none (an intercept row free): "
            "pass positive=True, False or the datafit's positive_rows(True)."
        )
    options = {"fit_intercept": datafit.fit_intercept, "positive": positive,
               "max_steps": max_steps, "sample_weight": datafit.sample_weight,
               "memo": memo}  # fmt: skip
    if isinstance(datafit, LeastSquares):
        Y = datafit.y if datafit.y.ndim == 2 else datafit.y[:, None]
        return gated_least_squares_fit(
            datafit.X_given, Y, labels, penalty.rho, penalty.lam, penalty.D, start, **options
        )  # fmt: skip
    if isinstance(datafit, (Logistic, Multinomial)):
        return gated_logistic_fit(
            datafit.X_given, datafit.codes, datafit.n_outputs, labels, penalty.rho,
            penalty.lam, penalty.D, start, bias, **options,
        )  # fmt: skip
    raise TypeError(f"No gated fit for the datafit {type(datafit).__name__}.")
