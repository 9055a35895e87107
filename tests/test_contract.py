"""The D-Gating behaviour contract, checked once for every D-gated estimator.

Every estimator trained by D-Gating promises the same things: groups the data do not need
end at exactly 0.0 during training, with a gap of orders of magnitude to the live ones;
``selected_features_`` is where ``feature_importances_`` is non-zero; ``compact()`` (where
it exists) predicts like the full model; the same ``random_state`` gives the same model;
``regularization_path`` runs warm-started from dense to empty; and the estimators behave in
``GridSearchCV``, ``SelectFromModel``, ``Pipeline`` and with pandas input.

One table (``ESTIMATORS``, small fast settings) and one small data set per task: features
0, 1 and 2 are informative, the other seven are noise. Family maths (shape functions,
trees, KKT conditions, ...) stays in the family files. A new estimator joins by one line
in ``ESTIMATORS`` and one entry in ``_MODULE_GROUP_NORMS``.
"""

import functools
import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectFromModel
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
)

INFORMATIVE = np.array([0, 1, 2])
N_FEATURES = 10
COLUMNS = [f"x{j}" for j in range(N_FEATURES)]
EPS32 = float(np.finfo(np.float32).eps)  # 1.2e-7, the default zero_tol

_MLP = {"D": 3, "hidden_layer_sizes": (8,), "max_epochs": 30, "batch_size": 32, "random_state": 0}
_NAM = {**_MLP, "lr": 0.1}
_NODE = {"D": 3, "num_trees": 16, "depth": 2, "max_epochs": 30, "batch_size": 32, "random_state": 0}

# settings at which every estimator keeps the informative features and drops the noise
ESTIMATORS = {
    "DGatedMLPRegressor": DGatedMLPRegressor(lam=0.1, **_MLP),
    "DGatedMLPClassifier": DGatedMLPClassifier(lam=0.1, **_MLP),
    "DGatedNAMRegressor": DGatedNAMRegressor(lam=0.1, **_NAM),
    "DGatedNAMClassifier": DGatedNAMClassifier(lam=0.1, **_NAM),
    "NODERegressor": NODERegressor(lam=0.03, **_NODE),
    "NODEClassifier": NODEClassifier(lam=0.02, **_NODE),
    "SparseLinearRegressor": SparseLinearRegressor(lam=0.1, D=3, random_state=0),
    "SparseLinearClassifier": SparseLinearClassifier(lam=0.05, D=3, random_state=0),
}
NAMES = list(ESTIMATORS)
WITH_COMPACT = [name for name in NAMES if hasattr(ESTIMATORS[name], "compact")]
LINEAR = ["SparseLinearRegressor", "SparseLinearClassifier"]


def short(name):
    """The table's estimator with a 10-epoch budget (networks): for tests that need no
    converged fit, only a fit (paths, grid searches)."""
    est = clone(ESTIMATORS[name])
    return est.set_params(max_epochs=10) if est.max_epochs is not None else est


def _module_norms_mlp(est):
    return np.linalg.norm(est.module_.linears[0].weight.detach().numpy(), axis=0)


def _module_norms_nam(est):
    first = est.module_.first.detach().numpy()  # (p, 2, h1): feature j's weights and biases
    return np.linalg.norm(first.reshape(first.shape[0], -1), axis=1)


def _module_norms_node(est):
    # one group per tree: its leaf responses
    return np.concatenate(
        [
            np.linalg.norm(layer.response.detach().numpy().reshape(layer.num_trees, -1), axis=1)
            for layer in est.module_.layers
        ]
    )


def _module_norms_linear(est):
    weight = est.module_.weight.detach().numpy()
    return np.linalg.norm(weight, axis=0)  # groups=None: every feature is its own group


# the norm of every gated group, read from the fitted (collapsed) torch module itself
_MODULE_GROUP_NORMS = {
    DGatedMLPRegressor: _module_norms_mlp,
    DGatedMLPClassifier: _module_norms_mlp,
    DGatedNAMRegressor: _module_norms_nam,
    DGatedNAMClassifier: _module_norms_nam,
    NODERegressor: _module_norms_node,
    NODEClassifier: _module_norms_node,
    SparseLinearRegressor: _module_norms_linear,
    SparseLinearClassifier: _module_norms_linear,
}


@functools.cache
def _data(classification):
    rng = np.random.default_rng(0)
    n = 200
    X = rng.normal(size=(n, N_FEATURES))
    if classification:  # three classes, told apart by features 0, 1 and 2
        logits = np.column_stack([2 * X[:, 0], 2 * X[:, 1] + 2 * X[:, 2], np.zeros(n)])
        y = np.argmax(logits + 0.3 * rng.normal(size=(n, 3)), axis=1)
    else:
        y = 2 * X[:, 0] - 1.5 * X[:, 1] + X[:, 2] + 0.3 * rng.normal(size=n)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def data(name):
    return _data(is_classifier(ESTIMATORS[name]))


@functools.cache
def fitted(name):
    """The table's estimator fitted on the task's data, given as a pandas DataFrame."""
    X, y = data(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # the settings are fit for purpose
        return clone(ESTIMATORS[name]).fit(pd.DataFrame(X, columns=COLUMNS), y)


def raw_output(est, X):
    return est.decision_function(X) if is_classifier(est) else est.predict(X)


# ------------------------------------------------------------- exact zeros, selection
@pytest.mark.parametrize("name", NAMES)
def test_dropped_groups_are_exact_zeros_with_a_gap(name):
    est = fitted(name)
    norms = _MODULE_GROUP_NORMS[type(est)](est)
    largest_dropped, smallest_live = est.sparsity_gap_
    # sparsity_gap_ is measured before thresholding at zero_tol (float32 eps, 1.2e-7, times
    # the coefficients' scale for linear models): dropped groups reached zero in training
    # (the threshold only removes dust far below it), live ones stay far above it
    assert largest_dropped < 1e-2 * est.zero_tol
    assert smallest_live > 1e3 * est.zero_tol
    assert smallest_live > 1e6 * largest_dropped
    # the fitted module holds exact zeros: the dropped groups are 0.0, the others not
    assert 0 < np.count_nonzero(norms) < norms.size
    assert np.all(norms[norms > 0] > 1e3 * est.zero_tol)
    # the public group norms have the module's exact zeros
    np.testing.assert_array_equal(np.flatnonzero(est.group_norms_), np.flatnonzero(norms))


@pytest.mark.parametrize("name", NAMES)
def test_selection_keeps_the_informative_features_and_matches_importances(name):
    est = fitted(name)
    importances = est.feature_importances_
    assert importances.shape == (N_FEATURES,)
    assert np.all(importances >= 0)
    np.testing.assert_array_equal(est.selected_features_, np.flatnonzero(importances))
    if isinstance(est, (NODERegressor, NODEClassifier)):
        # trees are the groups: a live tree may also read noise features
        assert set(INFORMATIVE) <= set(est.selected_features_)
    else:  # features (or feature groups) are the groups: exactly the informative ones
        np.testing.assert_array_equal(est.selected_features_, INFORMATIVE)
        norms = _MODULE_GROUP_NORMS[type(est)](est)
        np.testing.assert_array_equal(np.flatnonzero(norms), est.selected_features_)


@pytest.mark.parametrize("name", WITH_COMPACT)
def test_compact_predicts_like_the_full_model(name):
    est = fitted(name)
    X, _ = data(name)
    small = est.compact()
    with torch.no_grad():
        out = small(torch.as_tensor(X[:, est.selected_features_], dtype=torch.float32))
    out = out.numpy().reshape(len(X), -1)
    full = raw_output(est, X).reshape(len(X), -1)
    # float32: the compact module sums the same non-zero terms without the zero ones, in
    # another order and blocking (NODE predicts with a float64 copy of the module), so
    # each output rounds differently by a few eps32 per term summed. Outputs here sum
    # <= 16 terms (8 hidden units, 10 features, 16 trees); 64 eps32 of the outputs' scale
    # bounds that with room to spare.
    atol = 64 * EPS32 * np.abs(full).max()
    np.testing.assert_allclose(out, full, rtol=0, atol=atol)
    assert np.abs(full).max() > 0.5  # not a comparison of two near-constant outputs


# ------------------------------------------------------------------- determinism
@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_model_other_seed_other_model(name):
    X, y = data(name)
    est = short(name).fit(X, y)
    # the same seed on the same array: the selector's clone in a pipeline is that fit
    again = make_pipeline(SelectFromModel(short(name), threshold=1e-300)).fit(X, y)
    params = list(est.module_.parameters())
    # the same computation repeated in one process (same seed, same threads): bitwise
    for a, b in zip(params, again[0].estimator_.module_.parameters(), strict=True):
        assert torch.equal(a, b)
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    other = short(name).set_params(random_state=1).fit(X, y)
    assert torch.rand(1) == expected_next  # fit leaves torch's global RNG alone
    if name in LINEAR:
        # ridge start and exact block steps, nothing random to seed: the same model up to
        # float64 rounding (the certified KKT tolerance, 1e-9 relative, bounds any drift)
        np.testing.assert_array_equal(other.selected_features_, est.selected_features_)
        np.testing.assert_allclose(other.coef_, est.coef_, rtol=1e-9, atol=0)
    else:  # random initialization and batch order
        pairs = zip(params, other.module_.parameters(), strict=True)
        assert not all(torch.equal(a, b) for a, b in pairs)


# ------------------------------------------------------------------------- pickle
@pytest.mark.parametrize("name", NAMES)
def test_pickle_and_joblib_round_trips(name, tmp_path):
    est = fitted(name)
    X, _ = data(name)
    joblib.dump(est, tmp_path / "model.joblib")
    for restored in (pickle.loads(pickle.dumps(est)), joblib.load(tmp_path / "model.joblib")):
        # the same weights and computation: bitwise
        np.testing.assert_array_equal(raw_output(restored, X), raw_output(est, X))
        np.testing.assert_array_equal(restored.selected_features_, est.selected_features_)
        assert restored.sparsity_gap_ == est.sparsity_gap_


# ---------------------------------------------------------------------- pandas
@pytest.mark.parametrize("name", NAMES)
def test_pandas_input_keeps_feature_names(name):
    est = fitted(name)
    X, _ = data(name)
    frame = pd.DataFrame(X, columns=COLUMNS)
    assert list(est.feature_names_in_) == COLUMNS
    np.testing.assert_array_equal(
        est.feature_names_in_[est.selected_features_], [COLUMNS[j] for j in est.selected_features_]
    )
    # the same rows in column-major order (as a DataFrame holds them) are made row-major
    # before any arithmetic: the same predictions bit for bit, and the same model
    np.testing.assert_array_equal(est.predict(frame), est.predict(X))
    np.testing.assert_array_equal(est.predict(np.asfortranarray(X)), est.predict(X))
    if name in LINEAR:
        refit = clone(est).fit(np.asfortranarray(X), data(name)[1])
        np.testing.assert_array_equal(refit.coef_, clone(est).fit(X, data(name)[1]).coef_)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(frame[COLUMNS[::-1]])


# ------------------------------------------------------------------------ paths
@pytest.mark.parametrize("name", NAMES)
def test_warm_started_path_runs_from_dense_to_empty(name):
    est = short(name)
    X, y = data(name)
    frame = pd.DataFrame(X, columns=COLUMNS)
    # the default grid: geometric below lam_max (the D=2 bound), extended upward until a
    # point selects nothing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short fits at small lam
        path = est.regularization_path(frame, y, n_lams=3, lam_min_ratio=0.03)
    assert not hasattr(est, "module_")  # the estimator itself is not fitted
    assert np.all(np.diff(path.lams) > 0)  # ascending lam: dense to sparse
    assert path.n_selected[0] >= 3 and path.n_selected[-1] == 0
    if len(path) > 3:  # the extension stops at the first empty point
        assert path.n_selected[-2] > 0
    # warm starts at D=3: a group at exactly zero gets no gradient and never comes back,
    # so the selections are nested
    for dense, sparse in zip(path.selected, path.selected[1:], strict=False):
        assert set(sparse) <= set(dense)
    # one row of group norms (features, trees) and of feature importances per point; the
    # empty model's groups are all exactly zero
    n_groups = fitted(name).group_norms_.size
    assert path.group_norms.shape == (len(path), n_groups)
    assert path.importances.shape == (len(path), N_FEATURES)
    assert np.all(path.group_norms[-1] == 0) and np.all(path.importances[-1] == 0)
    np.testing.assert_array_equal(path.feature_names, COLUMNS)
    assert list(path.selected_at(path.lams[0])) == [COLUMNS[j] for j in path.selected[0]]


@pytest.mark.parametrize("name", LINEAR)
def test_linear_D2_path_selects_ever_fewer_features(name):
    est = clone(ESTIMATORS[name]).set_params(D=2)
    X, y = data(name)
    path = est.regularization_path(X, y, n_lams=12, lam_min_ratio=1e-2)
    assert path.n_selected[0] > INFORMATIVE.size  # dense end: noise features too
    # a D=2 group may come back along the path, but on this design the number selected
    # never grows, and the grid's top point (lam_max) selects nothing
    assert np.all(np.diff(path.n_selected) <= 0)
    assert path.n_selected[-1] == 0
    assert path.n_selected[-2] > 0


# --------------------------------------------------------------- model selection
LAM_EMPTY = 30.0  # beyond every estimator's lam_max on these data: the empty model


@pytest.mark.parametrize("name", NAMES)
def test_gridsearch_over_lam_and_D_chooses_the_informative_model(name):
    est = short(name)
    X, y = data(name)
    lam = est.lam
    grid = [{"lam": [lam], "D": [2, 3]}, {"lam": [LAM_EMPTY], "D": [3]}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 10-epoch fits
        search = GridSearchCV(est, grid, cv=2).fit(X, y)
        # refitted on all the data: the same model as a fresh fit with the best parameters
        again = clone(est).set_params(**search.best_params_).fit(X, y)
    scores = search.cv_results_["mean_test_score"]  # grid order: (lam, 2), (lam, 3), empty
    # the empty model (intercept only: R^2 <= 0, or the majority class, < 0.5 here) scores
    # far below a model with the informative features (R^2 or accuracy > 0.7 on these data)
    assert scores[2] < 0.5 < 0.7 < min(scores[0], scores[1])
    assert search.best_params_["lam"] == lam
    best = search.best_estimator_
    assert set(INFORMATIVE) <= set(best.selected_features_)
    np.testing.assert_array_equal(raw_output(best, X), raw_output(again, X))


@pytest.mark.parametrize("name", NAMES)
def test_select_from_model_in_a_pipeline_keeps_the_selected_features(name):
    est = fitted(name)
    X, y = data(name)
    frame = pd.DataFrame(X, columns=COLUMNS)
    prefit = SelectFromModel(est, threshold=1e-300, prefit=True)
    np.testing.assert_array_equal(np.flatnonzero(prefit.get_support()), est.selected_features_)
    np.testing.assert_array_equal(prefit.transform(frame), X[:, est.selected_features_])
    final = LogisticRegression() if is_classifier(est) else LinearRegression()
    pipe = make_pipeline(SelectFromModel(short(name), threshold=1e-300), final)
    pipe.fit(frame, y)
    kept = pipe[0].estimator_.selected_features_
    assert set(INFORMATIVE) <= set(kept)
    np.testing.assert_array_equal(np.flatnonzero(pipe[0].get_support()), kept)
    assert pipe[-1].coef_.shape[-1] == kept.size
    # a linear model on (at least) the 3 informative features fits these linear data well
    assert pipe.score(frame, y) > 0.8


@pytest.mark.parametrize("name", NAMES)
def test_early_stopping_stops_and_records_the_validation_loss(name):
    X, y = data(name)
    est = clone(ESTIMATORS[name]).set_params(
        early_stopping=True, n_iter_no_change=2, max_epochs=200
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # stopped early on purpose
        est.fit(X, y)
    assert est.n_iter_ < 200
    assert "valid_loss" in est.history_[-1]


# ----------------------------------------------------------------- subnormal numbers
NETWORKS = [name for name in NAMES if name not in LINEAR]  # trained by SGD steps


@pytest.mark.parametrize("caller_flushes", [False, True])
@pytest.mark.parametrize("name", NETWORKS)
def test_training_flushes_subnormals_and_restores_the_callers_setting(
    name, caller_flushes, monkeypatch
):
    """Dead groups' factors pass through subnormal floats before the fit removes them,
    where CPU arithmetic is up to ~70x slower: every epoch trains with them flushed to
    zero, and the caller's own setting is back afterwards, whichever it was."""
    from sksparse_nn.training import PenalizedNet
    from sksparse_nn.training.runtime import _flushing_denormals

    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal numbers")
    seen = []
    monkeypatch.setattr(
        PenalizedNet, "on_epoch_end", lambda *args, **kw: seen.append(_flushing_denormals())
    )
    try:
        torch.set_flush_denormal(caller_flushes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            short(name).fit(*data(name))
        assert _flushing_denormals() is caller_flushes
    finally:
        torch.set_flush_denormal(False)
    assert len(seen) >= 10 and all(seen)


def test_flush_denormals_restores_the_setting_when_the_block_raises():
    from sksparse_nn.training import flush_denormals
    from sksparse_nn.training.runtime import _flushing_denormals

    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal numbers")
    with pytest.raises(RuntimeError, match="inside"), flush_denormals():
        assert _flushing_denormals()
        # a product that would be subnormal is 0 inside the block
        assert float(torch.tensor([1e-20], dtype=torch.float32) ** 2) == 0.0
        raise RuntimeError("inside")
    assert not _flushing_denormals()
    assert float(torch.tensor([1e-20], dtype=torch.float32) ** 2) > 0.0
