"""scikit-learn estimators trained with D-Gating (each wraps a skorch net)."""

from .autoencoder import DGatedAutoencoder
from .linear import SparseLinearClassifier, SparseLinearRegressor
from .mlp import DGatedMLPClassifier, DGatedMLPRegressor
from .nam import DGatedNAMClassifier, DGatedNAMRegressor
from .neural_net import DGatedNeuralNetClassifier, DGatedNeuralNetRegressor
from .node import NODEClassifier, NODERegressor

__all__ = [
    "DGatedAutoencoder",
    "DGatedMLPClassifier",
    "DGatedMLPRegressor",
    "DGatedNAMClassifier",
    "DGatedNAMRegressor",
    "DGatedNeuralNetClassifier",
    "DGatedNeuralNetRegressor",
    "NODEClassifier",
    "NODERegressor",
    "SparseLinearClassifier",
    "SparseLinearRegressor",
]
