"""Plain PyTorch modules used by the estimators (no scikit-learn, no gating)."""

from .mlp import MLP, compact_mlp
from .nam import NAM, compact_nam
from .node import NODE, ObliviousTreeLayer, compact_node

__all__ = [
    "MLP",
    "NAM",
    "NODE",
    "ObliviousTreeLayer",
    "compact_mlp",
    "compact_nam",
    "compact_node",
]
