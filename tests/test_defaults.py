"""Defaults are the product: what an estimator does when the user sets nothing.

- the default ``lam`` of the linear models keeps a sparse, non-empty model of
  standardized data (``Lasso``'s ``alpha=1.0`` convention emptied it);
- paths and ``SparsePathCV`` take their grid from the estimator's ``default_grid()``
  unless the caller gives ``n_lams`` / ``lam_min_ratio``.
"""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.preprocessing import StandardScaler

from sksparse_nn import (
    DGatedMLPRegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
)


def _standardized(loader):
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    if loader is load_diabetes:
        y = (y - y.mean()) / y.std()
    return X, y


@pytest.mark.parametrize(
    "estimator, loader",
    [(SparseLinearRegressor(), load_diabetes), (SparseLinearClassifier(), load_breast_cancer)],
    ids=["regressor", "classifier"],
)
def test_default_lam_keeps_a_sparse_nonempty_model_of_standardized_data(estimator, loader):
    X, y = _standardized(loader)
    est = estimator.set_params(random_state=0).fit(X, y)
    assert est.lam < est.lambda_max(X, y)  # below the all-zero end ...
    assert 1 <= len(est.selected_features_) < X.shape[1]  # ... and still sparse


def test_paths_take_the_estimators_default_grid():
    X, y = _standardized(load_diabetes)
    linear = SparseLinearRegressor(D=2)
    assert linear.default_grid() == {"n_lams": 30, "lam_min_ratio": 1e-3}
    path = linear.regularization_path(X, y, n_lams=5)  # a caller's value wins
    assert path.lams[0] == pytest.approx(1e-3 * linear.lambda_max(X, y))
    assert len(path.lams) >= 5

    network = DGatedMLPRegressor(hidden_layer_sizes=(4,), max_epochs=2, random_state=0)
    grid = network.default_grid()
    assert grid["n_lams"] < 30 and grid["lam_min_ratio"] > 1e-3  # short, stops above 0
    with pytest.warns(Warning, match="max_epochs"):  # 2 epochs per point, on purpose
        path = network.regularization_path(X, y, lams=None)
    assert path.lams[0] == pytest.approx(grid["lam_min_ratio"] * network.lambda_max(X, y))


def test_sparse_path_cv_uses_the_default_grid_unless_given():
    X, y = _standardized(load_diabetes)
    search = SparsePathCV(SparseLinearRegressor(D=2), cv=2).fit(X, y)
    assert len(search.cv_path_.lams) >= 30
    search = SparsePathCV(SparseLinearRegressor(D=2), n_lams=6, cv=2).fit(X, y)
    # (lams below the grid where the folds chose its densest one: test_cv_extension.py)
    assert len(search.cv_path_.lams) - search.cv_path_.n_below == 6
    assert np.all(np.diff(search.cv_path_.lams) > 0)
