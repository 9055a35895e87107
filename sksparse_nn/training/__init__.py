"""The training engine: how a sparsified torch module is trained, on skorch.

Families declare what a fit needs (see :class:`sksparse_nn.estimators.BaseDGated`'s hook
table); this package does the rest and knows no family:

- :mod:`.engine`: :class:`GradientTrainer`, which builds the net a family declared,
  trains it and returns a :class:`Trained`;
- :mod:`.data`: the training rows (dense or CSR, standardized per batch), batches;
- :mod:`.net`: :class:`PenalizedNet`, the skorch net whose loss adds ``lam`` times the
  sparsifiers' penalty, with Ctrl-C and :class:`StopTraining` handled;
- :mod:`.schedule`, :mod:`.signals`: the learning-rate plan and the rule that stops a
  settled fit;
- :mod:`.early_stopping`: stopping on held-out rows (best epoch, averaged, clean gap);
- :mod:`.guards`, :mod:`.clipping`: divergence and non-convergence reports, the clip;
- :mod:`.optimizers`: the optimizer table, :class:`FactorSGD`, torch's SGD step and
  ``zero_grad`` without their wrappers;
- :mod:`.scaling`: standardization folded into the fitted module;
- :mod:`.runtime`: device, threads, random stream, subnormal floats.
"""

from .callbacks import make_callbacks
from .clipping import PenaltyAwareClipping
from .data import ArrayDataset, BatchIterator, RandomSplit, as_numpy, weighted_mean
from .early_stopping import (
    AveragingEarlyStopping,
    CleanEarlyStopping,
    EarlyStopping,
    StopWhenConverged,
)
from .engine import GradientTrainer, Trained, epoch_budget, step_size_groups
from .guards import (
    ConvergenceMonitor,
    DivergenceGuard,
    data_scale,
    warn_first_epoch_restored,
    warn_not_converged,
)
from .net import PenalizedNet, StopTraining
from .optimizers import FactorSGD, plain_sgd_step, resolve_optimizer, zero_grads
from .runtime import check_device, flush_denormals, seeded, thread_policy
from .scaling import MAX_STANDARDIZED, Scaling, bounded_scale
from .schedule import LRPlan, StopWhenSettled
from .signals import TINY

__all__ = [
    "TINY",
    "ArrayDataset",
    "AveragingEarlyStopping",
    "BatchIterator",
    "CleanEarlyStopping",
    "ConvergenceMonitor",
    "DivergenceGuard",
    "EarlyStopping",
    "FactorSGD",
    "GradientTrainer",
    "LRPlan",
    "PenaltyAwareClipping",
    "PenalizedNet",
    "RandomSplit",
    "MAX_STANDARDIZED",
    "Scaling",
    "bounded_scale",
    "StopTraining",
    "StopWhenConverged",
    "StopWhenSettled",
    "Trained",
    "as_numpy",
    "weighted_mean",
    "check_device",
    "data_scale",
    "epoch_budget",
    "flush_denormals",
    "make_callbacks",
    "plain_sgd_step",
    "resolve_optimizer",
    "seeded",
    "step_size_groups",
    "thread_policy",
    "warn_first_epoch_restored",
    "warn_not_converged",
    "zero_grads",
]
