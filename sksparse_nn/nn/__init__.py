"""Plain PyTorch modules used by the estimators (no scikit-learn, no gating)."""

from .mlp import MLP, compact_mlp

__all__ = ["MLP", "compact_mlp"]
