"""DGatedMLPClassifier / DGatedMLPRegressor: exact feature selection and integration."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
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
def test_importances_are_the_first_layer_column_norms(fitted):
    # (exact zeros, gap and selection of every estimator: tests/test_contract.py)
    np.testing.assert_array_equal(fitted.selected_features_, np.arange(5))
    first = fitted.module_.linears[0].weight.detach().double().numpy()
    # importances are taken before the (here ~identity) standardization is folded back into
    # the float32 weights, which re-rounds each weight by <= eps32 / 2 = 6e-8 relative (the
    # norms taken in float64: a float32 sum of 32 squares could add up to 16 eps32 = 2e-6)
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


@pytest.mark.numerics
def test_sparse_input_trains_like_dense(informative_problem):
    X, y = informative_problem
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


def test_regressor_finds_the_informative_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 12))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=500)
    est = DGatedMLPRegressor(lam=0.02, D=3, hidden_layer_sizes=(32,), random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_features_, [0, 1, 2])
    assert est.sparsity_gap_[0] < 1e-8 < 1e-3 < est.sparsity_gap_[1]  # around zero_tol=1.2e-7
    assert est.score(X, y) > 0.8
    assert est.predict(X).shape == (500,)


@pytest.mark.numerics
def test_linear_skip_is_part_of_each_feature_group():
    """With linear_skip, a feature's group is its hidden weights and its skip weights:
    removed features lose both, exactly; predictions are in the user's units (targets
    rescaled through the skip rows too) and the compact module reproduces them."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 8)
    y = 50.0 + 10.0 * (X[:, 0] + np.sin(2 * X[:, 1]))  # far from standardized units
    est = DGatedMLPRegressor(linear_skip=True, lam=0.03, hidden_layer_sizes=(16,), random_state=0)
    est.fit(X, y)
    first = est.module_.linears[0].weight.detach().numpy()
    assert first.shape == (16 + 1, 8)  # 16 hidden rows, one skip row
    dropped = np.setdiff1d(np.arange(8), est.selected_features_)
    assert {0, 1} <= set(est.selected_features_) and dropped.size > 0
    assert np.all(first[:, dropped] == 0.0)
    assert np.all(first[-1, est.selected_features_] != 0.0)  # the skip path is used
    # in the user's units (in standardized ones R^2 would be far below 0); how well this
    # one cold fit learns the sine depends on where the stopping rule anneals (R^2 0.85
    # to 0.99 over seeds and versions of the rule), not on the units
    assert est.score(X, y) > 0.8
    small = est.compact()
    with torch.no_grad():
        out = small(torch.as_tensor(X[:, est.selected_features_], dtype=torch.float32))
    # float32 sums in another order: a few eps32 of the outputs' scale (|y| ~ 80)
    np.testing.assert_allclose(out.numpy()[:, 0], est.predict(X), rtol=0, atol=1e-5 * 80)
