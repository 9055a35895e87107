"""One raw table in every form users hold it (pandas object / string / category columns,
polars, pyarrow): the same encoding, the same model, the same predictions; columns
matched by name at predict; the ONNX graph of a raw-table VariableModel (one typed input
per column) predicts what the model does, unseen levels and missing values included."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline

from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor, TableEncoder, VariableModel

N = 400
CITIES = ["Oslo", "Rome", "Lima", "Pune", "Kobe"]
SIZES = ["S", "M", "L"]


def _columns(n=N, seed=0):
    """The table as plain Python lists (None: missing): strings with missing values and
    a rare level, a category, a bool, a bool with missing values, integers with missing
    values, floats with missing values, integers."""
    rng = np.random.RandomState(seed)
    city = rng.choice(CITIES, n, p=[0.4, 0.3, 0.2, 0.08, 0.02]).tolist()
    age = rng.randn(n)
    visits = rng.randint(0, 6, n)
    data = {
        "city": [None if i % 9 == 0 else c for i, c in enumerate(city)],
        "size": rng.choice(SIZES, n).tolist(),
        "flag": (rng.rand(n) < 0.5).tolist(),
        "member": [None if i % 11 == 0 else bool(v) for i, v in enumerate(rng.rand(n) < 0.3)],
        "visits": [None if i % 7 == 0 else int(v) for i, v in enumerate(visits)],
        "age": [None if i % 6 == 0 else float(v) for i, v in enumerate(age)],
        "rooms": rng.randint(1, 5, n).tolist(),
    }
    effect = {"Oslo": 1.5, "Rome": -1.0, "Lima": 0.0, "Pune": 0.5, "Kobe": 0.0, None: 0.8}
    signal = np.array([effect[c] for c in data["city"]]) + np.nan_to_num(age)
    signal = signal + 1.2 * np.array([a is None for a in data["age"]])
    return data, signal + 0.3 * rng.randn(n)


def _categories(data):
    """The cities of ``data`` in reverse order and one no row holds."""
    return sorted({c for c in data["city"] if c is not None}, reverse=True) + ["Unused"]


def _pandas_object(data):
    return pd.DataFrame(
        {
            "city": pd.Series(data["city"], dtype=object),
            "size": pd.Series(data["size"], dtype=object),
            "flag": pd.Series(data["flag"], dtype=bool),
            "member": pd.Series(data["member"], dtype=object),
            "visits": pd.Series(data["visits"], dtype=np.float64),
            "age": pd.Series(data["age"], dtype=np.float64),
            "rooms": pd.Series(data["rooms"], dtype=np.int64),
        }
    )


def _pandas_string(data):
    frame = _pandas_object(data)
    return frame.astype(
        {"city": "string", "size": "string", "member": "boolean", "visits": "Int64"}
    )


def _pandas_category(data):
    frame = _pandas_string(data)
    # ordered, with a category no row holds; an unordered one
    frame["city"] = pd.Categorical(data["city"], categories=_categories(data), ordered=True)
    frame["size"] = frame["size"].astype("category")
    return frame


def _polars(data):
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(
        data,
        schema={
            "city": pl.String,
            "size": pl.Categorical,
            "flag": pl.Boolean,
            "member": pl.Boolean,
            "visits": pl.Int64,
            "age": pl.Float64,
            "rooms": pl.Int32,
        },
    )
    return frame.with_columns(pl.col("city").cast(pl.Enum(_categories(data))))


def _pyarrow(data):
    pa = pytest.importorskip("pyarrow")
    return pa.table(
        {
            "city": pa.array(data["city"], pa.string()),
            "size": pa.array(data["size"], pa.string()).dictionary_encode(),
            "flag": pa.array(data["flag"], pa.bool_()),
            "member": pa.array(data["member"], pa.bool_()),
            "visits": pa.array(data["visits"], pa.int64()),
            "age": pa.array(data["age"], pa.float64()),
            "rooms": pa.array(data["rooms"], pa.int64()),
        }
    )


FORMS = {
    "pandas-object": _pandas_object,
    "pandas-string": _pandas_string,
    "pandas-category": _pandas_category,
    "polars": _polars,
    "pyarrow": _pyarrow,
}


def _new_rows():
    """Rows to score: an unseen city, a missing city, size and age, missing integers
    and booleans, a rare level."""
    data, _ = _columns(n=40, seed=1)
    data["city"][:4] = ["Tokyo", None, "Kobe", "Oslo"]
    data["size"][1] = "XL"
    data["age"][2] = None
    data["visits"][3] = None
    data["member"][4] = None
    return data


def _snapshot(table):
    """A copy of the table to compare it with after a call."""
    if isinstance(table, pd.DataFrame):
        return table.copy(deep=True)
    if hasattr(table, "clone"):  # polars
        return table.clone()
    return table  # pyarrow: immutable


def _assert_unchanged(table, before):
    if isinstance(table, pd.DataFrame):
        pd.testing.assert_frame_equal(table, before)
    else:
        assert table.schema == before.schema and table.equals(before)


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits may not converge
        return model.fit(X, y)


@pytest.fixture(scope="module")
def table():
    data, y = _columns()
    return data, y, _pandas_object(data)


# ------------------------------------------------------------------ the same encoding
@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_gives_the_same_encoded_columns(table, form):
    data, _, reference = table
    X = FORMS[form](data)
    before = _snapshot(X)
    expected = TableEncoder().fit(reference)
    encoder = TableEncoder().fit(X)
    _assert_unchanged(X, before)
    names = encoder.get_feature_names_out().tolist()
    assert names == expected.get_feature_names_out().tolist()
    # levels are the values' strings, a missing value is a level, the rare city pooled,
    # the category no row holds is no level
    assert {"city_Oslo", "city_nan", "member_True", "member_nan", "flag_False"} <= set(names)
    assert "city_infrequent_sklearn" in names and "city_Kobe" not in names
    assert not any("Unused" in name for name in names)
    assert {"missingindicator_visits", "missingindicator_age"} <= set(names)
    np.testing.assert_array_equal(encoder.transform(X), expected.transform(reference))
    assert encoder.categorical_columns_ == ["city", "size", "flag", "member"]
    assert encoder.numeric_columns_ == ["visits", "age", "rooms"]


@pytest.mark.parametrize("form", [f for f in FORMS if f != "pandas-object"])
def test_declared_kinds_are_read_from_the_dtypes(form):
    data, _ = _columns(n=60)
    encoder = TableEncoder().fit(FORMS[form](data))
    assert encoder.input_kinds_ == [
        "string",
        "string",
        "boolean",
        "boolean",
        "integer",
        "float",
        "integer",
    ]


def test_a_category_of_numbers_is_a_categorical():
    frame = pd.DataFrame({"code": pd.Categorical([3, 1, None, 3] * 5), "x": np.arange(20.0)})
    encoder = TableEncoder(min_frequency=1).fit(frame)
    assert encoder.get_feature_names_out().tolist() == ["code_1", "code_3", "code_nan", "x"]
    as_strings = frame.assign(
        code=frame["code"].astype(object).map(str).where(frame["code"].notna())
    )
    np.testing.assert_array_equal(encoder.transform(as_strings), encoder.transform(frame))


# ------------------------------------------------------------------ the same model
@pytest.mark.parametrize(
    "estimator",
    [SparseLinearClassifier(lam=0.02), SparseLinearRegressor(lam=0.05)],
    ids=lambda e: type(e).__name__,
)
def test_every_form_fits_the_same_model_and_predicts_the_same(table, estimator):
    data, y, reference = table
    if isinstance(estimator, SparseLinearClassifier):
        y = (y > np.median(y)).astype(int)
    new = _new_rows()
    expected = _fit(VariableModel(estimator), reference, y)
    assert {"city", "age"} <= set(expected.selected_variables_)  # the data's signal
    method = "predict_proba" if hasattr(expected, "classes_") else "predict"
    want = getattr(expected, method)(_pandas_object(new))
    for form, make in FORMS.items():
        X, rows = make(data), make(new)
        before, rows_before = _snapshot(X), _snapshot(rows)
        model = _fit(VariableModel(estimator), X, y)
        assert model.selected_variables_.tolist() == expected.selected_variables_.tolist(), form
        np.testing.assert_array_equal(model.estimator_.coef_, expected.estimator_.coef_)
        np.testing.assert_array_equal(getattr(model, method)(rows), want)
        # a model fitted on one form scores the others
        np.testing.assert_array_equal(getattr(expected, method)(rows), want)
        _assert_unchanged(X, before)
        _assert_unchanged(rows, rows_before)


# ------------------------------------------------------------------ columns by name
@pytest.mark.parametrize("form", ["pandas-category", "polars", "pyarrow"])
def test_columns_are_matched_by_name_at_predict(table, form):
    data, y, _ = table
    X = FORMS[form](data)
    model = _fit(VariableModel(SparseLinearRegressor(lam=0.05)), X, y)
    new = _pandas_object(_new_rows())
    expected = model.predict(new)
    reordered = new[new.columns[::-1]].assign(extra=1.0, other="x")  # extra ones ignored
    np.testing.assert_array_equal(model.predict(reordered), expected)
    with pytest.raises(ValueError, match=r"no column 'city', 'age'.*fitted on"):
        model.predict(new.drop(columns=["city", "age"]))
    # the selected variables, taken by name, in the table's own kind
    chosen = model.transform(FORMS[form](_new_rows()))
    assert type(chosen) is type(X)
    names = chosen.column_names if hasattr(chosen, "column_names") else list(chosen.columns)
    assert names == model.selected_variables_.tolist()


def test_a_column_of_unsupported_kind_is_named():
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"when": pl.Series([1, 2, 3]).cast(pl.Date), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match=r"'when' \(Date\).*convert"):
        TableEncoder().fit(frame)
    with pytest.raises(TypeError, match="collected first"):
        TableEncoder().fit(frame.lazy())


def test_a_numeric_column_holding_strings_at_predict_is_named(table):
    data, y, reference = table
    model = _fit(VariableModel(SparseLinearRegressor(lam=0.05)), reference, y)
    bad = reference.head().astype({"age": object})
    bad.loc[bad.index[0], "age"] = "old"
    with pytest.raises(ValueError, match="'age' held numbers at fit"):
        model.predict(bad)


# ------------------------------------------------------------------ ONNX of a raw table
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("skl2onnx")

from sksparse_nn.export import onnx_feeds, register_converters, to_onnx  # noqa: E402

#: float32 rounding (eps 1.2e-7) of the standardized numbers and of the linear model's
#: sum over ~20 encoded columns, with margin: about a hundred roundings.
RTOL = 100 * np.finfo(np.float32).eps


def _session(graph):
    return ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])


def _assert_matches(outputs, model, rows, atol=RTOL):
    if hasattr(model, "classes_"):
        proba = model.predict_proba(rows)
        np.testing.assert_allclose(outputs[1], proba, rtol=0, atol=atol)
        clear = np.abs(proba[:, 1] - 0.5) > 2 * atol  # ties within rounding may flip
        np.testing.assert_array_equal(outputs[0][clear], model.predict(rows)[clear])
    else:
        pred = model.predict(rows)
        scale = max(1.0, np.abs(pred).max())
        np.testing.assert_allclose(outputs[0][:, 0], pred, rtol=0, atol=atol * scale)


@pytest.fixture(scope="module", params=["classifier", "regressor"])
def fitted(request, table):
    data, y, _ = table
    if request.param == "classifier":
        estimator, y = SparseLinearClassifier(lam=0.002), (y > np.median(y)).astype(int)
    else:
        estimator = SparseLinearRegressor(lam=0.002)
    return _fit(VariableModel(estimator), _pandas_category(data), y)


def test_onnx_inputs_are_one_typed_input_per_column(fitted):
    graph = fitted.to_onnx()
    from onnx import TensorProto

    types = {i.name: i.type.tensor_type.elem_type for i in graph.graph.input}
    assert types == {
        "city": TensorProto.STRING,
        "size": TensorProto.STRING,
        "flag": TensorProto.BOOL,
        "member": TensorProto.STRING,  # booleans with missing values at fit
        "visits": TensorProto.FLOAT,  # integers with missing values at fit
        "age": TensorProto.FLOAT,
        "rooms": TensorProto.INT64,
    }


@pytest.mark.parametrize("form", list(FORMS))
def test_onnx_predicts_what_the_model_does_from_every_form(fitted, form):
    rows = FORMS[form](_new_rows())
    session = _session(to_onnx(fitted))
    feeds = onnx_feeds(fitted, rows)
    assert feeds["city"][0, 0] == "Tokyo" and feeds["city"][1, 0] == ""  # unseen, missing
    assert np.isnan(feeds["age"][2, 0]) and np.isnan(feeds["visits"][3, 0])
    _assert_matches(session.run(None, feeds), fitted, rows)


def test_onnx_reads_only_the_kept_variables(table):
    data, y, _ = table
    model = _fit(VariableModel(SparseLinearRegressor(lam=0.05)), _polars(data), y)
    kept = set(model.selected_variables_)
    assert kept and kept < set(model.variable_names_)  # some variables dropped
    graph = to_onnx(model)
    read = {name for node in graph.graph.node for name in node.input}
    inputs = [i.name for i in graph.graph.input]
    assert {name for name in inputs if name in read} == kept
    small = model.to_onnx(drop_inputs=True)
    assert {i.name for i in small.graph.input} == kept
    rows = _pyarrow(_new_rows())
    _assert_matches(
        _session(small).run(None, onnx_feeds(model, rows, drop_inputs=True)), model, rows
    )
    _assert_matches(_session(graph).run(None, onnx_feeds(model, rows)), model, rows)


def test_onnx_in_float64_and_a_pipeline_around_the_model(fitted):
    rows = _pandas_string(_new_rows())
    graph = to_onnx(fitted, dtype="float64")
    eps64 = 100 * np.finfo(np.float64).eps
    _assert_matches(
        _session(graph).run(None, onnx_feeds(fitted, rows, dtype="float64")), fitted, rows, eps64
    )
    pipe = make_pipeline(fitted)  # fitted already: the Pipeline predicts with it
    _assert_matches(_session(to_onnx(pipe)).run(None, onnx_feeds(pipe, rows)), pipe, rows)
    # skl2onnx converts the Pipeline itself, inputs typed by the user
    import skl2onnx
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    register_converters()
    types = {"string": StringTensorType, "bool": BooleanTensorType, "int64": Int64TensorType}
    feeds = onnx_feeds(pipe, rows)
    initial = [
        (
            name,
            types.get(
                {"O": "string", "b": "bool", "i": "int64"}.get(v.dtype.kind), FloatTensorType
            )([None, 1]),
        )
        for name, v in feeds.items()
    ]
    options = {id(fitted.estimator_): {"zipmap": False}} if hasattr(fitted, "classes_") else None
    converted = skl2onnx.to_onnx(pipe, initial_types=initial, options=options)
    _assert_matches(_session(converted).run(None, feeds), pipe, rows)


def test_onnx_sample_and_feeds_say_what_is_wrong(fitted):
    rows = _pandas_object(_new_rows())
    with pytest.raises(ValueError, match="no column 'rooms'"):
        to_onnx(fitted, rows.drop(columns="rooms"))
    to_onnx(fitted, rows.head())  # a sample holding the columns
    bad = rows.astype({"flag": object})
    bad.loc[0, "flag"] = None
    with pytest.raises(ValueError, match="'flag' has missing values.*bool input"):
        onnx_feeds(fitted, bad)
    with pytest.raises(TypeError, match="VariableModel with its default encoder"):
        onnx_feeds(SparseLinearRegressor(), rows)


def test_onnx_of_a_constant_model_and_of_an_object_array(table):
    data, y, reference = table
    empty = _fit(VariableModel(SparseLinearRegressor(lam=1e6)), reference, y)
    assert empty.selected_variables_.size == 0
    rows = _pandas_object(_new_rows())
    _assert_matches(_session(to_onnx(empty)).run(None, onnx_feeds(empty, rows)), empty, rows)
    with pytest.raises(ValueError, match="keeps no variable"):
        to_onnx(empty, drop_inputs=True)
    # an object array (no column names): one input per column, x0, x1, ...
    array = reference[["city", "age"]].to_numpy(dtype=object)
    model = _fit(VariableModel(SparseLinearRegressor(lam=0.01)), array, y)
    graph = to_onnx(model)
    assert [i.name for i in graph.graph.input] == ["x0", "x1"]
    new = rows[["city", "age"]].to_numpy(dtype=object)
    _assert_matches(_session(graph).run(None, onnx_feeds(model, new)), model, new)
