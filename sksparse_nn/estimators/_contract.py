"""The family contract in code: what a family declares, and the hooks it may override.

A family is ``(task mixin) + BaseDGated`` plus one class attribute, ``_traits`` (a
:class:`Traits`), and the hooks of :data:`HOOKS`. Everything else on the base
(validation, the fit's orchestration, collapsing to exact zeros, prediction) and in the
training engine (:mod:`sksparse_nn.training`: building and training the net) is not
overridable; ``tests/test_contract_table.py`` fails when a family overrides a base
attribute that is not in :data:`HOOKS`, and when docs/architecture.md's table differs
from :func:`hook_table`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ..training import PenalizedNet

__all__ = ["HOOKS", "Hook", "Traits", "hook_table", "with_hook_table"]


@dataclass(frozen=True)
class Traits:
    """What a family declares about itself as data (read by the base and the engine).

    Subclasses derive theirs with :func:`dataclasses.replace`.
    """

    #: dtype of training: networks train in float32, the linear models in float64
    #: (they are checked against exact solvers).
    dtype: torch.dtype = torch.float32
    #: dtype of predictions: float64 makes a row's output independent of its batch;
    #: ``None`` keeps the training dtype (user modules may not run in float64).
    inference_dtype: torch.dtype | None = torch.float64
    #: How a fresh module is gated: ``"identity"`` (gates 1) or ``"balanced"`` (factors
    #: at the stationarity condition of the penalty, for a data-dependent start).
    fresh_init: str = "identity"
    #: Train on standardized inputs (the module absorbs the map, ``_rescale_inputs``),
    #: so that ``lr`` and ``lam`` do not depend on the units of X.
    standardize_inputs: bool = False
    #: Regressors train on standardized targets (``_rescale_outputs``).
    standardize_targets: bool = False
    #: The module takes torch sparse batches as they are (a linear map first): sparse X
    #: is never densified in training.
    sparse_batches: bool = False
    #: How X is validated (``validate_data`` keywords); images or sequences add
    #: ``allow_nd``.
    X_validation: dict = field(default_factory=lambda: {"accept_sparse": "csr"})
    #: The default lam grid of paths and the CV folds' first-pass stride (see
    #: ``default_grid``).
    default_grid: dict = field(
        default_factory=lambda: {"n_lams": 16, "lam_min_ratio": 0.02, "cv_stride": 2}
    )
    #: The automatic budget (``max_epochs=None``): a cap of at least this many
    #: optimizer steps and epochs.
    auto_min_steps: int = 4000
    auto_min_epochs: int = 100
    #: Cold fits with the automatic budget hold the full learning rate as warm starts
    #: do, instead of a cosine decay over the cap.
    hold_cold_rate: bool = False
    #: The gated layer feeds ungated weights through positively homogeneous activations
    #: (ReLU): they get a small L2 (``_ridge``).
    ridge_downstream: bool = False
    #: That L2 as a fraction of what one D-Gating factor carries (``1 / D``).
    ridge_scale: float = 0.1
    #: Rows per forward pass at prediction time.
    predict_batch: int = 8192
    #: The skorch net class the engine trains with.
    net_class: type = PenalizedNet
    #: ``(net) -> step or None``: every gradient of a training step in one call (see
    #: ``PenalizedNet``'s ``fused_step``); None: autograd's step.
    fused_step: Callable | None = None


class Hook(NamedTuple):
    """One entry of the contract: a name on ``BaseDGated`` a family may override."""

    name: str
    kind: str  # "declaration", "required", "optional", "task", "path" or "scikit-learn"
    does: str


HOOKS = (
    Hook("_traits", "declaration", "the family's Traits: dtypes, standardization, budget, grid"),
    Hook("_build_module", "required", "(n_features, n_outputs) -> the plain torch module"),
    Hook("_gate_module", "required", "(module, init): sparsify its groups with self._sparsify"),
    Hook("_plan_module", "optional", "(X, targets): data-dependent structure of a fresh module"),
    Hook("_init_module", "optional", "(module, dataset, targets): data-dependent start"),
    Hook("_rescale_inputs", "optional", "(module, shift, scale): absorb x -> (x - shift) / scale"),
    Hook("_rescale_outputs", "optional", "(module, shift, scale): outputs -> out * scale + shift"),
    Hook("_fit_scaling", "optional", "(X, targets) -> the Scaling the family trains in"),
    Hook("_ridge", "optional", "(module) -> {parameter: c}: L2 on ungated weights, or None"),
    Hook("_optimizer", "optional", "(module, ridge) -> (optimizer class, options)"),
    Hook("_early_stopper", "optional", "() -> the held-out stopping callback, or None"),
    Hook("_training_callbacks", "optional", "(module) -> further (name, callback) pairs"),
    Hook("_trainer", "optional", "() -> the trainer (the engine's GradientTrainer)"),
    Hook("_collapse", "optional", "(module, zero_tol) -> (norms, keep); exact zeros"),
    Hook("_inference_module", "optional", "() -> (compact module, columns it reads, sample shape)"),
    Hook("_feature_importances", "optional", "(module) -> importance per input feature, or None"),
    Hook("_weight_scale", "optional", "(X, y) -> the unit of zero_tol (1 in standard units)"),
    Hook("_module_output", "optional", "(X, method) -> outputs on validated X, float64"),
    Hook("_after_fit", "optional", "(X, y, sample_weight): family fitted attributes"),
    Hook("_fit_targets", "task", "(y) -> (encoded targets, n_outputs)"),
    Hook("_criterion", "task", "() -> the data loss (per-sample weights as 3rd argument)"),
    Hook("_constant_output", "task", "(targets, n_outputs) -> the best constant output"),
    Hook("_path_targets", "task", "(y) -> targets in the squared-error form of lambda_max"),
    Hook("_target_validation", "task", "validate_data keywords for y"),
    Hook("lambda_max", "path", "(X, y) -> the top of the default lam grid"),
    Hook(
        "default_grid",
        "path",
        "() -> {'n_lams', 'lam_min_ratio'[, 'cv_stride', 'extend_below']}",
    ),
    Hook("path_order", "path", "() -> 'ascending' or 'descending'"),
    Hook("linear_member", "path", "() -> the family's sparse linear member, or None"),
    Hook("path_start", "path", "() -> lam of an unrecorded start model, or None"),
    Hook(
        "fold_params",
        "path",
        "() -> parameters of the CV folds' fits ({'settle': 'objective'})",
    ),
    Hook("regularization_path", "path", "(X, y, keywords) -> RegularizationPath"),
    Hook("fit", "scikit-learn", "a signature with sample_weight, or y=None"),
    Hook("get_params", "scikit-learn", "module__* parameters"),
    Hook("set_params", "scikit-learn", "module__* parameters"),
    Hook("_validate_params", "scikit-learn", "checks beyond _parameter_constraints"),
    Hook("_parameter_constraints", "scikit-learn", "the family's own parameters"),
    Hook("__sklearn_tags__", "scikit-learn", "the family's tags"),
    Hook("__getstate__", "scikit-learn", "what pickles leave out"),
)


def hook_table(format="markdown"):
    """The contract as a table: Markdown (docs/architecture.md carries it verbatim) or
    reStructuredText (the base's docstring)."""
    if format == "markdown":
        rows = ["| hook | kind | what it does |", "|---|---|---|"]
        return "\n".join(rows + [f"| `{h.name}` | {h.kind} | {h.does} |" for h in HOOKS])
    name = max(len(h.name) for h in HOOKS) + 4
    kind = max(len(h.kind) for h in HOOKS)
    does = max(len(h.does) for h in HOOKS)
    rule = " ".join(["=" * name, "=" * kind, "=" * does])
    rows = [rule, f"{'hook':{name}} {'kind':{kind}} what it does", rule]
    rows += [f"{'``' + h.name + '``':{name}} {h.kind:{kind}} {h.does}" for h in HOOKS]
    return "\n".join([*rows, rule])


def with_hook_table(cls):
    """Class decorator: the ``$hook_table`` line of ``cls``'s docstring becomes the
    reStructuredText table (indented like that line)."""
    cls.__doc__ = re.sub(
        r"^([ ]*)\$hook_table",
        lambda m: textwrap.indent(hook_table(format="rst"), m.group(1)),
        cls.__doc__,
        flags=re.MULTILINE,
    )
    return cls
