"""Cross-validated regularization paths, the 1-SE rule and SparsePathCV."""

import numpy as np
import pytest
from sklearn.feature_selection import SelectFromModel
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksparse_nn import SparseLinearRegressor, SparsePathCV
from sksparse_nn.datasets import make_group_regression
from sksparse_nn.path import _one_se_rule

LAMS = np.geomspace(0.02, 3.0, 6)


@pytest.fixture(scope="module")
def known_support():
    data = make_group_regression(
        n_samples=120, n_test=10, n_groups=10, group_size=3, n_informative=3, random_state=0
    )
    return data.X, data.y, data.groups, data.informative_groups


@pytest.fixture(scope="module")
def cv_path(known_support):
    X, y, groups, _ = known_support
    est = SparseLinearRegressor(D=3, groups=groups, random_state=0)
    return est.regularization_path(X, y, lams=LAMS, cv=KFold(3, shuffle=True, random_state=0))


# Two computations of the same path that differ only in rounding (n_jobs, thread counts,
# backends) stop at different points: each fit ends when an iteration lowers the objective
# by < tol = 1e-12 (relative; f <= 2 here), and with curvature mu >= ~0.08 (30 features,
# 60-120 rows) it is then within sqrt(2 tol f / mu) ~ 7e-6 of the optimum in ||w||_2.
# Two fits: ~1.5e-5 in coefficients (of size ~1). A held-out R^2 moves by at most
# 2 sqrt(1 - R^2) RMS(d pred) / std(y) ~ 3e-5. Absolute tolerances: R^2 can be ~0.
PATH_COEF_ATOL = 5e-5
PATH_R2_ATOL = 1e-4


def test_cv_path_records_fold_scores_and_the_1se_rule(cv_path):
    assert cv_path.cv_scores.shape == (3, LAMS.size)
    # the same float64 reductions (mean, std over 3 folds): default rtol=1e-7 is ample
    np.testing.assert_allclose(cv_path.cv_mean, cv_path.cv_scores.mean(axis=0))
    np.testing.assert_allclose(cv_path.cv_se, cv_path.cv_scores.std(axis=0, ddof=1) / np.sqrt(3))
    best = cv_path.index_of(cv_path.best_lam_)
    one_se = cv_path.index_of(cv_path.lam_1se_)
    assert cv_path.cv_mean[best] == cv_path.cv_mean.max()  # an argmax: exact
    assert one_se >= best
    assert cv_path.cv_mean[one_se] >= cv_path.cv_mean[best] - cv_path.cv_se[best]
    assert cv_path.n_selected[one_se] <= cv_path.n_selected[best]
    assert set(cv_path.selected_at(cv_path.lam_1se_)) <= set(cv_path.selected_at(cv_path.best_lam_))


def test_one_se_rule_picks_the_largest_lam_within_one_standard_error():
    lams = np.array([0.1, 0.2, 0.4, 0.8, 1.6])
    mean = np.array([0.5, 0.9, 0.85, 0.79, 0.2])
    se = np.full(5, 0.1)
    assert _one_se_rule(lams, mean, se) == (0.2, 0.4)  # 0.79 < 0.9 - 0.1


@pytest.mark.parametrize(
    "converged, expected",
    [
        # every fit converged: the plain rule
        ([True] * 5, (0.2, 0.4)),
        # the plain 1-SE lam did not converge: the largest converged one in the band
        ([True, True, False, True, True], (0.2, 0.2)),
        # the best did not converge: the best converged one in the band, and the
        # largest converged one in it
        ([True, False, True, True, True], (0.4, 0.4)),
        # converged lams only below the best and outside the band: the plain rule
        ([True, False, False, False, True], (0.2, 0.4)),
        # none converged: the plain rule
        ([False] * 5, (0.2, 0.4)),
    ],
)
def test_one_se_rule_prefers_converged_fits_within_the_band(converged, expected):
    lams = np.array([0.1, 0.2, 0.4, 0.8, 1.6])
    mean = np.array([0.5, 0.9, 0.85, 0.79, 0.2])  # band: 0.2 and 0.4 (>= 0.8)
    se = np.full(5, 0.1)
    assert _one_se_rule(lams, mean, se, np.array(converged)) == expected


def test_one_se_rule_takes_the_largest_converged_lam_even_below_the_best():
    # the band's converged lams are all denser than the best one: 1-SE takes the
    # largest of them (not the best-scoring), never a lam below best_lam
    lams = np.arange(1.0, 6.0)
    mean = np.array([0.82, 0.85, 0.81, 0.90, 0.50])  # band: the first four (>= 0.8)
    se = np.full(5, 0.1)
    converged = np.array([False, True, True, False, False])
    assert _one_se_rule(lams, mean, se, converged) == (2.0, 3.0)


def test_meta_estimator_recovers_the_informative_groups(known_support):
    X, y, groups, informative = known_support
    search = SparsePathCV(
        SparseLinearRegressor(D=3, groups=groups, random_state=0), lams=LAMS, cv=3
    ).fit(X, y)
    np.testing.assert_array_equal(search.estimator_.selected_groups_, informative)
    assert search.lam_ == search.lam_1se_
    np.testing.assert_array_equal(search.selected_features_, search.estimator_.selected_features_)
    np.testing.assert_array_equal(search.predict(X), search.estimator_.predict(X))
    assert search.score(X, y) > 0.6  # unit noise: the true model scores about 0.75
    assert search.cv_path_.estimators == []  # only the chosen fit is kept
    best = SparsePathCV(search.estimator, lams=LAMS, cv=3, rule="best").fit(X, y)
    assert best.lam_ == best.best_lam_ <= search.lam_


@pytest.mark.numerics
def test_parallel_folds_give_the_same_numbers(known_support):
    X, y, groups, _ = known_support
    est = SparseLinearRegressor(D=2, groups=groups, random_state=0)
    lams = LAMS[::2]
    serial = est.regularization_path(X, y, lams=lams, cv=2, n_jobs=1)
    parallel = est.regularization_path(X, y, lams=lams, cv=2, n_jobs=2)
    # worker processes with other thread counts: same fits up to rounding (see above)
    np.testing.assert_allclose(parallel.cv_scores, serial.cv_scores, rtol=0, atol=PATH_R2_ATOL)
    np.testing.assert_allclose(parallel.coefs, serial.coefs, rtol=0, atol=PATH_COEF_ATOL)
    # exact zeros: every dropped group's gradient is >= 2% (3e-3) below its threshold
    # lam rho_j here, 30x what coefficients PATH_COEF_ATOL apart can move it (||X^T X / n||
    # = 2: 1e-4)
    np.testing.assert_array_equal(parallel.n_selected, serial.n_selected)
    # (every mean is >= 0.06 from the 1-SE band's edge: far beyond PATH_R2_ATOL)
    assert parallel.lam_1se_ == serial.lam_1se_


@pytest.mark.numerics
def test_dask_backend_matches_local_joblib(known_support):
    distributed = pytest.importorskip("dask.distributed")
    from joblib import parallel_config

    X, y, groups, _ = known_support
    est = SparseLinearRegressor(D=2, groups=groups, random_state=0)
    lams = LAMS[::2]
    local = est.regularization_path(X, y, lams=lams, cv=2, n_jobs=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        with distributed.Client(cluster), parallel_config(backend="dask"):
            remote = est.regularization_path(X, y, lams=lams, cv=2, n_jobs=2)
    # threads of this process instead of worker processes: rounding only (see above)
    np.testing.assert_allclose(remote.cv_scores, local.cv_scores, rtol=0, atol=PATH_R2_ATOL)


def test_meta_estimator_in_pipeline_selectfrommodel_and_gridsearch(known_support):
    X, y, groups, informative = known_support
    inner = SparsePathCV(SparseLinearRegressor(groups=groups, random_state=0), lams=LAMS, cv=2)
    pipe = make_pipeline(StandardScaler(), inner).fit(X, y)
    assert pipe.score(X, y) > 0.6
    selector = SelectFromModel(inner, threshold=1e-300).fit(X, y)
    np.testing.assert_array_equal(
        np.flatnonzero(selector.get_support()), selector.estimator_.selected_features_
    )
    grid = GridSearchCV(inner, {"estimator__D": [2, 3]}, cv=2).fit(X, y)
    assert grid.best_params_["estimator__D"] in (2, 3)


class _Interrupting(SparseLinearRegressor):
    """Simulates Ctrl-C during the third fit of a path."""

    def _fit(self, X, y, warm_module=None, **kwargs):
        if self.lam > 0.1:
            raise KeyboardInterrupt
        return super()._fit(X, y, warm_module=warm_module, **kwargs)


def test_interrupted_path_keeps_the_points_computed(known_support):
    X, y, groups, _ = known_support
    lams = [0.02, 0.05, 0.2, 0.5]
    with pytest.warns(UserWarning, match="interrupted"):
        # D=3: an ascending path (dense to sparse), interrupted at its third lam
        path = _Interrupting(groups=groups, D=3).regularization_path(X, y, lams=lams)
    assert not path.completed
    np.testing.assert_allclose(path.lams, lams[:2])
    assert path.coefs.shape[0] == 2


def test_plots_run_headless(cv_path):
    import matplotlib.pyplot as plt

    from sksparse_nn.plotting import plot_tradeoff

    ax = cv_path.plot(kind="cv")
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("1-SE" in label for label in labels)
    assert cv_path.plot(kind="norms").get_yscale() == "log"
    assert plot_tradeoff([cv_path]).get_xlabel() == "selected features"
    plt.close("all")


def test_classifiers_are_scored_by_the_log_loss_by_default():
    # validation rows holding one class only are scored too (the estimator's classes
    # are the labels); an explicit scorer still wins
    from sklearn.metrics import log_loss

    from sksparse_nn import SparseLinearClassifier, regularization_path

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=80) > 0).astype(int)
    X_val, y_val = X[y == 1][:10], y[y == 1][:10]
    path = regularization_path(
        SparseLinearClassifier(),
        X,
        y,
        lams=[0.01, 0.1],
        X_val=X_val,
        y_val=y_val,
        keep_estimators=True,
    )
    expected = [-log_loss(y_val, e.predict_proba(X_val), labels=[0, 1]) for e in path.estimators]
    np.testing.assert_allclose(path.val_score, expected, rtol=1e-12)
    accuracy = regularization_path(
        SparseLinearClassifier(),
        X,
        y,
        lams=[0.01, 0.1],
        X_val=X_val,
        y_val=y_val,
        scoring="accuracy",
    )
    assert np.all((accuracy.val_score >= 0) & (accuracy.val_score <= 1))
    assert SparsePathCV(SparseLinearClassifier()).rule == "best"


def test_the_folds_fit_with_the_fold_params_and_the_full_path_as_configured(known_support):
    # fold models are only scored: they stop on the objective's plateau
    # (fold_params(): settle="objective"); the full-data path's models are kept and wait
    # for their groups, as the user configured them
    from sksparse_nn import DGatedMLPRegressor

    seen = []

    class Spy(DGatedMLPRegressor):
        def fit(self, X, y):
            seen.append((len(X), self.settle))
            return super().fit(X, y)

    X, y, _, _ = known_support
    est = Spy(hidden_layer_sizes=(4,), max_epochs=2, random_state=0)
    assert est.fold_params() == {"settle": "objective"}
    est.regularization_path(X, y, lams=LAMS[-2:], cv=KFold(2, shuffle=True, random_state=0))
    assert {s for n, s in seen if n == len(X)} == {"support"}
    assert {s for n, s in seen if n < len(X)} == {"objective"}
    assert est.settle == "support"  # the estimator passed is not modified
