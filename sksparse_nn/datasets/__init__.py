"""Simulated data sets and loaders for real benchmark data.

Simulations (no data files, fully determined by ``random_state``):

* :func:`make_group_regression` -- sparse linear regression with grouped features, the
  group-lasso set-up of the D-Gating paper (40 groups of 5 features, 7 informative).
* :func:`make_additive_regression` -- a sparse non-linear additive model (5 shape functions
  plus noise features), the set-up used for sparse neural additive models.
* :func:`make_interaction_regression` -- four main effects and one pure pairwise
  interaction among noise features, the set-up of the sparse GA2M.
* :func:`make_sparse_classification` -- a small non-linear classification problem in which
  only the first few features carry signal.
* :func:`make_latent_manifold` -- data of known intrinsic dimension: a latent Gaussian
  pushed through a random (linear, quadratic or decoder-shaped network) map, the
  dimensionality-reduction problems of the DAM paper.

Real data:

* :func:`load_benchmark` -- ISOLET, COIL-20, MADELON, MNIST (test part), Wine Quality.
  Each set is read from ``<data_home>/<name>.npz`` when such a file exists (``data_home``
  defaults to the environment variable ``SKSPARSE_NN_DATA``) and downloaded from its public
  source otherwise.
* :func:`load_wine_quality` -- a thin wrapper for the two Wine Quality regression sets.

For a small data set that needs no download at all, use the ones bundled with
scikit-learn (:func:`sklearn.datasets.load_diabetes`, :func:`~sklearn.datasets.load_digits`,
:func:`~sklearn.datasets.load_breast_cancer`).

Modules: ``_regression`` (group-sparse linear and additive regression),
``_interactions`` (an additive model with an interaction),
``_classification``, ``_latent`` (latent manifolds), ``_checks`` (the simulations'
parameter checks), ``_loaders`` (benchmark sets from files or their source) and ``_fetch``
(the downloads).
"""

from ._classification import make_sparse_classification
from ._interactions import make_interaction_regression
from ._latent import make_latent_manifold
from ._loaders import BENCHMARK_NAMES, DATA_HOME_ENV, load_benchmark, load_wine_quality
from ._regression import make_additive_regression, make_group_regression

__all__ = [
    "BENCHMARK_NAMES",
    "DATA_HOME_ENV",
    "load_benchmark",
    "load_wine_quality",
    "make_additive_regression",
    "make_group_regression",
    "make_interaction_regression",
    "make_latent_manifold",
    "make_sparse_classification",
]
