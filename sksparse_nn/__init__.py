"""sksparse_nn: scikit-learn compatible sparse neural estimators trained with D-Gating."""

from .gating import (
    collapse,
    dgate,
    gated_tensors,
    group_norms,
    induced_penalty,
    misalignment,
    penalty,
)
from .groups import AxisGroups

__version__ = "0.1.0.dev0"

__all__ = [
    "AxisGroups",
    "collapse",
    "dgate",
    "gated_tensors",
    "group_norms",
    "induced_penalty",
    "misalignment",
    "penalty",
]
