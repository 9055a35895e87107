"""The fast solvers take the datafit and penalty objects: each pair goes to the solver
of its types, with the result of calling that solver directly (to the bit: the objects
hand over the data as given), pairs without one go to the generic proximal-gradient
solver, and the gated route at D = 2 reaches the reference solver's point."""

import numpy as np
import pytest
import scipy.sparse as sp
from _grouped_problem import grouped_problem

from sksparse_nn.solvers import (
    GatedGroupNorm,
    GroupNorm,
    LeastSquares,
    Logistic,
    Multinomial,
    gated_fit,
    gated_least_squares_fit,
    gated_logistic_fit,
    lambda_max,
    proximal_gradient,
    solve,
    solve_group_lasso,
    solve_group_logistic,
)

pytestmark = pytest.mark.numerics

# Both sides stop at a relative KKT violation of 1e-10 on a well-conditioned problem
# (n = 40 > p = 12, Gaussian design): the coefficients agree to a few times the
# violation over the smallest curvature; 1e-7 leaves a wide margin.
COEF_TOL = 1e-7


@pytest.fixture(scope="module")
def data():
    return grouped_problem(3)


def _same(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_least_squares_pairs_are_the_group_lasso_solver(data, sparse, weighted):
    X, y, _, labels, rho, sw = data
    X = sp.csc_matrix(X) if sparse else X
    sw = sw if weighted else None
    lam = 0.2 * lambda_max(X, y, labels, rho, sample_weight=sw)
    for positive in (False, True):
        datafit = LeastSquares(X, y, sample_weight=sw)
        got = solve(datafit, GroupNorm(labels, rho, lam, positive), tol=1e-10)
        ref = solve_group_lasso(X, y, lam, labels, rho, tol=1e-10, positive=positive,
                                sample_weight=sw)  # fmt: skip
        _same(got, ref)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_log_loss_pairs_are_the_group_logistic_solver(data, n_classes):
    X, y, codes, labels, rho, sw = data
    if n_classes == 3:
        codes = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    Y = codes.astype(float) if n_classes == 2 else np.eye(3)[codes]
    lam = 0.2 * lambda_max(X, Y, labels, rho, loss="log_loss", sample_weight=sw)
    if n_classes == 2:
        datafit = Logistic(X, codes, sample_weight=sw)
    else:
        datafit = Multinomial(X, codes, 3, sample_weight=sw)
    got = solve(datafit, GroupNorm(datafit.row_labels(labels), rho, lam), tol=1e-10)
    _same(got, solve_group_logistic(X, Y, lam, labels, rho, tol=1e-10, sample_weight=sw))


def test_pairs_without_a_fast_solver_go_to_the_generic_solver(data):
    X, y, codes, labels, rho, _ = data
    # two least-squares outputs
    Y2 = np.column_stack([y, -y])
    lam = 0.2 * lambda_max(X, y, labels, rho)
    datafit = LeastSquares(X, Y2)
    penalty = GroupNorm(labels, rho, lam)
    got = solve(datafit, penalty, tol=1e-10)
    direct = proximal_gradient(datafit, penalty, tol=1e-10)
    np.testing.assert_array_equal(got.coef, direct.W)
    # the two columns (sign flipped) double the loss and count sqrt(2) |w_j| in the
    # group norm: the one-output problem at lam / sqrt(2)
    assert got.converged
    one = solve_group_lasso(X, y, lam / np.sqrt(2), labels, rho, tol=1e-10)
    np.testing.assert_allclose(got.coef, np.column_stack([one.coef, -one.coef]), atol=COEF_TOL)
    # positivity of a log-loss: no fast solver takes it
    datafit = Logistic(X, codes)
    lam = 0.1 * lambda_max(X, codes, labels, rho, loss="log_loss")
    penalty = GroupNorm(datafit.row_labels(labels), rho, lam, datafit.positive_rows(True))
    got = solve(datafit, penalty, tol=1e-9)
    direct = proximal_gradient(datafit, penalty, tol=1e-9)
    np.testing.assert_array_equal(got.coef, direct.W[:12, 0])
    assert got.converged and np.all(got.coef >= 0) and np.any(got.coef > 0)
    assert got.objective == pytest.approx(datafit.value(direct.W) + penalty.value(direct.W))


@pytest.mark.parametrize("loss", ["squared_error", "log_loss"])
def test_gated_pairs_are_the_gated_fits(data, loss):
    X, y, codes, labels, rho, sw = data
    start = np.random.RandomState(0).randn(12, 1)
    lam = 0.3
    if loss == "squared_error":
        datafit = LeastSquares(X, y[:, None], sample_weight=sw)
        ref = gated_least_squares_fit(
            X, y[:, None], labels, rho, lam, 3, start, fit_intercept=True, positive=True,
            max_steps=50, sample_weight=sw,
        )  # fmt: skip
    else:
        datafit = Logistic(X, codes, sample_weight=sw)
        ref = gated_logistic_fit(
            X, codes, 1, labels, rho, lam, 3, start, np.zeros(1), fit_intercept=True,
            positive=True, max_steps=50, sample_weight=sw,
        )  # fmt: skip
    penalty = GatedGroupNorm(datafit.row_labels(labels), rho, lam, 3, datafit.positive_rows(True))
    bias = None if loss == "squared_error" else np.zeros(1)
    _same(gated_fit(datafit, penalty, start, bias, max_steps=50), ref)


def test_the_gated_route_at_d2_reaches_the_reference_point(data):
    # the gated fit of the D = 2 pair certifies the group lasso's solution: the point of
    # the reference solver of the same objects (both at relative KKT 1e-8 or below)
    X, y, _, labels, rho, _ = data
    lam = 0.2 * lambda_max(X, y, labels, rho)
    datafit = LeastSquares(X, y[:, None])
    fit = gated_fit(datafit, GatedGroupNorm(labels, rho, lam, 2), np.zeros((12, 1)),
                    max_steps=50)  # fmt: skip
    ref = solve(LeastSquares(X, y), GroupNorm(labels, rho, lam), tol=1e-10)
    assert fit.certified
    np.testing.assert_allclose(fit.W[:, 0], ref.coef, atol=1e-6)  # KKT 1e-8: coef ~1e-7


def test_pairs_the_routes_cannot_take_are_refused(data):
    X, y, codes, labels, rho, _ = data
    datafit = Logistic(X, codes)
    with pytest.raises(ValueError, match="rows"):  # the intercept row left out
        solve(datafit, GroupNorm(labels, rho, 0.1))
    held = GatedGroupNorm(datafit.row_labels(labels), rho, 0.1, 3, positive=True)
    with pytest.raises(ValueError, match=">= 0 or none"):  # the intercept row held too
        gated_fit(datafit, held, np.zeros((12, 1)), np.zeros(1), max_steps=5)
    with pytest.raises(TypeError, match="GroupNorm"):
        solve(datafit, object())
