"""D-Gating, the package's default sparsifier: its public home.

The implementation is :mod:`sksparse_nn.sparsifiers`' ``"dgating"`` method (a vector
times ``D - 1`` scalar gates per group, with L2 on all factors: the smooth form of the
penalty ``lam * sum_j ||w_j||^(2/D)``, *Structured Sparsity via D-Gating*). This module
gives it the name users import it by; the penalty, group norms and collapse exported
here cover every sparsifier of a model.
"""

from .sparsifiers import (
    ZERO_TOL,
    DGate,
    collapse,
    dgate,
    gate_factors,
    gated_tensors,
    group_norms,
    induced_penalty,
    misalignment,
    penalty,
    penalty_function,
    set_weight,
)

__all__ = [
    "DGate",
    "ZERO_TOL",
    "collapse",
    "dgate",
    "gate_factors",
    "gated_tensors",
    "group_norms",
    "induced_penalty",
    "misalignment",
    "penalty",
    "penalty_function",
    "set_weight",
]
