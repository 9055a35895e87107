"""ONNX graphs of fitted estimators through ``torch.onnx``."""

from __future__ import annotations

import io
import warnings

import numpy as np
import torch

from ._deps import require
from ._graph import InferenceGraph, inference_parts

__all__ = ["OUTPUTS", "to_onnx", "torch_graph"]

#: Output names of the graph per task (skl2onnx's names for its regressors and
#: classifiers).
OUTPUTS = {
    "regression": ["variable"],
    "classification": ["label", "probabilities"],
    "transform": ["codes"],
}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def torch_graph(estimator, *, drop_inputs=False, dtype="float32"):
    """``(graph, n_inputs, task)``: the :class:`InferenceGraph` of a fitted estimator
    (a plain torch module: what ``to_onnx`` exports), the width of the X it takes and
    the task."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    module, columns, task = inference_parts(estimator)
    n_in = len(columns) if drop_inputs else int(estimator.n_features_in_)
    every = not drop_inputs and np.array_equal(columns, np.arange(n_in))
    read = None if drop_inputs or every else columns
    return InferenceGraph(module, read, task, _DTYPES[dtype]), n_in, task


def _export(graph, n_in, task, dtype, opset, exporter, name):
    """Serialized ONNX model of ``graph`` (inputs ``X`` with a free batch axis)."""
    example = torch.zeros((2, n_in), dtype=_DTYPES[dtype])
    outputs = OUTPUTS[task]
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            # the TorchScript exporter announces its deprecation on every call
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            if exporter == "torchscript":
                torch.onnx.export(
                    graph,
                    (example,),
                    buffer,
                    dynamo=False,
                    input_names=["X"],
                    output_names=outputs,
                    dynamic_axes={k: {0: "n"} for k in ["X", *outputs]},
                    opset_version=opset,
                )
                return buffer.getvalue()
            program = torch.onnx.export(
                graph,
                (example,),
                dynamo=True,
                input_names=["X"],
                output_names=outputs,
                dynamic_shapes=({0: torch.export.Dim("n", min=1)},),
                opset_version=opset,
                verbose=False,
            )
            return program.model_proto.SerializeToString()
    except Exception as exc:
        raise ValueError(
            f"torch.onnx ({exporter} exporter) cannot export the fitted module of {name}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _with_labels(model, classes):
    """``label`` as the class labels: a Gather of the class index in ``classes``."""
    onnx = require("onnx", "ONNX export")
    from onnx import helper, numpy_helper

    classes = np.asarray(classes)
    if classes.dtype.kind in "OUS":
        classes = classes.astype(str).astype(object)
    elif classes.dtype.kind in "iub":
        classes = classes.astype(np.int64)
    graph = model.graph
    for node in graph.node:  # the class index becomes an inner tensor
        node.output[:] = ["label_index" if o == "label" else o for o in node.output]
    graph.initializer.append(numpy_helper.from_array(classes, name="classes"))
    graph.node.append(helper.make_node("Gather", ["classes", "label_index"], ["label"], axis=0))
    label = next(o for o in graph.output if o.name == "label")
    label.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(classes.dtype)
    onnx.checker.check_model(model)
    return model


def to_onnx(
    estimator, X=None, *, drop_inputs=False, dtype="float32", opset=None, exporter="torchscript"
):
    """The fitted estimator as an ONNX model: what ``predict`` / ``predict_proba`` /
    ``transform`` compute, from the selected columns only.

    The exported module is the compacted one (only the kept inputs, neurons, trees,
    filters or heads), with the input and target scaling folded in and the output link
    added: regression values ``variable`` of shape ``(n, n_outputs)``; class
    ``label`` and ``probabilities`` ``(n, n_classes)``; ``codes`` of an autoencoder's
    live units. A ``VariableModel`` is converted with its encoder through skl2onnx
    (:func:`register_converters`).

    Parameters
    ----------
    estimator : fitted estimator
        One of the package's estimators (or ``SparsePathCV`` / ``VariableModel``).
    X : array-like or DataFrame, optional
        A few training rows, read by a ``VariableModel``'s conversion only: the types
        of its input columns (a DataFrame of numbers and strings gives one input per
        column). Without it, the input is one tensor of ``n_features_in_`` columns.
    drop_inputs : bool, default=False
        ``False``: the graph takes ``X`` with all ``n_features_in_`` columns and reads
        only the selected ones (the others may hold anything, NaN included);
        ``True``: it takes the selected columns alone (``X[:, columns]``, as
        ``compact()`` does).
    dtype : {"float32", "float64"}, default="float32"
        Input and arithmetic (float32: the runtimes' fast path, predictions equal the
        estimator's to float32 rounding).
    opset : int or None, default=None
        ONNX operator set version (``None``: the exporter's default).
    exporter : {"torchscript", "dynamo"}, default="torchscript"
        torch's exporter: the TorchScript tracer (fast) or ``torch.export``.

    Returns
    -------
    model : onnx.ModelProto
        Input ``X`` (any number of rows).

    Raises
    ------
    ImportError
        Without the ``export`` extra (onnx).
    ValueError
        When torch cannot export the module (the message names the operation), or on
        a bad ``dtype`` / ``exporter``.
    """
    onnx = require("onnx", "ONNX export")
    if exporter not in ("torchscript", "dynamo"):
        raise ValueError(f"exporter must be 'torchscript' or 'dynamo', got {exporter!r}.")
    if hasattr(estimator, "encoder_"):
        from ._skl2onnx import convert

        return convert(estimator, X=X, drop_inputs=drop_inputs, dtype=dtype, opset=opset)
    graph, n_in, task = torch_graph(estimator, drop_inputs=drop_inputs, dtype=dtype)
    name = type(estimator).__name__
    model = onnx.load_from_string(_export(graph, n_in, task, dtype, opset, exporter, name))
    if task == "classification":
        model = _with_labels(model, estimator.classes_)
    model.doc_string = f"{name} exported by sksparse_nn"
    return model
