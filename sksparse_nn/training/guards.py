"""Guards against silent failure: divergence and non-convergence.

Each guard turns a way a fit can go wrong unnoticed into an error or a warning that
names the cause and the parameter to change:

- :class:`DivergenceGuard`: a non-finite or exploding training loss stops training with
  :class:`~sksparse_nn.exceptions.TrainingDivergedError`; a fit that ends far above
  where it began is a ConvergenceWarning.
- :class:`ConvergenceMonitor`, :func:`warn_not_converged`: a ConvergenceWarning when
  ``max_epochs`` ends training while the loss is still falling or groups are still on
  their way to zero.
- :func:`warn_first_epoch_restored`: a ConvergenceWarning when early stopping restored
  a barely trained model.
- :func:`data_scale`: the data's range, for error messages.
"""

from __future__ import annotations

import math

import numpy as np
from skorch.callbacks import Callback

from ..exceptions import TrainingDivergedError
from ..sparsifiers import (
    group_norms,
)
from ..utils.convergence import warn_convergence
from ..utils.validation import abs_max
from .signals import SHRINKING, ending_width, in_transit, still_falling

__all__ = [
    "ConvergenceMonitor",
    "DivergenceGuard",
    "data_scale",
]

#: A training loss this many times the loss of the constant (intercept-only) model means
#: the weights have exploded even while the loss is still a finite float.
EXPLODED = 1e3
#: A fit whose last epoch's training objective is this many times its best epoch's ...
BROKE_DOWN = 3.0
#: ... and above it by this share of the constant model's objective (mini-batch noise
#: around a near-zero loss can triple it) ended far from any minimum.
BROKE_DOWN_SHARE = 0.1


def data_scale(X, y=None):
    """Short description of the scale of X (and float y) for error messages."""
    text = f"|X| up to {abs_max(X):.3g}"
    if y is not None and np.issubdtype(np.asarray(y).dtype, np.floating):
        y = np.asarray(y, dtype=np.float64)
        text += f", y in [{y.min():.3g}, {y.max():.3g}]"
    return text


class DivergenceGuard(Callback):
    """Stop with :class:`TrainingDivergedError` when the epoch's training loss is not finite
    or has exploded (over ``EXPLODED`` times ``baseline``, the constant model's loss).

    One scalar comparison per epoch: the loss is already in skorch's history.
    ``baseline`` may be a callable, evaluated when training begins (a fit that trains
    nothing never pays for it).

    A fit that ends far above where it began (its last epoch's training objective over
    ``BROKE_DOWN`` times its first epoch's, by more than ``BROKE_DOWN_SHARE`` of
    ``baseline``) did not diverge to infinity but broke down on the way (a learning rate
    at the edge of stability): the model is not a minimum, and a ConvergenceWarning says
    so. Minimization only lowers the objective, up to mini-batch noise.
    """

    def __init__(self, baseline, describe):
        self.baseline = baseline
        self.describe = describe  # callable(epoch, loss) -> message

    def on_train_begin(self, net, **kwargs):
        self.baseline_ = self.baseline() if callable(self.baseline) else self.baseline

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1, "train_loss"]
        exploded = self.baseline_ > 0 and loss > EXPLODED * self.baseline_
        if not math.isfinite(loss) or exploded:
            epoch = len(net.history)
            raise TrainingDivergedError(self.describe(epoch, loss), lam=net.lam, epoch=epoch)

    def on_train_end(self, net, **kwargs):
        if len(net.history) < 2:
            return
        losses = net.history[:, "train_loss"]  # (skorch leaves out an epoch cut short)
        if len(losses) < 2:
            return
        losses = np.asarray(losses, dtype=np.float64)
        best_epoch = int(np.argmin(losses))
        best, final = float(losses[best_epoch]), float(losses[-1])
        share = BROKE_DOWN_SHARE * max(getattr(self, "baseline_", 0.0), 0.0)
        if best > 0 and final > BROKE_DOWN * best and final - best > share:
            warn_convergence(
                f"The training objective ended at {final:.3g} after {len(losses)} epochs, "
                f"{final / best:.3g} times its best epoch's ({best:.3g}, epoch "
                f"{best_epoch + 1}): training broke down on the way and the model is not a "
                "minimum (a learning rate at the edge of stability for this start). "
                "Lower lr.",
                stacklevel=2,
            )


class ConvergenceMonitor(Callback):
    """Record what :meth:`diagnose` needs to tell whether ``max_epochs`` cut training short.

    Group norms are read once, three quarters into training (a handful of small tensor
    reductions); the training losses come from skorch's history.
    """

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs
        self.snapshot_epoch = max(1, (3 * max_epochs) // 4)

    def initialize(self):
        self.snapshot_ = None
        return self

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.snapshot_epoch:
            self.snapshot_ = {k: v.cpu().double() for k, v in group_norms(net.module_).items()}

    def diagnose(self, losses, final_norms, zero_tol):
        """Messages for what was still moving when training stopped (empty: converged)."""
        messages = []
        losses = np.asarray(losses, dtype=np.float64)
        if losses.size >= 2:
            width = ending_width(losses.size)
            falling, before, recent = still_falling(losses, width)
            if falling:
                messages.append(
                    f"the training loss was still falling ({before:.4g} -> {recent:.4g} over "
                    f"the last {2 * width} epochs)"
                )
        if self.snapshot_ is not None and self.snapshot_epoch < self.max_epochs:
            transit = 0
            for key, norms in final_norms.items():
                before = self.snapshot_.get(key)
                if before is None:
                    continue
                before = before.numpy()
                moving = in_transit(norms, before, zero_tol)
                if np.max(norms, initial=0.0) < SHRINKING * np.max(before, initial=0.0):
                    # the whole tensor is shrinking (a lam too large for the epochs): its
                    # largest group too, so every falling group is on its way out
                    moving |= (norms >= zero_tol) & (norms < SHRINKING * before)
                transit += int(moving.sum())
            if transit:
                messages.append(
                    f"{transit} group(s) were still shrinking towards zero (above "
                    f"zero_tol={zero_tol:.3g}, they count as selected)"
                )
        return messages


def warn_not_converged(estimator, messages, max_epochs):
    """One ConvergenceWarning naming what moved and the parameter to raise."""
    if not messages:
        return
    if getattr(estimator, "max_epochs", None) is None:  # the automatic budget ran out
        advice = f"Set max_epochs above the automatic budget of {max_epochs}"
    else:
        advice = "Raise max_epochs (or set max_epochs=None for the automatic budget)"
    warn_convergence(
        f"{type(estimator).__name__} reached max_epochs={max_epochs} before converging: "
        + "; ".join(messages)
        + f". {advice}, or raise lr if training is slow.",
        stacklevel=4,
    )


def warn_first_epoch_restored(estimator, stopper):
    """A ConvergenceWarning when validation early stopping restored the first epoch of a
    penalized fit that trained longer: the penalty shrank the model while the validation
    loss only rose, and the fitted model is the barely trained one. Not for warm starts
    (the caller's choice): their first epoch is the previous fit's model, one epoch on
    (a path point whose larger lam the validation loss did not want)."""
    if getattr(stopper, "restored_epoch_", None) != 1 or estimator.n_iter_ <= 1:
        return
    if not estimator.lam > 0:
        return
    warn_convergence(
        f"{type(estimator).__name__}: early stopping restored the model of the first epoch "
        f"of {estimator.n_iter_}: the validation loss only rose after it while the penalty "
        f"(lam={estimator.lam:g}) shrank the model, so the fitted model is barely trained. "
        "Lower lam, or set early_stopping=False to let the penalty finish.",
        stacklevel=4,
    )
