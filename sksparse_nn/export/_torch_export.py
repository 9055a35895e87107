"""The ONNX graph of a fitted estimator's torch module (``torch.onnx``), class labels added."""

from __future__ import annotations

import io
import warnings

import numpy as np
import torch

from ._deps import require
from ._graph import InferenceGraph, inference_parts

__all__ = ["OUTPUTS", "export_module", "torch_graph"]

#: Output names of the graph per task (skl2onnx's names for its regressors and
#: classifiers).
OUTPUTS = {
    "regression": ["variable"],
    "classification": ["label", "probabilities"],
    "transform": ["codes"],
}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def torch_graph(estimator, *, drop_inputs=False, dtype="float32"):
    """``(graph, sample_shape, task)``: the :class:`InferenceGraph` of a fitted
    estimator (a plain torch module: what ``to_onnx`` exports), the shape of one sample
    of the X it takes and the task."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    module, columns, shape, task = inference_parts(estimator)
    if drop_inputs:
        shape = (len(columns), *shape[1:])
    every = np.array_equal(columns, np.arange(shape[0]))
    read = None if drop_inputs or every else columns
    return InferenceGraph(module, read, task, _DTYPES[dtype]), tuple(shape), task


def _export(graph, shape, task, dtype, opset, exporter, name):
    """Serialized ONNX model of ``graph`` (inputs ``X`` with a free batch axis)."""
    example = torch.zeros((2, *shape), dtype=_DTYPES[dtype])
    outputs = OUTPUTS[task]
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            # the TorchScript exporter announces its deprecation on every call
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            # Python branches on shapes (one logit or several) are meant as constants;
            # the tests compare graphs with the estimators on other rows
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
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


def export_module(
    estimator, *, drop_inputs=False, dtype="float32", opset=None, exporter="torchscript"
):
    """The ONNX model of the estimator's :class:`InferenceGraph` (see ``to_onnx``)."""
    onnx = require("onnx", "ONNX export")
    if exporter not in ("torchscript", "dynamo"):
        raise ValueError(f"exporter must be 'torchscript' or 'dynamo', got {exporter!r}.")
    graph, shape, task = torch_graph(estimator, drop_inputs=drop_inputs, dtype=dtype)
    name = type(estimator).__name__
    model = onnx.load_from_string(_export(graph, shape, task, dtype, opset, exporter, name))
    if task == "classification":
        model = _with_labels(model, estimator.classes_)
    model.doc_string = f"{name} exported by sksparse_nn"
    return model
