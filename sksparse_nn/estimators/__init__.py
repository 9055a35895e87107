"""scikit-learn estimators trained with D-Gating (each wraps a skorch net)."""

from .linear import SparseLinearClassifier, SparseLinearRegressor
from .mlp import DGatedMLPClassifier, DGatedMLPRegressor
from .nam import DGatedNAMClassifier, DGatedNAMRegressor
from .node import NODEClassifier, NODERegressor

__all__ = [
    "DGatedMLPClassifier",
    "DGatedMLPRegressor",
    "DGatedNAMClassifier",
    "DGatedNAMRegressor",
    "NODEClassifier",
    "NODERegressor",
    "SparseLinearClassifier",
    "SparseLinearRegressor",
]
