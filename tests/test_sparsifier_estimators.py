"""The estimators' ``sparsifier`` parameter: every method through the same contract."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
)

ESTIMATORS = [DGatedMLPRegressor, DGatedMLPClassifier, DGatedNAMRegressor, DGatedNAMClassifier]
SMALL = {"hidden_layer_sizes": (8,), "max_epochs": 40, "random_state": 0}


def _data(classifier, n=120, p=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    signal = X[:, 0] - X[:, 1] + 0.5 * X[:, 2]
    y = (signal > 0).astype(int) if classifier else signal + 0.1 * rng.randn(n)
    return X, y


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few epochs on purpose
        return est.fit(X, y)


@pytest.mark.parametrize("sparsifier", ["ds", "l21"])
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_every_family_fits_with_every_feature_sparsifier(Estimator, sparsifier):
    X, y = _data("Classifier" in Estimator.__name__)
    est = _fit(Estimator(lam=0.05, sparsifier=sparsifier, **SMALL), X, y)
    dead, live = est.sparsity_gap_
    assert dead < live
    importances = est.feature_importances_
    np.testing.assert_array_equal(est.selected_features_, np.flatnonzero(importances))
    assert np.all(est.group_norms_[est.group_norms_ > 0] >= live)
    assert {0, 1} <= set(est.selected_features_.tolist())  # the strongest signals stay
    if sparsifier == "l21":  # no exact zeros: selection by the stated threshold
        assert dead < 1e-3 <= live
    pred = est.predict(X)
    assert np.all(np.isfinite(pred.astype(float)))
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), pred)


@pytest.mark.parametrize("Estimator", [DGatedMLPRegressor, DGatedNAMRegressor])
def test_dam_cannot_select_input_features(Estimator):
    X, y = _data(False)
    with pytest.raises(ValueError, match="fixed order.*cannot choose input features"):
        Estimator(sparsifier="dam", **SMALL).fit(X, y)


def test_dam_prunes_hidden_neurons_and_compacts():
    X, y = _data(False, n=200)
    est = DGatedMLPRegressor(
        sparsifier="dam",
        gate_inputs=False,
        gate_hidden=True,
        lam=0.1,
        hidden_layer_sizes=(32,),
        max_epochs=150,
        random_state=0,
    )
    _fit(est, X, y)
    assert 0 < est.n_neurons_[0] < 32
    np.testing.assert_array_equal(est.selected_features_, np.arange(X.shape[1]))
    assert est.score(X, y) > 0.8
    import torch

    small = est.compact()
    assert small.linears[0].weight.shape[0] == est.n_neurons_[0]
    with torch.no_grad():
        out = small(torch.as_tensor(X, dtype=torch.float32)).numpy().ravel()
    np.testing.assert_allclose(out, est.predict(X), rtol=1e-5, atol=1e-5 * np.abs(y).max())


def test_grid_search_over_the_sparsifier():
    X, y = _data(False)
    search = GridSearchCV(
        DGatedMLPRegressor(**{**SMALL, "max_epochs": 15}),
        {"sparsifier": ["dgating", "ds", "l21"], "lam": [0.01, 0.05]},
        cv=2,
    )
    _fit(search, X, y)
    assert search.best_params_["sparsifier"] in {"dgating", "ds", "l21"}
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_regularization_path_with_ds():
    X, y = _data(False)
    est = DGatedNAMRegressor(sparsifier="ds", **{**SMALL, "max_epochs": 15})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = est.regularization_path(X, y, n_lams=4, lam_min_ratio=0.1)
    assert len(path.lams) >= 2
    assert max(path.n_selected) <= X.shape[1] and min(path.n_selected) >= 0


@pytest.mark.parametrize(
    "params, message",
    [
        ({"sparsifier": "prune"}, "Unknown sparsifier 'prune'"),
        ({"sparsifier": "ds", "sparsifier_params": {"D": 3}}, "do not fit sparsifier='ds'"),
        ({"gate_inputs": False}, "nothing to sparsify"),
    ],
)
def test_bad_sparsifier_settings_raise_clear_errors(params, message):
    X, y = _data(False)
    with pytest.raises(ValueError, match=message):
        DGatedMLPRegressor(**{**SMALL, **params}).fit(X, y)
