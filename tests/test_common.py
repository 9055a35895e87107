"""Checks every public estimator must pass: scikit-learn's own, and a table of bad inputs.

A new estimator joins by one line in ``ESTIMATORS`` (small, fast settings).
"""

import warnings

import numpy as np
import pytest
import torch
from _minimal_family import OneHiddenRegressor
from _user_module import TwoLayer
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    DGatedNeuralNetClassifier,
    DGatedNeuralNetRegressor,
    GroupLassoClassifier,
    GroupLassoRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
    VariableModel,
)
from sksparse_nn.exceptions import TrainingDivergedError
from sksparse_nn.path._points import selection

_TINY_NAM = {"hidden_layer_sizes": (8,), "batch_size": 32, "max_epochs": 10, "random_state": 0}




_USER = {"gates": {"hidden.weight": "in"}, "lam": 1e-3, "max_epochs": 10, "random_state": 0}

ESTIMATORS = [
    GroupLassoRegressor(lam=0.01),
    GroupLassoClassifier(lam=0.01),
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
    DGatedNeuralNetRegressor(TwoLayer, **_USER),
    DGatedNeuralNetClassifier(TwoLayer, **_USER),
    # groups of input features (pairs of columns kept or removed together)
    DGatedMLPClassifier(groups=2, lam=1e-3, hidden_layer_sizes=(8,), max_epochs=5, random_state=0),
    DGatedNAMRegressor(groups=2, **{"lam": 1e-3, **_TINY_NAM}),
    # one group per variable of an encoder's output (here one column each)
    VariableModel(SparseLinearRegressor(lam=0.01, max_epochs=5), encoder=StandardScaler()),
    VariableModel(SparseLinearRegressor(lam=0.01, max_epochs=5)),  # TableEncoder: NaN in
    VariableModel(
        DGatedMLPClassifier(lam=1e-3, hidden_layer_sizes=(8,), max_epochs=5, random_state=0),
        encoder=StandardScaler(),
    ),
    # a family written from the hook table alone (tests/_minimal_family.py)
    OneHiddenRegressor(random_state=0),
]


def _ids(est):
    return type(est).__name__


def _expected_failures(estimator):
    """Checks an estimator fails by design, with the reason (scikit-learn's mechanism)."""
    if isinstance(estimator, SparseLinearClassifier):
        reason = (
            "D > 2 is non-convex and its steps stop on a relative objective change "
            "(1e-10 per block step, tol for L-BFGS): weights and repeated rows agree "
            "to that tolerance (tests/test_linear_sample_weight.py: 1e-5), not to "
            "the check's rtol=1e-7"
            if estimator.D > 2
            else "the proximal-Newton steps stop at a relative KKT violation of 1e-8: "
            "the decision functions of weights and of repeated rows agree to a few "
            "1e-7 relative (5e-7 on 3 of 45 values), beyond the check's rtol=1e-7"
        )
        return {
            "check_sample_weight_equivalence_on_dense_data": reason,
            "check_sample_weight_equivalence_on_sparse_data": reason,
        }
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
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
    if name == "3-d X" and getattr(getattr(estimator, "_traits", None), "X_validation", {}).get(
        "allow_nd"
    ):
        return  # images and sequences are this estimator's input: n-d X is valid
    X, y = _data(estimator)
    X_bad, y_bad = corrupt(X, y)
    tags = estimator.__sklearn_tags__().input_tags
    if tags.allow_nan and name in ("nan in X", "string in X"):
        clone(estimator).fit(X_bad, y_bad)  # a raw table's content (VariableModel's encoder)
        return
    with pytest.raises(ValueError, match=message):
        clone(estimator).fit(X_bad, y_bad)


@pytest.mark.parametrize("estimator", [e for e in ESTIMATORS if is_regressor(e)], ids=_ids)
def test_string_targets_of_a_regressor_are_a_clear_error(estimator):
    # GroupLassoRegressor raised numpy's "ufunc 'maximum' did not contain a loop"
    X, _ = _data(estimator)
    with pytest.raises(ValueError, match="could not convert string to float"):
        clone(estimator).fit(X, np.array(["a"] * len(X)))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_bad_predict_input_raises_a_clear_error(estimator):
    X, y = _data(estimator)
    est = clone(estimator).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :-1])
    if estimator.__sklearn_tags__().input_tags.allow_nan:
        assert np.all(np.isfinite(est.predict(_with(X, (0, 0), np.nan))))
        return
    with pytest.raises(ValueError, match="NaN"):
        est.predict(_with(X, (0, 0), np.nan))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_fit_does_not_modify_its_inputs(estimator):
    X, y = _data(estimator)
    X_copy, y_copy = X.copy(), y.copy()
    clone(estimator).fit(X, y)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)


# ---------------------------------------------------------------- silent failure
# Every case below once produced NaN models, torch stack traces or misleading messages.
# Each estimator is held to it; families join by being in ESTIMATORS.
def _having(*names):
    """The estimators (of ESTIMATORS) that have all the given parameters."""
    return [e for e in ESTIMATORS if all(n in e.get_params(deep=False) for n in names)]


def _standardized(est, n=120, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X = (X - X.mean(0)) / X.std(0)
    if is_classifier(est):
        return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, (y - y.mean()) / y.std()


def _assert_finite_fit(est, X):
    """No NaN anywhere a user looks: predictions, importances, selection."""
    assert np.all(np.isfinite(est.predict(X)))
    if hasattr(est, "predict_proba"):
        assert np.all(np.isfinite(est.predict_proba(X)))
    importances = getattr(est, "feature_importances_", None)
    if importances is not None:
        assert np.all(np.isfinite(importances))
        np.testing.assert_array_equal(est.selected_features_, np.flatnonzero(importances))


@pytest.mark.parametrize("estimator", _having("lam"), ids=_ids)
def test_huge_lam_gives_the_empty_model_not_nan(estimator):
    # a path runs to large lam: the default optimizer must shrink every group to exactly
    # zero (intercept-only model), never blow up (the gate step grows like lr * lam)
    X, y = _standardized(estimator)
    budget = {"max_epochs": 40} if "lr" in estimator.get_params() else {}
    # 1e20: the NAM's gradient clipping squared lam-sized pulls in float32 (inf / inf: NaN)
    for lam in (30.0, 1e3, 1e20):
        est = clone(estimator).set_params(lam=lam, **budget).fit(X, y)
        _assert_finite_fit(est, X)
        assert selection(est).size == 0  # what a path counts: features, or units
        if hasattr(est, "selected_features_"):  # an empty model reads no feature
            assert est.selected_features_.size == 0
        out = est.decision_function(X) if is_classifier(est) else est.predict(X)
        assert np.ptp(out) <= 1e-5 * max(1.0, np.abs(out).max())  # float32: constant


@pytest.mark.slow
@pytest.mark.parametrize("estimator", _having("lam"), ids=_ids)
def test_huge_lam_with_all_defaults_gives_the_empty_model(estimator):
    X, y = _standardized(estimator)
    required = {
        k: estimator.get_params()[k] for k in ("module", "gates") if k in estimator.get_params()
    }
    default = type(estimator)(**required)
    for lam in (30.0, 1e3):
        est = clone(default).set_params(lam=lam).fit(X, y)
        _assert_finite_fit(est, X)
        assert selection(est).size == 0


@pytest.mark.parametrize(
    "estimator",
    [
        e
        for e in _having("lam")
        if getattr(getattr(e, "_traits", None), "dtype", None) == torch.float32
    ],
    ids=_ids,
)
def test_a_lam_beyond_the_training_dtype_is_a_clear_error(estimator):
    # float32 networks: torch raised "value cannot be converted to type float without
    # overflow" from the penalty's gradient
    X, y = _data(estimator)
    with pytest.raises(ValueError, match="lam=1e\\+39 is beyond the range of the float32"):
        clone(estimator).set_params(lam=1e39).fit(X, y)


@pytest.mark.parametrize("estimator", _having("device"), ids=_ids)
@pytest.mark.parametrize("device", ["foo", "cuda:7", "meta:0"])
def test_a_device_torch_cannot_use_is_a_clear_error(estimator, device):
    # torch raises a RuntimeError (unknown name) or an AssertionError (a backend this
    # build lacks) from deep inside; the estimator names its parameter instead
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this torch build has CUDA")  # a real device: not bad input here
    X, y = _data(estimator)
    bad = clone(estimator).set_params(device=device)
    message = f"device='{device.split(':')[0]}|device='{device}'"
    with pytest.raises(ValueError, match=message):
        bad.fit(X, y)
    with pytest.raises(ValueError, match=message):  # a path checks it before any work
        bad.regularization_path(X, y, n_lams=2)


@pytest.mark.parametrize("estimator", _having("lr"), ids=_ids)
def test_divergence_raises_a_clear_error_never_nan(estimator):
    X, y = _standardized(estimator)
    est = clone(estimator).set_params(lr=1e4, optimizer="sgd")
    try:
        est.fit(X, y)
    except TrainingDivergedError as exc:
        assert isinstance(exc, ValueError) and isinstance(exc, FloatingPointError)
        for word in ("diverged", "lr=10000", "lam=", "|X| up to"):
            assert word in str(exc)
        assert not hasattr(est, "module_") or not hasattr(est, "selected_features_")
    else:  # a fit that survives must be finite everywhere
        _assert_finite_fit(est, X)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda X, y, c: (X * 1e6, y), id="X*1e6"),
        pytest.param(lambda X, y, c: (X * 1e-4 + 50.0, y), id="X*1e-4+50"),
        pytest.param(lambda X, y, c: (X, y if c else y * 1e4 + 1e5), id="y*1e4+1e5"),
    ],
)
def test_unscaled_data_fits_with_defaults(estimator, transform):
    X, y = _standardized(estimator)
    X_t, y_t = transform(X, y, is_classifier(estimator))
    est = clone(estimator).fit(X_t, y_t)
    _assert_finite_fit(est, X_t)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_values_beyond_the_arithmetic_raise_a_clear_error(estimator):
    X, y = _standardized(estimator)
    with pytest.raises(ValueError, match="Rescale X|too large|beyond"):
        clone(estimator).fit(X * 1e300, y)
    # beyond float32 but fine in float64: a clear error or a finite model, never inf/NaN
    try:
        est = clone(estimator).fit(X * 1e39, y)
    except ValueError as exc:
        assert "Rescale X" in str(exc)
    else:
        _assert_finite_fit(est, X * 1e39)


@pytest.mark.parametrize("estimator", _having("warm_start"), ids=_ids)
def test_warm_start_on_differently_shaped_data_raises(estimator):
    X, y = _standardized(estimator)
    est = clone(estimator).set_params(warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.fit(X[:, :-1], y)
    if is_classifier(est):
        y3 = np.where(X[:, 2] > 1, 2, y)
        with pytest.raises(ValueError, match="classes"):
            est.fit(X, y3)
        np.testing.assert_array_equal(est.classes_, [0, 1])  # the fitted model is kept
    else:
        with pytest.raises(ValueError, match="output|1d array"):
            est.fit(X, np.column_stack([y, y]))
    _assert_finite_fit(est, X)


_BAD_PARAMS = [
    ("max_epochs", 0),
    ("batch_size", 0),
    ("lr_schedule", "bogus"),
    ("tol", -1.0),
    ("warm_start", "yes"),
    ("validation_fraction", 5.0),
    ("n_threads", 0),
    ("lam", -1.0),
    ("D", 1),
]


@pytest.mark.parametrize("name, value", _BAD_PARAMS, ids=[f"{n}={v}" for n, v in _BAD_PARAMS])
@pytest.mark.parametrize("estimator", _having("lam", "lr"), ids=_ids)
def test_bad_parameters_raise_in_fit_and_in_paths(estimator, name, value):
    X, y = _standardized(estimator)
    est = clone(estimator).set_params(**{name: value})
    with pytest.raises(ValueError, match=name):
        est.fit(X, y)
    if name == "lam":
        return  # paths set lam themselves
    with pytest.raises(ValueError, match=name):
        est.regularization_path(X, y, lams=[0.01, 0.1])
    with pytest.raises(ValueError, match=name):
        SparsePathCV(est, lams=[0.01, 0.1], cv=2).fit(X, y)


@pytest.mark.parametrize("estimator", [e for e in ESTIMATORS if is_classifier(e)], ids=_ids)
def test_confident_probabilities_do_not_overflow(estimator):
    X, y = _standardized(estimator)
    est = clone(estimator).fit(X, y)
    far = X * 1e3  # logits of hundreds to thousands: exp overflows if not done stably
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        proba = est.predict_proba(far)
        log_proba = est.predict_log_proba(far)
    assert np.all(np.isfinite(proba)) and np.all(np.isfinite(log_proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)  # float64 softmax
    np.testing.assert_allclose(np.exp(log_proba), proba, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("estimator", _having("n_threads"), ids=_ids)
def test_thread_policy_restores_the_callers_setting(estimator, monkeypatch):
    from sksparse_nn.training import runtime as _guards

    monkeypatch.setattr(_guards, "SMALL_STEP_WORK", 2**20)  # the shipped policy
    if isinstance(estimator, (SparseLinearRegressor, SparseLinearClassifier)):
        # at D=2 the numpy solver certifies the fit: no torch forward to observe
        estimator = clone(estimator).set_params(D=3)
    X, y = _standardized(estimator)
    seen = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, args: seen.append(torch.get_num_threads())
    )
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        clone(estimator).fit(X, y)  # n_threads=None: small problem -> one thread
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
        seen.clear()
        torch.set_num_threads(1)
        clone(estimator).set_params(n_threads=2).fit(X, y)
        assert seen and set(seen) == {2}
        assert torch.get_num_threads() == 1
    finally:
        handle.remove()
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    "estimator", [e for e in _having("max_epochs", "lr") if "hidden_layer_sizes" in
                  e.get_params() or "num_trees" in e.get_params()], ids=_ids
)  # fmt: skip
def test_max_epochs_cut_short_warns(estimator):
    # networks after 3 epochs at a small step: the loss is still falling
    X, y = _standardized(estimator)
    est = clone(estimator).set_params(max_epochs=3, lr=1e-3, lam=0.0)
    with pytest.warns(ConvergenceWarning, match="max_epochs=3"):
        est.fit(X, y)


def test_convergence_advice_fits_how_max_epochs_was_set():
    from sksparse_nn.training import warn_not_converged

    est = DGatedMLPRegressor(max_epochs=None)
    with pytest.warns(ConvergenceWarning, match="above the automatic budget of 250") as rec:
        warn_not_converged(est, ["the loss was still falling"], 250)
    assert "set max_epochs=None" not in str(rec[0].message)  # it already is
    with pytest.warns(ConvergenceWarning, match="Raise max_epochs .or set max_epochs=None"):
        warn_not_converged(est.set_params(max_epochs=30), ["the loss was still falling"], 30)


def test_convergence_monitor_names_groups_in_transit_and_falling_losses():
    from sksparse_nn.training import ConvergenceMonitor

    monitor = ConvergenceMonitor(max_epochs=100).initialize()
    monitor.snapshot_ = {"w": torch.tensor([1.0, 1e-3, 1e-4, 2.0], dtype=torch.float64)}
    final = {"w": np.array([1.0, 1e-5, 0.0, 1.9])}  # group 1 shrank 100x and is not 0
    flat = np.r_[np.linspace(1.0, 0.2, 80), np.full(20, 0.2)]
    messages = monitor.diagnose(flat, final, zero_tol=1e-7)
    assert len(messages) == 1 and "1 group(s) were still shrinking" in messages[0]
    falling = np.linspace(1.0, 0.2, 100)  # the last tenth still lowers the loss
    messages = monitor.diagnose(falling, {"w": np.array([1.0, 0.0, 0.0, 1.9])}, 1e-7)
    assert len(messages) == 1 and "still falling" in messages[0]
    # every group shrinking alike (a lam too large for the epochs): none below half its
    # size or tiny next to the largest, yet the largest fell by a third too
    uniform = {"w": np.array([0.7, 7e-4, 7e-5, 1.3])}
    messages = monitor.diagnose(flat, uniform, zero_tol=1e-7)
    assert len(messages) == 1 and "4 group(s) were still shrinking" in messages[0]
    steady = {"w": np.array([0.97, 1e-3, 1e-4, 1.95])}  # within 10%: settled
    assert monitor.diagnose(flat, steady, zero_tol=1e-7) == []


def test_groups_cut_off_in_transit_warn_in_a_real_fit():
    # lam large enough to remove noise features, but too few steps to finish: the
    # shrinking groups end above zero_tol and would count as selected without a word
    X, y = _standardized(DGatedMLPRegressor())
    X = np.column_stack([X, np.random.default_rng(1).normal(size=(len(X), 6))])
    est = DGatedMLPRegressor(lam=0.1, max_epochs=30, lr_schedule="constant", random_state=0)
    with pytest.warns(ConvergenceWarning, match="still shrinking towards zero"):
        est.fit(X, y)
    with warnings.catch_warnings():  # with the default budget the fit is done: no warning
        warnings.simplefilter("error", ConvergenceWarning)
        est.set_params(max_epochs=None, lr_schedule="cosine").fit(X, y)
    assert est.sparsity_gap_[0] < 1e-3 * est.sparsity_gap_[1]
