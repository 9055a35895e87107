"""scikit-learn estimators that select their own groups of weights, one module a family.

The families (linear, MLP, NAM, NODE, a user's module, the autoencoder) derive from
:class:`BaseDGated` and answer its hook table; a new family does the same with the
extension names exported here (:class:`BaseDGated`, :class:`Traits`, the task mixins,
:class:`LinearMember` for a family that contains the sparse linear model,
:func:`column_norms`).
"""

from ._base import BaseDGated, column_norms
from ._contract import HOOKS, Traits
from ._linear_member import LinearMember
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin
from .autoencoder import DGatedAutoencoder
from .linear import SparseLinearClassifier, SparseLinearRegressor
from .mlp import DGatedMLPClassifier, DGatedMLPRegressor
from .nam import DGatedNAMClassifier, DGatedNAMRegressor
from .neural_net import DGatedNeuralNetClassifier, DGatedNeuralNetRegressor
from .node import NODEClassifier, NODERegressor

__all__ = [
    "HOOKS",
    "BaseDGated",
    "ClassifierTaskMixin",
    "DGatedAutoencoder",
    "DGatedMLPClassifier",
    "DGatedMLPRegressor",
    "DGatedNAMClassifier",
    "DGatedNAMRegressor",
    "DGatedNeuralNetClassifier",
    "DGatedNeuralNetRegressor",
    "LinearMember",
    "NODEClassifier",
    "NODERegressor",
    "RegressorTaskMixin",
    "SparseLinearClassifier",
    "SparseLinearRegressor",
    "Traits",
    "column_norms",
]
