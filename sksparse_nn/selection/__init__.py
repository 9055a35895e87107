"""Selections with a stated error over any family's path, built on the public path API.

* :class:`StabilitySelection` -- complementary-pairs stability selection over any
  family: selection probabilities along a common lam grid from half-sample paths, and a
  bound on the expected number of false selections.
* :class:`SelectFromPath` -- exactly ``k`` features (or variables) from a path,
  bisecting lam where no grid point has ``k``.
* :class:`KnockoffFilter` -- the model-X knockoff+ filter at a target FDR.

All are scikit-learn feature selectors (``get_support``, ``transform``,
``get_feature_names_out``, ``set_output``; Pipelines, ``clone``, grid searches).

Modules, one job each:

* ``_base``: the selector plumbing of the stability and exact-k selectors, how a
  family's path is run and its units counted, a path's selections as a boolean matrix;
* ``_subsamples``: complementary pairs of half-samples (stratified for classifiers) and
  their paths in parallel (joblib);
* ``_bound``: the complementary-pairs bound and the choice of threshold and region;
* ``_stability``: :class:`StabilitySelection`;
* ``_select_k``: :class:`SelectFromPath`;
* ``_knockoff_sampling``: Gaussian model-X knockoffs (covariance estimate, the ``S``
  matrix by maximum entropy / MVR / equicorrelated, group blocks, correlation clusters);
* ``_knockoff_statistics``: the statistics of units against their knockoffs from a
  path (the lam each leaves the model; importances at the CV-chosen lam), the
  knockoff+ threshold, e-values and e-BH;
* ``_knockoffs``: :class:`KnockoffFilter`, the knockoff+ filter with e-value
  derandomization over draws.
"""

from ._bound import cpss_bound
from ._knockoff_sampling import (
    GaussianKnockoffs,
    correlation_clusters,
    estimate_correlation,
    knockoff_s_matrix,
)
from ._knockoff_statistics import (
    e_bh,
    importance_statistics,
    knockoff_e_values,
    knockoff_threshold,
    path_statistics,
)
from ._knockoffs import KnockoffFilter
from ._select_k import SelectFromPath
from ._stability import StabilitySelection

__all__ = [
    "GaussianKnockoffs",
    "KnockoffFilter",
    "SelectFromPath",
    "StabilitySelection",
    "correlation_clusters",
    "cpss_bound",
    "e_bh",
    "estimate_correlation",
    "importance_statistics",
    "knockoff_e_values",
    "knockoff_s_matrix",
    "knockoff_threshold",
    "path_statistics",
]
