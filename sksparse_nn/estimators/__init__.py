"""scikit-learn estimators trained with D-Gating (each wraps a skorch net)."""

from .linear import SparseLinearClassifier, SparseLinearRegressor

__all__ = ["SparseLinearClassifier", "SparseLinearRegressor"]
