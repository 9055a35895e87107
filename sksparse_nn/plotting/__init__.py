"""matplotlib figures (optional extra ``plot``: ``pip install 'sksparse-nn[plot]'``).

* :func:`plot_path`, :func:`plot_cv_path`, :func:`plot_tradeoff` -- a regularization path:
  group norms, scores, the CV curve, the sparsity-accuracy trade-off.
* :func:`plot_shape_functions` -- the shape functions of a fitted sparse NAM (heat maps
  for its interactions).
* :func:`plot_explanation` -- one prediction of a sparse NAM as a waterfall of its terms.
* :func:`plot_stability_path` -- selection probabilities against lam of a fitted
  :class:`~sksparse_nn.selection.StabilitySelection`.

matplotlib is imported when a figure is drawn, not when this package is imported.
"""

from ._explain import plot_explanation
from ._nam import plot_shape_functions
from ._path import plot_cv_path, plot_path, plot_tradeoff
from ._stability import plot_stability_path

__all__ = [
    "plot_cv_path",
    "plot_explanation",
    "plot_path",
    "plot_shape_functions",
    "plot_stability_path",
    "plot_tradeoff",
]
