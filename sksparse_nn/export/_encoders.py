"""skl2onnx converters in front of skl2onnx's own for two encoder settings it refuses,
both in what ``VariableModel``'s encoders build; every other encoder goes to skl2onnx's.

* ``OneHotEncoder`` grouping rare levels (``min_frequency`` / ``max_categories``):
  skl2onnx converts it only when every column is a separate input, not the one-column
  input a ``ColumnTransformer`` gives it. Here, per column, a ``LabelEncoder`` from level
  to output column (rare and unknown levels to the infrequent column or to none), then
  ``OneHot``.
* ``SimpleImputer(add_indicator=True)``: skl2onnx drops the indicator columns. Here the
  ``Imputer`` of NaN by the fitted statistics, then ``IsNaN`` of the indicator's columns.
"""

from __future__ import annotations

import numpy as np

__all__ = ["register_encoders"]

_ALIAS = "SklearnOneHotEncoder"
_IMPUTER = "SklearnSimpleImputer"
_ORIGINAL = {}


def _grouped(encoder):
    """Whether the fitted encoder groups rare levels into an infrequent column."""
    rare = getattr(encoder, "infrequent_categories_", None)
    return rare is not None and any(r is not None and len(r) for r in rare)


def _columns(encoder, index):
    """``(levels, codes, unknown, width)`` of input column ``index``: its levels, the
    output column of each (frequent levels in order, rare ones the last column), the
    column of an unseen level (``width``: none) and its number of output columns."""
    levels = np.asarray(encoder.categories_[index])
    rare = encoder.infrequent_categories_[index]
    rare = np.asarray([] if rare is None else rare, dtype=levels.dtype)
    frequent = [v for v in levels if v not in set(rare.tolist())]
    width = len(frequent) + (1 if rare.size else 0)
    position = {v: k for k, v in enumerate(frequent)}
    codes = np.array([position.get(v, len(frequent)) for v in levels], dtype=np.int64)
    grouped_unknown = encoder.handle_unknown == "infrequent_if_exist" and rare.size
    unknown = len(frequent) if grouped_unknown else width  # width: an all-zero row
    return levels, codes, unknown, width


def _shape(operator):
    encoder = operator.raw_operator
    if not _grouped(encoder):
        return _ORIGINAL[_ALIAS, "shape"](operator)
    from skl2onnx.common.data_types import FloatTensorType

    width = sum(_columns(encoder, i)[3] for i in range(len(encoder.categories_)))
    operator.outputs[0].type = FloatTensorType([operator.inputs[0].get_first_dimension(), width])


def _convert(scope, operator, container):
    encoder = operator.raw_operator
    if not _grouped(encoder):
        return _ORIGINAL[_ALIAS, "convert"](scope, operator, container)
    from onnx import TensorProto
    from skl2onnx.common.data_types import StringTensorType

    if getattr(encoder, "drop_idx_", None) is not None:
        raise NotImplementedError("OneHotEncoder with drop and infrequent categories")
    names = [v.full_name for v in operator.inputs]
    source = names[0]
    if len(names) > 1:
        source = scope.get_unique_variable_name("ohe_columns")
        container.add_node("Concat", names, source, axis=1)
    strings = isinstance(operator.inputs[0].type, StringTensorType)

    def constant(values, dtype=np.int64):
        name = scope.get_unique_variable_name("ohe_const")
        values = np.asarray(values, dtype=dtype)
        kind = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT64
        container.add_initializer(name, kind, list(values.shape), values.ravel().tolist())
        return name

    pieces = []
    for i in range(len(encoder.categories_)):
        levels, codes, unknown, width = _columns(encoder, i)
        column = scope.get_unique_variable_name("ohe_column")
        container.add_node("Gather", [source, constant([i])], column, axis=1)
        mapped = scope.get_unique_variable_name("ohe_code")
        if strings:
            keys = {"keys_strings": [str(v) for v in levels]}
        else:  # numbers: integer levels
            as_int = scope.get_unique_variable_name("ohe_int")
            container.add_node("Cast", column, as_int, to=TensorProto.INT64)
            column, keys = as_int, {"keys_int64s": levels.astype(np.int64).tolist()}
        container.add_node(
            "LabelEncoder",
            column,
            mapped,
            op_domain="ai.onnx.ml",
            op_version=2,
            values_int64s=codes.tolist(),
            default_int64=int(unknown),
            **keys,
        )
        hot = scope.get_unique_variable_name("ohe_hot")
        container.add_node(
            "OneHot",
            [mapped, constant([width + 1]), constant([0.0, 1.0], np.float32)],
            hot,
            axis=-1,
        )
        flat = scope.get_unique_variable_name("ohe_flat")
        container.add_node("Reshape", [hot, constant([-1, width + 1])], flat)
        piece = scope.get_unique_variable_name("ohe_piece")
        container.add_node("Slice", [flat, constant([0]), constant([width]), constant([1])], piece)
        pieces.append(piece)
    container.add_node("Concat", pieces, operator.outputs[0].full_name, axis=1)


def _indicates(imputer):
    """Whether the fitted imputer adds missing-value indicator columns."""
    indicator = getattr(imputer, "indicator_", None)
    return indicator is not None and len(indicator.features_) > 0


def _imputer_shape(operator):
    imputer = operator.raw_operator
    if not _indicates(imputer):
        return _ORIGINAL[_IMPUTER, "shape"](operator)
    from skl2onnx.common.data_types import FloatTensorType

    width = imputer.statistics_.size + len(imputer.indicator_.features_)
    operator.outputs[0].type = FloatTensorType([operator.inputs[0].get_first_dimension(), width])


def _convert_imputer(scope, operator, container):
    imputer = operator.raw_operator
    if not _indicates(imputer):
        return _ORIGINAL[_IMPUTER, "convert"](scope, operator, container)
    from onnx import TensorProto

    statistics = np.asarray(imputer.statistics_, dtype=np.float64)
    if not (isinstance(imputer.missing_values, float) and np.isnan(imputer.missing_values)):
        raise NotImplementedError("SimpleImputer(add_indicator=True) with missing_values != NaN")
    if not np.all(np.isfinite(statistics)):
        raise NotImplementedError("SimpleImputer(add_indicator=True) with empty features")
    names = [v.full_name for v in operator.inputs]
    source = scope.get_unique_variable_name("imp_columns")
    container.add_node("Concat", names, source, axis=1)
    x = scope.get_unique_variable_name("imp_float")
    container.add_node("Cast", source, x, to=TensorProto.FLOAT)
    imputed = scope.get_unique_variable_name("imp_imputed")
    container.add_node(
        "Imputer",
        x,
        imputed,
        op_domain="ai.onnx.ml",
        op_version=1,
        imputed_value_floats=statistics.astype(np.float32).tolist(),
        replaced_value_float=float("nan"),
    )
    features = np.asarray(imputer.indicator_.features_, dtype=np.int64)
    index = scope.get_unique_variable_name("imp_features")
    container.add_initializer(index, TensorProto.INT64, [features.size], features.tolist())
    picked = scope.get_unique_variable_name("imp_picked")
    container.add_node("Gather", [x, index], picked, axis=1)
    missing = scope.get_unique_variable_name("imp_missing")
    container.add_node("IsNaN", picked, missing)
    flags = scope.get_unique_variable_name("imp_flags")
    container.add_node("Cast", missing, flags, to=TensorProto.FLOAT)
    container.add_node("Concat", [imputed, flags], operator.outputs[0].full_name, axis=1)


def register_encoders():
    """Put these converters in front of skl2onnx's for ``OneHotEncoder`` and
    ``SimpleImputer`` (skl2onnx's stay in use for every other setting)."""
    from skl2onnx.common._registration import (
        get_converter,
        get_shape_calculator,
        register_converter,
        register_shape_calculator,
    )

    for alias, convert, shape in (
        (_ALIAS, _convert, _shape),
        (_IMPUTER, _convert_imputer, _imputer_shape),
    ):
        if (alias, "convert") not in _ORIGINAL:
            _ORIGINAL[alias, "convert"] = get_converter(alias)
            _ORIGINAL[alias, "shape"] = get_shape_calculator(alias)
        register_converter(alias, convert, overwrite=True)
        register_shape_calculator(alias, shape, overwrite=True)
