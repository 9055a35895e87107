"""Least-squares working sets on sparse X: coordinate descent on the set's sparse columns
(a sweep costs its nonzeros) once the set holds more features than a column has entries,
for the reference solver and the D = 2 estimator, certified by the KKT conditions."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.exceptions import ConvergenceWarning

from sksparse_nn import SparseLinearRegressor
from sksparse_nn.solvers import KKT_TOL, _least_squares, lambda_max, solve_group_lasso
from sksparse_nn.solvers._coordinate_descent import (
    SparseColumns,
    column_entries,
    wide_set,
)

EPS = np.finfo(np.float64).eps
# a text-like design: 400 rows, 1200 columns with ~12 nonzeros each, positive entries
N, P, DENSITY = 400, 1200, 0.03


@pytest.fixture(scope="module")
def text_like():
    rng = np.random.default_rng(0)
    X = sp.random(N, P, density=DENSITY, format="csr", random_state=1,
                  data_rvs=lambda k: rng.uniform(0.5, 1.5, size=k))  # fmt: skip
    coef = np.zeros(P)
    coef[:30] = 3.0 * rng.standard_normal(30)
    y = X @ coef + 0.5 * rng.standard_normal(N)
    return X, y


def test_the_route_compares_a_sets_entries_with_its_gram_block():
    X = sp.random(N, P, density=DENSITY, format="csr", random_state=0)
    assert column_entries(X) == pytest.approx(X.nnz / P)
    assert column_entries(X.toarray()) == N
    # dense: wider than the samples; sparse: more features than entries per column
    assert not wide_set(N, N) and wide_set(N + 1, N)
    assert wide_set(300, column_entries(X)) and not wide_set(300, N)
    assert not wide_set(200, column_entries(X))  # narrow sets keep the Gram route


def _kkt_violation(X, y, coef, lam, fit_intercept):
    """Largest violation of the Lasso's KKT conditions (singleton groups), written out."""
    Xd = X.toarray()
    if fit_intercept:
        Xd, y = Xd - Xd.mean(axis=0), y - y.mean()
    grad = Xd.T @ (Xd @ coef - y) / N
    scale = np.abs(Xd.T @ y / N).max()
    live = coef != 0
    viol = np.where(live, np.abs(grad + lam * np.sign(coef)), np.maximum(np.abs(grad) - lam, 0))
    return viol.max(), scale, live


@pytest.mark.numerics
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_reference_solves_wide_sparse_sets_on_their_sparse_columns(
    text_like, fit_intercept, monkeypatch
):
    X, y = text_like
    seen = []
    cd = _least_squares.least_squares_cd

    def spy(cols, *args, **kwargs):
        seen.append((cols.k, cols.dense))
        return cd(cols, *args, **kwargs)

    monkeypatch.setattr(_least_squares, "least_squares_cd", spy)
    labels, rho = np.arange(P), np.ones(P)
    lam = 0.004 * lambda_max(X, y, labels, rho, fit_intercept=fit_intercept)
    res = solve_group_lasso(X, y, lam, labels, rho, tol=1e-10, fit_intercept=fit_intercept)
    assert res.converged
    # sets wider than a column's entries (12) and than 256, never densified, some of
    # them narrower than the samples (where the dense rule keeps the Gram route)
    assert seen and not any(dense for _, dense in seen)
    assert any(256 < k <= N for k, _ in seen)
    viol, scale, live = _kkt_violation(X, y, res.coef, lam, fit_intercept)
    assert live.sum() > 256
    # the solver's rule (1e-10 of the scale) plus a recomputed gradient's rounding
    assert viol <= 1e-10 * scale + 1e4 * EPS * scale


@pytest.mark.numerics
@pytest.mark.parametrize("case", ["plain", "intercept", "sample weights"])
def test_estimator_solves_wide_sparse_sets_and_meets_the_kkt_conditions(text_like, case):
    from sksparse_nn.solvers import _curvature

    X, y = text_like
    fit_intercept = case != "plain"
    s = np.random.default_rng(2).uniform(0.2, 3.0, N) if case == "sample weights" else None
    columns = []
    original = _curvature.DesignCurvature.set_columns

    def spy(self, idx, ext):
        cols = original(self, idx, ext)
        columns.append(cols)
        return cols

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_curvature.DesignCurvature, "set_columns", spy)
        lam = 0.004 * lambda_max(X, y, np.arange(P), np.ones(P), fit_intercept=fit_intercept)
        est = SparseLinearRegressor(lam=lam, D=2, fit_intercept=fit_intercept)
        est.fit(X, y, sample_weight=s)
    assert est.n_iter_ == 0  # certified by the block steps
    if s is None:  # sparse columns, centred implicitly, some narrower than the samples
        assert columns
        assert all(isinstance(c, SparseColumns) and not c.dense for c in columns)
        assert any(256 < c.k <= N for c in columns)
    else:  # their centring is along sqrt(s): the Gram route instead, never the columns
        assert not columns

    w = np.ones(N) if s is None else s * N / s.sum()
    Xd = X.toarray()
    m, ybar = (w @ Xd / N, w @ y / N) if fit_intercept else (np.zeros(P), 0.0)
    Xc, yc = Xd - m, y - ybar
    grad = Xc.T @ (w * (Xc @ est.coef_ - yc)) / N
    scale = np.abs(Xc.T @ (w * yc) / N).max()
    coef = est.coef_
    live = coef != 0
    viol = np.where(live, np.abs(grad + lam * np.sign(coef)), np.maximum(np.abs(grad) - lam, 0))
    assert live.sum() > 256
    assert viol.max() <= KKT_TOL * scale + 1e4 * EPS * scale


@pytest.mark.parametrize("estimator", ["regressor", "classifier"])
@pytest.mark.parametrize("batch_size", [None, 64, "early stopping"])
def test_linear_training_never_densifies_sparse_x(estimator, batch_size, monkeypatch):
    # after the block steps a D = 3 fit trains by gradient steps, whose batches of sparse
    # X were densified (full batch: all of X, n x p); they are torch sparse tensors, and
    # the fit equals the one on the dense twin
    from sksparse_nn import SparseLinearClassifier
    from sksparse_nn.training import data as _training

    rng = np.random.default_rng(4)
    X = sp.random(300, 500, density=0.02, format="csr", random_state=5)
    score = X[:, :6] @ rng.standard_normal(6) * 3
    y = score + 0.1 * rng.standard_normal(300)
    if estimator == "classifier":
        y = (score > np.median(score)).astype(int)
    cls = SparseLinearRegressor if estimator == "regressor" else SparseLinearClassifier
    params = dict(lam=0.01, D=3, random_state=0, max_epochs=5)
    if batch_size == "early stopping":  # a validation split of the sparse dataset
        params.update(early_stopping=True)
    elif batch_size is not None:
        params.update(optimizer="adam", lr=0.01, batch_size=batch_size)
    batches = []
    rows = _training.ArrayDataset.rows

    def spy(self, index):
        out = rows(self, index)
        batches.append(out.layout)
        return out

    monkeypatch.setattr(_training.ArrayDataset, "rows", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no torch sparse-tensor warnings
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=ConvergenceWarning)  # 5 epochs: expected
        sparse = cls(**params).fit(X, y)
    assert sparse.n_iter_ > 0 and batches  # gradient epochs ran, on sparse batches
    assert all(layout == torch.sparse_coo for layout in batches)
    monkeypatch.undo()
    dense = cls(**params).fit(X.toarray(), y)
    np.testing.assert_array_equal(sparse.selected_features_, dense.selected_features_)
    # the same arithmetic up to the summation order of a sparse product, so both runs
    # stop by the same rule: an epoch lowers the objective by less than tol (relative,
    # 1e-12). Near a minimum the objective is quadratic, so two points that both pass the
    # rule agree in the coefficients to sqrt(tol) of their scale (10x: the curvature's
    # condition on the support); rounding can decide which step stops, so nothing tighter
    # holds on every machine. A different fit (another support or start) differs at the
    # size of the coefficients.
    scale = np.abs(dense.coef_).max()
    atol = 10 * np.sqrt(dense.tol) * scale
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=atol)


@pytest.mark.parametrize("estimator", ["regressor", "classifier"])
def test_a_warm_path_reads_csr_columns_through_one_store_not_a_copy_of_x(text_like, estimator):
    # CSR columns cost a pass over all nonzeros per slice: the working sets of a warm
    # path read one CSRColumns held by the data memo, which copies only the columns
    # the sets asked for (never a column-ordered copy of all of X), entry for entry
    from sksparse_nn import SparseLinearClassifier
    from sksparse_nn.solvers import _column_store, _curvature, _gated_logistic

    X, y = text_like
    if estimator == "classifier":
        y = (y > np.median(y)).astype(int)
        cls, target = SparseLinearClassifier, _gated_logistic.GatedLogisticProblem
    else:
        cls, target = SparseLinearRegressor, _curvature.DesignCurvature
    seen = []
    original = target.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(self.X_cols)

    est = cls(D=2, warm_start=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(target, "__init__", spy)
        for lam in (0.3, 0.1, 0.05):
            lam_max = lambda_max(X, y if estimator == "regressor" else y - y.mean(),
                                 np.arange(P), np.ones(P))  # fmt: skip
            est.set_params(lam=lam * lam_max).fit(X, y)
    store = seen[0]
    assert len(seen) >= 3 and all(c is store for c in seen)
    assert isinstance(store, _column_store.CSRColumns) and est._fit_memo.columns is store
    assert 0 < store.held.size < P and store.data.size < X.nnz
    held = store[:, store.held]
    expected = X.tocsc()[:, store.held]
    expected.sort_indices()
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(held, name), getattr(expected, name))
    # the same solution as a cold fit (both certified; the support is unique here)
    cold = cls(D=2, lam=est.lam).fit(X, y)
    np.testing.assert_array_equal(cold.selected_features_, est.selected_features_)


def test_csr_columns_are_the_csc_columns_and_kept_within_their_budget():
    # a request's columns are X's CSC columns, entry for entry (rows ascending); a
    # request within the held columns makes no pass over X; one outside them holds the
    # union while it fits the budget, else the request alone; X is not modified
    from sksparse_nn.solvers import _column_store
    from sksparse_nn.solvers._column_store import CSRColumns

    rng = np.random.default_rng(3)
    X = sp.random(60, 40, density=0.2, format="csr", random_state=4)
    before = X.copy()
    csc = X.tocsc()
    store = CSRColumns(X)
    a = np.array([7, 3, 30, 12])
    got, expected = store[:, a], csc[:, a]
    expected.sort_indices()
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    lo, hi, indices, data = store.pointers(a)
    for j, c in enumerate(a):
        col = csc[:, [c]]
        col.sort_indices()
        np.testing.assert_array_equal(indices[lo[j] : hi[j]], col.indices)
        np.testing.assert_array_equal(data[lo[j] : hi[j]], col.data)
    assert store.passes == 1
    store.pointers(a[::-1][:2])  # within the held columns: no pass
    assert store.passes == 1
    b = np.array([1, 30, 5])  # new columns: the union held (under the budget)
    np.testing.assert_array_equal(store[:, b].toarray(), csc[:, b].toarray())
    assert store.passes == 2 and set(store.held) == set(a) | set(b)
    with pytest.MonkeyPatch.context() as mp:  # a budget below the union: the request
        mp.setattr(_column_store, "_HELD_FRACTION", 0.0)
        small = CSRColumns(X)
        small.pointers(a)
        small.pointers(b)
        np.testing.assert_array_equal(small.held, np.sort(b))
    c = rng.permutation(40)  # every column, in any order
    np.testing.assert_array_equal(store[:, c].toarray(), csc[:, c].toarray())
    assert (X != before).nnz == 0 and X.has_canonical_format == before.has_canonical_format
    with pytest.raises(IndexError, match="columns only"):
        store[:3, a]


@pytest.mark.parametrize("group_size", [1, 5])
def test_coordinate_descent_holds_no_second_copy_of_a_sets_columns(group_size):
    # a dense set is copied once (SparseColumns); a model solve weights its entries as
    # it reads them and forms its sums and group bounds a chunk of columns at a time:
    # what it allocates beyond the set stays far below one more copy of its entries
    import tracemalloc

    from sksparse_nn.solvers._coordinate_descent import _model_cd

    rng = np.random.default_rng(group_size)
    n, k = 200, 5000  # 8 MB of entries; the chunks' temporaries are about 2 MB
    X = rng.standard_normal((n, k))
    ext = np.arange(k) // group_size
    cols = SparseColumns(X, np.arange(k), ext)
    h = rng.uniform(0.5, 1.5, n) / n
    cols.weights = h
    n_groups = k // group_size
    gw = -cols.tdot(h * rng.standard_normal(n))
    lam_rho = np.full(n_groups, 0.5 * np.abs(gw).max())
    tracemalloc.start()
    try:
        w, _, sweeps = _model_cd(cols, gw, np.zeros(k), h, ext, lam_rho, n_groups, 1e-10,
                                 None, 50)  # fmt: skip
        extra = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sweeps > 0 and np.any(w)
    # a weighted copy of the entries (or their densified slice) alone would be 8 MB
    assert extra < 0.4 * cols.data.nbytes


def test_a_csc_design_is_read_in_place():
    # CSC X is what the working sets read: kept as given (no CSR conversion, no column
    # copy, no copy of a set's columns); the fit is the CSR fit's, to the bit (the same
    # products in the same order). What the fit allocates is then vectors of the
    # features' or samples' length and a set's Gram block: below one copy of X (1.4 MB
    # here; it measured 0.68 copies, the route before this one over 2: a CSR and a CSC
    # copy of X, then a copy of each set's columns)
    import tracemalloc

    rng = np.random.default_rng(5)
    n, p = 2000, 2000
    X = sp.random(n, p, density=0.03, format="csc", random_state=2,
                  data_rvs=lambda k: rng.uniform(0.5, 1.5, size=k))  # fmt: skip
    y = X[:, :10] @ (3.0 * rng.standard_normal(10)) + rng.standard_normal(n)
    x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    lam = 0.01 * lambda_max(X, y[:, None], np.arange(p), np.ones(p), fit_intercept=False)
    before = X.copy()
    params = {"D": 2, "lam": lam, "fit_intercept": False}
    SparseLinearRegressor(**params).fit(X, y)  # kernels loaded, imports done
    tracemalloc.start()
    try:
        est = SparseLinearRegressor(**params).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.selected_features_.size > 100  # sets wider than a column's entries
    assert peak < 0.85 * x_bytes
    assert (X != before).nnz == 0 and X.format == "csc"  # untouched
    csr = SparseLinearRegressor(**params).fit(X.tocsr(), y)
    np.testing.assert_array_equal(est.coef_, csr.coef_)


def test_a_path_reads_a_csc_design_as_given(text_like):
    # without folds the path keeps sparse X's format (rows are indexed only for CV):
    # every fit's working sets read the caller's CSC matrix itself
    from sksparse_nn import regularization_path
    from sksparse_nn.solvers import _curvature

    X, y = text_like
    X = X.tocsc()
    seen = []
    original = _curvature.DesignCurvature.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(self.X_cols)

    est = SparseLinearRegressor(D=2)
    lam_max = est.lambda_max(X, y)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_curvature.DesignCurvature, "__init__", spy)
        path = regularization_path(est, X, y, lams=[0.2 * lam_max, 0.5 * lam_max])
    assert len(seen) == 2 and all(c is X for c in seen)
    assert path.n_selected[0] > path.n_selected[1] > 0
