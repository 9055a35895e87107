"""Plain PyTorch modules used by the estimators (no scikit-learn, no gating)."""

from .mlp import MLP, compact_mlp
from .node import NODE, ObliviousTreeLayer, compact_node

__all__ = ["MLP", "NODE", "ObliviousTreeLayer", "compact_mlp", "compact_node"]
