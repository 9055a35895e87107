"""Selections with a stated error over any family's path.

* ``_knockoff_sampling``: Gaussian model-X knockoffs (covariance estimate, the ``S``
  matrix by maximum entropy / MVR / equicorrelated, group blocks, correlation clusters);
* ``_knockoffs``: :class:`KnockoffFilter`, the knockoff+ filter with e-value
  derandomization over draws, and its arithmetic.
"""

from ._knockoff_sampling import (
    GaussianKnockoffs,
    correlation_clusters,
    estimate_correlation,
    knockoff_s_matrix,
)
from ._knockoffs import KnockoffFilter, e_bh, knockoff_e_values, knockoff_threshold, path_statistics

__all__ = [
    "GaussianKnockoffs",
    "KnockoffFilter",
    "correlation_clusters",
    "e_bh",
    "estimate_correlation",
    "knockoff_e_values",
    "knockoff_s_matrix",
    "knockoff_threshold",
    "path_statistics",
]
