"""Selections with a stated error: StabilitySelection (complementary pairs, the bound,
the region) and SelectFromPath (exactly k units), as scikit-learn selectors."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor
from sksparse_nn.compose import VariableModel
from sksparse_nn.selection import SelectFromPath, StabilitySelection, cpss_bound
from sksparse_nn.selection._bound import choose_region, region_sizes
from sksparse_nn.selection._subsamples import complementary_pairs

pytestmark = pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")


def _strong(n=120, p=12, seed=0):
    """Two strong features among ``p``: y = 2 x0 - 2 x1 + noise of sd 0.3."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    return X, 2 * X[:, 0] - 2 * X[:, 1] + 0.3 * rng.randn(n)


def _grid(est, X, y, n=6):
    """A short grid from 0.05 to 2 lam_max (the fits of the tests are few)."""
    return est.lambda_max(X, y) * np.geomspace(0.05, 2, n)


@pytest.fixture(scope="module")
def strong_fit():
    X, y = _strong()
    est = SparseLinearRegressor()
    sel = StabilitySelection(est, n_pairs=4, lams=_grid(est, X, y), random_state=0)
    return sel.fit(X, y), X


# ------------------------------------------------------------------------ pairs
def test_pairs_are_complementary_and_disjoint():
    rng = np.random.RandomState(0)
    for n in (10, 11):
        for A, B in complementary_pairs(n, 4, rng):
            assert not np.intersect1d(A, B).size
            assert np.array_equal(np.sort(np.concatenate([A, B])), np.arange(n))
            assert len(A) == (n + 1) // 2 and len(B) == n // 2
    pairs = complementary_pairs(50, 3, rng)
    assert not np.array_equal(pairs[0][0], pairs[1][0])  # fresh splits per pair


def test_pairs_are_stratified_by_class():
    classes = np.array([0] * 23 + [1] * 7 + [2] * 4)
    for A, B in complementary_pairs(len(classes), 5, np.random.RandomState(1), classes):
        for c in (0, 1, 2):
            assert abs(np.sum(classes[A] == c) - np.sum(classes[B] == c)) <= 1


def test_classifier_fit_stratifies_its_halves():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = (X[:, 0] > 0.8).astype(int)  # about 1 in 5 positive
    est = SparseLinearClassifier()
    # one lam, above lam_max: the halves matter here, not the fits
    lams = [2 * est.lambda_max(X, y)]
    sel = StabilitySelection(est, n_pairs=2, lams=lams, random_state=0).fit(X, y)
    for A, B in sel.pairs_:
        assert abs(y[A].sum() - y[B].sum()) <= 1
        assert not np.intersect1d(A, B).size and len(A) + len(B) == len(y)


# ------------------------------------------------------------------------ bound
def test_cpss_bound_formula():
    # q^2 / ((2 pi - 1) p): q = 4 units of p = 40 at pi = 0.9 gives 16 / 32
    assert cpss_bound(4, 40, 0.9) == pytest.approx(0.5)
    # at pi = 1 the bound is q^2 / p, and it grows as pi falls to 1/2
    assert cpss_bound(3, 9, 1.0) == pytest.approx(1.0)
    assert cpss_bound(3, 9, 0.6) > cpss_bound(3, 9, 0.8) > cpss_bound(3, 9, 1.0)
    with pytest.raises(ValueError, match="threshold"):
        cpss_bound(3, 9, 0.5)


def test_region_sizes_count_the_union_over_the_region():
    # one half selects unit 0 at the dense lam only, unit 1 at the sparse lam only
    half = np.array([[[True, False], [False, True]]])
    other = np.zeros_like(half)
    q = region_sizes(np.concatenate([half, other]))
    # region lams[0:] holds both units (union), lams[1:] one; mean over the two halves
    assert q.tolist() == [1.0, 0.5]


def test_choose_region_keeps_the_bound():
    p, q = 50, np.array([12.0, 8.0, 6.0, 4.0, 2.0, 0.0])
    start, threshold, bound, target = choose_region(q, p)
    # widest region with q <= sqrt((2 * 0.9 - 1) * p * 1) = sqrt(40) = 6.32
    assert start == 2 and target == 1.0
    assert threshold == pytest.approx(0.5 + 36 / 100)  # the smallest keeping bound 1
    assert bound == pytest.approx(1.0)
    start, threshold, bound, _ = choose_region(q, p, max_false_selections=0.2)
    assert q[start] <= np.sqrt(0.8 * p * 0.2) < q[start - 1]
    assert bound <= 0.2 + 1e-12 and 0.6 <= threshold <= 0.9
    start, threshold, bound, _ = choose_region(q, p, threshold=0.75)
    assert threshold == 0.75 and bound <= 1 and q[start] <= np.sqrt(0.5 * p) < q[start - 1]
    # nothing qualifies: even the sparsest lam selects too many
    assert choose_region(np.array([30.0, 20.0]), p)[0] is None


# ------------------------------------------------------------------------ selection
def test_strong_signal_is_found_and_noise_is_rare(strong_fit):
    sel, X = strong_fit
    assert sel.selected_features_.tolist() == [0, 1]
    assert sel.stability_scores_.shape == (X.shape[1], len(sel.lams_))
    start = np.searchsorted(sel.lams_, sel.lam_region_[0])
    noise = sel.stability_scores_[2:, start:]
    assert noise.max() < sel.threshold_ and noise.mean() < 0.1
    # the bound as stated on the fitted object
    assert sel.expected_false_selections_ == pytest.approx(
        cpss_bound(sel.n_selected_per_half_, X.shape[1], sel.threshold_)
    )
    assert sel.expected_false_selections_ <= sel.max_false_selections_ + 1e-12
    assert np.all(np.diff(sel.lams_) > 0)
    for A, B in sel.pairs_:
        assert not np.intersect1d(A, B).size and len(A) + len(B) == len(X)


def test_parallel_halves_give_the_sequential_result(strong_fit):
    from joblib import parallel_config

    sel, X = strong_fit
    _, y = _strong()
    with parallel_config(backend="threading"):  # joblib's dispatch, no process start-up
        par = clone(sel).set_params(n_jobs=2).fit(X, y)
    # the halves' paths run with cpu_count // 2 torch threads there, the caller's here:
    # rounding may differ, the selections may not. The scores are means of 0/1 selections,
    # and every one is clear (D = 3: dropped groups exactly 0, kept ones >= 1; a 1e-8
    # relative change of y changes none), so they agree exactly
    np.testing.assert_array_equal(par.stability_scores_, sel.stability_scores_)
    for (a, b), (c, d) in zip(par.pairs_, sel.pairs_, strict=True):
        assert np.array_equal(a, c) and np.array_equal(b, d)


def test_plumbing_pipeline_names_set_output(strong_fit):
    sel, X = strong_fit
    assert sel.get_support().tolist() == [j in (0, 1) for j in range(X.shape[1])]
    assert sel.transform(X).shape == (len(X), 2)
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    X2, y2 = _strong()
    fitted = clone(sel).set_params(n_pairs=1).fit(frame, y2)
    assert fitted.get_feature_names_out().tolist() == ["c0", "c1"]
    assert fitted.feature_names_in_.tolist() == frame.columns.tolist()
    out = clone(fitted).set_output(transform="pandas").fit(frame, y2).transform(frame)
    assert isinstance(out, pd.DataFrame) and out.columns.tolist() == ["c0", "c1"]
    pipe = make_pipeline(clone(fitted), LinearRegression()).fit(X2, y2)
    assert pipe.score(X2, y2) > 0.9
    assert "estimator__lam" in sel.get_params()  # grid-searchable nested parameters


def test_errors():
    X, y = _strong(n=40, p=5)
    both = StabilitySelection(SparseLinearRegressor(), threshold=0.8, max_false_selections=1)
    with pytest.raises(ValueError, match="not both"):
        both.fit(X, y)
    for bad in (0.5, 0.3, 1.2):
        with pytest.raises(InvalidParameterError, match="threshold"):
            StabilitySelection(SparseLinearRegressor(), threshold=bad).fit(X, y)
    with pytest.raises(InvalidParameterError, match="max_false_selections"):
        StabilitySelection(SparseLinearRegressor(), max_false_selections=0).fit(X, y)
    with pytest.raises(TypeError, match="sparse estimator of this package"):
        StabilitySelection(LinearRegression()).fit(X, y)
    with pytest.raises(ValueError, match="more than the 5 units"):
        SelectFromPath(SparseLinearRegressor(), n_features_to_select=6).fit(X, y)
    with pytest.raises(InvalidParameterError, match="n_features_to_select"):
        SelectFromPath(SparseLinearRegressor(), n_features_to_select=0).fit(X, y)
    with pytest.raises(ValueError, match="4 rows"):
        StabilitySelection(SparseLinearRegressor()).fit(X[:3], y[:3])
    X_copy, y_copy = X.copy(), y.copy()
    SelectFromPath(SparseLinearRegressor(), n_features_to_select=2).fit(X, y)
    assert np.array_equal(X, X_copy) and np.array_equal(y, y_copy)  # inputs untouched


def test_plot_stability_path(strong_fit):
    import matplotlib.pyplot as plt

    sel, X = strong_fit
    ax = sel.plot_stability_path()
    assert len(ax.lines) == X.shape[1] + 1  # every unit and the threshold
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["x0", "x1"]
    plt.close("all")


# ------------------------------------------------------------------------ units
def _block(n=120, seed=0):
    """x0 and two near-copies (corr ~0.995) carry y; five noise columns."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 8)
    X[:, 1:3] = X[:, [0]] + 0.1 * rng.randn(n, 2)
    return X, 2 * X[:, 0] + 0.5 * rng.randn(n)


def test_units_of_several_columns_count_as_one():
    X, y = _block()
    est = SparseLinearRegressor()  # D = 3: a fit keeps one member of the block
    kwargs = {"n_pairs": 2, "lams": _grid(est, X, y, n=4), "random_state": 0}
    labels = np.array([0, 0, 0, 1, 2, 3, 4, 5])
    sel = StabilitySelection(est, groups=labels, **kwargs).fit(X, y)
    # the block is one unit, selected on every half where some member is
    assert sel.n_units_ == 6 and sel.stability_scores_.shape == (6, len(sel.lams_))
    assert sel.selected_units_.tolist() == [0] and sel.selected_features_.tolist() == [0, 1, 2]
    alone = StabilitySelection(est, groups=None, **kwargs).fit(X, y)
    block = alone.stability_scores_[:3]  # the same halves, column by column
    # any member: at least as often as the likeliest member, at most their sum (1e-12:
    # means of the same 0/1 counts)
    assert np.all(sel.stability_scores_[0] >= block.max(axis=0) - 1e-12)
    assert np.all(sel.stability_scores_[0] <= block.sum(axis=0) + 1e-12)
    np.testing.assert_array_equal(sel.stability_scores_[1:], alone.stability_scores_[3:])
    # the bound counts units
    assert sel.expected_false_selections_ == pytest.approx(
        cpss_bound(sel.n_selected_per_half_, 6, sel.threshold_)
    )
    # "clusters" (the default): the correlation clusters (the block; the noise columns
    # alone)
    clusters = StabilitySelection(est, **kwargs).fit(X, y)
    np.testing.assert_array_equal(clusters.groups_, labels)
    np.testing.assert_array_equal(clusters.stability_scores_, sel.stability_scores_)
    with pytest.raises(ValueError, match="one label per unit of X \\(8\\)"):
        StabilitySelection(est, groups=[0, 1]).fit(X, y)
    # sparse X: no dense correlation matrix, the columns are the units
    from scipy import sparse

    on_sparse = StabilitySelection(est, **kwargs).fit(sparse.csr_matrix(X), y)
    np.testing.assert_array_equal(on_sparse.groups_, np.arange(8))


# ------------------------------------------------------------------------ exactly k
def _ladder(seed=0):
    """Three features of decreasing strength (4, 2, 1) among six."""
    rng = np.random.RandomState(seed)
    X = rng.randn(150, 6)
    return X, X @ np.array([4.0, 2.0, 1.0, 0, 0, 0]) + 0.1 * rng.randn(150)


def test_exact_k_bisects_between_bracketing_points():
    X, y = _ladder()
    est = SparseLinearRegressor(D=3)  # keeps only the three at a small lam (the lasso: five)
    lam_max = est.lambda_max(X, y)
    # a coarse grid whose points keep 3 and then 0 features: k = 1, 2 need bisection
    lams = [lam_max * 1e-3, lam_max * 2]
    for k in (1, 2):
        sel = SelectFromPath(est, n_features_to_select=k, lams=lams).fit(X, y)
        assert sel.path_.n_selected.tolist() == [3, 0]  # the grid has no point with k
        assert sel.get_support().sum() == k
        assert sel.bisections_ and len(sel.bisections_) <= sel.max_bisections
        assert not sel.tie_broken_ and sel.bisections_[-1][1] == k
        assert sel.selected_features_.tolist() == list(range(k))  # the strongest k
        assert lams[0] < sel.lam_ < lams[1]


def test_exact_k_breaks_ties_by_importance():
    rng = np.random.RandomState(1)
    X = rng.randn(150, 6)
    y = 3 * X[:, 0] + 1 * X[:, 1] + 0.1 * rng.randn(150)
    groups = [0, 0, 1, 1, 2, 2]  # features 0 and 1 leave together
    est = SparseLinearRegressor(groups=groups)
    sel = SelectFromPath(est, n_features_to_select=1, max_bisections=3, lams=_grid(est, X, y))
    sel.fit(X, y)
    assert sel.tie_broken_ and sel.get_support().sum() == 1
    assert sel.selected_features_.tolist() == [0]  # the larger weight of the pair
    assert len(sel.bisections_) == 3


def test_exact_k_refit_and_pipeline():
    X, y = _ladder()
    est = SparseLinearRegressor()
    sel = SelectFromPath(est, n_features_to_select=2, refit=True, lams=_grid(est, X, y))
    sel.fit(X, y)
    assert sel.estimator_.n_features_in_ == 2 and sel.estimator_.lam == 0
    # lam = 0: the refit keeps both columns and their least-squares weights
    ols = LinearRegression().fit(X[:, :2], y)
    np.testing.assert_allclose(sel.estimator_.coef_.ravel(), ols.coef_, rtol=1e-3)
    pipe = make_pipeline(clone(sel).set_params(refit=False), LinearRegression()).fit(X, y)
    assert pipe[0].transform(X).shape == (len(X), 2)


# ------------------------------------------------------------------------ variables
def test_variable_model_counts_variables():
    rng = np.random.RandomState(0)
    n = 120
    df = pd.DataFrame(
        {
            "color": rng.choice(["red", "blue", "green"], n),
            "size": rng.randn(n),
            "noise": rng.randn(n),
        }
    )
    y = df["color"].map({"red": 2.0, "blue": -2.0, "green": 0.0}) + 0.2 * rng.randn(n)
    model = VariableModel(SparseLinearRegressor())
    lams = _grid(model, df, y, 4)
    sel = StabilitySelection(model, n_pairs=1, lams=lams, random_state=0).fit(df, y)
    assert sel.stability_scores_.shape[0] == 3  # variables, not encoded columns
    assert sel.groups_.tolist() == [0, 1, 2]  # the default units: the variables
    assert sel.get_feature_names_out().tolist() == ["color"]
    assert sel.transform(df).columns.tolist() == ["color"]  # the raw table's column
    k = SelectFromPath(model, n_features_to_select=1, lams=lams).fit(df, y)
    assert k.get_support().tolist() == [True, False, False]
    # a table without a VariableModel: the default clusters need numbers, said before a fit
    with pytest.raises(ValueError, match='groups="clusters" needs numeric X'):
        StabilitySelection(SparseLinearRegressor(), lams=lams).fit(df, y)


# ------------------------------------------------------------------------ every family (slow)
@pytest.mark.slow
@pytest.mark.parametrize("family", ["mlp", "nam", "node"])
def test_every_family_gives_probabilities_and_exact_k(family):
    from sksparse_nn import DGatedMLPRegressor, DGatedNAMRegressor, NODERegressor

    est = {
        "mlp": DGatedMLPRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0),
        "nam": DGatedNAMRegressor(max_epochs=10, random_state=0),
        "node": NODERegressor(max_epochs=5, random_state=0),
    }[family]
    X, y = _strong(n=80, p=5)
    sel = StabilitySelection(est, n_pairs=2, n_lams=3, n_jobs=2, random_state=0).fit(X, y)
    assert sel.stability_scores_.shape == (5, len(sel.lams_))
    assert np.all((sel.stability_scores_ >= 0) & (sel.stability_scores_ <= 1))
    # probabilities are multiples of 1 / (2 n_pairs)
    np.testing.assert_allclose(sel.stability_scores_ * 4, np.round(sel.stability_scores_ * 4))
    k = SelectFromPath(est, n_features_to_select=2, n_lams=4).fit(X, y)
    assert k.get_support().sum() == 2
