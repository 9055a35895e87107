"""DGatedMLPClassifier / DGatedMLPRegressor: exact feature selection and integration."""

import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from sklearn.base import clone
from sklearn.feature_selection import SelectFromModel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksparse_nn import DGatedMLPClassifier, DGatedMLPRegressor
from sksparse_nn.datasets import make_sparse_classification

FAST = {"hidden_layer_sizes": (16,), "max_epochs": 15, "random_state": 0}


@pytest.fixture(scope="module")
def informative_problem():
    X, y = make_sparse_classification(n_samples=600, n_features=30, n_informative=5, random_state=0)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def fitted(informative_problem):
    X, y = informative_problem
    return DGatedMLPClassifier(lam=0.03, D=3, hidden_layer_sizes=(32,), random_state=0).fit(X, y)


@pytest.mark.numerics
def test_selects_the_informative_features_with_exact_zeros(fitted):
    np.testing.assert_array_equal(fitted.selected_features_, np.arange(5))
    largest_dropped, smallest_live = fitted.sparsity_gap_
    # before thresholding: dropped groups end well below zero_tol (1.2e-7), live ones far above
    assert largest_dropped < 1e-8
    assert smallest_live > 1e-3
    first = fitted.module_.linears[0].weight.detach().numpy()
    assert np.all(first[:, 5:] == 0)  # exact zeros
    assert np.all(np.abs(first[:, :5]).sum(axis=0) > 0)
    # importances are taken before the (here ~identity) standardization is folded back into
    # the float32 weights, which re-rounds each weight by <= eps32 / 2 = 6e-8 relative
    np.testing.assert_allclose(
        fitted.feature_importances_, np.linalg.norm(first, axis=0), rtol=1e-6
    )


@pytest.mark.numerics
def test_compact_module_predicts_like_the_full_model(informative_problem):
    X, y = informative_problem
    est = DGatedMLPClassifier(
        lam=0.03, D=3, hidden_layer_sizes=(32,), gate_hidden=True, random_state=0
    ).fit(X, y)
    small = est.compact()
    assert small.linears[0].in_features == est.selected_features_.size
    assert small.linears[0].out_features == est.n_neurons_[0] < 32  # dead neurons removed
    with torch.no_grad():
        logits = small(torch.as_tensor(X[:, est.selected_features_], dtype=torch.float32))
    full = est.decision_function(X)
    # float32: the compact module sums fewer terms (no zero columns or dead neurons) in
    # another order/blocking, a few eps32 (1.2e-7) of the logits' scale (|logit| <~ 20)
    np.testing.assert_allclose(logits.numpy()[:, 0], full, rtol=0, atol=1e-6 * np.abs(full).max())


def test_select_from_model_keeps_exactly_the_selected_features(fitted, informative_problem):
    X, y = informative_problem
    selector = SelectFromModel(fitted, threshold=1e-300, prefit=True)
    np.testing.assert_array_equal(np.flatnonzero(selector.get_support()), fitted.selected_features_)
    pipe = make_pipeline(
        SelectFromModel(DGatedMLPClassifier(lam=0.03, **FAST), threshold=1e-300),
        DGatedMLPClassifier(lam=0.0, **FAST),
    ).fit(X, y)
    kept = pipe[0].get_support()
    np.testing.assert_array_equal(np.flatnonzero(kept), pipe[0].estimator_.selected_features_)


def test_gridsearch_over_lam_and_D(informative_problem):
    X, y = informative_problem
    search = GridSearchCV(
        DGatedMLPClassifier(**FAST), {"lam": [1e-3, 3e-2], "D": [2, 3, 4]}, cv=2
    ).fit(X[:300], y[:300])
    assert set(search.best_params_) == {"lam", "D"}
    assert search.cv_results_["mean_test_score"].shape == (6,)


@pytest.mark.numerics
def test_same_seed_same_model_and_global_rng_untouched(informative_problem):
    X, y = informative_problem
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = DGatedMLPClassifier(**FAST).fit(X, y)
    assert torch.rand(1) == expected_next  # fit leaves torch's global RNG alone
    b = clone(a).fit(X, y)
    # the same computation repeated in one process (same seed, same threads): bitwise
    for pa, pb in zip(a.module_.parameters(), b.module_.parameters(), strict=True):
        assert torch.equal(pa, pb)
    c = clone(a).set_params(random_state=1).fit(X, y)
    assert not torch.equal(a.module_.linears[0].weight, c.module_.linears[0].weight)


@pytest.mark.numerics
def test_string_labels_pandas_names_and_sparse_input(informative_problem):
    X, y = informative_problem
    names = np.array(["no", "yes"])[y]
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    est = DGatedMLPClassifier(lam=0.03, **FAST).fit(frame, names)
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    assert list(est.feature_names_in_) == list(frame.columns)
    assert set(est.predict(frame)) <= {"no", "yes"}
    np.testing.assert_allclose(est.predict_proba(frame).sum(axis=1), 1.0, rtol=1e-12)  # float64
    X_sparse = X.copy()
    X_sparse[np.abs(X_sparse) < 0.5] = 0.0
    dense = DGatedMLPClassifier(**FAST).fit(X_sparse, y)
    sparse = DGatedMLPClassifier(**FAST).fit(sp.csr_matrix(X_sparse), y)
    # float32 training: the standardization statistics of sparse and dense X differ in
    # float64 rounding (~1e-16), the float32 batches then at most by rare 1-ulp ties; the
    # predictions agree to ~1e-6 of the logits (|logit| <~ 20): dp <= dz / 4 < 1e-5
    np.testing.assert_allclose(
        sparse.predict_proba(sp.csr_matrix(X_sparse)),
        dense.predict_proba(X_sparse),
        rtol=0,
        atol=1e-5,
    )


def test_pickle_and_joblib_round_trips(fitted, informative_problem, tmp_path):
    X, _ = informative_problem
    restored = pickle.loads(pickle.dumps(fitted))
    # the same weights and computation: bitwise
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))
    joblib.dump(fitted, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib")
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))
    np.testing.assert_array_equal(loaded.selected_features_, fitted.selected_features_)


def test_regressor_finds_the_informative_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 12))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=500)
    est = DGatedMLPRegressor(lam=0.02, D=3, hidden_layer_sizes=(32,), random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_features_, [0, 1, 2])
    assert est.sparsity_gap_[0] < 1e-8 < 1e-3 < est.sparsity_gap_[1]  # around zero_tol=1.2e-7
    assert est.score(X, y) > 0.8
    assert est.predict(X).shape == (500,)


def test_path_warm_starts_and_early_stopping(informative_problem):
    X, y = informative_problem
    est = DGatedMLPClassifier(D=3, **{**FAST, "max_epochs": 10})
    path = est.regularization_path(X, y, lams=[1e-3, 1e-2, 1e-1, 1.0], X_val=X, y_val=y)
    assert path.n_selected[0] >= path.n_selected[-1]
    assert path.n_selected[-1] == 0
    assert path.group_norms.shape == (4, 30)
    assert path.coefs is None
    stopped = DGatedMLPClassifier(
        early_stopping=True, n_iter_no_change=2, **{**FAST, "max_epochs": 200}
    ).fit(X, y)
    assert stopped.n_iter_ < 200
    assert "valid_loss" in stopped.history_[-1]
