"""The inference graph of a fitted estimator as one torch module: the columns it reads,
its compacted module (scaling folded in), and the output link of its task."""

from __future__ import annotations

import copy

import numpy as np
import torch
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

__all__ = ["InferenceGraph", "inference_parts"]


def inference_parts(estimator):
    """``(module, columns, sample_shape, task)`` of a fitted estimator: the smallest
    module on ``X[:, columns]`` giving its raw outputs, the shape of one sample of X,
    and ``"regression"``, ``"classification"`` or ``"transform"``.

    The estimator's ``_inference_module`` hook gives the module (the package's
    families); a meta-estimator with a fitted ``estimator_`` (SparsePathCV) gives its
    estimator's; a linear model with ``coef_`` and ``intercept_`` (the group-lasso
    solvers' estimators) becomes a ``Linear`` on its non-zero columns.
    """
    check_is_fitted(estimator)
    task = (
        "classification"
        if is_classifier(estimator)
        else "regression"
        if is_regressor(estimator)
        else "transform"
    )
    if hasattr(estimator, "encoder_"):
        raise ValueError(
            f"{type(estimator).__name__} encodes its input with a scikit-learn encoder: "
            "export it through skl2onnx (sksparse_nn.export.to_onnx does so)."
        )
    inner = getattr(estimator, "_inference_module", None)
    if inner is not None:
        module, columns, shape = inner()
        return module, np.asarray(columns, dtype=np.int64), tuple(shape), task
    if hasattr(estimator, "estimator_"):
        return inference_parts(estimator.estimator_)[:3] + (task,)
    if hasattr(estimator, "coef_") and hasattr(estimator, "intercept_"):
        module, columns = _linear(estimator.coef_, estimator.intercept_)
        return module, columns, (estimator.n_features_in_,), task
    raise TypeError(
        f"{type(estimator).__name__} has no inference module to export (no "
        "_inference_module, estimator_ or coef_)."
    )


def _linear(coef, intercept):
    """A ``Linear`` on the non-zero columns of ``coef`` (``(n_outputs, n_features)`` or
    ``(n_features,)``) and the columns."""
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    columns = np.flatnonzero(np.any(coef != 0, axis=0))
    layer = nn.Linear(len(columns), coef.shape[0], dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(coef[:, columns]))
        layer.bias.copy_(torch.as_tensor(np.broadcast_to(intercept, (coef.shape[0],)).copy()))
    return layer.eval(), columns


class InferenceGraph(nn.Module):
    """``X -> outputs`` of a fitted estimator, in one dtype.

    Reads the ``columns`` of ``X`` (or takes them alone with ``columns=None``), runs the
    compacted ``module`` and applies the task's link: regression values as
    ``(n, n_outputs)``; for classification the class index of the largest probability and
    the probabilities (logistic function of one logit for two classes, else softmax);
    codes for transformers.
    """

    def __init__(self, module, columns, task, dtype=torch.float32):
        super().__init__()
        self.module = copy.deepcopy(module).to(dtype).eval()  # the caller's is kept
        self.task = task
        if columns is None:
            self.columns = None
        else:
            self.register_buffer("columns", torch.as_tensor(columns, dtype=torch.int64))

    def forward(self, x):
        if self.columns is not None:
            # rows as columns: onnxruntime gathers whole rows of the transpose much
            # faster than single entries along axis 1
            x = x.transpose(0, 1).index_select(0, self.columns).transpose(0, 1)
        out = self.module(x)
        out = out.reshape(out.shape[0], -1)
        if self.task != "classification":
            return out
        if out.shape[1] == 1:
            p = torch.sigmoid(out)
            proba = torch.cat([1.0 - p, p], dim=1)
        else:
            proba = torch.softmax(out, dim=1)
        return proba.argmax(dim=1), proba
