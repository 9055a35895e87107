"""The ONNX graph of a model on a raw table: a ``VariableModel`` whose encoder is a
:class:`~sksparse_nn.encoding.TableEncoder` (alone or as the first step of a Pipeline).

The graph takes one input per column of the table, named by the column and typed by
what the column held at fit (:func:`table_inputs`): ``string`` (strings, objects,
categories; a missing value fed as ``""``), ``bool`` (a boolean column without missing
values at fit, else ``string`` of ``"True"`` / ``"False"`` / ``""``), ``int64`` (an
integer column without missing values at fit, else ``float``), ``float`` (numbers, a
missing one NaN). A model fitted on an array of numbers (no column names) takes one
input ``X`` instead. The encoding of the variables the estimator reads (one-hot
levels, rare and unseen levels as the encoder maps them; imputed, indicated and
standardized numbers) and the estimator on the encoded columns it reads are one
graph: the other columns are read by no operation (``drop_inputs=True``: not inputs).
:func:`onnx_feeds` builds the inputs onnxruntime takes from rows of the table, in any
form the encoder reads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from ..encoding import TableEncoder
from ._graph import inference_parts

__all__ = [
    "onnx_feeds",
    "parse_table_model",
    "raw_table_model",
    "register_table_encoding",
    "table_inputs",
]

#: skl2onnx alias of the encoding operator.
_ALIAS = "SksparseNNTableEncoding"
_FLOATS = {"float32": np.float32, "float64": np.float64}


# ------------------------------------------------------------------ what the graph takes
def raw_table_model(estimator):
    """The fitted ``VariableModel`` with a ``TableEncoder`` that ``estimator`` is, or
    that is the first step of the Pipeline ``estimator`` is; None otherwise."""
    while isinstance(estimator, Pipeline):
        steps = [s for _, s in estimator.steps if s is not None and s != "passthrough"]
        if not steps:
            return None
        estimator = steps[0]
    if isinstance(getattr(estimator, "encoder_", None), TableEncoder):
        return estimator
    return None


def _missing_level(onehot, k):
    return any(_is_missing(v) for v in onehot.categories_[k])


def _is_missing(value):
    return isinstance(value, float) and np.isnan(value)


def _parts(encoder):
    """``(onehot, imputer, scaler)`` of a fitted TableEncoder (None for an empty part)."""
    ct = encoder.column_transformer_
    onehot = ct.named_transformers_["categorical"] if encoder.categorical_columns_ else None
    numbers = ct.named_transformers_["numeric"] if encoder.numeric_columns_ else None
    if numbers is None:
        return onehot, None, None
    return onehot, numbers[0], numbers[-1]


def _labels(encoder):
    return list(getattr(encoder, "feature_names_in_", range(encoder.n_features_in_)))


def _input_type(encoder, j):
    """ONNX type of input column ``j``: ``"string"``, ``"bool"``, ``"int64"`` or
    ``"float"``."""
    kind = encoder.input_kinds_[j]
    label = _labels(encoder)[j]
    onehot, imputer, _ = _parts(encoder)
    if kind == "string":
        return "string"
    if kind == "boolean":
        k = encoder.categorical_columns_.index(label)
        return "string" if _missing_level(onehot, k) else "bool"
    if kind == "integer":
        p = encoder.numeric_columns_.index(label)
        indicated = imputer.indicator_ is not None and p in set(imputer.indicator_.features_)
        return "float" if indicated else "int64"
    return "float"


def _single_input(model):
    """Whether the graph takes one tensor ``X``: a model fitted on an array of numbers."""
    encoder = model.encoder_
    return not hasattr(encoder, "feature_names_in_") and all(
        k in ("integer", "float") for k in encoder.input_kinds_
    )


def _read_columns(model):
    """The encoded columns the estimator reads, in its order."""
    return np.asarray(inference_parts(model.estimator_)[1], dtype=np.intp)


def _needed(model):
    """Input columns (positions) the graph reads: the variables of the encoded columns
    the estimator reads."""
    sources = _encoded_sources(model.encoder_)
    return sorted({int(sources[c][0]) for c in _read_columns(model)})


def table_inputs(model, *, drop_inputs=False):
    """``[(name, type, position)]`` of the graph's inputs: one per column (``type`` one
    of ``"string"``, ``"bool"``, ``"int64"``, ``"float"``; ``position`` among the
    fitted columns), or ``[("X", "float", None)]`` for a model fitted on an array of
    numbers. ``drop_inputs``: the columns the graph reads only."""
    encoder = model.encoder_
    if drop_inputs and not _needed(model):
        raise ValueError(
            f"The {type(model).__name__} keeps no variable (its prediction is a constant): "
            "export it with drop_inputs=False."
        )
    if _single_input(model):
        return [("X", "float", None)]
    names = model.variable_names_
    positions = _needed(model) if drop_inputs else range(encoder.n_features_in_)
    return [(str(names[j]), _input_type(encoder, j), j) for j in positions]


def skl2onnx_types(model, *, dtype="float32", drop_inputs=False):
    """The graph's inputs as skl2onnx ``initial_types``."""
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    floats = DoubleTensorType if dtype == "float64" else FloatTensorType
    kinds = {"string": StringTensorType, "bool": BooleanTensorType, "int64": Int64TensorType}
    inputs = table_inputs(model, drop_inputs=drop_inputs)  # a clear error first
    if _single_input(model):
        width = len(_needed(model)) if drop_inputs else model.encoder_.n_features_in_
        return [("X", floats([None, width]))]
    return [(name, kinds.get(kind, floats)([None, 1])) for name, kind, _ in inputs]


def check_sample(model, X):
    """A sample ``X`` given to ``to_onnx`` holds the fitted columns (its types are not
    read: the inputs are typed by the fit)."""
    model.encoder_.read_columns(X)  # a clear error for missing or wrong columns


def onnx_feeds(estimator, X, *, dtype="float32", drop_inputs=False):
    """The inputs of the ONNX graph of a model on a raw table, from rows of the table.

    Parameters
    ----------
    estimator : fitted VariableModel, or Pipeline whose first step is one
        With the default encoder (a :class:`~sksparse_nn.encoding.TableEncoder`).
    X : DataFrame (pandas, polars), pyarrow Table or array-like
        Rows to score, in any form the encoder reads (columns matched by name).
    dtype : {"float32", "float64"}, default="float32"
        The ``dtype`` the graph was exported with (its float inputs).
    drop_inputs : bool, default=False
        The ``drop_inputs`` the graph was exported with.

    Returns
    -------
    feeds : dict
        Input name -> array of shape ``(n_samples, 1)`` (one per column: ``str``
        objects with ``""`` for a missing value, bool, int64, or floats with NaN), or
        ``{"X": (n_samples, n_columns) floats}``: what
        ``onnxruntime.InferenceSession.run(None, feeds)`` takes.

    Raises
    ------
    ValueError
        A missing value in a column whose input cannot hold one (bool, int64), or a
        fractional number in an int64 input.
    """
    if dtype not in _FLOATS:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    model = raw_table_model(estimator)
    if model is None:
        raise TypeError(
            f"onnx_feeds takes a fitted VariableModel with its default encoder (or a "
            f"Pipeline starting with one), got {type(estimator).__name__}."
        )
    columns = model.encoder_.read_columns(X)
    names = list(columns)
    inputs = table_inputs(model, drop_inputs=drop_inputs)
    if inputs[0][2] is None:  # one tensor X
        read = _needed(model) if drop_inputs else range(len(names))
        return {"X": np.column_stack([columns[names[j]] for j in read]).astype(_FLOATS[dtype])}
    return {name: _feed(name, columns[names[j]], kind, dtype) for name, kind, j in inputs}


def _feed(name, values, kind, dtype):
    """One input column, shape ``(n, 1)``."""
    if kind == "float":
        return values.astype(_FLOATS[dtype]).reshape(-1, 1)
    missing = pd.isna(values)
    if kind == "string":
        return np.where(missing, "", values).astype(object).reshape(-1, 1)
    if missing.any():
        raise ValueError(
            f"The column {name!r} has missing values, which its {kind} input cannot hold "
            "(it had none at fit): fill them, or refit on rows with them."
        )
    if kind == "bool":
        return (values == "True").reshape(-1, 1)
    if np.any(values != np.round(values)):
        raise ValueError(f"The column {name!r} holds fractions; its input is int64.")
    return values.astype(np.int64).reshape(-1, 1)


# ------------------------------------------------------------------ the encoding's plan
def _encoded_sources(encoder):
    """``[(input position, part, index)]`` of every encoded column: part ``"level"``
    (index: the one-hot column of the variable), ``"value"`` or ``"indicator"``."""
    labels = _labels(encoder)
    where = {label: j for j, label in enumerate(labels)}
    onehot, imputer, _ = _parts(encoder)
    out = []
    for k, label in enumerate(encoder.categorical_columns_):
        width = _onehot_map(onehot, k)[3]
        out += [(where[label], "level", i) for i in range(width)]
    if imputer is not None:
        out += [(where[label], "value", p) for p, label in enumerate(encoder.numeric_columns_)]
        if imputer.indicator_ is not None:
            for p in imputer.indicator_.features_:
                out.append((where[encoder.numeric_columns_[p]], "indicator", int(p)))
    return out


def _key(level):
    """The string an input holds for ``level``: ``""`` for the missing level."""
    return "" if _is_missing(level) else str(level)


def _onehot_map(onehot, k):
    """``(keys, codes, unknown, width)`` of categorical column ``k``: the key of every
    level, its output column (frequent levels in order, rare ones the last column), the
    column of an unseen level (``width``: none) and the number of output columns."""
    levels = list(onehot.categories_[k])
    rare = getattr(onehot, "infrequent_categories_", [None] * len(onehot.categories_))[k]
    rare = set() if rare is None else {_key(v) for v in rare}
    keys = [_key(v) for v in levels]
    if len(set(keys)) < len(keys):
        raise ValueError(
            f"The column {onehot.feature_names_in_[k]!r} has both the level '' and "
            "missing values: an ONNX string input feeds a missing value as '', so the "
            "two cannot be told apart. Replace '' (or the missing values) before fitting."
        )
    frequent = [key for key in keys if key not in rare]
    width = len(frequent) + (1 if rare else 0)
    position = {key: i for i, key in enumerate(frequent)}
    codes = [position.get(key, len(frequent)) for key in keys]
    grouped = onehot.handle_unknown == "infrequent_if_exist" and rare
    return keys, codes, (len(frequent) if grouped else width), width


# ------------------------------------------------------------------ skl2onnx: the parser
def parse_table_model(scope, model, inputs, custom_parsers=None, forward_options=None):
    """skl2onnx parser of a raw-table ``VariableModel``: the encoding operator on the
    columns it reads, then the estimator on the encoded columns it reads."""
    from skl2onnx._parse import _parse_sklearn
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    dtype = scope.get_options(model, {"dtype": "float32"})["dtype"]
    needed = _needed(model)
    operator = scope.declare_local_operator(_ALIAS, model)
    operator.inputs = list(inputs)
    operator.sksparse_columns = _input_columns(model, inputs, needed)
    operator.sksparse_dtype = dtype
    kind = DoubleTensorType if dtype == "float64" else FloatTensorType
    # the encoded columns the estimator reads; reading none (a constant model), all of
    # them as zeros
    read = len(_read_columns(model)) or len(_encoded_sources(model.encoder_))
    encoded = scope.declare_local_variable("encoded", kind([None, read]))
    operator.outputs.append(encoded)
    if forward_options is not None:
        forward_options(scope, model, model.estimator_)
    outputs = _parse_sklearn(scope, model.estimator_, [encoded], custom_parsers=custom_parsers)
    for op in scope.operators.values():  # the estimator takes its read columns alone
        if any(v is encoded for v in op.inputs):
            op.sksparse_drop_inputs = bool(needed)
    return outputs


def _input_columns(model, inputs, needed):
    """``{position: (input index, column in it or None)}`` of every column read: inputs
    named by the columns, one input per fitted column, or one tensor of all columns
    (or of the read ones alone)."""
    names = [str(n) for n in model.variable_names_]
    given = {v.raw_name: i for i, v in enumerate(inputs)}
    if all(names[j] in given for j in needed) and not _single_input(model):
        return {j: (given[names[j]], None) for j in needed}
    if len(inputs) == len(names) and len(inputs) > 1:
        return {j: (j, None) for j in needed}
    if len(inputs) == 1:
        width = inputs[0].get_second_dimension()
        if width == len(names) or width is None:
            return {j: (0, j) for j in needed}
        if width == len(needed):
            return {j: (0, i) for i, j in enumerate(needed)}
    raise RuntimeError(
        f"{type(model).__name__} reads the columns {[names[j] for j in needed]}: give "
        f"one input per column named by it (or one tensor of all {len(names)} columns); "
        f"got the inputs {[v.raw_name for v in inputs]}."
    )


# ------------------------------------------------------------------ skl2onnx: converter
def _shape(operator):
    """The encoded columns' type is set by the parser."""


class _Nodes:
    """Adds nodes and constants to skl2onnx's container."""

    def __init__(self, scope, container, dtype):
        from onnx import TensorProto

        self.scope, self.container, self.dtype = scope, container, _FLOATS[dtype]
        self.float_type = TensorProto.DOUBLE if dtype == "float64" else TensorProto.FLOAT
        self.types = {
            np.int64: TensorProto.INT64,
            np.float32: TensorProto.FLOAT,
            np.float64: TensorProto.DOUBLE,
        }

    def name(self, seed):
        return self.scope.get_unique_variable_name(f"table_{seed}")

    def constant(self, values, dtype=None):
        dtype = self.dtype if dtype is None else dtype
        values = np.asarray(values, dtype=dtype)
        name = self.name("const")
        self.container.add_initializer(
            name, self.types[dtype], list(values.shape), values.ravel().tolist()
        )
        return name

    def add(self, op_type, inputs, seed, **attrs):
        out = self.name(seed)
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        self.container.add_node(op_type, inputs, out, **attrs)
        return out


def _convert(scope, operator, container):
    """The encoded columns the estimator reads, from the inputs of the columns read."""
    from onnx import TensorProto
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        Int64TensorType,
        StringTensorType,
    )

    model = operator.raw_operator
    encoder = model.encoder_
    nodes = _Nodes(scope, container, operator.sksparse_dtype)
    labels = _labels(encoder)
    onehot, imputer, scaler = _parts(encoder)
    sources = _encoded_sources(encoder)
    blocks, offset, position = [], 0, {}
    for j, (i, column) in sorted(operator.sksparse_columns.items()):
        source = operator.inputs[i]
        x = source.full_name
        if column is not None:  # one column of a tensor of all columns
            x = nodes.add("Gather", [x, nodes.constant([column], np.int64)], "column", axis=1)
        kind = type(source.type)
        mine = [c for c, s in enumerate(sources) if s[0] == j]
        if labels[j] in encoder.categorical_columns_:
            k = encoder.categorical_columns_.index(labels[j])
            keys, codes, unknown, width = _onehot_map(onehot, k)
            if kind is BooleanTensorType:
                x = nodes.add("Cast", x, "bool", to=TensorProto.INT64)
                pairs = [
                    (int(key == "True"), c)
                    for key, c in zip(keys, codes, strict=True)
                    if key in ("False", "True")
                ]
                attrs = {
                    "keys_int64s": [p[0] for p in pairs],
                    "values_int64s": [p[1] for p in pairs],
                }
            else:
                if kind is not StringTensorType:
                    if kind is not Int64TensorType:
                        raise RuntimeError(
                            f"The categorical column {labels[j]!r} needs a string input "
                            f"(or int64, bool), got {kind.__name__}."
                        )
                    x = nodes.add("Cast", x, "text", to=TensorProto.STRING)
                attrs = {"keys_strings": keys, "values_int64s": codes}
            code = nodes.add(
                "LabelEncoder",
                x,
                "code",
                op_domain="ai.onnx.ml",
                op_version=2,
                default_int64=int(unknown),
                **attrs,
            )
            hot = nodes.add(  # 0 / 1 in float32 (onnxruntime has no double OneHot)
                "OneHot",
                [code, nodes.constant([width + 1], np.int64), nodes.constant([0, 1], np.float32)],
                "hot",
                axis=-1,
            )
            if nodes.dtype is not np.float32:
                hot = nodes.add("Cast", hot, "hot", to=nodes.float_type)
            flat = nodes.add("Reshape", [hot, nodes.constant([-1, width + 1], np.int64)], "flat")
            block = nodes.add(
                "Slice",
                [flat] + [nodes.constant([v], np.int64) for v in (0, width, 1)],
                "levels",
            )
        else:
            block = _numeric_block(nodes, x, kind, sources, mine, imputer, scaler, encoder)
        blocks.append(block)
        for n, c in enumerate(mine):
            position[c] = offset + n
        offset += len(mine)
    read = [position[c] for c in _read_columns(model)]
    out = operator.outputs[0].full_name
    if not read:  # a constant model: zeros in the shape of the encoding
        _zeros(nodes, operator.inputs[0].full_name, len(sources), out)
        return
    whole = blocks[0] if len(blocks) == 1 else nodes.add("Concat", blocks, "blocks", axis=1)
    if read == list(range(offset)):
        container.add_node("Identity", [whole], out)
    else:
        container.add_node("Gather", [whole, nodes.constant(read, np.int64)], out, axis=1)


def _zeros(nodes, source, width, out):
    """``out``: zeros of shape ``(rows of source, width)``."""
    from onnx import helper

    shape = nodes.add("Shape", source, "shape")
    rows = nodes.add(
        "Slice",
        [shape, nodes.constant([0], np.int64), nodes.constant([1], np.int64)],
        "rows",
    )
    dims = nodes.add("Concat", [rows, nodes.constant([width], np.int64)], "dims", axis=0)
    value = helper.make_tensor("value", nodes.float_type, [1], [0.0])
    nodes.container.add_node("ConstantOfShape", [dims], out, value=value)


def _numeric_block(nodes, x, kind, sources, mine, imputer, scaler, encoder):
    """A numeric column's value (imputed, standardized) and, where it had missing values
    at fit, its standardized missing indicator."""
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    if kind is StringTensorType:
        raise RuntimeError("A numeric column needs a float, int64 or bool input, got strings.")
    own = {FloatTensorType: np.float32, DoubleTensorType: np.float64}.get(kind)
    if own is not nodes.dtype:
        x = nodes.add("Cast", x, "number", to=nodes.float_type)
    missing = None
    if kind not in (Int64TensorType, BooleanTensorType):
        missing = nodes.add("IsNaN", x, "missing")
    offset = encoder.column_transformer_.output_indices_["numeric"].start
    pieces = []
    for c in mine:
        _, part, p = sources[c]
        k = c - offset  # the scaler's column
        if part == "value":
            value = x
            if missing is not None:
                statistic = nodes.constant([imputer.statistics_[p]])
                value = nodes.add("Where", [missing, statistic, x], "imputed")
        else:
            if missing is None:
                value = nodes.constant(np.zeros((1, 1)))
                value = nodes.add("Expand", [value, nodes.add("Shape", x, "rows")], "none")
            else:
                value = nodes.add("Cast", missing, "flag", to=nodes.float_type)
        centred = nodes.add("Sub", [value, nodes.constant([scaler.mean_[k]])], "centred")
        pieces.append(nodes.add("Div", [centred, nodes.constant([scaler.scale_[k]])], "scaled"))
    return pieces[0] if len(pieces) == 1 else nodes.add("Concat", pieces, "numbers", axis=1)


def register_table_encoding():
    """Register the encoding operator's converter with skl2onnx."""
    from skl2onnx.common._registration import register_converter, register_shape_calculator

    register_converter(_ALIAS, _convert, overwrite=True)
    register_shape_calculator(_ALIAS, _shape, overwrite=True)
