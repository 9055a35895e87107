"""skl2onnx converters of the package's estimators: a scikit-learn ``Pipeline`` holding
them (scalers, ``ColumnTransformer``, ``VariableModel``) converts as a whole.

An estimator's converter inlines the graph of :func:`~sksparse_nn.export.to_onnx`
(exported at the conversion's operator set) into skl2onnx's; ``SparsePathCV`` parses
as its chosen estimator and ``VariableModel`` as the pipeline of its encoder and
estimator.
"""

from __future__ import annotations

import inspect

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.pipeline import Pipeline

from ._deps import require
from ._encoders import register_encoders
from ._tables import (
    check_sample,
    parse_table_model,
    raw_table_model,
    register_table_encoding,
    skl2onnx_types,
)
from ._torch_export import export_module

__all__ = ["convert", "package_estimators", "register_converters"]

#: The highest operator set torch's TorchScript exporter writes.
_MAX_TORCH_OPSET = 20
_CLASSIFIER_OPTIONS = {"zipmap": [True, False, "columns"], "nocl": [True, False]}
#: A raw-table VariableModel's options: its classifier's, and the arithmetic of its graph.
_TABLE_OPTIONS = {**_CLASSIFIER_OPTIONS, "dtype": ["float32", "float64"]}


def package_estimators():
    """The package's public estimator classes: the concrete subclasses of scikit-learn's
    ``BaseEstimator`` defined in ``sksparse_nn`` (found among the loaded classes, so
    this module imports no estimator)."""
    found, stack = set(), [BaseEstimator]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if (
                sub.__module__.startswith("sksparse_nn.")
                and not sub.__name__.startswith("_")
                and not inspect.isabstract(sub)
            ):
                found.add(sub)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def _tensor_type(operator):
    from skl2onnx.common.data_types import DoubleTensorType

    return "float64" if isinstance(operator.inputs[0].type, DoubleTensorType) else "float32"


def _n_outputs(est):
    """Width of a regressor's (or transformer's) output."""
    if hasattr(est, "estimator_"):
        return _n_outputs(est.estimator_)
    for name in ("n_components_", "n_outputs_"):
        if hasattr(est, name):
            return int(getattr(est, name))
    return int(np.atleast_2d(est.coef_).shape[0])


def _shape(operator):
    """Regressors and transformers: one output ``(N, n_outputs)`` of the input's type."""
    n = operator.inputs[0].get_first_dimension()
    kind = type(operator.inputs[0].type)
    operator.outputs[0].type = kind([n, _n_outputs(operator.raw_operator)])


def _convert(scope, operator, container):
    """Inline the estimator's exported graph, its tensors renamed into the scope (on the
    columns it reads alone where a raw table's encoding gives them)."""
    from onnx import helper, numpy_helper

    opset = min(int(container.target_opset), _MAX_TORCH_OPSET)
    model = export_module(
        operator.raw_operator,
        dtype=_tensor_type(operator),
        opset=opset,
        drop_inputs=getattr(operator, "sksparse_drop_inputs", False),
    )
    graph = model.graph
    names = {graph.input[0].name: operator.inputs[0].full_name, "": ""}
    for out, var in zip(graph.output, operator.outputs, strict=False):
        names[out.name] = var.full_name

    def name(tensor):
        if tensor not in names:
            names[tensor] = scope.get_unique_variable_name(f"{operator.full_name}_{tensor}")
        return names[tensor]

    for init in graph.initializer:  # as Constant nodes: any element type, as stored
        value = numpy_helper.from_array(numpy_helper.to_array(init), name="value")
        container.add_node("Constant", [], [name(init.name)], op_version=opset, value=value)
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        container.add_node(
            node.op_type,
            [name(t) for t in node.input],
            [name(t) for t in node.output],
            op_domain=node.domain,
            op_version=opset,
            name=scope.get_unique_operator_name(f"{operator.full_name}_{node.op_type}"),
            **attrs,
        )


def _not_shaped(operator):
    raise RuntimeError(f"{operator.type} is parsed into its parts, never shaped as one")


def _not_converted(scope, operator, container):
    raise RuntimeError(f"{operator.type} is parsed into its parts, never converted as one")


def _forward_options(scope, outer, inner):
    """Conversion options given for ``outer`` (by id) apply to ``inner`` (the
    classifier's ``zipmap``)."""
    options = getattr(scope, "options", None)
    if options and id(outer) in options and id(inner) not in options:
        forwarded = {k: v for k, v in options[id(outer)].items() if k != "dtype"}
        if forwarded:
            options[id(inner)] = forwarded


def _parse_inner(scope, model, inputs, custom_parsers=None):
    """``SparsePathCV``: the estimator it chose."""
    from skl2onnx._parse import _parse_sklearn

    _forward_options(scope, model, model.estimator_)
    return _parse_sklearn(scope, model.estimator_, inputs, custom_parsers=custom_parsers)


def _parse_fitted_encoding(scope, model, inputs, custom_parsers=None):
    """``TableEncoder``: the ``ColumnTransformer`` it fitted."""
    from skl2onnx._parse import _parse_sklearn

    if not hasattr(model, "column_transformer_"):
        raise TypeError(f"{type(model).__name__} has no fitted column_transformer_ to convert")
    return _parse_sklearn(scope, model.column_transformer_, inputs, custom_parsers=custom_parsers)


def _parse_variable_model(scope, model, inputs, custom_parsers=None):
    """``VariableModel``: its fitted encoder, then its estimator (on a raw table: the
    encoding of the columns read, then the estimator on the encoded columns it reads)."""
    from skl2onnx._parse import _parse_sklearn

    if raw_table_model(model) is model:
        return parse_table_model(
            scope, model, inputs, custom_parsers, forward_options=_forward_options
        )
    pipeline = Pipeline([("encoder", model.encoder_), ("estimator", model.estimator_)])
    _forward_options(scope, model, model.estimator_)
    return _parse_sklearn(scope, pipeline, inputs, custom_parsers=custom_parsers)


def register_converters(classes=None):
    """Register skl2onnx converters for the package's estimators.

    After this, ``skl2onnx.to_onnx`` converts a fitted estimator of the package, or a
    ``Pipeline`` / ``ColumnTransformer`` holding one, as a whole. A classifier's outputs
    are skl2onnx's: ``label`` and ``probabilities`` (a list of dictionaries unless
    ``options={EstimatorClass: {"zipmap": False}}``); a regressor's ``variable``
    ``(N, n_outputs)``.

    Parameters
    ----------
    classes : sequence of classes or None, default=None
        ``None``: every public estimator of the package. A family of your own (a
        ``BaseDGated`` subclass) joins by being named here.

    Returns
    -------
    classes : list of classes
        The classes registered.
    """
    require("skl2onnx", "Converting a Pipeline with skl2onnx")
    from skl2onnx import update_registered_converter
    from skl2onnx.common.shape_calculator import calculate_linear_classifier_output_shapes

    register_encoders()  # settings of VariableModel's encoders skl2onnx refuses
    register_table_encoding()  # a raw table's encoding
    classes = package_estimators() if classes is None else list(classes)
    for cls in classes:
        alias = f"SksparseNN{cls.__name__}"
        parameters = inspect.signature(cls).parameters
        if "encoder" in parameters:  # VariableModel
            update_registered_converter(
                cls,
                alias,
                _not_shaped,
                _not_converted,
                parser=_parse_variable_model,
                options=_TABLE_OPTIONS,
            )
        elif "estimator" in parameters:  # SparsePathCV
            update_registered_converter(
                cls, alias, _not_shaped, _not_converted, parser=_parse_inner
            )
        elif issubclass(cls, TransformerMixin) and not hasattr(cls, "_inference_module"):
            # an encoder of the package (TableEncoder): the ColumnTransformer it fitted
            update_registered_converter(
                cls, alias, _not_shaped, _not_converted, parser=_parse_fitted_encoding
            )
        elif issubclass(cls, ClassifierMixin):
            update_registered_converter(
                cls,
                alias,
                calculate_linear_classifier_output_shapes,
                _convert,
                options=_CLASSIFIER_OPTIONS,
            )
        else:
            update_registered_converter(cls, alias, _shape, _convert)
    return classes


def convert(estimator, *, X=None, dtype="float32", opset=None, drop_inputs=False):
    """A model with an encoder (``VariableModel``, a Pipeline) through skl2onnx.

    On a raw table (a ``VariableModel`` with its default encoder, or a Pipeline that
    starts with one) the inputs are one per column, typed by the fit (``X``, when
    given, is checked to hold the fitted columns); ``drop_inputs``: only the columns
    read. Otherwise ``X`` (a few rows of the training table, e.g. a DataFrame of mixed
    columns) gives the input types, its float columns as ``dtype``; without it the
    input is one ``dtype`` tensor of ``n_features_in_`` columns."""
    skl2onnx = require("skl2onnx", "ONNX export of a VariableModel")
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    register_converters()
    options = _no_zipmap(estimator)
    table_model = raw_table_model(estimator)
    if table_model is not None:
        if X is not None:
            check_sample(table_model, X)
        options = {**(options or {}), id(table_model): {"dtype": dtype}}
        return skl2onnx.to_onnx(
            estimator,
            initial_types=skl2onnx_types(table_model, dtype=dtype, drop_inputs=drop_inputs),
            target_opset=opset,
            options=options,
        )
    if drop_inputs:
        raise ValueError(
            f"drop_inputs=True is not available for {type(estimator).__name__}: its "
            "encoder reads the columns."
        )
    kind = DoubleTensorType if dtype == "float64" else FloatTensorType
    initial = None if X is not None else [("X", kind([None, estimator.n_features_in_]))]
    if X is not None:
        X = _with_float_dtype(X, np.float64 if dtype == "float64" else np.float32)
    try:
        return skl2onnx.to_onnx(
            estimator, X, initial_types=initial, target_opset=opset, options=options
        )
    except RuntimeError as exc:
        if X is not None or "Unable to find column name" not in str(exc):
            raise
        raise ValueError(
            f"The encoder of {type(estimator).__name__} reads columns by name: pass a few "
            "rows of the table as X (to_onnx(model, X=table.head())), which types one "
            "input per column."
        ) from exc


def _with_float_dtype(X, dtype):
    """``X`` with its float columns in ``dtype``: skl2onnx types the graph's inputs from
    them (and onnxruntime imputes float32 only)."""
    if hasattr(X, "dtypes"):  # a DataFrame
        floats = [c for c, t in X.dtypes.items() if getattr(t, "kind", None) == "f"]
        return X.astype(dict.fromkeys(floats, dtype))
    X = np.asarray(X)
    return X.astype(dtype) if np.issubdtype(X.dtype, np.floating) else X


def _no_zipmap(estimator):
    """Options asking the (inner) classifier for a probability tensor, no ZipMap."""
    inner = estimator
    while isinstance(inner, Pipeline) or hasattr(inner, "estimator_"):
        inner = inner.steps[-1][1] if isinstance(inner, Pipeline) else inner.estimator_
    return {id(inner): {"zipmap": False}} if hasattr(inner, "classes_") else None
