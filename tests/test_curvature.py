"""The design-based curvature operator equals the Gram-matrix one (wide and sparse X)."""

import numpy as np
import pytest
import scipy.sparse as sp

from sksparse_nn import GroupLassoRegressor, SparseLinearRegressor
from sksparse_nn.solvers._curvature import DenseCurvature, DesignCurvature

EPS = np.finfo(np.float64).eps

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
    # both certified to relative KKT <= 1e-8 (ours) / 1e-11 (reference): coefficients to
    # sqrt(#live) 1e-8 scale / (smallest curvature on the support), 1.1e-7 of the largest
    # here, allowed 1e-6 of it
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6 * np.abs(ref.coef_).max())


@pytest.mark.parametrize("singular", [False, True])
def test_in_place_positive_solve_matches_the_solver_and_falls_back(singular):
    # the scratch copy is factorized in place (no second copy of A); a singular A (more
    # features than samples) gets the least-norm solution from A rebuilt
    from sksparse_nn.solvers._curvature import solve_pos

    rng = np.random.default_rng(int(singular))
    X = rng.normal(size=(10 if singular else 60, 20))
    A, B = X.T @ X, rng.normal(size=(20, 3))
    calls = []

    def rebuild():
        calls.append(1)
        return A.copy()

    got = solve_pos(A.copy(), B, rebuild=rebuild)
    if singular:
        assert calls  # the factorization failed: A was rebuilt for the least-norm solve
        np.testing.assert_allclose(got, np.linalg.lstsq(A, B, rcond=None)[0], atol=1e-10)
    else:
        assert not calls
        # a Cholesky solve of a well-conditioned system: residual at rounding level
        np.testing.assert_allclose(A @ got, B, rtol=0, atol=1e-10 * np.abs(B).max())


def test_gram_cache_blocks_are_symmetric_products_of_the_design():
    # the first block is the cache itself (symmetrized in place, tile by tile), later
    # blocks are grown from it; every block equals X_c[:, idx]^T X_c[:, idx] / n
    from sksparse_nn.solvers._design import GramCache, _symmetrized

    rng = np.random.default_rng(3)
    n, p = 30, 50
    X = rng.normal(size=(n, p))

    def products(a, b):
        return X[:, a].T @ X[:, b] / n

    cache = GramCache(products, p, p)
    first = np.arange(0, p, 2)
    G1 = cache.block(first)
    np.testing.assert_array_equal(G1, G1.T)
    np.testing.assert_allclose(G1, products(first, first), rtol=1e-13, atol=1e-13)
    both = np.arange(p)
    G2 = cache.block(both)
    np.testing.assert_array_equal(G2, G2.T)
    np.testing.assert_allclose(G2, products(both, both), rtol=1e-13, atol=1e-13)
    C = rng.normal(size=(1100, 1100))  # several tiles, a ragged last one
    np.testing.assert_array_equal(_symmetrized(C.copy()), 0.5 * (C + C.T))


def _sparse_design(intercept, weighted, group_size, seed=0):
    """A sparse design with its dense twin: (sparse operator, dense G, groups)."""
    rng = np.random.default_rng(seed)
    n, p = 30, 80
    X = np.where(rng.random((n, p)) < 0.2, rng.standard_normal((n, p)), 0.0)
    s = rng.uniform(0.5, 2.0, n) if weighted else None
    root = None if s is None else np.sqrt(s * n / s.sum())
    u = np.ones(n) if root is None else root
    m = (u * u) @ X / n if intercept else np.zeros(p)
    Xs = X if root is None else root[:, None] * X
    group = np.arange(p) // group_size
    group[:3] = -1  # unpenalized features
    Xc = Xs - np.outer(u, m)
    return DesignCurvature(sp.csr_matrix(Xs), m, group, row_scale=root), Xc.T @ Xc / n, group


@pytest.mark.numerics
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("group_size", [1, 4])
def test_sparse_design_steps_match_the_gram_matrix(intercept, weighted, group_size):
    # the whole-design block steps on sparse X (Woodbury solve wider than n, products
    # with the groups' diagonal blocks) by sparse products and rank-one centring terms
    curv, G, group = _sparse_design(intercept, weighted, group_size)
    rng = np.random.default_rng(1)
    p = G.shape[0]
    W = rng.standard_normal((p, 2))
    same = (group[:, None] == group[None, :]) & (group[:, None] >= 0)
    scale = np.abs(G).max() * np.abs(W).max()
    np.testing.assert_allclose(curv.block_dot(W), (G * same) @ W, rtol=0, atol=1e3 * EPS * scale)
    support = np.ones(p, dtype=bool)
    support[::7] = False  # 68 features > 30 samples: the Woodbury form
    k = support.sum()
    s, B, diag = rng.uniform(0.5, 2, k), rng.standard_normal((k, 2)), rng.uniform(0.5, 1, k)
    V = curv.scaled_solve(support, s, B, diag)
    A = s[:, None] * G[np.ix_(support, support)] * s[None, :] + np.diag(diag)
    # a backward-stable solve: residual within rounding of ||A|| ||V||
    residual = np.abs(A @ V - B).max()
    assert residual <= 1e4 * EPS * np.abs(A).sum(axis=1).max() * np.abs(V).max()


def test_sparse_whole_design_steps_never_densify_the_design(monkeypatch):
    # D = 3 on a wide sparse design starts with every feature live: the whole-design
    # steps ran on dense copies of all columns (n x p; 2000 x 10000: +337 MB for a
    # 2.4 MB X); they take the columns of small live sets only
    rng = np.random.default_rng(0)
    n, p = 60, 600
    X = sp.random(n, p, density=0.05, format="csr", random_state=2)
    # a signal the fit keeps (a weaker one selected nothing: no step, nothing checked)
    y = X[:, :5] @ (10 * rng.standard_normal(5)) + 0.1 * rng.standard_normal(n)
    sizes = []
    columns = DesignCurvature.columns

    def spy(self, idx):
        sizes.append(idx.size)
        return columns(self, idx)

    monkeypatch.setattr(DesignCurvature, "columns", spy)
    sparse = SparseLinearRegressor(lam=0.02, D=3, random_state=0).fit(X, y)
    assert sizes and max(sizes) <= n and sparse.selected_features_.size > 0
    monkeypatch.undo()
    dense = SparseLinearRegressor(lam=0.02, D=3, random_state=0).fit(X.toarray(), y)
    # the same steps in another summation order: the same local minimum (rounding of
    # ~1e4 eps per product through a few steps; another local minimum differs by much
    # more than 1e-9 of the objective)
    np.testing.assert_array_equal(sparse.selected_features_, dense.selected_features_)
    assert sparse.objective_ == pytest.approx(dense.objective_, rel=1e-9)


def test_gram_cache_returns_itself_for_the_set_and_drops_what_it_left():
    # a block is the cache itself in the set's (sorted) order, never a copy; features the
    # set left are dropped before new ones come in, and the entries stay the products
    from sksparse_nn.solvers._design import GramCache

    rng = np.random.default_rng(4)
    n, p = 40, 60
    X = rng.normal(size=(n, p))
    calls = []

    def products(a, b):
        calls.append((a.size, b.size))
        return X[:, a].T @ X[:, b] / n

    cache = GramCache(products, p, p)
    for idx in (np.arange(10, 30), np.arange(0, 40, 2), np.arange(5, 50), np.arange(20, 25)):
        G = cache.block(idx)
        assert G is cache.block(idx)  # asked again: the same array, nothing recomputed
        assert len(cache) == idx.size  # nothing beyond the set is held
        # products of the same columns in other shapes: rounding of a few ulps
        np.testing.assert_allclose(G, products(idx, idx), rtol=1e-12, atol=1e-14)
    calls.clear()
    cache.block(np.arange(20, 25))
    assert not calls  # the last set again: no product


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("intercept", [False, True])
def test_design_products_in_tiles_equal_the_centred_products(monkeypatch, sparse, intercept):
    # tiles of a few columns (several per side, a ragged last one), the smaller side
    # outside, a = b mirrored: the entries are X_c[:, a]^T X_c[:, b] / n
    from sksparse_nn.solvers import _curvature

    monkeypatch.setattr(_curvature, "_PRODUCT_ENTRIES", 7 * 30)  # 7 columns of 30 rows
    monkeypatch.setattr(_curvature, "_PRODUCT_MIN_COLUMNS", 1)
    rng = np.random.default_rng(5)
    n, p = 30, 50
    X = np.where(rng.random((n, p)) < 0.3, rng.standard_normal((n, p)), 0.0)
    m = X.mean(axis=0) if intercept else np.zeros(p)
    curv = DesignCurvature(sp.csr_matrix(X) if sparse else X, m, np.arange(p))
    Xc = X - m
    a, b = np.arange(0, p, 3), np.arange(1, 40)
    for left, right in ((a, b), (b, a), (a, a)):
        want = Xc[:, left].T @ Xc[:, right] / n
        got = curv.products(left, right)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max())


def test_logistic_hessian_slices_and_in_place_updates_equal_the_formula(monkeypatch):
    # rank-k updates of slices of rows (several, a ragged last one) and the in-place
    # update on the moved samples give A^T diag(d) A (rounding of a few ulps)
    from sksparse_nn.solvers import _logistic_newton as ln

    monkeypatch.setattr(ln, "_HESSIAN_ENTRIES", 5 * 12)  # 5 rows of 12 columns
    monkeypatch.setattr(ln, "_ROWS_MIN", 1)
    rng = np.random.default_rng(6)
    n, m = 23, 12
    A = rng.normal(size=(n, m))
    d0 = rng.uniform(0.05, 0.25, n)
    H, d_model = ln.update_hessian(A, d0)
    np.testing.assert_allclose(H, A.T @ (d0[:, None] * A), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(H, H.T)
    d1 = d0.copy()
    d1[[2, 7, 19]] *= 1.5  # three samples moved beyond the tolerance: updated in place
    H1, d_model1 = ln.update_hessian(A, d1, H, d_model)
    assert H1 is H
    np.testing.assert_allclose(H1, A.T @ (d1[:, None] * A), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(d_model1, d1)
    assert not np.shares_memory(d_model1, d1)
