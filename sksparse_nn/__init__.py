"""sksparse_nn: scikit-learn compatible sparse neural estimators trained with D-Gating."""

from .compose import TableEncoder, VariableModel, variable_groups
from .estimators import (
    DGatedAutoencoder,
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    DGatedNeuralNetClassifier,
    DGatedNeuralNetRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
)
from .exceptions import TrainingDivergedError
from .gating import (
    collapse,
    dgate,
    gate_factors,
    gated_tensors,
    group_norms,
    induced_penalty,
    misalignment,
    penalty,
)
from .groups import AxisGroups, group_labels_from_sizes
from .model_selection import SparsePathCV
from .path import RegularizationPath, regularization_path
from .solvers import GroupLassoClassifier, GroupLassoRegressor
from .sparsifiers import sparsify, support

__version__ = "0.1.0"

__all__ = [
    "AxisGroups",
    "DGatedAutoencoder",
    "DGatedMLPClassifier",
    "DGatedMLPRegressor",
    "DGatedNAMClassifier",
    "DGatedNAMRegressor",
    "DGatedNeuralNetClassifier",
    "DGatedNeuralNetRegressor",
    "GroupLassoClassifier",
    "GroupLassoRegressor",
    "NODEClassifier",
    "NODERegressor",
    "RegularizationPath",
    "SparseLinearClassifier",
    "SparseLinearRegressor",
    "SparsePathCV",
    "TrainingDivergedError",
    "TableEncoder",
    "VariableModel",
    "collapse",
    "dgate",
    "gate_factors",
    "gated_tensors",
    "group_labels_from_sizes",
    "group_norms",
    "induced_penalty",
    "misalignment",
    "penalty",
    "regularization_path",
    "sparsify",
    "support",
    "variable_groups",
]
