"""The NAM's pairwise interactions (sparse GA2M): choice of pairs, purity, additivity,
selection, explanations, compaction, persistence."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from sksparse_nn import regularization_path
from sksparse_nn.datasets import make_interaction_regression
from sksparse_nn.estimators._pair_screening import Screening, screen_pairs
from sksparse_nn.estimators.nam import DGatedNAMClassifier, DGatedNAMRegressor
from sksparse_nn.nn.nam import NAM

# Tiny fits: the properties tested hold for any weights, not only for converged ones.
TINY = {"hidden_layer_sizes": (8,), "batch_size": 50, "max_epochs": 4, "random_state": 0}
EPS32 = np.finfo(np.float32).eps


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_epochs ends these fits early on purpose
        return fit()


@pytest.fixture(scope="module")
def data():
    X, y = make_interaction_regression(n_samples=200, n_features=6, random_state=0)
    return pd.DataFrame(X, columns=[f"c{j}" for j in range(6)]), y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    est = DGatedNAMRegressor(lam=1e-3, interactions=[("c0", "c1"), (2, 3)], **TINY)
    return _quiet(lambda: est.fit(X, y))


def _scale(est, X):
    """The size of the terms a sum adds up: float32 rounding is relative to it."""
    return np.abs(est.contributions(X)).sum(axis=1).max() + abs(est.intercept_)


def test_default_has_no_interactions(data):
    X, y = data
    est = _quiet(lambda: DGatedNAMRegressor(**TINY).fit(X, y))
    assert est.module_.interactions is None
    assert est.interaction_pairs_.shape == (0, 2)
    assert len(est.terms_) == 6


def test_explicit_pairs_by_name_and_index(fitted):
    assert fitted.interaction_pairs_.tolist() == [[0, 1], [2, 3]]
    assert list(fitted.term_names_[6:]) == ["c0 x c1", "c2 x c3"]
    assert [t.tolist() for t in fitted.terms_[6:]] == [[0, 1], [2, 3]]


def test_contributions_sum_to_the_prediction(fitted, data):
    X, _ = data
    contrib = fitted.contributions(X)
    assert contrib.shape == (len(X), 8)
    # float32 terms summed in another order: each of the 9 terms rounds once (eps32)
    tol = 9 * EPS32 * _scale(fitted, X)
    np.testing.assert_allclose(contrib.sum(axis=1) + fitted.intercept_, fitted.predict(X), atol=tol)


def test_pairs_are_pure(fitted, data):
    """Averaged over the training data's values of one side, a pair is 0 for every value
    of the other side: it holds no main effect."""
    X, _ = data
    for t, (a, b) in zip((6, 7), fitted.interaction_pairs_, strict=True):
        for fixed, other in ((a, b), (b, a)):
            for value in np.linspace(-1, 1, 5):
                Z = X.copy()
                Z.iloc[:, fixed] = value
                f = fitted.contributions(Z)[:, t]
                assert abs(f.mean()) <= 4 * EPS32 * np.abs(f).max() + 1e-12, (t, other)


def test_shape_functions_give_pair_surfaces(fitted):
    curves = fitted.shape_functions(grid=7)
    xa, xb, f = curves[6]
    assert xa.shape == xb.shape == (7,) and f.shape == (7, 7)
    # the surface is the pair's contribution at the grid points (others at 0)
    rows = np.zeros((1, 6))
    rows[0, :2] = xa[2], xb[5]
    frame = pd.DataFrame(rows, columns=[f"c{j}" for j in range(6)])
    assert fitted.contributions(frame)[0, 6] == pytest.approx(f[2, 5], abs=1e-6)


def test_explain_is_a_waterfall_of_the_output(fitted, data):
    X, _ = data
    frame = fitted.explain(X.iloc[:5])
    kept = list(fitted.term_names_[fitted.selected_terms_])
    assert list(frame.columns) == ["intercept", *kept, "output"]
    assert (frame.index == X.index[:5]).all()
    tol = 9 * EPS32 * _scale(fitted, X)
    np.testing.assert_allclose(frame["output"], fitted.predict(X.iloc[:5]), atol=tol)
    np.testing.assert_allclose(frame.drop(columns="output").sum(axis=1), frame["output"])


def test_compact_and_pickle_keep_the_pairs(fitted, data):
    X, _ = data
    compact = fitted.compact()
    columns = sorted({int(c) for t in fitted.selected_terms_ for c in fitted.terms_[t]})
    out = compact(torch.as_tensor(X.to_numpy()[:, columns], dtype=torch.float32))
    tol = 9 * EPS32 * _scale(fitted, X)
    np.testing.assert_allclose(out.detach().numpy().ravel(), fitted.predict(X), atol=tol)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))


def test_removed_pairs_are_exactly_zero(data):
    X, y = data
    X, y = X.iloc[:100], y[:100]
    # 160 steps: enough for lam = 50 to shrink every group below zero_tol
    est = DGatedNAMRegressor(
        lam=50.0, interactions=2, **{**TINY, "batch_size": 25, "max_epochs": 40}
    )
    est = _quiet(lambda: est.fit(X, y))
    assert est.selected_terms_.size == 0
    assert np.all(est.contributions(X) == 0.0)
    assert torch.all(est.module_.interactions.means == 0.0)


def test_budget_screens_the_true_pair_first():
    X, y = make_interaction_regression(n_samples=600, n_features=8, noise=0.2, random_state=1)
    once = {**TINY, "max_epochs": 1}  # the pairs are chosen before training
    est = _quiet(lambda: DGatedNAMRegressor(interactions=3, **once).fit(X, y))
    assert len(est.interaction_pairs_) == 3
    assert est.interaction_pairs_[0].tolist() == [0, 1]  # the simulation's pair
    auto = _quiet(lambda: DGatedNAMRegressor(interactions="auto", **once).fit(X, y))
    assert auto.interaction_pairs_.tolist() == [[0, 1]]  # the one significant of 28


def test_screening_is_calibrated_without_interactions():
    """With additive data every pair's p-value is uniform (the chi-square statistic's
    degrees of freedom are right), and "auto" finds a pair in at most about 5% of the
    tables (Bonferroni's family-wise level; a fixed 16 x 16 table without degrees of
    freedom would rank noise by its number of cells and always find some)."""
    p_values, any_pair = [], []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-1, 1, size=(400, 8))
        X[:, 7] = rng.integers(3, size=400)  # a few-valued column: fewer degrees of freedom
        y = np.sin(3 * X[:, 0]) + X[:, 1] + X[:, 7] + rng.normal(size=400)
        screening = screen_pairs(X, y[:, None], [[j] for j in range(8)])
        p_values.extend(screening.p_values)
        any_pair.append(bool(screening.significant(0.05)))
    # 60 x 28 p-values: their mean is 0.5 +- 0.03 (3 SE of a uniform's, pairs sharing a
    # table are dependent, hence the margin)
    assert abs(np.mean(p_values) - 0.5) < 0.05
    assert np.mean(any_pair) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 60)


def test_robust_screening_finds_an_interaction_under_heavy_tails():
    """Noise of a t(1.5) distribution inflates the residual variance, so the plain test
    misses a real interaction that residuals clipped at 3 robust standard deviations
    show (30 tables of 600 rows; no other pair is found more than ~5% of the time)."""
    found = {False: [], True: []}
    for seed in range(30):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-1, 1, size=(600, 6))
        y = np.sin(3 * X[:, 0]) + X[:, 1] + 1.5 * X[:, 0] * X[:, 1]
        y += 0.5 * rng.standard_t(1.5, size=600)
        for robust in found:
            kept = screen_pairs(X, y[:, None], [[j] for j in range(6)], robust=robust)
            found[robust].append(kept.significant(0.05)[:1] == [(0, 1)])
    assert np.mean(found[True]) >= 0.8
    assert np.mean(found[False]) <= np.mean(found[True]) - 0.2


@pytest.mark.parametrize(
    "p_values, n_kept",
    [
        ([0.001, 0.0125, 0.03, 0.5], 2),  # Bonferroni: p <= 0.05 / 4 candidates
        ([0.02, 0.02, 0.02, 0.04], 0),  # no step-up: each p is held to the same bound
    ],
)
def test_significant_pairs_hold_the_family_wise_level(p_values, n_kept):
    pairs = [(0, 1), (0, 2), (1, 2), (2, 3)]
    screening = Screening(pairs, np.ones(4), np.ones(4, dtype=int), np.array(p_values))
    assert screening.significant(0.05) == pairs[:n_kept]


def test_screening_ignores_the_few_rows_of_rare_levels():
    """Two categoricals with five rare levels each (~6 rows) and heavy-tailed noise, no
    interaction: a cell of one or two rows with an outlier would look like one (a
    pair found in ~20% of such tables when every cell counts); cells of fewer than
    ``MIN_CELL_ROWS`` are left out of the test, which keeps its family-wise level."""
    found = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        levels = [rng.choice(6, size=800, p=[0.96] + [0.008] * 5) for _ in range(2)]
        X = np.column_stack([rng.uniform(-1, 1, (800, 2)), *(np.eye(6)[v] for v in levels)])
        y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.3 * rng.standard_t(2, size=800)
        terms = [[0], [1], list(range(2, 8)), list(range(8, 14))]
        found.append(bool(screen_pairs(X, y[:, None], terms).significant(0.05)))
    assert np.mean(found) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 40)


def test_pair_with_a_group_takes_the_whole_group():
    rng = np.random.RandomState(0)
    level = rng.randint(3, size=150)
    X = np.column_stack([rng.uniform(-1, 1, 150), np.eye(3)[level]])
    y = X[:, 0] * (level - 1.0) + 0.1 * rng.randn(150)
    groups = [0, 1, 1, 1]  # the categorical's one-hot columns are one term
    est = DGatedNAMRegressor(lam=1e-3, groups=groups, interactions=[(0, 2)], **TINY)
    est = _quiet(lambda: est.fit(X, y))
    assert est.terms_[-1].tolist() == [0, 1, 2, 3]
    assert est.term_names_[-1] == "x0 x [x1, x2, x3]"
    xa, levels, f = est.shape_functions(grid=4)[2]
    assert xa.shape == (4,) and levels.shape == (3, 3) and f.shape == (4, 3)
    assert sorted(map(tuple, levels)) == sorted(map(tuple, np.eye(3)))


@pytest.mark.parametrize(
    "interactions, match",
    [
        ([("c0", "zz")], "no such column"),
        ([(0, 0)], "one term twice"),
        ([(0, 1), (1, 0)], "given twice"),
        ([(0, 9)], "not an index below 6"),
        ([(0, 1, 2)], "two features"),
    ],
)
def test_bad_pairs_are_named(data, interactions, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        DGatedNAMRegressor(interactions=interactions, **TINY).fit(X, y)


def test_user_pairs_are_not_modified(data):
    X, y = data
    pairs = [["c0", "c1"]]
    _quiet(lambda: DGatedNAMRegressor(interactions=pairs, **TINY).fit(X, y))
    assert pairs == [["c0", "c1"]]


def test_classifier_with_interactions(data):
    X, y = data
    est = DGatedNAMClassifier(lam=1e-3, interactions=[(0, 1)], **TINY)
    est = _quiet(lambda: est.fit(X, y > np.median(y)))
    tol = 9 * EPS32 * _scale(est, X)
    np.testing.assert_allclose(
        est.contributions(X).sum(axis=1) + est.intercept_, est.decision_function(X), atol=tol
    )


def test_path_counts_terms_and_warm_starts_keep_pairs(data):
    X, y = data
    est = DGatedNAMRegressor(interactions=[(0, 1)], **TINY)
    path = _quiet(lambda: regularization_path(est, X, y, lams=[1e-3, 2e-3], keep_estimators=True))
    # all 6 features by their mains, and the pair: 7 terms (4 epochs leave no group at 0)
    assert path.n_selected.tolist() == [6, 6] and path.n_terms.tolist() == [7, 7]
    for fit, n in zip(path.estimators, path.n_terms, strict=True):
        assert fit.interaction_pairs_.tolist() == [[0, 1]]
        assert len(fit.selected_terms_) == n
    assert "n_terms" in path.to_frame()
    plain = _quiet(lambda: regularization_path(DGatedNAMRegressor(**TINY), X, y, lams=[1e-3]))
    assert plain.n_terms[0] == len(plain.selected[0])


@pytest.mark.parametrize("training", [True, False])
def test_compiled_pairs_match_the_tensor_products(training):
    """The pairs' compiled paths (inputs without gradient: the factors alone, and the
    fused sum of all pairs) against the batched tensor products (taken when the input
    needs a gradient): outputs, every parameter's gradient and the running means;
    sides of one and of two columns, a removed pair exactly 0. float64, so agreement
    to 1e-10 relative leaves room only for reassociated sums."""
    from sksparse_nn.nn._nam_pairs import PairTerms

    torch.manual_seed(0)
    pairs = [[[0], [1]], [[2, 3], [4]], [[1], [2, 3]]]
    module = PairTerms(5, pairs, hidden=16, rank=4, n_outputs=2).double().train(training)
    with torch.no_grad():
        module.means.uniform_(-0.1, 0.1)
        module.first[4:6].zero_()  # pair 2 removed: zero factors, means 0 (center_)
        module.means[4:6].zero_()
    start = module.means.clone()
    x = torch.randn(40, 5, dtype=torch.float64)
    weights = torch.linspace(-1, 1, 80, dtype=torch.float64).reshape(40, 2)

    def run(compute, grad_x):
        module.zero_grad()
        module.means.copy_(start)
        out = compute(x.clone().requires_grad_(grad_x))  # per pair (3-d) or summed
        total = out.sum(dim=0) if out.dim() == 3 else out
        (total * weights).sum().backward()
        grads = [p.grad.clone() for p in (module.first, module.out, module.weight)]
        return out.detach(), grads, module.means.clone()

    tensor = run(module.pair_outputs, True)
    assert torch.equal(tensor[0][2], torch.zeros_like(tensor[0][2]))
    for compiled in (run(module.pair_outputs, False), run(module, False)):
        expected = tensor[0] if compiled[0].dim() == 3 else tensor[0].sum(dim=0)
        torch.testing.assert_close(compiled[0], expected, rtol=1e-10, atol=1e-12)
        for a, b in zip([*compiled[1], compiled[2]], [*tensor[1], tensor[2]], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert torch.equal(run(module.pair_outputs, False)[0][2], torch.zeros_like(tensor[0][2]))


def test_pairs_deepen_the_default_grid():
    """With pairs, paths go deeper than the plain NAM's grid, at a ratio between
    neighbouring lams no larger; without, the grid is the plain NAM's, its folds
    fitting every lam."""
    plain = DGatedNAMRegressor().default_grid()
    assert DGatedNAMRegressor(interactions=[]).default_grid() == plain
    deep = DGatedNAMRegressor(interactions="auto").default_grid()
    assert deep["lam_min_ratio"] < plain["lam_min_ratio"]
    step = [g["lam_min_ratio"] ** (-1 / (g["n_lams"] - 1)) for g in (plain, deep)]
    assert step[1] <= step[0]
    # the plain NAM's folds fit every lam (its step is fused); the GA2M's every second
    assert plain.get("cv_stride", 1) == 1 and deep["cv_stride"] == 2


def test_module_pairs_without_terms_read_their_columns():
    """A compact module whose pair reads a column that no main term reads."""
    nam = NAM(3, (4,), terms=[[0]], pairs=[[[1], [2]]])
    x = torch.randn(5, 3)
    assert nam.contributions(x).shape == (5, 2, 1)
    torch.testing.assert_close(nam(x), nam.contributions(x).sum(dim=1) + nam.intercept)


def test_plots_draw_a_heat_map_per_pair_and_a_waterfall(fitted, data):
    plt = pytest.importorskip("matplotlib.pyplot")
    from matplotlib.collections import QuadMesh

    from sksparse_nn.plotting import plot_explanation, plot_shape_functions

    X, _ = data
    axes = plot_shape_functions(fitted, X, grid=9)
    titles = [ax.get_title() for ax in axes]
    assert titles[-2:] == ["c0 x c1", "c2 x c3"]
    assert all(any(isinstance(c, QuadMesh) for c in ax.collections) for ax in axes[-2:])
    ax = plot_explanation(fitted, X.iloc[[3]], max_terms=3)
    bars = ax.patches
    assert len(bars) == 4  # the 3 largest terms and one bar for the other 5
    end = bars[-1].get_x() + bars[-1].get_width()
    assert end == pytest.approx(fitted.explain(X.iloc[[3]])["output"].iloc[0], abs=1e-9)
    with pytest.raises(ValueError, match="one row"):
        plot_explanation(fitted, X.iloc[:2].to_numpy())
    plt.close("all")


def test_onnx_export_runs_the_kept_pairs(fitted, data):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    X, _ = data
    session = ort.InferenceSession(fitted.to_onnx().SerializeToString())
    name = session.get_inputs()[0].name
    out = session.run(None, {name: X.to_numpy(dtype=np.float32)})[0].ravel()
    tol = 9 * EPS32 * _scale(fitted, X)  # float32 graph against the float64 predict
    np.testing.assert_allclose(out, fitted.predict(X), atol=tol)


def test_variable_model_pairs_whole_variables():
    from sksparse_nn import VariableModel

    X, y = make_interaction_regression(n_samples=120, n_features=4, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["d"] = np.where(X[:, 3] > 0, "hi", "lo")  # a categorical: one term, two columns
    est = DGatedNAMRegressor(lam=1e-3, interactions=4, **TINY)
    model = _quiet(lambda: VariableModel(est).fit(frame, y))
    inner = model.estimator_
    assert len(inner.interaction_pairs_) == 4  # the budget, of 6 pairs
    n_main = len(inner.terms_) - 4
    sizes = {len(inner.terms_[a]) + len(inner.terms_[b]) for a, b in inner.interaction_pairs_}
    assert [len(t) for t in inner.terms_[n_main:]] == [
        len(inner.terms_[a]) + len(inner.terms_[b]) for a, b in inner.interaction_pairs_
    ]
    assert sizes <= {2, 3}  # a pair with d holds both of its columns


@pytest.mark.slow
def test_default_search_keeps_exactly_the_true_terms():
    """The done-when simulation: 4 main effects and 1 pure pair among 20 features. The
    default cross-validated path finds the pair and keeps exactly those 5 terms, the
    others at exactly 0 with a clean gap, over a wide range of lams (a score as good as
    the best); its choice keeps all of them with a clean gap, and the one-standard-error
    choice exactly them.

    Which lam scores best is a near tie between neighbours: 0.88106 (the true terms and
    a noise term at norm 0.48) against 0.88098 (exactly the true terms) with a standard
    error of 0.008, decided by the float32 training's rounding (with FMA in the
    compiled NAM step the denser lam won, without it the other), so the chosen fit may
    keep a noise term besides the true ones."""
    from sksparse_nn import SparsePathCV

    X, y = make_interaction_regression(n_samples=1000, random_state=0)
    search = SparsePathCV(DGatedNAMRegressor(interactions="auto", random_state=0))
    search = _quiet(lambda: search.fit(X, y))
    est = search.estimator_
    # the one significant pair (float64 screening; the next p-value 0.025, 100x the bound)
    assert est.interaction_pairs_.tolist() == [[0, 1]]
    assert {"x0", "x1", "x2", "x3", "x0 x x1"} <= set(est.term_names_[est.selected_terms_])
    # a clean gap: the smallest kept norm 4 orders above the largest removed one and the
    # collapse threshold (a group still in transit to zero would sit in between)
    dead, live = est.sparsity_gap_
    assert live > 1e4 * max(dead, est.zero_tol)
    # the points that keep exactly the true terms: features 0-3 and 5 terms (on those
    # features there are only their mains and the pair), fits that converged (a clean
    # gap); the best of them within one standard error of the best score, and the
    # sparsest lam within it (lam_1se_) one of them
    path = search.cv_path_
    exact = path.converged & np.array(
        [
            n == 5 and list(s) == [0, 1, 2, 3]
            for n, s in zip(path.n_terms, path.selected, strict=True)
        ]
    )
    best = path.index_of(search.best_lam_)
    assert np.nanmax(np.where(exact, path.cv_mean, np.nan)) >= path.cv_mean[best] - path.cv_se[best]
    assert exact[path.index_of(search.lam_1se_)]
