"""The knockoff filter: threshold and e-value arithmetic, the S matrices and the knockoff
law, the path statistic, the selector and its errors."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils._param_validation import InvalidParameterError

from sksparse_nn import SparseLinearRegressor
from sksparse_nn.compose import VariableModel
from sksparse_nn.selection import (
    GaussianKnockoffs,
    KnockoffFilter,
    correlation_clusters,
    e_bh,
    estimate_correlation,
    importance_statistics,
    knockoff_e_values,
    knockoff_s_matrix,
    knockoff_threshold,
    path_statistics,
)

# eigenvalue slack of a PSD check: float64 rounding of p x p products with entries <= 2
PSD_TOL = 1e-9


def _correlated_sigma(p=8, block=3, rho_block=0.99, seed=0):
    """A correlation matrix with one block of features at corr ~rho_block (radius /
    perimeter / area) and the rest from a random factor model."""
    rng = np.random.default_rng(seed)
    loadings = rng.standard_normal((p, 2))
    C = loadings @ loadings.T + np.eye(p)
    C[:block, :block] += rho_block / (1 - rho_block) * np.ones((block, block))
    d = np.sqrt(np.diag(C))
    return C / np.outer(d, d)


# ------------------------------------------------------------------ threshold
def test_knockoff_plus_threshold_by_hand():
    W = np.array([5.0, 4.0, 3.0, -2.0, 1.0, -0.5, 0.0])
    # t = 0.5: (1 + 2) / 4; t = 1: (1 + 1) / 4; t = 3: (1 + 0) / 3 <= 1/3
    assert knockoff_threshold(W, 1 / 3) == 3.0
    assert knockoff_threshold(W, 0.5) == 1.0
    assert knockoff_threshold(W, 0.3) == np.inf  # (1 + 0) / 3 > 0.3, and t = 4: 1 / 2
    # without the +1 offset the count of negatives alone: t = 1 gives 1 / 4
    assert knockoff_threshold(W, 0.3, offset=0) == 1.0


@pytest.mark.parametrize("fdr", [0.1, 0.2])
def test_knockoff_plus_selects_nothing_or_at_least_one_over_q(fdr):
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(300):
        W = rng.standard_normal(40) + rng.choice([0.0, 3.0], 40)
        T = knockoff_threshold(W, fdr)
        sizes.append(np.sum(W >= T))
        if np.isfinite(T):  # the rule the threshold satisfies
            assert (1 + np.sum(W <= -T)) / np.sum(W >= T) <= fdr
    sizes = np.array(sizes)
    assert np.all((sizes == 0) | (sizes >= np.ceil(1 / fdr)))
    assert np.any(sizes > 0)  # the property is not vacuous


def test_e_bh_of_one_draw_is_knockoff_plus():
    rng = np.random.default_rng(1)
    for _ in range(100):
        W = rng.standard_normal(30) + rng.choice([0.0, 4.0], 30)
        e, T = knockoff_e_values(W, 0.2)
        chosen, _ = e_bh(e, 0.2)
        np.testing.assert_array_equal(chosen, W >= T)


def test_e_values_and_e_bh_by_hand():
    W = np.array([3.0, 2.0, 1.0, 1.0, -1.0])
    e, T = knockoff_e_values(W, 0.5)  # t = 1: (1 + 1) / 4 = 0.5
    assert T == 1.0
    np.testing.assert_allclose(e, [2.5, 2.5, 2.5, 2.5, 0.0])  # 5 / (1 + 1)
    chosen, cut = e_bh([10.0, 4.0, 1.0, 0.0], 0.5)  # cuts 8, 4, 8/3, 2: k = 2
    np.testing.assert_array_equal(chosen, [True, True, False, False])
    assert cut == 4.0
    assert e_bh(np.zeros(4), 0.5)[1] == np.inf
    # averaged e-values: a unit selected in one draw of two has half its e-value
    e2, _ = knockoff_e_values(-W, 0.5)
    assert np.all((e + e2) / 2 <= np.maximum(e, e2))


# ------------------------------------------------------------------ statistics
def test_path_statistics_signs_ties_and_swaps():
    # 3 units, columns: originals 0..2, knockoffs 3..5; ascending lams
    path = SimpleNamespace(
        lams=np.array([0.1, 0.2, 0.3]),
        selected=[np.array([0, 1, 3, 4]), np.array([0, 1, 4]), np.array([0])],
        importances=np.array([[3, 2, 0, 1, 2, 0], [3, 1, 0, 0, 2, 0], [3, 0, 0, 0, 0, 0.0]]),
    )
    units = np.array([0, 1, 2, 3, 4, 5])
    W = path_statistics(path, units, 3)
    # unit 0 outlasts its knockoff (0.3 vs 0.1); unit 1 ties at 0.2, loses on importance;
    # unit 2 and its knockoff never enter: 0
    np.testing.assert_allclose(W, [0.3, -0.2, 0.0])
    swapped = units.copy()
    swapped[[1, 4]] = swapped[[4, 1]]  # relabel: column 1 is now unit 1's knockoff
    np.testing.assert_allclose(path_statistics(path, swapped, 3), [0.3, 0.2, 0.0])


def test_importance_statistics_at_the_chosen_lam_and_swaps():
    # 2 units: unit 0 = columns 0, 1 (knockoffs 3, 4), unit 1 = column 2 (knockoff 5)
    path = SimpleNamespace(
        lams=np.array([0.1, 0.2, 0.4]),
        best_lam_=0.2,
        importances=np.array([[9, 9, 9, 9, 9, 9], [3, 4, 1, 0, 2, 2], [0, 0, 0, 0, 0, 0.0]]),
    )
    units = np.array([0, 0, 1, 2, 2, 3])
    # at lam 0.2: ||(3, 4)|| - ||(0, 2)|| = 3 and 1 - 2 = -1
    np.testing.assert_allclose(importance_statistics(path, units, 2), [3.0, -1.0])
    swapped = np.array([0, 0, 3, 2, 2, 1])  # unit 1 and its knockoff trade columns
    np.testing.assert_allclose(importance_statistics(path, swapped, 2), [3.0, 1.0])
    with pytest.raises(ValueError, match="cross-validated path"):
        importance_statistics(SimpleNamespace(best_lam_=None, importances=None), units, 2)


# ------------------------------------------------------------------ S and the knockoff law
@pytest.mark.parametrize("method", ["maxent", "mvr", "equicorrelated"])
def test_s_matrix_feasible(method):
    Sigma = _correlated_sigma()
    S = knockoff_s_matrix(Sigma, method=method)
    assert np.linalg.eigvalsh(2 * Sigma - S)[0] >= -PSD_TOL
    assert np.all(np.diag(S) > 0)
    np.testing.assert_array_equal(S, np.diag(np.diag(S)))
    if method != "equicorrelated":  # the optimizers beat the equicorrelated choice
        equi = knockoff_s_matrix(Sigma, method="equicorrelated")
        assert np.diag(S)[3:].min() > np.diag(equi)[3:].min()


@pytest.mark.parametrize("method", ["maxent", "equicorrelated"])
def test_group_knockoffs_block_structure_and_swap_invariance(method):
    Sigma = _correlated_sigma()
    groups = np.array([0, 0, 0, 1, 2, 2, 3, 4])
    X = np.random.default_rng(0).multivariate_normal(np.zeros(8), Sigma, size=50)
    law = GaussianKnockoffs(method=method, groups=groups).fit(X)
    S, Sig = law.S_, law.corr_
    same = groups[:, None] == groups[None, :]
    assert np.all(S[~same] == 0)  # block-diagonal over the groups
    assert np.linalg.eigvalsh(2 * Sig - S)[0] >= -PSD_TOL
    assert np.linalg.eigvalsh(S)[0] >= -PSD_TOL
    # population law of [Z, Z~] from the sampler's conditional: Z~ = Z M + N, Cov N = R'R
    M, R = law.mean_map_, law.noise_root_
    G = np.block([[Sig, Sig @ M], [M.T @ Sig, M.T @ Sig @ M + R.T @ R]])
    np.testing.assert_allclose(G[:8, 8:], Sig - S, atol=1e-10)
    for g in range(5):  # swapping any group with its knockoffs leaves G unchanged
        order = np.arange(16)
        cols = np.flatnonzero(groups == g)
        order[cols], order[cols + 8] = cols + 8, cols
        np.testing.assert_allclose(G[np.ix_(order, order)], G, atol=1e-10)


def test_knockoff_draws_follow_the_law():
    Sigma = _correlated_sigma(p=4, block=2, rho_block=0.9)
    rng = np.random.default_rng(0)
    n = 20000
    X = rng.multivariate_normal(np.zeros(4), Sigma, size=n) * 3.0 + 1.0
    law = GaussianKnockoffs().fit(X)
    Xt = law.sample(X, rng)
    joint = np.corrcoef(np.hstack([X, Xt]), rowvar=False)
    expected = np.block([[law.corr_, law.corr_ - law.S_], [law.corr_ - law.S_, law.corr_]])
    # sampling error of a correlation ~ 1 / sqrt(n) = 0.007: 5 of them
    np.testing.assert_allclose(joint, expected, atol=5 / np.sqrt(n))
    np.testing.assert_allclose(Xt.mean(axis=0), 1.0, atol=5 * 3 / np.sqrt(n))


def test_covariance_estimate_when_n_below_p():
    X = np.random.default_rng(0).standard_normal((10, 30))
    _, _, corr = estimate_correlation(X)
    assert np.linalg.eigvalsh(corr)[0] > 0  # shrinkage keeps it invertible
    assert knockoff_s_matrix(corr).shape == (30, 30)


def test_clusters_join_correlated_features_only():
    Sigma = _correlated_sigma()
    labels = correlation_clusters(Sigma, 0.9)
    assert labels[0] == labels[1] == labels[2]
    assert np.sum(labels == labels[0]) == 3
    np.testing.assert_array_equal(correlation_clusters(Sigma, 1.0), np.arange(8))


@pytest.mark.slow  # knockpy's import (cvxpy) and solvers: ~9 s
def test_s_matrices_match_knockpy():
    smatrix = pytest.importorskip("knockpy.smatrix")
    Sigma = _correlated_sigma(p=10)

    def entropy(S):
        return np.linalg.slogdet(2 * Sigma - S)[1] + np.linalg.slogdet(S)[1]

    def reconstructability(S):
        return np.trace(np.linalg.inv(2 * Sigma - S)) + np.trace(np.linalg.inv(S))

    # both solve convex problems: ours is at least as good as knockpy's (1e-4: its
    # solvers' stopping tolerance on these objectives)
    theirs = smatrix.compute_smatrix(Sigma, method="maxent")
    assert entropy(knockoff_s_matrix(Sigma, method="maxent")) >= entropy(theirs) - 1e-4
    theirs = smatrix.compute_smatrix(Sigma, method="mvr")
    ours = knockoff_s_matrix(Sigma, method="mvr")
    assert reconstructability(ours) <= reconstructability(theirs) + 1e-4
    groups = np.array([0, 0, 0, 1, 2, 3, 4, 5, 6, 7])
    theirs = smatrix.compute_smatrix(Sigma, method="maxent", groups=groups + 1)
    ours = knockoff_s_matrix(Sigma, method="maxent", groups=groups)
    assert entropy(ours) >= entropy(theirs) - 1e-4
    assert np.linalg.eigvalsh(2 * Sigma - theirs)[0] >= -1e-6  # knockpy's is feasible too


# ------------------------------------------------------------------ the filter
@pytest.fixture(scope="module")
def strong_linear():
    rng = np.random.RandomState(0)
    X = rng.randn(150, 16)
    y = X[:, :6] @ np.full(6, 2.0) + 0.5 * rng.randn(150)
    # 3 folds, 8 lams: the CV paths of the default statistic, kept small
    kf = KnockoffFilter(SparseLinearRegressor(), fdr=0.2, n_draws=2, cv=3, n_lams=8, random_state=0)
    return X, y, kf.fit(X, y)


def test_filter_selects_strong_true_features(strong_linear):
    X, y, kf = strong_linear
    assert set(range(6)) <= set(kf.selected_features_)
    assert kf.n_selected_ == kf.selected_features_.size >= 5  # 1 / fdr
    assert kf.statistics_.shape == (2, kf.n_units_)
    assert np.all(kf.statistics_[:, :6] > 0)
    assert kf.draw_fdr_ == 0.2 and np.isfinite(kf.threshold_)
    np.testing.assert_array_equal(kf.get_support(indices=True), kf.selected_features_)
    # the default statistic: importances at the CV-chosen lam, |coef| differences here
    assert kf.statistic == "importance"
    lam = KnockoffFilter(
        SparseLinearRegressor(), fdr=0.2, statistic="lam", n_draws=2, n_lams=12, random_state=0
    ).fit(X, y)
    assert set(range(6)) <= set(lam.selected_features_)
    assert np.all(lam.statistics_[:, :6] > 0)


def test_units_clusters_by_default_columns_with_none():
    # the same spelling as StabilitySelection: "clusters" (default), None, labels
    rng = np.random.RandomState(1)
    X = rng.randn(60, 5)
    X[:, 1] = X[:, 0] + 0.05 * rng.randn(60)  # correlation ~0.999 with column 0
    y = X[:, 0] + X[:, 3]
    kwargs = {"statistic": "lam", "n_lams": 4, "random_state": 0}
    default = KnockoffFilter(SparseLinearRegressor(), **kwargs).fit(X, y)
    assert default.groups_[0] == default.groups_[1] and default.n_units_ == 4
    alone = KnockoffFilter(SparseLinearRegressor(), groups=None, **kwargs).fit(X, y)
    np.testing.assert_array_equal(alone.groups_, np.arange(5))


def test_selector_plumbing(strong_linear):
    X, y, kf = strong_linear
    assert kf.transform(X).shape == (150, kf.n_selected_)
    names = [f"f{j}" for j in range(16)]
    frame = pd.DataFrame(X, columns=names)
    kf2 = KnockoffFilter(
        SparseLinearRegressor(), fdr=0.2, statistic="lam", n_draws=1, n_lams=10, random_state=0
    )
    pipe = make_pipeline(FunctionTransformer(), kf2).set_output(transform="pandas")
    out = pipe.fit(frame, y).transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(kf2.get_feature_names_out())
    assert {"f0", "f1", "f2", "f3", "f4", "f5"} <= set(out.columns)


def test_filter_on_variables_of_a_table():
    rng = np.random.RandomState(1)
    n = 150
    frame = pd.DataFrame(rng.randn(n, 6), columns=[f"x{j}" for j in range(6)])
    frame["color"] = rng.choice(["red", "blue", "green"], n)
    effect = frame["color"].map({"red": 2.0, "blue": -2.0, "green": 0.0})
    y = effect + frame[["x0", "x1", "x2", "x3"]].sum(axis=1) * 1.5 + 0.3 * rng.randn(n)
    model = VariableModel(SparseLinearRegressor())
    kf = KnockoffFilter(model, fdr=0.2, n_draws=1, n_lams=10, random_state=0).fit(frame, y)
    assert kf.n_units_ == 7  # variables, the categorical's columns one unit
    assert kf.get_support().shape == (7,)
    assert {"x0", "x1", "x2", "x3", "color"} <= set(kf.get_feature_names_out())
    assert list(kf.transform(frame).columns) == list(kf.get_feature_names_out())


@pytest.mark.parametrize("fdr", [0.0, 1.0, 1.5])
def test_fdr_outside_unit_interval(fdr):
    with pytest.raises(InvalidParameterError, match="fdr"):
        KnockoffFilter(SparseLinearRegressor(), fdr=fdr).fit(np.ones((5, 2)), np.ones(5))


def test_bad_inputs_say_what_to_do():
    X = np.array([["a", 1.0], ["b", 2.0], ["a", 3.0]], dtype=object)
    with pytest.raises(ValueError, match="encode first"):
        KnockoffFilter(SparseLinearRegressor()).fit(X, np.ones(3))
    with pytest.raises(ValueError, match="one label per unit of X"):
        KnockoffFilter(SparseLinearRegressor(), groups=[0, 1]).fit(np.ones((5, 3)), np.ones(5))
    with pytest.raises(ValueError, match="singleton groups only"):
        knockoff_s_matrix(np.eye(3), groups=[0, 0, 1], method="mvr")
    with pytest.raises(ValueError, match="NaN"):
        KnockoffFilter(SparseLinearRegressor()).fit(np.full((5, 2), np.nan), np.ones(5))


def test_inputs_not_modified(strong_linear):
    X, y, _ = strong_linear
    X0, y0 = X.copy(), y.copy()
    groups = np.arange(16)
    KnockoffFilter(
        SparseLinearRegressor(),
        groups=groups,
        statistic="lam",
        n_draws=1,
        n_lams=10,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(groups, np.arange(16))
