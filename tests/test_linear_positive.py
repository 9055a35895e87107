"""``positive=True``: non-negative coefficients, the intercept free.

At D=2 the model is the non-negative (group) lasso: checked against scikit-learn's
``Lasso(positive=True)`` (singleton groups) and by its KKT conditions (groups, logistic).
Tolerances: the block steps stop at a relative KKT violation of ``KKT_TOL`` = 1e-8 (of the
largest group norm of the gradient at zero); the group checks below allow 1e-6 of that
scale, and coefficients are compared with scikit-learn's within the distance that the
two points' own KKT residuals allow (``tests/_lasso_kkt.py``).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _lasso_kkt import assert_same_lasso_point
from scipy.special import expit
from sklearn.linear_model import Lasso

from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor
from sksparse_nn.solvers import KKT_TOL


def _data(n, p, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    w = np.zeros(p)
    w[:6] = [2.0, -1.0, 1.5, -0.5, 1.0, -2.0]  # half the true coefficients negative
    return X, X @ w + 0.3 * rng.randn(n)


@pytest.mark.numerics
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("shape", [(60, 10), (40, 200)], ids=["tall", "wide"])
@pytest.mark.parametrize("lam", [0.02, 0.3])
def test_d2_equals_nonnegative_lasso(sparse, fit_intercept, shape, lam):
    X, y = _data(*shape)
    Xin = sp.csr_matrix(X) if sparse else X
    ours = SparseLinearRegressor(lam=lam, D=2, positive=True, fit_intercept=fit_intercept)
    ours.fit(Xin, y)
    ref = Lasso(alpha=lam, positive=True, fit_intercept=fit_intercept, tol=1e-14, max_iter=10**6)
    ref.fit(X, y)
    assert ours.coef_.min() >= 0.0
    # our certificate under scikit-learn's definition of the problem, and scikit-learn's
    # point within the distance the two points' own KKT residuals allow (a fixed 1e-6
    # was tighter than the certificate alone guarantees on the wide design, ~1e-4)
    assert_same_lasso_point(X, y, ours, ref, lam, fit_intercept, positive=True, kkt_tol=KKT_TOL)
    unconstrained = SparseLinearRegressor(lam=lam, D=2, fit_intercept=fit_intercept).fit(Xin, y)
    assert unconstrained.coef_.min() < -0.1  # the constraint is active here


def _check_nonnegative_kkt(w, grad, labels, lam, scale):
    """KKT of min f(w) + lam sum_g ||w_g|| s.t. w >= 0, ``grad`` = f'(w)."""
    tol = 1e-6 * scale
    for g in np.unique(labels):
        wg, gg = w[labels == g], grad[labels == g]
        norm = np.linalg.norm(wg)
        if norm > 0:
            pos = wg > 0
            np.testing.assert_allclose(gg[pos] + lam * wg[pos] / norm, 0.0, atol=tol)
            assert np.all(gg[~pos] >= -tol)
        else:
            assert np.linalg.norm(np.maximum(-gg, 0.0)) <= lam + tol


@pytest.mark.numerics
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_regression_meets_the_nonnegative_kkt_conditions(seed):
    rng = np.random.RandomState(seed)
    X, y = _data(80, 24, seed)
    labels = np.repeat(np.arange(8), rng.multinomial(24 - 8, np.ones(8) / 8) + 1)
    lam = 0.1
    est = SparseLinearRegressor(lam=lam, D=2, groups=labels, positive=True).fit(X, y)
    Xc, yc = X - X.mean(0), y - y.mean()
    grad = Xc.T @ (Xc @ est.coef_ - yc) / len(y)
    _check_nonnegative_kkt(est.coef_, grad, labels, lam, np.abs(Xc.T @ yc).max() / len(y))
    assert est.coef_.min() >= 0.0 and len(est.selected_groups_) > 0


@pytest.mark.numerics
def test_binary_classifier_meets_the_nonnegative_kkt_conditions():
    X, y = _data(120, 12)
    y = (y > 0).astype(int)
    lam = 0.01
    est = SparseLinearClassifier(lam=lam, D=2, positive=True).fit(X, y)
    w, b = est.coef_[0], est.intercept_[0]
    assert w.min() >= 0.0 and 0 < len(est.selected_features_) < 12
    residual = expit(X @ w + b) - y
    assert abs(residual.mean()) < 1e-6  # the free intercept is optimal
    grad = X.T @ residual / len(y)
    _check_nonnegative_kkt(w, grad, np.arange(12), lam, np.abs(X.T @ (0.5 - y)).max() / len(y))


@pytest.mark.parametrize(
    "kwargs",
    [{"D": 3}, {"D": 3, "optimizer": "adam", "lr": 0.01, "max_epochs": 40, "batch_size": 16}],
    ids=["block-steps+lbfgs", "adam-minibatch"],
)
def test_every_optimizer_keeps_coefficients_nonnegative(kwargs):
    X, y = _data(60, 10)
    est = SparseLinearRegressor(lam=0.01, positive=True, random_state=0, **kwargs).fit(X, y)
    assert est.coef_.min() >= 0.0
    assert np.all(est.coef_[[1, 3, 5]] == 0.0)  # the truly negative ones, exactly zero
    assert np.all(est.coef_[[0, 2, 4]] > 0.1)


def test_positive_multinomial_is_refused():
    X, y = _data(60, 8)
    y3 = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    with pytest.raises(ValueError, match="binary problems only"):
        SparseLinearClassifier(lam=0.01, positive=True).fit(X, y3)
