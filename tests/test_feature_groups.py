"""Groups of input features kept or removed as wholes (categoricals, modalities)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sksparse_nn import DGatedMLPClassifier, DGatedMLPRegressor

LABELS = [0, 0, 0, 1, 1, 1, 2, 2, 2, -1]  # three blocks of 3, the last feature unpenalized


def _blocks(classifier=False, n=300, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 10)
    signal = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 9]  # block 0 and the free feature
    if classifier:
        return X, (signal > 0).astype(int)
    return X, signal + 0.1 * rng.randn(n)


@pytest.mark.parametrize("Estimator", [DGatedMLPRegressor, DGatedMLPClassifier])
def test_mlp_removes_whole_blocks_exactly(Estimator):
    X, y = _blocks(Estimator is DGatedMLPClassifier)
    est = Estimator(groups=LABELS, lam=0.05, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    assert est.group_norms_.shape == (3,)  # one norm per block; feature 9 is not a group
    norms = est.group_norms_
    assert norms[0] > 0 and norms[1] == 0.0 and norms[2] == 0.0
    np.testing.assert_array_equal(est.selected_features_, [0, 1, 2, 9])
    weight = est.module_.linears[0].weight.detach().numpy()
    assert np.all(weight[:, 3:9] == 0.0)  # all members of a removed block, exactly
    dead, live = est.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live


def test_unpenalized_features_survive_any_lam():
    X, y = _blocks()
    est = DGatedMLPRegressor(groups=LABELS, lam=1e3, max_epochs=30, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_features_, [9])


def test_group_weights_enter_the_penalty_and_lambda_max():
    X, y = _blocks()
    plain = DGatedMLPRegressor(groups=[[0, 1], [2, 3, 4, 5]])
    sqrt = DGatedMLPRegressor(groups=[[0, 1], [2, 3, 4, 5]], group_weights="sqrt")
    # lambda_max is the largest gradient norm over rho_j: heavier weights lower it
    assert sqrt.lambda_max(X, y) < plain.lambda_max(X, y)


@pytest.mark.parametrize(
    "groups, message", [([0, 1], "length|shape"), ([[0, 1], [1, 2]], "overlap")]
)
def test_bad_groups_raise(groups, message):
    X, y = _blocks()
    with pytest.raises(ValueError, match=message):
        DGatedMLPRegressor(groups=groups, max_epochs=1).fit(X, y)


def test_weight_sparsity_zeroes_single_weights():
    """sparsity='weights': every weight is its own group (deep weight factorization);
    zeros fall inside rows and columns, not only on whole features."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 6)
    y = X[:, 0] - 0.5 * X[:, 1]
    est = DGatedMLPRegressor(
        sparsity="weights", D=3, lam=1e-2, hidden_layer_sizes=(16,), random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    first = est.module_.linears[0].weight.detach().numpy()
    total = sum(layer.weight.numel() for layer in est.module_.linears)
    assert 0 < est.n_nonzero_weights_ < total / 4
    assert est.n_nonzero_weights_ == sum(
        int(np.count_nonzero(layer.weight.detach().numpy())) for layer in est.module_.linears
    )
    partly = [(row != 0).any() and (row == 0).any() for row in first]
    assert any(partly)  # element-wise zeros, not whole rows or columns
    assert est.group_norms_.size == total  # one group per weight
    dead, live = est.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live
    assert est.score(X, y) > 0.9
    with pytest.raises(ValueError, match="groups apply to sparsity='features'"):
        DGatedMLPRegressor(sparsity="weights", groups=2, max_epochs=1).fit(X, y)
