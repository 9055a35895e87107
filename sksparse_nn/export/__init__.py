"""Shipping fitted estimators: ONNX graphs of the compacted models and secure persistence.

* :func:`to_onnx`: the fitted estimator as an ONNX model (``torch.onnx``): only the
  selected input columns are read, the compacted module runs, the input / target
  scaling and the output link (probabilities, class labels) are in the graph;
* :func:`onnx_feeds`: the inputs of the ONNX graph of a model on a raw table (one per
  column: strings, bools, int64 or floats), from rows of the table in any form;
* :func:`register_converters`: skl2onnx converters, so that a scikit-learn
  ``Pipeline`` (scalers, ``ColumnTransformer``, ``VariableModel``) converts as a whole
  with ``skl2onnx.to_onnx``;
* :func:`trusted_types`: the short list of types to pass to ``skops.io.load``;
  :class:`PortableModule` and :class:`PortableHistory` are how a fitted torch module
  and its training history appear in a skops file (plain arrays, one JSON text).

onnx, onnxruntime, skl2onnx and skops are the optional ``export`` extra
(``pip install 'sksparse-nn[export]'``); only the functions that need them import them.

Modules, one job each: ``_graph`` (the inference module: columns, compacted module,
output link), ``_torch_export`` (its torch.onnx export, class labels), ``_onnx``
(``to_onnx``: torch export, or skl2onnx for a model with an encoder), ``_skl2onnx``
(converters, shape calculators, parsers), ``_tables`` (a raw-table ``VariableModel``:
one typed input per column, the encoding of the columns read, the estimator on the
encoded columns it reads; ``onnx_feeds``), ``_encoders`` (``OneHotEncoder`` grouping
rare levels and ``SimpleImputer`` with indicators, which skl2onnx refuses), ``_skops`` (trusted
types), ``_portable`` (:class:`PortableModule`, :class:`PortableHistory`), ``_deps`` (the
extra's ImportError).
"""

from ._graph import InferenceGraph
from ._onnx import to_onnx
from ._portable import PortableHistory, PortableModule
from ._skl2onnx import register_converters
from ._skops import trusted_types
from ._tables import onnx_feeds
from ._torch_export import torch_graph

__all__ = [
    "InferenceGraph",
    "PortableHistory",
    "PortableModule",
    "onnx_feeds",
    "register_converters",
    "to_onnx",
    "torch_graph",
    "trusted_types",
]
