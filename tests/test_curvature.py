"""The design-based curvature operator equals the Gram-matrix one (wide and sparse X)."""

import numpy as np
import pytest
import scipy.sparse as sp

from sksparse_nn import GroupLassoRegressor, SparseLinearRegressor
from sksparse_nn.estimators._curvature import DenseCurvature, DesignCurvature

pytestmark = pytest.mark.numerics  # re-run with 2 threads by `make test`


@pytest.mark.parametrize("sparse", [False, True])
def test_design_operator_matches_the_gram_matrix(sparse):
    rng = np.random.default_rng(0)
    n, p, k = 15, 40, 2  # wide: scaled solves on more than n features use Woodbury
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < 0.5)
    x_mean = X.mean(axis=0)
    Xc = X - x_mean
    gram = Xc.T @ Xc / n
    group = np.where(np.arange(p) < 36, np.arange(p) // 4, -1)  # 9 groups, 4 free features
    dense = DenseCurvature(gram, group)
    design = DesignCurvature(sp.csr_matrix(X) if sparse else X, x_mean, group)
    W = rng.normal(size=(p, k))
    # float64 products in two orders: agreement to ~p * eps64 of the scale
    np.testing.assert_allclose(design.dot(W), dense.dot(W), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(design.block_dot(W), dense.block_dot(W), rtol=1e-10, atol=1e-12)
    idx = np.arange(p)
    np.testing.assert_allclose(design.submatrix(idx[::3]), gram[np.ix_(idx[::3], idx[::3])],
                               rtol=1e-10, atol=1e-12)  # fmt: skip
    support = np.ones(p, dtype=bool)
    support[::7] = False
    s = rng.uniform(0.1, 2.0, size=support.sum())
    B = rng.normal(size=(support.sum(), k))
    diag = np.ones(support.sum())
    V_dense = dense.scaled_solve(support, s, B, diag)
    V_design = design.scaled_solve(support, s, B, diag)  # 34 > n = 15: Woodbury
    A = s[:, None] * gram[np.ix_(support, support)] * s[None, :] + np.eye(support.sum())
    np.testing.assert_allclose(A @ V_design, B, rtol=1e-9, atol=1e-10)  # cond(A) ~ 1e2
    np.testing.assert_allclose(V_design, V_dense, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
def test_wide_group_lasso_matches_the_proximal_solver(sparse):
    rng = np.random.default_rng(1)
    n, p = 80, 300
    X = rng.normal(size=(n, p))
    if sparse:
        X = sp.csr_matrix(X * (np.abs(X) > 1.0))
    w = np.zeros(p)
    w[:15] = rng.normal(size=15)
    y = X @ w + 0.5 * rng.normal(size=n)
    labels = np.arange(p) // 5
    lam = 0.1 * SparseLinearRegressor(D=2, groups=labels).lambda_max(X, y)
    ref = GroupLassoRegressor(lam=lam, groups=labels, tol=1e-11, max_iter=10**6).fit(X, y)
    est = SparseLinearRegressor(lam=lam, D=2, groups=labels).fit(X, y)
    np.testing.assert_array_equal(est.selected_groups_, ref.selected_groups_)
    # both certified to relative KKT <= 1e-9 (ours) / 1e-11 (reference): coefficients to
    # ~1e-9 * scale / (smallest curvature on the support), allowed 1e-6 of the scale
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6 * np.abs(ref.coef_).max())
