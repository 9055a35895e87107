"""Selections with a stated error, built on the public path API.

* :class:`StabilitySelection` -- complementary-pairs stability selection over any
  family: selection probabilities along a common lam grid from half-sample paths, and a
  bound on the expected number of false selections.
* :class:`SelectFromPath` -- exactly ``k`` features (or variables) from a path,
  bisecting lam where no grid point has ``k``.

Both are scikit-learn feature selectors (``get_support``, ``transform``,
``get_feature_names_out``, ``set_output``; Pipelines, ``clone``, grid searches).

Modules, one job each:

* ``_base``: the selector plumbing, how a family's path is run and its units counted,
  a path's selections as a boolean matrix;
* ``_subsamples``: complementary pairs of half-samples (stratified for classifiers) and
  their paths in parallel (joblib);
* ``_bound``: the complementary-pairs bound and the choice of threshold and region;
* ``_stability``: :class:`StabilitySelection`;
* ``_select_k``: :class:`SelectFromPath`.
"""

from ._bound import cpss_bound
from ._select_k import SelectFromPath
from ._stability import StabilitySelection

__all__ = ["SelectFromPath", "StabilitySelection", "cpss_bound"]
