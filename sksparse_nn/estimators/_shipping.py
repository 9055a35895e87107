"""What ships a fitted estimator (a mixin of :class:`~sksparse_nn.estimators.BaseDGated`):
its inference module (the ``_inference_module`` hook's default), ``to_onnx`` and the
saved state that pickle and skops read (:mod:`sksparse_nn.export`)."""

from __future__ import annotations

import copy

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ..compaction import compact_module
from ..export import PortableHistory, PortableModule

__all__ = ["ShippingMixin", "without_unread_inputs"]


def _unbuildable(estimator, name):
    """Why skops cannot store the torch module an estimator holds in ``name``."""
    return (
        f"{type(estimator).__name__}: skops stores a fitted torch module as arrays and "
        f"rebuilds it from the estimator's parameters, but {name}= is a torch module "
        "instance, which it cannot rebuild. Pass its class instead (with module__* "
        "parameters for its constructor) to save with skops; pickle keeps instances."
    )


def without_unread_inputs(model, report, shape):
    """``(model, columns, shape)`` of a compacted ``Standardized`` user module without
    the input columns (features, or channels of images) its first layer gives only zero
    weights (when that layer reads the input directly), its input scaling sliced alike.

    ``report`` is the compaction's :class:`~sksparse_nn.compaction.CompactionReport`,
    ``shape`` the shape of one sample."""
    columns = np.arange(shape[0])
    kept = np.asarray(report.kept_inputs, dtype=np.int64)
    if 0 < kept.size < shape[0]:  # 0: no layer reads the input directly
        user = model.module
        example = torch.zeros((2, *shape), dtype=next(user.parameters()).dtype)
        model = copy.deepcopy(model)
        model.module, _ = compact_module(user, example, drop_inputs=True)
        index = torch.as_tensor(kept)
        for name in ("in_shift", "in_scale"):
            value = getattr(model, name)
            if value.dim() > 1 and value.shape[1] == shape[0]:
                setattr(model, name, value.index_select(1, index))
        columns = kept
    return model.eval(), columns, shape


class ShippingMixin:
    """ONNX export and persistence of a fitted estimator (see :mod:`sksparse_nn.export`)."""

    def _inference_module(self):
        """``(module, columns, shape)``: the smallest plain module computing the raw
        outputs (regression values, logits, codes) of the fitted model from
        ``X[:, columns]`` (indices along axis 1: features, or channels of images), and
        the shape of one sample of X (default: a copy of ``module_`` on every column
        of a table). Families that compact (their ``compact()``) return the compacted
        module and the columns it reads: what ``to_onnx`` exports."""
        check_is_fitted(self, "module_")
        n = self.n_features_in_
        return copy.deepcopy(self.module_).eval(), np.arange(n), (n,)

    def to_onnx(self, *, drop_inputs=False, dtype="float32", opset=None, exporter="torchscript"):
        """The fitted model as an ONNX graph (see :func:`sksparse_nn.export.to_onnx`).

        Parameters
        ----------
        drop_inputs : bool, default=False
            ``False``: the graph takes every column of X (the unselected ones are read
            by no operation); ``True``: it takes ``X[:, selected columns]`` only.
        dtype : {"float32", "float64"}, default="float32"
            Input and arithmetic of the graph (float32: what ONNX runtimes run fastest).
        opset : int or None, default=None
            ONNX operator set (``None``: the exporter's default).
        exporter : {"torchscript", "dynamo"}, default="torchscript"
            torch's ONNX exporter (the TorchScript one exports in a fraction of the
            time of ``torch.export``'s).

        Returns
        -------
        model : onnx.ModelProto
            Inputs ``X``; outputs ``variable`` (regression), ``label`` and
            ``probabilities`` (classification) or ``codes`` (autoencoders).
        """
        from ..export import to_onnx

        return to_onnx(
            self, drop_inputs=drop_inputs, dtype=dtype, opset=opset, exporter=exporter
        )

    def __getstate__(self):
        """The state with ``module_`` as a :class:`~sksparse_nn.export.PortableModule`
        (pickle keeps the module, skops sees plain arrays) and ``history_`` as a
        :class:`~sksparse_nn.export.PortableHistory` (skops: one JSON text)."""
        state = dict(super().__getstate__())  # a copy: the default is __dict__ itself
        for key, value in state.items():
            if key == "module_" and isinstance(value, torch.nn.Module):
                state[key] = PortableModule(value)
            elif isinstance(value, torch.nn.Module):  # a parameter: pickle only
                state[key] = PortableModule(value, unbuildable=_unbuildable(self, key))
        if "history_" in state:
            state["history_"] = PortableHistory(state["history_"])
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if isinstance(self.__dict__.get("history_"), PortableHistory):
            self.history_ = self.history_.restore()
        for key, value in list(self.__dict__.items()):
            if key == "module_" and isinstance(value, PortableModule):
                self.module_ = value.restore(
                    lambda: self._build_module(self.n_features_in_, self.n_outputs_)
                )
            elif isinstance(value, PortableModule):
                setattr(self, key, value.module)
