"""Structured sparsity by training: D-Gating and its peers as tensor parametrizations.

Every method turns the groups of a weight tensor into something SGD can remove, through
one class of the :class:`Sparsifier` protocol:

================  ====================================================================
``"dgating"``     :class:`~sksparse_nn.gating.DGate` -- a vector times ``D - 1`` scalar
                  gates with L2 on all factors: the penalty ``sum_j ||w_j||^(2/D)``
                  (*Structured Sparsity via D-Gating*); exact zeros.
``"dam"``         :class:`DAM` -- ordered gates with one learnable offset
                  (*DiscriminAtive Masking*); for interchangeable units (neurons).
``"ds"``          :class:`DS` -- thresholded architecture parameters with a norm penalty
                  (*Differentiable Sparsification*); exact zeros.
``"l21"``         :class:`L21` -- the group-lasso penalty by plain subgradient steps; no
                  exact zeros, selection by a stated magnitude threshold.
================  ====================================================================

:func:`sparsify` attaches one (``tie=`` extends a group over further tensors);
:func:`penalty`, :func:`group_norms`, :func:`support` and :func:`collapse` work on any mix
of them. A new method is one subclass with a ``method`` name (see :class:`Sparsifier`).
Modules: ``_base.py`` (the protocol, the registry, ``sparsify``), ``_model.py`` (the
functions on a whole model), ``_dgating.py`` and ``_dgating_model.py`` (D-Gating and its
model-wide functions), ``_dam.py``, ``_ds.py``, ``_l21.py``. Pure PyTorch.
"""

from ._base import DEFAULT_METHOD, ZERO_TOL, Sparsifier, get_sparsifier, sparsifier_names, sparsify
from ._dam import DAM
from ._dgating import DGate, dgate
from ._dgating_model import gate_factors, gated_tensors, induced_penalty, misalignment, set_weight
from ._ds import DS
from ._l21 import L21
from ._model import (
    cached,
    can_drop,
    closed_form_penalties,
    collapse,
    drop_groups_,
    group_norms,
    penalty,
    penalty_curvatures,
    penalty_function,
    sparsified_tensors,
    support,
)

__all__ = [
    "DEFAULT_METHOD",
    "DAM",
    "DGate",
    "DS",
    "L21",
    "ZERO_TOL",
    "Sparsifier",
    "cached",
    "can_drop",
    "closed_form_penalties",
    "collapse",
    "dgate",
    "drop_groups_",
    "gate_factors",
    "gated_tensors",
    "get_sparsifier",
    "group_norms",
    "induced_penalty",
    "misalignment",
    "penalty",
    "penalty_curvatures",
    "penalty_function",
    "set_weight",
    "sparsified_tensors",
    "sparsifier_names",
    "sparsify",
    "support",
]
