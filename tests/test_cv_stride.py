"""The CV folds' two passes (``cv_stride``): every s-th lam first, then the lams next to
the chosen ones."""

import numpy as np
import pytest
from joblib import parallel_backend
from sklearn.model_selection import KFold

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedNAMClassifier,
    SparseLinearRegressor,
    SparsePathCV,
)
from sksparse_nn.datasets import make_group_regression
from sksparse_nn.path import regularization_path
from sksparse_nn.path._assemble import one_se_indices
from sksparse_nn.path._refine import coarse_indices

CV = KFold(3, shuffle=True, random_state=0)
# D = 2 is convex: the fold scores at a lam do not depend on the warm start, up to the
# solver's stopping rule (tol=1e-10 on the objective's relative decrease; the fitted
# coefficients then agree to ~sqrt(tol) ~ 1e-5 relative, and so do the held-out R^2)
TOL = 1e-10
SCORE_ATOL = 1e-5


@pytest.fixture(scope="module")
def data():
    d = make_group_regression(
        n_samples=120, n_test=10, n_groups=10, group_size=3, n_informative=3, random_state=0
    )
    return d.X, d.y, d.groups


@pytest.fixture(scope="module")
def full_and_strided(data):
    X, y, groups = data
    est = SparseLinearRegressor(D=2, groups=groups, tol=TOL)
    full = regularization_path(est, X, y, n_lams=12, cv=CV)
    strided = regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=3)
    return full, strided


@pytest.mark.parametrize(
    "n, stride, expected",
    [(16, 2, [0, 2, 4, 6, 8, 10, 12, 14, 15]), (5, 2, [0, 2, 4]), (4, 1, [0, 1, 2, 3]),
     (3, 5, [0, 2]), (1, 2, [0])],
)  # fmt: skip
def test_coarse_indices_take_every_stride_th_lam_and_the_sparse_end(n, stride, expected):
    assert coarse_indices(n, stride).tolist() == expected


def test_folds_fit_the_coarse_lams_and_the_neighbours_of_the_first_choice(data, full_and_strided):
    full, strided = full_and_strided
    coarse = coarse_indices(12, 3)
    # the first pass's choice, made on the coarse lams of the every-lam run (same scores)
    mean = np.full(12, np.nan)
    mean[coarse] = full.cv_mean[coarse]
    best, one_se = one_se_indices(mean, full.cv_se, full.converged)
    # next to the best: the lam on each side; next to the one-SE: the one above
    beside_best = {j for j in (best - 1, best + 1) if 0 <= j < 12 and j not in coarse}
    near = beside_best | {j for j in (one_se + 1,) if j < 12 and j not in coarse}
    assert near  # (this problem's choice does fall between coarse lams)
    fitted = np.isfinite(strided.cv_scores).all(axis=0)
    assert set(np.flatnonzero(fitted)) == set(coarse) | near
    assert not np.isfinite(strided.cv_scores[:, ~fitted]).any()  # skipped by every fold
    # a refined fit (warm from the fold's model at the coarse lam below) solves the same
    # convex problem as the every-lam path's
    np.testing.assert_allclose(
        strided.cv_scores[:, fitted], full.cv_scores[:, fitted], rtol=0, atol=SCORE_ATOL
    )
    # the choice is made among the fitted lams only, and is the best of them
    chosen = strided.index_of(strided.best_lam_)
    assert fitted[chosen]
    assert strided.cv_mean[chosen] == np.nanmax(strided.cv_mean)
    # the full-data path is the same whatever the stride
    np.testing.assert_array_equal(strided.n_selected, full.n_selected)
    # SparsePathCV's rule="best" refines next to the best lam only
    X, y, groups = data
    est = SparseLinearRegressor(D=2, groups=groups, tol=TOL)
    best_only = regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=3, cv_rule="best")
    fitted = np.isfinite(best_only.cv_scores).all(axis=0)
    assert set(np.flatnonzero(fitted)) == set(coarse) | beside_best


def test_folds_in_parallel_give_the_sequential_result(data, full_and_strided):
    X, y, groups = data
    _, strided = full_and_strided
    est = SparseLinearRegressor(D=2, groups=groups, tol=TOL)
    with parallel_backend("threading"):
        parallel = regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=3, n_jobs=2)
    np.testing.assert_array_equal(np.isfinite(parallel.cv_mean), np.isfinite(strided.cv_mean))
    np.testing.assert_allclose(parallel.cv_scores, strided.cv_scores, rtol=0, atol=SCORE_ATOL)
    assert parallel.best_lam_ == strided.best_lam_


def test_a_given_grid_is_fitted_whole_and_linear_models_default_to_every_lam(data):
    X, y, groups = data
    est = SparseLinearRegressor(D=2, groups=groups)
    assert est.default_grid().get("cv_stride", 1) == 1
    assert DGatedMLPClassifier().default_grid().get("cv_stride", 1) == 1  # chose denser
    assert DGatedNAMClassifier().default_grid().get("cv_stride", 1) == 1  # the same
    assert DGatedNAMClassifier(interactions=2).default_grid()["cv_stride"] == 2  # GA2M
    path = regularization_path(est, X, y, lams=np.geomspace(0.05, 2.0, 7), cv=CV)
    assert np.isfinite(path.cv_scores).all()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_network_search_defaults_to_the_two_passes(data):
    X, y, _ = data
    labels = (y > np.median(y)).astype(int)
    ga2m = DGatedNAMClassifier(
        hidden_layer_sizes=(4,), max_epochs=2, random_state=0, interactions=[(0, 1)]
    )
    search = SparsePathCV(ga2m, n_lams=6, cv=2, linear_member=False)  # the network's path
    search.fit(X, labels)
    path = search.cv_path_
    fitted = np.isfinite(path.cv_mean)
    assert 0 < fitted.sum() < len(path.lams)
    assert set(coarse_indices(len(path.lams), 2)) <= set(np.flatnonzero(fitted))
    assert fitted[path.index_of(search.lam_)]
    path.plot(kind="cv")  # gaps in the CV curve are drawn
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize(
    "bad", [{"cv_stride": 0}, {"cv_stride": -1}, {"cv_stride": 1.5}, {"cv_stride": True},
            {"cv_rule": "worst"}],
)  # fmt: skip
def test_a_bad_cv_stride_or_rule_is_refused_naming_it(data, bad):
    X, y, groups = data
    with pytest.raises(ValueError, match=next(iter(bad))):
        regularization_path(SparseLinearRegressor(groups=groups), X, y, n_lams=4, cv=2, **bad)


def test_a_checkpoint_keeps_both_passes_and_refuses_another_stride(data, tmp_path, monkeypatch):
    X, y, groups = data
    est = SparseLinearRegressor(D=2, groups=groups, tol=TOL)
    first = regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=3, checkpoint=tmp_path)
    assert any((tmp_path / "fold-0-second").glob("point-*.pkl"))  # the second pass too
    with pytest.raises(ValueError, match="cv_stride=3 there, 1 now"):
        regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=1, checkpoint=tmp_path)

    def no_fit(*args, **kwargs):
        raise AssertionError("a finished search rerun with its checkpoint fits nothing")

    from sksparse_nn.path import _points, _refine

    monkeypatch.setattr(_points, "fit_point", no_fit)
    monkeypatch.setattr(_refine, "fit_point", no_fit)
    again = regularization_path(est, X, y, n_lams=12, cv=CV, cv_stride=3, checkpoint=tmp_path)
    np.testing.assert_array_equal(again.cv_scores, first.cv_scores)
    assert again.best_lam_ == first.best_lam_


def test_the_second_pass_fits_with_the_fold_rows_sample_weights(data):
    X, y, groups = data
    w = np.random.default_rng(0).uniform(0.2, 3.0, len(y))
    est = SparseLinearRegressor(D=2, groups=groups, tol=TOL)
    kwargs = {"n_lams": 12, "cv": CV, "fit_params": {"sample_weight": w}}
    every = regularization_path(est, X, y, cv_stride=1, **kwargs)
    strided = regularization_path(est, X, y, cv_stride=3, **kwargs)
    fitted = np.isfinite(strided.cv_scores).all(axis=0)
    assert fitted.sum() > len(coarse_indices(12, 3))  # a second pass ran
    # weighted refits (convex) agree with the every-lam run's; unweighted ones would not
    np.testing.assert_allclose(
        strided.cv_scores[:, fitted], every.cv_scores[:, fitted], rtol=0, atol=SCORE_ATOL
    )
