"""The solvers as datafit x penalty x solver: the generic proximal-gradient solver on
every pair reaches the points of the specialised solvers (the reference group-lasso
solvers, the gated estimators), and the penalties' pieces (prox, subdifferential,
variational form) satisfy their definitions."""

import numpy as np
import pytest
import scipy.sparse as sp
from _grouped_problem import grouped_problem

from sksparse_nn import SparseLinearRegressor
from sksparse_nn.solvers import (
    GatedGroupNorm,
    GroupNorm,
    LeastSquares,
    Logistic,
    Multinomial,
    lambda_max,
    proximal_gradient,
    solve_group_lasso,
    solve_group_logistic,
)

pytestmark = pytest.mark.numerics

# Both sides stop at a relative KKT violation of 1e-12 / 1e-10; the problems are
# well conditioned (n = 40 > p = 12, Gaussian design), so the coefficients agree to a
# few times the violation over the smallest curvature: 1e-7 leaves a wide margin.
COEF_TOL = 1e-7


@pytest.fixture(scope="module")
def data():
    X, y, _, labels, rho, sample_weight = grouped_problem(0)
    return X, y, labels, rho, sample_weight


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("positive", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_least_squares_with_the_group_norm_is_the_group_lasso(data, weighted, positive, sparse):
    X, y, labels, rho, sw = data
    sw = sw if weighted else None
    lam = 0.2 * lambda_max(X, y, labels, rho, sample_weight=sw)
    ref = solve_group_lasso(X, y, lam, labels, rho, tol=1e-12, sample_weight=sw, positive=positive)
    datafit = LeastSquares(sp.csr_matrix(X) if sparse else X, y, sample_weight=sw)
    res = proximal_gradient(datafit, GroupNorm(labels, rho, lam, positive), tol=1e-10)
    coef, intercept = datafit.coef_intercept(res.W)
    assert res.converged
    assert not (positive and np.any(res.W < 0))
    np.testing.assert_allclose(coef[:, 0], ref.coef, atol=COEF_TOL)
    np.testing.assert_allclose(intercept[0], ref.intercept, atol=COEF_TOL)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_log_losses_with_the_group_norm_are_the_group_logistic(data, n_classes):
    X, y, labels, rho, sw = data
    codes = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    Y = codes if n_classes == 2 else np.eye(n_classes)[codes]
    lam = 0.2 * lambda_max(X, Y, labels, rho, loss="log_loss", sample_weight=sw)
    ref = solve_group_logistic(X, Y, lam, labels, rho, tol=1e-12, sample_weight=sw)
    if n_classes == 2:
        datafit = Logistic(X, codes, sample_weight=sw)
    else:
        datafit = Multinomial(X, codes, n_classes, sample_weight=sw)
    penalty = GroupNorm(datafit.row_labels(labels), rho, lam)
    res = proximal_gradient(datafit, penalty, tol=1e-10)
    coef, intercept = datafit.coef_intercept(res.W)
    assert res.converged
    np.testing.assert_allclose(coef.reshape(np.shape(ref.coef)), ref.coef, atol=COEF_TOL)
    np.testing.assert_allclose(np.ravel(intercept), np.ravel(ref.intercept), atol=COEF_TOL)


@pytest.mark.parametrize("D", [3, 4])
def test_the_gated_estimator_stops_where_the_gated_penalty_is_stationary(data, D):
    # the estimator's block steps and the composed solver agree on what a solution is:
    # the estimator's point is stationary by the penalty's rule and a fixed point of its
    # proximal-gradient steps; from the least-squares start the composed solver reaches
    # a stationary point no worse than it
    X, y, labels, rho, _ = data
    lam = 0.3
    est = SparseLinearRegressor(lam=lam, D=D, groups=labels).fit(X, y)
    datafit, penalty = LeastSquares(X, y), GatedGroupNorm(labels, rho, lam, D=D)
    W = est.coef_[:, None]
    assert datafit.value(W) + penalty.value(W) == pytest.approx(est.objective_, rel=1e-12)
    # the estimator's own stop (an epoch lowering its objective by less than 1e-12 of it)
    # leaves a violation that rounding moves around 1e-9 on some machines: the composed
    # solver may take a few steps, which must stay within the coefficients' tolerance
    # of the start (a few times the violation over the smallest curvature) and never
    # raise the objective (non-convex: plain steps of 1/L)
    fixed = proximal_gradient(datafit, penalty, W, tol=1e-9)
    assert fixed.converged
    np.testing.assert_allclose(fixed.W, W, rtol=0, atol=COEF_TOL)
    start = datafit.value(W) + penalty.value(W)
    assert datafit.value(fixed.W) + penalty.value(fixed.W) <= start + 1e-12 * abs(start)
    # a point that meets the rule is a fixed point: no step from it, exactly (the same
    # violation, computed again from the same numbers)
    again = proximal_gradient(datafit, penalty, fixed.W, tol=fixed.kkt)
    assert again.n_iter == 0 and again.converged
    np.testing.assert_array_equal(again.W, fixed.W)
    ols = np.linalg.lstsq(X - X.mean(0), y - y.mean(), rcond=None)[0][:, None]
    res = proximal_gradient(datafit, penalty, ols, tol=1e-9)
    assert res.converged
    # a stationary point with the estimator's support, within the estimator's tolerance
    np.testing.assert_array_equal(penalty.norms(res.W) > 0, est.group_norms_ > 0)
    assert datafit.value(res.W) + penalty.value(res.W) <= est.objective_ * (1 + 1e-9)


@pytest.mark.parametrize("D", [2, 3, 4])
def test_the_prox_minimizes_its_objective(D):
    # against a fine grid of the group norm r (the prox is a scaling of z): the prox's
    # objective is at most the grid's smallest (up to the grid's resolution 1e-5)
    rng = np.random.RandomState(D)
    labels = np.repeat(np.arange(30), 2)
    Z = rng.randn(60, 1) * rng.uniform(0.01, 3.0, 60)[:, None]
    penalty = GatedGroupNorm(labels, rng.uniform(0.1, 2.0, 30), 0.7, D=D)
    V = penalty.prox(Z, 0.9)
    a = penalty.norms(Z)
    r = np.linspace(0.0, a.max(), 200001)
    c = 0.9 * penalty.lam_rho[:30]
    grid = 0.5 * (r[None, :] - a[:, None]) ** 2 + c[:, None] * r[None, :] ** (2.0 / D)
    v = penalty.norms(V)
    ours = 0.5 * (v - a) ** 2 + c * v ** (2.0 / D)
    assert np.all(ours <= grid.min(axis=1) + 1e-5 * a.max())
    # a scaling of each group of z, and D = 2 is the group norm's soft thresholding
    aligned = (V * Z).sum(1)
    assert np.all(aligned >= 0)
    if D == 2:
        np.testing.assert_allclose(V, GroupNorm(labels, penalty.rho, 0.7).prox(Z, 0.9))


def test_the_positive_prox_projects_then_shrinks():
    # the prox of the penalty plus w >= 0 is the penalty's prox of the positive part
    labels = np.array([0, 0, 1, 1, -1])
    Z = np.array([[1.0], [-2.0], [-0.5], [-0.1], [-3.0]])
    penalty = GroupNorm(labels, np.ones(2), 0.5, positive=True)
    np.testing.assert_allclose(
        penalty.prox(Z, 1.0), GroupNorm(labels, np.ones(2), 0.5).prox(np.maximum(Z, 0), 1.0)
    )


def test_the_variational_form_equals_the_penalty_at_balance():
    rng = np.random.RandomState(1)
    labels = np.repeat(np.arange(5), 3)
    W = rng.randn(15, 2)
    W[:3] = 0.0  # a zero group
    penalty = GatedGroupNorm(labels, rng.uniform(0.5, 2.0, 5), 0.4, D=4)
    omega, gates, smooth = penalty.variational(W)
    assert smooth == pytest.approx(penalty.value(W), rel=1e-12)
    per_row = np.prod(gates, axis=0)[labels][:, None]
    np.testing.assert_allclose(omega * per_row, W, atol=1e-15)
    # any other split of the same W costs more (AM-GM)
    other = gates * rng.uniform(0.5, 2.0, gates.shape)
    omega_other = W / np.where(per_row > 0, np.prod(other, axis=0)[labels][:, None], 1.0)
    sq = np.bincount(labels, weights=(omega_other**2).sum(1), minlength=5)
    cost = 0.4 / 4 * float(penalty.rho @ (sq + (other**2).sum(0)))
    assert cost >= smooth


def test_zero_groups_are_stationary_only_for_the_non_convex_penalty(data):
    X, y, labels, rho, _ = data
    datafit = LeastSquares(X, y)
    W = np.zeros((12, 1))
    G = datafit.gradient(W)
    lam = 0.5 * lambda_max(X, y, labels, rho)  # zero is not the group lasso's solution
    assert GroupNorm(labels, rho, lam).violations(W, G).max() > 0
    assert GatedGroupNorm(labels, rho, lam, D=3).violations(W, G).max() == 0


def test_bad_pieces_are_refused():
    labels = np.array([0, 0, 1])
    with pytest.raises(ValueError, match="rho"):
        GroupNorm(labels, np.ones(3), 0.1)
    with pytest.raises(ValueError, match="lam"):
        GroupNorm(labels, np.ones(2), -1.0)
    with pytest.raises(ValueError, match="D must"):
        GatedGroupNorm(labels, np.ones(2), 0.1, D=1)
    with pytest.raises(ValueError, match="labels in"):
        Logistic(np.ones((3, 3)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="class codes"):
        Multinomial(np.ones((3, 3)), np.array([0, 1, 3]), 3)
