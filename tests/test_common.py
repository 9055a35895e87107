"""Checks every public estimator must pass: scikit-learn's own, and a table of bad inputs.

A new estimator joins by one line in ``ESTIMATORS`` (small, fast settings).
"""

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    GroupLassoRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
)

_TINY_NAM = {"hidden_layer_sizes": (8,), "batch_size": 32, "max_epochs": 10, "random_state": 0}

ESTIMATORS = [
    GroupLassoRegressor(lam=0.01),
    SparseLinearRegressor(lam=0.01, max_epochs=5),
    SparseLinearClassifier(lam=0.01, max_epochs=5),
    DGatedMLPRegressor(lam=1e-3, hidden_layer_sizes=(8,), max_epochs=5, random_state=0),
    DGatedMLPClassifier(lam=1e-3, hidden_layer_sizes=(8,), max_epochs=5, random_state=0),
    SparsePathCV(SparseLinearRegressor(max_epochs=5), lams=[1e-3, 1e-2], cv=2),
    NODERegressor(num_trees=8, depth=3, max_epochs=10, batch_size=32, random_state=0),
    NODEClassifier(num_trees=8, depth=3, max_epochs=10, batch_size=32, random_state=0),
    DGatedNAMRegressor(
        lam=1e-3, hidden_layer_sizes=(8,), batch_size=32, max_epochs=10, random_state=0
    ),
    DGatedNAMClassifier(
        lam=1e-3, hidden_layer_sizes=(8,), batch_size=32, max_epochs=10, random_state=0
    ),
]


def _ids(est):
    return type(est).__name__


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _data(est, n=40, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = (X[:, 0] > 0).astype(int) if is_classifier(est) else X[:, 0] + 0.1 * rng.normal(size=n)
    return X, y


def _with(X, index, value):
    X = X.astype(object) if isinstance(value, str) else X.copy()
    X[index] = value
    return X


# (name, transform of (X, y) into bad input, what the error must say)
BAD_FIT_INPUTS = [
    ("nan in X", lambda X, y: (_with(X, (0, 0), np.nan), y), "NaN"),
    ("inf in X", lambda X, y: (_with(X, (1, 2), np.inf), y), "infinity"),
    ("string in X", lambda X, y: (_with(X, (0, 1), "a"), y), "could not convert|string"),
    ("complex X", lambda X, y: (X + 1j, y), "[Cc]omplex"),
    ("1-d X", lambda X, y: (X[:, 0], y), "Expected 2D array"),
    ("3-d X", lambda X, y: (X[:, :, None], y), "dim 3|3D|3 dimensions"),
    ("no samples", lambda X, y: (X[:0], y[:0]), "0 sample"),
    ("no features", lambda X, y: (X[:, :0], y), "0 feature"),
    ("y too short", lambda X, y: (X, y[:-3]), "inconsistent numbers of samples"),
    ("nan in y", lambda X, y: (X, np.where(np.arange(len(y)) == 0, np.nan, y)), "NaN"),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
@pytest.mark.parametrize(
    "name, corrupt, message", BAD_FIT_INPUTS, ids=[b[0] for b in BAD_FIT_INPUTS]
)
def test_bad_fit_input_raises_a_clear_error(estimator, name, corrupt, message):
    X, y = _data(estimator)
    X_bad, y_bad = corrupt(X, y)
    with pytest.raises(ValueError, match=message):
        clone(estimator).fit(X_bad, y_bad)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_bad_predict_input_raises_a_clear_error(estimator):
    X, y = _data(estimator)
    est = clone(estimator).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :-1])
    with pytest.raises(ValueError, match="NaN"):
        est.predict(_with(X, (0, 0), np.nan))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_fit_does_not_modify_its_inputs(estimator):
    X, y = _data(estimator)
    X_copy, y_copy = X.copy(), y.copy()
    clone(estimator).fit(X, y)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)
