"""Groups of input features kept or removed as wholes (categoricals, modalities)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
)

LABELS = [0, 0, 0, 1, 1, 1, 2, 2, 2, -1]  # three blocks of 3, the last feature unpenalized


def _blocks(classifier=False, n=300, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 10)
    signal = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 9]  # block 0 and the free feature
    if classifier:
        return X, (signal > 0).astype(int)
    return X, signal + 0.1 * rng.randn(n)


GROUPED = [DGatedMLPRegressor, DGatedMLPClassifier, DGatedNAMRegressor, DGatedNAMClassifier]


def _fit_quietly(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


def _first_layer_columns(est):
    """Each input feature's first-layer entries (whatever the family), one row per feature."""
    if hasattr(est.module_, "linears"):
        return est.module_.linears[0].weight.detach().numpy().T
    first = est.module_.first.detach().numpy()  # NAM: (terms, width + 1, hidden)
    return np.stack(
        [
            first[np.flatnonzero([j in t for t in est.terms_])[0]].ravel()
            for j in range(est.n_features_in_)
        ]
    )


@pytest.mark.parametrize("Estimator", GROUPED)
def test_whole_blocks_are_removed_exactly(Estimator):
    X, y = _blocks(is_classifier(Estimator()))
    # D = 3 (the MLP's default is 2, whose noise blocks can linger at the edge of zero)
    est = _fit_quietly(Estimator(groups=LABELS, lam=0.05, D=3, random_state=0), X, y)
    assert est.group_norms_.shape == (3,)  # one norm per block; feature 9 is not a group
    norms = est.group_norms_
    assert norms[0] > 0 and norms[1] == 0.0 and norms[2] == 0.0
    np.testing.assert_array_equal(est.selected_features_, [0, 1, 2, 9])
    columns = _first_layer_columns(est)
    assert np.all(columns[3:9] == 0.0)  # all members of a removed block, exactly
    assert np.all(np.abs(columns[[0, 1, 2, 9]]).max(axis=1) > 0)
    np.testing.assert_array_equal(np.flatnonzero(est.feature_importances_), [0, 1, 2, 9])
    dead, live = est.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live


@pytest.mark.parametrize("Estimator", GROUPED)
def test_unpenalized_features_survive_any_lam(Estimator):
    X, y = _blocks(is_classifier(Estimator()))
    est = Estimator(groups=LABELS, lam=1e3, max_epochs=30, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_features_, [9])


@pytest.mark.parametrize("Estimator", [DGatedMLPRegressor, DGatedNAMRegressor])
def test_group_weights_enter_the_penalty_and_lambda_max(Estimator):
    X, y = _blocks()
    plain = Estimator(groups=[[0, 1], [2, 3, 4, 5]])
    sqrt = Estimator(groups=[[0, 1], [2, 3, 4, 5]], group_weights="sqrt")
    # lambda_max is the largest gradient norm over rho_j: heavier weights lower it
    assert sqrt.lambda_max(X, y) < plain.lambda_max(X, y)


@pytest.mark.parametrize("Estimator", GROUPED)
@pytest.mark.parametrize(
    "groups, message",
    [
        ([0, 1], "length|shape"),
        ([[0, 1], [1, 2]], "overlap"),
        ([[0, 12]], "out of range"),
        ([[0, 1], []], "empty"),
        ([0.5] * 10, "integers"),
    ],
)
def test_bad_groups_raise(Estimator, groups, message):
    X, y = _blocks(is_classifier(Estimator()))
    with pytest.raises(ValueError, match=message):
        Estimator(groups=groups, max_epochs=1).fit(X, y)


@pytest.mark.parametrize("Estimator", GROUPED)
def test_singleton_groups_are_the_ungrouped_model(Estimator):
    """A group that is a single column is that feature alone: the same fit."""
    X, y = _blocks(is_classifier(Estimator()), n=120)
    plain = Estimator(lam=0.05, max_epochs=5, random_state=0).fit(X, y)
    grouped = Estimator(groups=list(range(10)), lam=0.05, max_epochs=5, random_state=0).fit(X, y)
    np.testing.assert_allclose(grouped.predict(X), plain.predict(X), rtol=0, atol=0)
    np.testing.assert_array_equal(grouped.group_norms_, plain.group_norms_)


def _categorical_data(n=600, seed=0):
    """``color`` (4 levels, one-hot) drives y with a numeric term; ``shape`` (3 levels) and
    one numeric column are noise; the last column is unpenalized noise."""
    rng = np.random.RandomState(seed)
    color, shape = rng.randint(0, 4, n), rng.randint(0, 3, n)
    x1, x2, x3 = rng.randn(3, n)
    X = np.column_stack([np.eye(4)[color], np.eye(3)[shape], x1, x2, x3])
    effect = np.array([0.0, 2.0, -1.0, 1.0])
    y = effect[color] + np.sin(2 * x1) + 0.3 * rng.randn(n)
    return X, y, effect, [0] * 4 + [1] * 3 + [2, 3, -1]


def test_nam_gives_a_categorical_one_term_with_its_levels():
    X, y, effect, groups = _categorical_data()
    est = _fit_quietly(DGatedNAMRegressor(groups=groups, random_state=0), X, y)
    assert [t.tolist() for t in est.terms_] == [[0, 1, 2, 3], [4, 5, 6], [7], [8], [9]]
    np.testing.assert_array_equal(est.selected_terms_[:2], [0, 2])  # color and x1
    assert 1 not in est.selected_terms_ and 3 not in est.selected_terms_
    dead, live = est.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live
    levels, f = est.shape_functions()[0]
    np.testing.assert_array_equal(levels, np.eye(4))  # the one-hot rows, in column order
    # the learned level effects are the true ones up to the centring constant; the noise
    # sd is 0.3 with ~150 rows per level, so 0.15 is several standard errors
    np.testing.assert_allclose(f - f.mean(), effect - effect.mean(), atol=0.15)
    contrib = est.contributions(X)
    assert contrib.shape == (len(X), 5)
    assert np.all(contrib[:, [1, 3]] == 0.0)
    # the compact model takes the selected columns and predicts the same
    compact = est.compact()
    with torch.no_grad():
        out = compact(torch.as_tensor(X[:, est.selected_features_], dtype=torch.float32))
    np.testing.assert_allclose(out.numpy().ravel(), est.predict(X), atol=1e-5)


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
