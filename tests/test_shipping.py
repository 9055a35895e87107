"""Shipping a fitted model: ONNX graphs (onnxruntime predicts what the estimator does)
and skops files (they load back and predict identically), for every estimator of the
shared table (``ESTIMATORS`` of tests/test_common.py: a new family is held to it)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from test_common import ESTIMATORS, _ids

from sksparse_nn import (
    DGatedAutoencoder,
    DGatedMLPRegressor,
    DGatedNAMRegressor,
    DGatedNeuralNetClassifier,
    DGatedNeuralNetRegressor,
    NODERegressor,
    SparseLinearClassifier,
    VariableModel,
)
from sksparse_nn.export import register_converters, to_onnx, trusted_types

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")
sio = pytest.importorskip("skops.io")

#: float32 rounding (eps 1.2e-7) through the folded scaling and a few layers of width
#: <= 8: about a hundred roundings of the output's size.
RTOL = 100 * np.finfo(np.float32).eps


def _data(est, n=48, p=5, seed=0, classes=("a", "b", "c")):
    """Training rows and targets (string classes for classifiers), and other rows for
    the comparison, spread wider than the training rows (nothing traced from the
    export's example row can pass unnoticed)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if is_classifier(est):
        y = np.asarray(classes)[np.digitize(X[:, 0] + X[:, 1], [-0.6, 0.6][: len(classes) - 1])]
    else:
        y = X[:, 0] + np.abs(X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y, 2.0 * rng.normal(size=(30, p)) + 0.5


def _run(model, X):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X.astype(np.float32)})


def _fit(est, X, y):
    with warnings.catch_warnings():  # tiny budgets: convergence warnings expected
        warnings.simplefilter("ignore")
        return est.fit(X, y)


def _assert_same_predictions(outputs, fitted, X):
    """onnxruntime's outputs equal the fitted model's on X, to float32 rounding."""
    if is_classifier(fitted):
        proba = fitted.predict_proba(X)
        np.testing.assert_allclose(outputs[1], proba, rtol=0, atol=RTOL)
        top2 = np.sort(proba, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * RTOL  # ties within rounding may flip
        assert np.array_equal(outputs[0][clear], fitted.predict(X)[clear])
    else:
        pred = fitted.predict(X).reshape(len(X), -1)
        scale = max(1.0, np.abs(pred).max())
        np.testing.assert_allclose(outputs[0], pred, rtol=0, atol=RTOL * scale)


def _trusted(est):
    """The package's list, plus the test's own classes an estimator holds."""
    own = [type(est), getattr(est, "module", None), getattr(est, "estimator", None)]
    own = [c if isinstance(c, type) else type(c) for c in own if c is not None]
    return trusted_types() + [f"{c.__module__}.{c.__qualname__}" for c in own]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=_ids)
def test_onnx_and_skops_predict_what_the_estimator_does(estimator):
    X, y, X_new = _data(estimator)
    unfitted = clone(estimator)
    loaded = sio.loads(sio.dumps(unfitted), trusted=_trusted(unfitted))
    assert loaded.get_params().keys() == unfitted.get_params().keys()

    fitted = _fit(clone(estimator), X, y)
    _assert_same_predictions(_run(to_onnx(fitted), X_new), fitted, X_new)
    selected = getattr(fitted, "selected_features_", None)
    if selected is not None and len(selected) < X.shape[1] and not hasattr(fitted, "encoder"):
        # the graph reads the selected columns only: the others may hold anything
        X_nan = X_new.copy()
        X_nan[:, np.setdiff1d(np.arange(X.shape[1]), selected)] = np.nan
        _assert_same_predictions(_run(to_onnx(fitted), X_nan), fitted, X_new)

    loaded = sio.loads(sio.dumps(fitted), trusted=_trusted(fitted))
    method = fitted.predict_proba if is_classifier(fitted) else fitted.predict
    assert np.array_equal(getattr(loaded, method.__name__)(X_new), method(X_new))
    if hasattr(fitted, "history_"):  # a skorch History again, every entry kept
        assert type(loaded.history_) is type(fitted.history_)
        assert list(loaded.history_) == list(fitted.history_)


#: One entry per class (and inner estimator's class): the conversion depends on the
#: classes, not on their settings.
_ONE_PER_CLASS = list(
    {(type(e), type(getattr(e, "estimator", None))): e for e in ESTIMATORS[::-1]}.values()
)[::-1]


@pytest.mark.parametrize("estimator", _ONE_PER_CLASS, ids=_ids)
def test_a_pipeline_with_scaling_converts_as_a_whole(estimator):
    register_converters()
    if not type(estimator).__module__.startswith("sksparse_nn"):
        register_converters([type(estimator)])  # a family of one's own joins by name
    X, y, X_new = _data(estimator, classes=("no", "yes"), seed=1)
    pipe = _fit(make_pipeline(StandardScaler(), clone(estimator)), 10.0 * X + 3.0, y)
    options = {id(pipe[-1]): {"zipmap": False}} if is_classifier(pipe) else None
    model = skl2onnx.to_onnx(pipe, X[:1].astype(np.float32), options=options)
    X_new = 10.0 * X_new + 3.0
    outputs = _run(model, X_new)
    if is_regressor(pipe):
        outputs[0] = outputs[0].reshape(len(X_new), -1)
    _assert_same_predictions(outputs, pipe, X_new)


def _mixed_encoder():
    """An explicit encoder of the mixed table: imputer + scaler on numbers, one-hot with
    rare levels grouped on strings, in a ColumnTransformer."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder

    return ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["a", "b", "d"]),
            ("cat", OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=10), ["c"]),
        ]
    )


@pytest.mark.parametrize("explicit", [False, True], ids=["TableEncoder", "ColumnTransformer"])
def test_a_variable_model_on_a_mixed_table_converts_with_its_encoder(explicit):
    # VariableModel's default encoder (rare levels pooled, missing-value indicators) or
    # an explicit ColumnTransformer: converted with the estimator, saved with skops
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame(
        {
            "a": 5.0 * rng.normal(size=n) + 2.0,
            "b": rng.normal(size=n),
            "c": rng.choice(["x", "y", "z", "w"], n, p=[0.45, 0.45, 0.07, 0.03]),
            "d": rng.integers(0, 3, n),
        }
    )
    frame.loc[::7, "b"] = np.nan
    y = frame["a"].to_numpy() + (frame["c"] == "x") + 0.1 * rng.normal(size=n)
    est = DGatedMLPRegressor(lam=0.01, hidden_layer_sizes=(8,), max_epochs=5, random_state=0)
    model = VariableModel(est, encoder=_mixed_encoder() if explicit else "auto")
    _fit(model, frame, y)
    assert any("infrequent" in name for name in model.encoder_.get_feature_names_out())
    session = ort.InferenceSession(to_onnx(model, frame.head()).SerializeToString())
    new = frame.head(12).copy()
    new["c"] = ["x", "y", "z", "w", "unseen", "x"] * 2
    feeds = {c: new[[c]].to_numpy(np.float32) for c in ("a", "b")}
    feeds["c"] = new[["c"]].to_numpy(object)
    feeds["d"] = new[["d"]].to_numpy(np.int64)
    (values,) = session.run(None, feeds)
    expected = model.predict(new)
    np.testing.assert_allclose(values[:, 0], expected, atol=RTOL * np.abs(expected).max())
    loaded = sio.loads(sio.dumps(model), trusted=trusted_types())
    assert np.array_equal(loaded.predict(new), expected)


def test_missing_value_indicators_convert_with_the_pipeline():
    from sklearn.impute import SimpleImputer

    est = DGatedMLPRegressor(hidden_layer_sizes=(8,), max_epochs=3, random_state=0)
    X, y, X_new = _data(est)
    X[::5, 1] = np.nan
    X_new[::3, 1] = np.nan
    pipe = _fit(make_pipeline(SimpleImputer(add_indicator=True), StandardScaler(), est), X, y)
    register_converters()
    outputs = _run(skl2onnx.to_onnx(pipe, X[:1].astype(np.float32)), X_new)
    _assert_same_predictions(outputs, pipe, X_new)


def test_drop_inputs_takes_the_selected_columns_alone():
    est = SparseLinearClassifier(lam=0.05)
    X, y, X_new = _data(est)
    _fit(est, X, y)
    columns = est.selected_features_
    assert 0 < len(columns) < X.shape[1]  # the data select some columns
    model = to_onnx(est, drop_inputs=True)
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_value == len(columns)
    _assert_same_predictions(_run(model, X_new[:, columns]), est, X_new)


def test_a_nam_graph_holds_beyond_one_chunk_of_rows():
    # the NAM's forward sums features in chunks sized by the batch: the traced graph
    # must not keep the example batch's chunks (64 units x 5 features: 820+ rows)
    est = DGatedNAMRegressor(hidden_layer_sizes=(64,), max_epochs=2, random_state=0)
    X, y, _ = _data(est)
    _fit(est, X, y)
    X_new = np.random.default_rng(2).normal(size=(2000, X.shape[1]))
    _assert_same_predictions(_run(to_onnx(est), X_new), est, X_new)


def test_the_autoencoder_exports_its_codes_and_round_trips():
    X, _, X_new = _data(DGatedAutoencoder())
    small = {"n_components": 4, "hidden_layer_sizes": (8,), "max_epochs": 3}
    est = _fit(DGatedAutoencoder(**small, random_state=0), X, None)
    (codes,) = _run(to_onnx(est), X_new)
    expected = est.transform(X_new)
    np.testing.assert_allclose(codes, expected, atol=RTOL * max(1.0, np.abs(expected).max()))
    loaded = sio.loads(sio.dumps(est), trusted=trusted_types())
    assert np.array_equal(loaded.transform(X_new), expected)


def test_a_user_module_reads_only_the_inputs_its_first_layer_uses():
    from _user_module import TwoLayer

    est = DGatedNeuralNetRegressor(TwoLayer, gates={"hidden.weight": "in"}, max_epochs=2)
    X, y, X_new = _data(est)
    _fit(est, X, y)
    with torch.no_grad():  # as if training had removed inputs 1 and 3
        est.module_.module.hidden.weight[:, [1, 3]] = 0.0
    X_nan = X_new.copy()
    X_nan[:, [1, 3]] = np.nan
    _assert_same_predictions(_run(to_onnx(est), X_nan), est, X_new)
    model = to_onnx(est, drop_inputs=True)
    _assert_same_predictions(_run(model, X_new[:, [0, 2, 4]]), est, X_new)


class _Conv(torch.nn.Module):
    """A small conv chain on 1 x 6 x 6 images."""

    def __init__(self, n_outputs):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.out = torch.nn.Linear(4 * 4 * 4, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.conv(x)).flatten(1))


def test_an_image_model_exports_with_its_sample_shape():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(40, 1, 6, 6))
    y = (images[:, 0, 2, 2] > 0).astype(int)
    est = DGatedNeuralNetClassifier(_Conv, gates={"conv.weight": "out"}, max_epochs=2)
    _fit(est, images, y)
    new = 2.0 * rng.normal(size=(9, 1, 6, 6))
    session = ort.InferenceSession(to_onnx(est).SerializeToString())
    outputs = session.run(None, {"X": new.astype(np.float32)})
    _assert_same_predictions(outputs, est, new)


def test_skops_refuses_a_module_instance_parameter_clearly():
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    est = DGatedNeuralNetRegressor(net, gates={"0.weight": "in"})
    with pytest.raises(TypeError, match="module= is a torch module instance.*its class"):
        sio.dumps(est)
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(est)).module, torch.nn.Sequential)


class _Cumulative(torch.nn.Module):
    """A module with an operation the TorchScript exporter has no ONNX form for."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, n_outputs)

    def forward(self, x):
        return torch.cummax(self.hidden(x), dim=1).values


def test_a_module_torch_cannot_export_is_a_clear_error():
    est = DGatedNeuralNetClassifier(_Cumulative, gates={"hidden.weight": "in"}, max_epochs=2)
    X, y, _ = _data(est)
    _fit(est, X, y)
    with pytest.raises(ValueError, match="cannot export the fitted module of .*cummax"):
        to_onnx(est)


def test_missing_extra_is_an_import_error_naming_it(monkeypatch):
    import sys

    est = _fit(NODERegressor(num_trees=2, depth=2, max_epochs=1), *_data(NODERegressor())[:2])
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now fails
    with pytest.raises(ImportError, match=r"sksparse-nn\[export\]"):
        to_onnx(est)


@pytest.mark.slow
def test_the_dynamo_exporter_gives_the_same_graph_outputs():
    est = NODERegressor(num_trees=4, depth=2, max_epochs=3, random_state=0)
    X, y, X_new = _data(est)
    _fit(est, X, y)
    _assert_same_predictions(_run(to_onnx(est, exporter="dynamo"), X_new), est, X_new)
