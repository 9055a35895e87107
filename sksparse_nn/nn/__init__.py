"""Plain PyTorch modules used by the estimators (no scikit-learn, no gating)."""

from ._nam_training import NAMTrainingStep
from .autoencoder import Autoencoder, compact_autoencoder
from .mlp import MLP, compact_mlp
from .nam import NAM, compact_nam
from .node import NODE, ObliviousTreeLayer, compact_node

__all__ = [
    "Autoencoder",
    "MLP",
    "NAM",
    "NAMTrainingStep",
    "NODE",
    "ObliviousTreeLayer",
    "compact_autoencoder",
    "compact_mlp",
    "compact_nam",
    "compact_node",
]
