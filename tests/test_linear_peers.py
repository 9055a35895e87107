"""Linear models on the test problems scikit-learn's Lasso is held to (written anew here)."""

import numpy as np
import pytest

from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_default_grid_starts_where_everything_is_zero(fit_intercept):
    # data with a large mean: centring changes lam_max a lot
    rng = np.random.default_rng(0)
    X = rng.normal(loc=5.0, size=(40, 6))
    y = X @ rng.normal(size=6) + 20.0
    path = SparseLinearRegressor(D=2, fit_intercept=fit_intercept).regularization_path(
        X, y, n_lams=1, lam_min_ratio=1.0
    )
    Xc, yc = (X - X.mean(0), y - y.mean()) if fit_intercept else (X, y)
    np.testing.assert_allclose(path.lams[0], np.abs(Xc.T @ yc).max() / len(y), rtol=1e-12)
    assert path.n_selected[0] == 0
    # just below lam_max the first feature enters (D=2 is the convex Lasso)
    est = SparseLinearRegressor(D=2, lam=0.99 * path.lams[0], fit_intercept=fit_intercept)
    assert est.fit(X, y).selected_features_.size == 1


@pytest.mark.parametrize("cls", [SparseLinearRegressor, SparseLinearClassifier])
def test_lam_zero_is_solved_directly(cls):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 5))
    y = X @ rng.normal(size=5) + 0.5 * rng.normal(size=80)
    if cls is SparseLinearClassifier:
        y = (y > 0).astype(int)
    est = cls(lam=0.0, D=2).fit(X, y)
    assert est.n_iter_ <= 5  # block steps solve it; L-BFGS only confirms (was 200)
    if cls is SparseLinearRegressor:
        A = np.column_stack([X, np.ones(len(y))])
        ols = np.linalg.lstsq(A, y, rcond=None)[0]
        # float64 normal equations vs QR: agreement to ~cond(X) * eps64, ~1e-14 here
        np.testing.assert_allclose(est.coef_, ols[:-1], rtol=1e-8, atol=1e-10)
