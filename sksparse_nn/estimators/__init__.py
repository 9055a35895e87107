"""scikit-learn estimators trained with D-Gating (each wraps a skorch net)."""

from .linear import SparseLinearClassifier, SparseLinearRegressor
from .mlp import DGatedMLPClassifier, DGatedMLPRegressor

__all__ = [
    "DGatedMLPClassifier",
    "DGatedMLPRegressor",
    "SparseLinearClassifier",
    "SparseLinearRegressor",
]
