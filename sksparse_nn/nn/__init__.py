"""Plain PyTorch modules used by the estimators (no scikit-learn, no gating)."""

from ._nam_training import NAMTrainingStep
from .autoencoder import Autoencoder, compact_autoencoder
from .embeddings import PiecewiseLinearEncoding, quantile_edges
from .mlp import MLP, MemberLinear, compact_mlp
from .nam import NAM, compact_nam
from .node import NODE, ObliviousTreeLayer, compact_node

__all__ = [
    "Autoencoder",
    "MLP",
    "MemberLinear",
    "NAM",
    "NAMTrainingStep",
    "NODE",
    "ObliviousTreeLayer",
    "PiecewiseLinearEncoding",
    "compact_autoencoder",
    "compact_mlp",
    "compact_nam",
    "compact_node",
    "quantile_edges",
]
