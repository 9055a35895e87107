"""Fit parameters (sample weights) through regularization_path and the selectors.

Integer weights of the linear family are the same problem as rows repeated that many
times (its loss is the weighted mean; the weights' mean-1 rescaling cancels), so a path
or an exact-k selection with weights must equal the one on repeated rows. Where the rows
are drawn anew (the stability halves, the knockoffs' law), weights are tested by their
effect: zero weights on half of the rows are the same as dropping them.
"""

import numpy as np
import pytest
from sklearn.model_selection import KFold

from sksparse_nn import (
    DGatedMLPRegressor,
    SparseLinearRegressor,
    SparsePathCV,
    regularization_path,
)
from sksparse_nn.compose import VariableModel
from sksparse_nn.selection import KnockoffFilter, SelectFromPath, StabilitySelection

pytestmark = pytest.mark.filterwarnings("ignore::sksparse_nn.exceptions.ConvergenceWarning")


def _data(n=80, p=8, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    y = X[:, 0] - 0.7 * X[:, 1] + 0.4 * X[:, 2] + 0.8 * rng.randn(n)
    return X, y, rng.randint(0, 3, n)  # weights 0, 1, 2: dropped, kept, doubled rows


def _two_regimes(n=200, seed=0):
    """The first half of the rows depends on feature 0, the second on feature 1: a
    weight of zero on one half leaves the other's feature."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 6)
    first = np.arange(n) < n // 2
    y = np.where(first, 2 * X[:, 0], 2 * X[:, 1]) + 0.3 * rng.randn(n)
    return X, y, first.astype(float), (~first).astype(float)


def test_path_with_integer_weights_is_the_path_on_repeated_rows():
    X, y, w = _data()
    kept = w.copy()
    kwargs = {"n_lams": 6, "lam_min_ratio": 0.05}
    weighted = regularization_path(
        SparseLinearRegressor(), X, y, fit_params={"sample_weight": w}, **kwargs
    )
    repeated = regularization_path(
        SparseLinearRegressor(), np.repeat(X, w, 0), np.repeat(y, w), **kwargs
    )
    # the default grid's lambda_max is the weighted problem's (1e-12: float rounding of
    # the same sums in another order)
    np.testing.assert_allclose(weighted.lams, repeated.lams, rtol=1e-12)
    # two computations, the same selections: at D = 3 a dropped group is exactly 0 and the
    # kept ones are >= 0.14 here, far from the 1e-6 the coefficients may differ by
    for a, b in zip(weighted.selected, repeated.selected, strict=True):
        np.testing.assert_array_equal(a, b)
    # exact block solves on the same objective: the coefficients agree to the solver's
    # tolerance (1e-6, far above its KKT stop of 1e-8 relative)
    np.testing.assert_allclose(weighted.coefs, repeated.coefs, atol=1e-6)
    np.testing.assert_array_equal(w, kept)  # the user's weights are not modified


def test_cv_folds_fit_on_their_rows_weights():
    X, y, w = _data()
    splits = list(KFold(3).split(X))
    est = SparseLinearRegressor()
    lams = est.lambda_max(X, y) * np.geomspace(0.05, 1, 4)
    path = regularization_path(est, X, y, lams=lams, cv=splits, fit_params={"sample_weight": w})
    for k, (train, test) in enumerate(splits):
        fold = regularization_path(
            est, X[train], y[train], lams=lams, X_val=X[test], y_val=y[test],
            fit_params={"sample_weight": w[train]},
        )  # fmt: skip
        np.testing.assert_allclose(path.cv_scores[k], fold.val_score, rtol=1e-10)


def test_sparse_path_cv_passes_the_weights_on():
    X, y, w = _data()
    est = SparseLinearRegressor()
    lams = est.lambda_max(X, y) * np.geomspace(0.05, 1, 4)
    search = SparsePathCV(est, lams=lams, cv=KFold(3)).fit(X, y, sample_weight=w)
    path = regularization_path(est, X, y, lams=lams, cv=KFold(3), fit_params={"sample_weight": w})
    np.testing.assert_array_equal(search.cv_path_.cv_scores, path.cv_scores)
    chosen = path.index_of(search.lam_)
    np.testing.assert_array_equal(search.estimator_.coef_, path.coefs[chosen])


def test_a_checkpoint_names_other_weights(tmp_path):
    X, y, w = _data()
    est = SparseLinearRegressor()
    lams = est.lambda_max(X, y) * np.geomspace(0.1, 1, 3)
    first = regularization_path(
        est, X, y, lams=lams, checkpoint=tmp_path, fit_params={"sample_weight": w}
    )
    again = regularization_path(
        est, X, y, lams=lams, checkpoint=tmp_path, fit_params={"sample_weight": w.copy()}
    )
    np.testing.assert_array_equal(first.coefs, again.coefs)
    with pytest.raises(ValueError, match="fit parameters \\(sample_weight"):
        regularization_path(
            est, X, y, lams=lams, checkpoint=tmp_path, fit_params={"sample_weight": w + 1}
        )
    with pytest.raises(ValueError, match="fit parameters \\(sample_weight"):
        regularization_path(est, X, y, lams=lams, checkpoint=tmp_path)


def test_exact_k_with_integer_weights_is_exact_k_on_repeated_rows():
    X, y, w = _data()
    kwargs = {"n_features_to_select": 2, "refit": True, "n_lams": 10}
    weighted = SelectFromPath(SparseLinearRegressor(), **kwargs).fit(X, y, sample_weight=w)
    repeated = SelectFromPath(SparseLinearRegressor(), **kwargs).fit(
        np.repeat(X, w, 0), np.repeat(y, w)
    )
    np.testing.assert_array_equal(weighted.support_, repeated.support_)
    assert weighted.lam_ == pytest.approx(repeated.lam_, rel=1e-12)
    np.testing.assert_allclose(weighted.estimator_.coef_, repeated.estimator_.coef_, atol=1e-6)


def test_stability_halves_fit_with_their_rows_weights():
    X, y, first, second = _two_regimes()
    est = SparseLinearRegressor()
    kwargs = {"n_pairs": 3, "n_lams": 3, "lam_min_ratio": 0.2, "random_state": 0}
    on_first = StabilitySelection(est, **kwargs).fit(X, y, sample_weight=first)
    on_second = StabilitySelection(est, **kwargs).fit(X, y, sample_weight=second)
    assert on_first.selected_features_.tolist() == [0]
    assert on_second.selected_features_.tolist() == [1]
    # the default grid reaches the weighted problem's lam_max: that of the rows kept
    # (the grid's third point; 1e-12: the same sums in another order)
    kept = first > 0
    assert on_first.lams_[2] == pytest.approx(est.lambda_max(X[kept], y[kept]), rel=1e-12)


def test_knockoff_paths_fit_with_the_weights():
    X, y, first, second = _two_regimes()
    # the default statistic: a cross-validated path on [X, X~] (3 folds: small)
    kf = KnockoffFilter(SparseLinearRegressor(), n_draws=1, cv=3, n_lams=10, random_state=0)
    # the statistic W of a unit is largest for the feature the weighted rows depend on
    assert np.argmax(kf.fit(X, y, sample_weight=first).statistics_[0]) == 0
    assert np.argmax(kf.fit(X, y, sample_weight=second).statistics_[0]) == 1


@pytest.mark.parametrize(
    "fit",
    [
        lambda X, y, **kw: regularization_path(DGatedMLPRegressor(), X, y, fit_params=kw),
        lambda X, y, **kw: StabilitySelection(DGatedMLPRegressor()).fit(X, y, **kw),
        lambda X, y, **kw: SelectFromPath(DGatedMLPRegressor()).fit(X, y, **kw),
        lambda X, y, **kw: KnockoffFilter(DGatedMLPRegressor()).fit(X, y, **kw),
        lambda X, y, **kw: StabilitySelection(VariableModel(DGatedMLPRegressor())).fit(X, y, **kw),
    ],
    ids=["path", "stability", "exact_k", "knockoffs", "variable_model"],
)
def test_a_family_without_weights_is_named_before_any_fit(fit):
    X, y, w = _data(n=20)
    with pytest.raises(TypeError, match="DGatedMLPRegressor.fit takes no 'sample_weight'"):
        fit(X, y, sample_weight=w)


def test_bad_fit_params_are_named():
    X, y, w = _data(n=20)
    with pytest.raises(TypeError, match="takes no 'weights'"):
        StabilitySelection(SparseLinearRegressor()).fit(X, y, weights=w)
    with pytest.raises(ValueError, match="one weight per row of X \\(20\\), got shape \\(5,\\)"):
        SelectFromPath(SparseLinearRegressor()).fit(X, y, sample_weight=w[:5])
