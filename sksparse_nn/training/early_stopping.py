"""Early stopping on held-out rows: the best epoch, an average of epochs, a clean one."""

from __future__ import annotations

import copy
from collections import deque

import numpy as np
import torch
from skorch.callbacks import Callback

from ..sparsifiers import (
    group_norms,
    induced_penalty,
)
from .net import StopTraining
from .signals import TINY


class StopWhenConverged(Callback):
    """Stop when an epoch lowers the training loss by less than ``tol`` (relative)."""

    def __init__(self, tol):
        self.tol = tol

    def on_epoch_end(self, net, **kwargs):
        losses = net.history[:, "train_loss"]
        if len(losses) < 2 or not np.isfinite(losses[-1]):  # the divergence guard decides
            return
        if losses[-2] - losses[-1] <= self.tol * max(abs(losses[-1]), 1e-12):
            raise StopTraining


class EarlyStopping(Callback):
    """Stop when the validation loss has not improved for ``patience`` epochs, then
    restore the weights of the best epoch.

    ``monitor`` names the history entry watched (``"valid_loss"``; a subclass may record
    another, e.g. the validation objective, before this reads it)."""

    def __init__(self, patience, monitor="valid_loss"):
        self.patience = patience
        self.monitor = monitor

    def initialize(self):
        self.best_loss_, self.best_state_, self.misses_ = float("inf"), None, 0
        self.best_epoch_ = self.restored_epoch_ = None  # epochs counted from 1
        return self

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1, self.monitor]
        if loss < self.best_loss_:
            self.best_loss_, self.misses_ = loss, 0
            self.best_state_ = copy.deepcopy(net.module_.state_dict())
            self.best_epoch_ = len(net.history)
        else:
            self.misses_ += 1
            if self.misses_ >= self.patience:
                raise StopTraining

    def on_train_end(self, net, **kwargs):
        if self.best_state_ is not None:
            net.module_.load_state_dict(self.best_state_)
            self.restored_epoch_ = self.best_epoch_


#: A tree early stopping may restore as dead is below this fraction of ``zero_tol``.
_DUST = 1e-2


#: Early stopping restores the average of the weights of the best epoch and of the
#: epochs just before it (at most this many in all, with the same live trees). The
#: average is restored as it is: the best epoch's own validation loss, the minimum of
#: noisy values, is biased low and would almost always be preferred.
_AVERAGE_EPOCHS = 5


#: Relative validation objective a clean early-stopping epoch may give up against the best
#: epoch overall (a clean sparsity gap is worth a little accuracy, not a lot).
_CLEAN_SLACK = 0.05


#: Training with early stopping ends once the best validation value of all epochs has not
#: improved for this many times ``n_iter_no_change`` epochs.
_STALL_FACTOR = 3


def _within_slack(best_loss):
    """The worst validation objective a clean epoch may have and still be restored."""
    return best_loss + _CLEAN_SLACK * abs(best_loss)


def _average_states(states):
    """Entry-wise mean of module state dicts (floating entries; others from the last)."""
    last = states[-1]
    if len(states) == 1:
        return copy.deepcopy(last)
    out = {}
    for key, value in last.items():
        if value.is_floating_point():
            out[key] = torch.stack([s[key] for s in states]).mean(dim=0).to(value.dtype)
        else:
            out[key] = value.clone()
    return out


class AveragingEarlyStopping(EarlyStopping):
    """Early stopping that restores the average of the weights of the last epochs.

    At every new best validation value the restore point becomes the mean of the weights
    of that epoch and of up to ``window - 1`` epochs before it (those kept by
    :meth:`_remember`): a Polyak (stochastic weight) average at the best point, as the
    NODE paper averages its last checkpoints. A trained NODE's test error fluctuates from
    epoch to epoch with the Adam steps; the average of neighbouring epochs is a smoother,
    better model than any one of them.

    Parameters
    ----------
    patience : int
        Epochs without a new best value before training stops.
    window : int, default=5
        Epochs averaged, the best one included.
    monitor : str, default="valid_loss"
        The history entry watched.
    smooth : bool, default=False
        Compare epochs by the mean value over the window instead of the last epoch's
        own: the restored model is that average, and the minimum of single epochs'
        values on a small validation set is mostly noise, biased low.
    """

    def __init__(self, patience, window=_AVERAGE_EPOCHS, monitor="valid_loss", smooth=False):
        super().__init__(patience, monitor)
        self.window = window
        self.smooth = smooth

    def initialize(self):
        self.forget()
        return super().initialize()

    def forget(self):
        """Start the window of remembered epochs anew."""
        self.recent_, self.recent_values_ = [], []

    def judged(self):
        """The value the last remembered epoch is compared by: its own, or with
        ``smooth`` the mean over the remembered epochs (those the restore point would
        average)."""
        return float(np.mean(self.recent_values_)) if self.smooth else self.recent_values_[-1]

    def _remember(self, net):
        state = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}
        keep = self.window - 1
        self.recent_ = [*self.recent_[-keep:], state] if keep else [state]
        value = net.history[-1, self.monitor]
        self.recent_values_ = [*self.recent_values_[-keep:], value] if keep else [value]

    def on_epoch_end(self, net, **kwargs):
        self._remember(net)
        loss = self.judged()
        if loss < self.best_loss_:
            self.best_loss_, self.misses_ = loss, 0
            self.best_state_ = _average_states(self.recent_)
            self.best_epoch_ = len(net.history)
        else:
            self.misses_ += 1
            if self.misses_ >= self.patience:
                raise StopTraining


class CleanEarlyStopping(AveragingEarlyStopping):
    """Early stopping at epochs with clean zeros, on the model with the final support.

    It watches the validation *objective* (history entry ``"valid_objective"``): the
    validation loss plus ``lam`` times the trees' penalty, the quantity the fit minimizes,
    on held-out rows (LassoNet's paths stop on it too). On the loss alone, a warm-started
    path point whose first epoch (the previous point's model) validates best would be
    restored at every lam, and a lam above ``lam_max`` would restore an untrained cold
    fit where the empty model is the answer.

    An epoch is a candidate only if its sparsity gap is clean: every tree is dead (below
    ``_DUST * zero_tol``: collapsing it removes only dust) or live (at least ``TINY``
    times the largest tree of any epoch so far). Epochs with trees in transit neither
    count towards ``patience`` nor can be restored, and a change of the live set starts
    the search again, so the restored model has the fewest trees training reached, at its
    best validation objective. Plain early stopping would stop while unused trees are
    still shrinking and restore them alive. The restored weights are the window average
    of the base class, judged by the window's mean (``smooth``); a tree dead in every
    averaged epoch is dead in the average.

    When no epoch was clean, or the best clean one validates more than ``_CLEAN_SLACK``
    worse than the best epoch overall (a clean gap is worth a little accuracy, not a lot),
    the best window of any support is restored instead, judged and averaged alike.

    Training stops once no epoch has improved the validation objective for
    ``_STALL_FACTOR * patience`` epochs, unless the last epoch is clean (its support then
    ends training by its own patience) or a clean gap is in reach: trees still arrive at
    dust in time for ``max_epochs`` (:meth:`_clean_in_time`) and a clean epoch arriving now
    would validate within the slack (:meth:`_restorable`). Stopping at the stall alone
    would restore trees in transit; waiting for a gap that cannot come in time only trains
    an overfitting model longer.

    Parameters
    ----------
    patience : int
        Epochs without a new best clean epoch of the current support before training
        stops.
    zero_tol : float
        Tree norms below it count as zero (as in the fit's collapse).
    window : int, default=5
        See :class:`AveragingEarlyStopping`.
    smooth : bool, default=True
        See :class:`AveragingEarlyStopping`.
    """

    def __init__(self, patience, zero_tol, window=_AVERAGE_EPOCHS, smooth=True):
        super().__init__(patience, window, monitor="valid_objective", smooth=smooth)
        self.zero_tol = zero_tol

    def initialize(self):
        self.support_ = None
        # the best epochs, clean or not, judged and averaged as the clean ones are (the
        # slack compares like with like)
        self.any_ = AveragingEarlyStopping(np.inf, self.window, self.monitor, self.smooth)
        self.any_.initialize()
        # the stall window's values as any_ judged them; the largest tree of any epoch
        self.judged_ = deque(maxlen=_STALL_FACTOR * self.patience)
        self.largest_ = 0.0
        self.norms_ = deque(maxlen=2 * self.patience)  # tree norms of the last epochs
        self.ends_clean_ = False  # whether the last epoch had a clean gap
        return super().initialize()

    def _in_transit(self, layer_norms):
        """Mask of the trees on their way to zero (``layer_norms``: their norms, one
        tensor per layer; layers concatenated): above dust and below ``TINY`` times the
        largest tree of the model in any epoch of this fit. The reference is model-wide
        (every layer's trees feed the output at the same scale) and over all epochs (at
        a lam too large for the data every tree shrinks alike). An epoch is clean when
        no tree is in transit."""
        norms = torch.cat(layer_norms)
        return ((norms >= _DUST * self.zero_tol) & (norms < TINY * self.largest_)).numpy()

    def _clean_in_time(self, transit, epochs_left):
        """Whether waiting is likely to give a clean model: trees have been arriving at
        dust over the last ``2 * patience`` epochs (many trees dying at once: their
        norms are too noisy to extrapolate one by one), or every tree in transit (mask
        ``transit``) gets below dust within ``epochs_left`` epochs at its pace over those
        epochs (the fall of its mean log-norm from the first half of them to the
        second: one tree on its way out)."""
        if len(self.norms_) < self.norms_.maxlen:
            return True  # too few epochs to tell
        norms, dust = np.stack(self.norms_), _DUST * self.zero_tol
        if (norms[-1] < dust).sum() > (norms[0] < dust).sum():
            return True
        logs = np.log(np.maximum(norms[:, transit], dust))
        fall = logs[: self.patience].mean(axis=0) - logs[self.patience :].mean(axis=0)
        fall /= self.patience  # per epoch
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = np.where(fall > 0, (logs[-1] - np.log(dust)) / fall, np.inf)
        return bool(np.all(needed <= epochs_left))

    def _restorable(self, net):
        """Whether a clean epoch arriving now could still be restored: one of the last
        ``_STALL_FACTOR * patience`` epochs (at the stall, every epoch since the best
        one) is judged within ``_CLEAN_SLACK`` of the best epoch. When the model keeps
        overfitting while trees die, the clean model that would end the wait is stale
        before it exists. The whole stall is read, not a shorter window, which would
        take a small validation set's epoch-to-epoch noise for overfitting."""
        recent = min(self.judged_)
        return recent <= _within_slack(self.any_.best_loss_)

    def on_epoch_end(self, net, **kwargs):
        with torch.no_grad():
            penalty = float(induced_penalty(net.module_))
        net.history.record(self.monitor, net.history[-1, "valid_loss"] + net.lam * penalty)
        self.any_.on_epoch_end(net, **kwargs)
        self.judged_.append(self.any_.judged())
        with torch.no_grad():
            layer_norms = [n.double() for n in group_norms(net.module_).values()]
        self.norms_.append(torch.cat(layer_norms).numpy())
        net.history.record("largest_tree", float(self.norms_[-1].max()))
        self.largest_ = max(self.largest_, net.history[-1, "largest_tree"])
        transit = self._in_transit(layer_norms)
        self.ends_clean_ = not transit.any()
        if self.ends_clean_:  # a candidate (and the patience count of its support)
            support = torch.cat([n >= self.zero_tol for n in layer_norms])
            if self.support_ is None or not torch.equal(support, self.support_):
                self.support_, self.best_loss_, self.misses_ = support, float("inf"), 0
                self.forget()  # average (and judge) only epochs with this support
            super().on_epoch_end(net, **kwargs)
        if self.any_.misses_ >= _STALL_FACTOR * self.patience and not self.ends_clean_:
            # (a clean epoch's support ends training by its own patience, above: a
            # support just reached gets as many epochs to validate as the others had)
            epochs_left = (getattr(net, "max_epochs", None) or np.inf) - len(net.history)
            if not (self._restorable(net) and self._clean_in_time(transit, epochs_left)):
                raise StopTraining  # nothing improves any more, nor will the gap in time

    def on_train_end(self, net, **kwargs):
        stale = self.best_loss_ > _within_slack(self.any_.best_loss_)
        if self.best_state_ is None or stale:  # no (good) clean epoch: the best of all
            self.best_state_, self.best_epoch_ = self.any_.best_state_, self.any_.best_epoch_
        super().on_train_end(net, **kwargs)
