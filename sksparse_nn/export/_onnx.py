"""``to_onnx``: any fitted estimator of the package as an ONNX model."""

from __future__ import annotations

from ._skl2onnx import convert
from ._torch_export import export_module

__all__ = ["to_onnx"]


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
    if hasattr(estimator, "encoder_"):
        return convert(estimator, X=X, drop_inputs=drop_inputs, dtype=dtype, opset=opset)
    return export_module(
        estimator, drop_inputs=drop_inputs, dtype=dtype, opset=opset, exporter=exporter
    )
