"""The gated linear solvers as presets: one exact fit of the D-gated least-squares or
logistic objective from a start, on the whole design or on working sets (chosen by the
data's shape), with the data memo of a warm-started path. The linear family calls these
and writes the result into its module."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..utils.columns import column_squares
from ._gated_least_squares import GatedLeastSquares
from ._gated_logistic import GatedLogisticProblem
from ._gated_setup import (
    BLOCK_STEPS_TOL,
    KKT_TOL,
    centered_moments,
    curvature_operator,
    gram_cache,
    row_scaled,
    uses_working_sets,
)

__all__ = ["GatedFit", "gated_least_squares_fit", "gated_logistic_fit"]


class GatedFit(NamedTuple):
    """One gated fit: coefficients ``W`` (n_features, n_outputs), the intercept (None
    without one), the objective, minus the data term's gradient at ``W`` (the descent
    direction), the group norms, whether the KKT conditions hold to ``KKT_TOL``
    (``D = 2``) and the number of block steps taken."""

    W: np.ndarray
    intercept: np.ndarray | None
    objective: float
    gradient: np.ndarray
    norms: np.ndarray
    certified: bool
    n_steps: int


def gated_least_squares_fit(
    X, Y, labels, rho, lam, D, start, *, fit_intercept, positive, max_steps,
    sample_weight=None, memo=None,
):  # fmt: skip
    """The D-gated least-squares fit from ``start`` (see :class:`GatedLeastSquares`).

    ``X`` (n, p) dense or sparse, ``Y`` (n, k) float targets, ``labels``/``rho`` the
    penalty groups and their weights, ``start`` (p, k). Data with more than
    ``WORKING_SET_MIN_FEATURES`` features run on working sets and need ``memo``, the
    data set's :class:`~._data_memo.DataMemo` (moments and Gram blocks kept along a
    path); narrower data form the Gram matrix. Returns a :class:`GatedFit`.
    """
    sets = uses_working_sets(X)
    if sets:  # never form the p x p Gram matrix: products with the design
        _, rhs, x_mean, y_mean, const = memo.targets_moments(X, Y, fit_intercept, sample_weight)
        group = GatedLeastSquares.penalized_groups(labels, rho, lam)
        if memo.squares is None:
            Xs, _ = row_scaled(X, sample_weight)
            memo.squares = column_squares(Xs)
        gram = curvature_operator(
            X, x_mean, group, True, None, sample_weight, squares=memo.squares,
            by_columns=memo.by_columns(X) if sample_weight is None else None,
        )  # fmt: skip
    else:
        gram, rhs, x_mean, y_mean, const = centered_moments(
            X, Y, fit_intercept, sample_weight=sample_weight
        )
    nonneg = np.ones(X.shape[1], dtype=bool) if positive else None
    problem = GatedLeastSquares(
        gram, rhs, const, labels, rho, lam, D, nonneg,
        gradient=None if memo is None or not sets else memo.gradient,
        group=group if sets else None,  # the design's array, not a second one
    )  # fmt: skip
    if sets:  # the problem holds it now (and drops it at its next gradient)
        memo.gradient = None
    if sets:  # working sets, their Gram blocks kept along a warm-started path
        if memo.gram is None:
            memo.gram = gram_cache(gram)
        cache = memo.gram
        cache.products = gram.products  # the blocks of this fit's design object
        W, objective, n_steps = problem.minimize_working_sets(
            start, cache, max_steps, BLOCK_STEPS_TOL, kkt_tol=KKT_TOL
        )
    else:
        W, objective, n_steps = problem.minimize(start, max_steps, BLOCK_STEPS_TOL, kkt_tol=KKT_TOL)
    intercept = y_mean - x_mean @ W
    certified = D == 2 and problem.relative_kkt(W) <= KKT_TOL
    gradient = -problem.gradient(W)
    if sets:  # where a warm start from this solution begins
        memo.gradient = problem.last_gradient
    return GatedFit(W, intercept, objective, gradient, problem.norms(W), certified, n_steps)


def gated_logistic_fit(
    X, codes, n_outputs, labels, rho, lam, D, start, bias, *, fit_intercept, positive,
    max_steps, sample_weight=None, memo=None,
):  # fmt: skip
    """The D-gated logistic (binary: ``n_outputs = 1``) or multinomial fit from
    ``start`` (p, n_outputs) and ``bias`` (the start's intercept, or None), see
    :class:`GatedLogisticProblem`. ``codes``: the class codes ``0..K-1``. Data with
    more than ``WORKING_SET_MIN_FEATURES`` features run on working sets, reading ``X``
    by columns from ``memo`` (a :class:`~._data_memo.DataMemo`). Returns a
    :class:`GatedFit` (intercept None without one)."""
    sets = uses_working_sets(X)
    by_columns = memo.by_columns(X) if sets else None
    problem = GatedLogisticProblem(
        X, codes, n_outputs, labels, rho, lam, D, fit_intercept, sample_weight,
        positive=positive, by_columns=by_columns,
    )  # fmt: skip
    if bias is not None and problem.x_mean is not None:
        bias = bias + problem.x_mean @ start  # the intercept of the centred columns
    full = start if bias is None else np.vstack([start, bias[None, :]])
    V, objective, n_steps = problem.minimize(problem.to_reduced(full), max_steps, KKT_TOL, sets)
    W, p = problem.to_full(V), X.shape[1]
    gradient = -problem.gradient[:p]  # the descent direction, as the least-squares fit's
    b = None
    if fit_intercept:
        b = W[p] if problem.x_mean is None else W[p] - problem.x_mean @ W[:p]
    certified = D == 2 and problem.kkt(V, problem.gradient) <= KKT_TOL
    return GatedFit(W[:p], b, objective, gradient, problem.shape.norms(V), certified, n_steps)
