"""``to_onnx``: any fitted estimator of the package as an ONNX model."""

from __future__ import annotations

from sklearn.pipeline import Pipeline

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
    live units. A ``VariableModel`` (or a ``Pipeline``) is converted with its encoder
    through skl2onnx (:func:`register_converters`).

    A ``VariableModel`` on a raw table (its default encoder), alone or as the first
    step of a Pipeline, gives one graph of the encoding and the compacted estimator
    with one input per column of the table, named by the column and typed by what the
    column held at fit: ``string`` (strings, categories; a missing value fed as
    ``""``), ``bool`` (booleans without missing values at fit, else ``string`` of
    ``"True"`` / ``"False"`` / ``""``), ``int64`` (integers without missing values at
    fit, else ``float``), ``float`` (``dtype``; a missing value NaN). Only the variables
    the estimator reads are encoded. :func:`onnx_feeds` builds these inputs from rows
    of the table, in any form the model reads (pandas, polars, pyarrow). A model fitted
    on an array of numbers takes one input ``X``.

    Parameters
    ----------
    estimator : fitted estimator
        One of the package's estimators (or ``SparsePathCV`` / ``VariableModel``, or a
        ``Pipeline`` of them).
    X : array-like or DataFrame, optional
        A few rows of the table. A raw-table ``VariableModel``: checked to hold the
        fitted columns (the inputs are typed by the fit, so it is not needed). An
        encoder of your own: the types of its input columns (a DataFrame of numbers and
        strings gives one input per column); without it, the input is one tensor of
        ``n_features_in_`` columns.
    drop_inputs : bool, default=False
        ``False``: the graph takes ``X`` with all ``n_features_in_`` columns and reads
        only the selected ones (the others may hold anything, NaN included);
        ``True``: it takes the selected columns alone (``X[:, columns]``, as
        ``compact()`` does; a raw table: the inputs of the columns read only).
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
        Input ``X`` (any number of rows), or one input per column of a raw table.

    Raises
    ------
    ImportError
        Without the ``export`` extra (onnx).
    ValueError
        When torch cannot export the module (the message names the operation), or on
        a bad ``dtype`` / ``exporter``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sksparse_nn import SparseLinearRegressor, VariableModel
    >>> from sksparse_nn.export import onnx_feeds, to_onnx
    >>> rng = np.random.RandomState(0)
    >>> df = pd.DataFrame({"city": rng.choice(["Oslo", "Rome"], 100),
    ...                    "age": rng.randn(100)})
    >>> df["city"] = df["city"].astype("category")
    >>> y = (df["city"] == "Oslo") + df["age"] + 0.1 * rng.randn(100)
    >>> model = VariableModel(SparseLinearRegressor(lam=0.01)).fit(df, y)
    >>> graph = to_onnx(model)  # doctest: +SKIP
    >>> [i.name for i in graph.graph.input]  # doctest: +SKIP
    ['city', 'age']
    >>> sorted(onnx_feeds(model, df.head(3)))
    ['age', 'city']
    """
    if hasattr(estimator, "encoder_") or isinstance(estimator, Pipeline):
        return convert(estimator, X=X, drop_inputs=drop_inputs, dtype=dtype, opset=opset)
    return export_module(
        estimator, drop_inputs=drop_inputs, dtype=dtype, opset=opset, exporter=exporter
    )
