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
#: epochs just before it (at most this many in all, with the same live trees). Measured
#: in one run on the same training trajectories (benchmarks/node_defaults.py's tasks,
#: 3 splits): dense NODE's test RMSE 0.4-1.5% lower on all four tasks than restoring
#: the best epoch alone; the default sparse model from -0.9% (Friedman #1) to +2.1%
#: (diabetes, 35 validation rows), neutral on average. Restoring the average only when
#: its validation loss beats the best epoch's almost never does (that epoch's loss is
#: the minimum of noisy values, biased low), so the average is restored as it is.
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

    At every new best validation loss the restore point becomes the mean of the
    weights of that epoch and of up to ``window - 1`` epochs before it (those kept by
    :meth:`_remember`), a Polyak / stochastic-weight average at the best point (the
    NODE paper averages its last checkpoints too). A trained NODE's test error
    fluctuates from epoch to epoch with the Adam steps; the average of neighbouring
    epochs is a smoother, better model than any one of them.

    With ``smooth`` the epochs are compared by the mean validation value of the epochs
    averaged (the window), not by the last one's: the restored model is that average,
    and one epoch's value on a small validation set is mostly noise whose minimum is
    biased low. Dense NODE on scikit-learn's diabetes (25-35 validation rows) stopped
    at epoch 13 on a lucky third epoch (panel split 1: test RMSE 0.840 in units of y's
    sd); judged by the window's mean, 0.718. Measured in one run over the
    node_defaults tasks (3 splits) and the defaults panel's diabetes / red wine (4
    seeds), dense fits: diabetes 2.7% / 4.5% lower mean test RMSE, red wine level /
    2.4% lower, white wine 1.5% lower, Friedman #1 0.5% higher; default sparse fits
    (:class:`CleanEarlyStopping`, smoothed too): diabetes 2.8% / 4.9% lower, red wine
    level / 0.4% higher, white 0.3% and Friedman #1 0.6% lower, with fewer trees in
    transit (red wine's second split 46 -> 15 trees, Friedman #1's third 74 -> 47).
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

    It watches the validation *objective*, the validation loss plus ``lam`` times the
    penalty of the trees (history entry ``"valid_objective"``), the quantity the fit
    minimizes measured on held-out rows (LassoNet's paths stop on it too). On the loss
    alone, a warm-started path point whose first epoch validates best (the previous
    point's model, already overfitting) restored that epoch at every lam: a default
    path on 800 rows of white wine kept the same 83-116 trees from 0.1 to 385 times
    lam_max, and a lam above lam_max restored the first, untrained epoch of a cold fit
    (every tree kept, R^2 near 0) where the empty model is the answer.

    An epoch is a candidate for the best one only if its sparsity gap is clean: every
    tree is below ``DUST * zero_tol`` (dead: collapsing it to 0 removes only dust) or at
    least ``TINY`` times the largest tree of any epoch so far (live). Epochs with trees
    half-way to zero neither count towards ``patience`` nor can be restored, and when the set of
    live trees changes the search starts again: the restored model is the one with the
    fewest trees training reached, at its best validation objective. Plain early stopping
    would stop a sparse fit while unused trees are still shrinking (the validation loss
    no longer changes) and restore them "alive" at 1e-6, or restore an earlier epoch
    with more trees.

    The restored weights are the average of the best epoch and the clean epochs with
    the same live trees just before it (see the base class), and an epoch is judged by
    the mean validation objective of that window (``smooth``): a dead tree is below
    ``DUST * zero_tol`` in every averaged epoch, so also in the average.

    If no epoch was clean (trees kept dying until ``max_epochs``), or the best clean
    epoch validates more than ``_CLEAN_SLACK`` worse than the best epoch overall (a
    small ``lam`` shrinks unused trees so slowly that the only clean epochs are the
    first, nearly untrained ones; or the sparser model the penalty reached validates
    worse than an earlier, denser epoch), the best window of epochs of any support is
    restored, judged and averaged alike (its trees in transit show in the sparsity gap). The
    validation objective decides, as early stopping does: keeping the clean sparser model
    whatever it validated made default fits on 1,500 standardized rows of white / red
    wine with noise columns keep 24 / 25 trees at test RMSE 0.98 / 0.91 (in units of
    y's sd) where the best epoch's model (128 trees) had 0.86 / 0.74. Training also
    stops once no epoch, clean or not, has improved the validation objective for
    ``_STALL_FACTOR * patience`` epochs, unless trees are in transit and a clean gap is
    in reach (:meth:`_clean_in_time`: trees keep arriving below dust, or every one in
    transit gets there before ``max_epochs`` at its pace; and :meth:`_restorable`: a
    clean epoch arriving now would validate within the slack), or the last epoch is clean
    (its support then ends training by its own patience): the validation loss stops
    improving while unused trees die, and stopping then restored a model with trees in
    transit (red wine, default lam: 126 / 46 / 8 trees kept on three splits, the first
    two with no gap, largest removed 1e-7 next to smallest kept 2e-7); but a gap that
    cannot be clean in time is not waited for (at a small lam unused trees lose a few
    percent an epoch or stall: the dense end of a default path on 800 rows trained ~490
    epochs per point while its validation loss rose from 0.42 to 0.70, for a model
    still in transit).
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
        largest tree of the model in any epoch of this fit (every layer's trees feed the
        output at the same scale; per layer, the trees of a layer on its way out looked
        live next to each other; and at a lam too large for the data every tree shrinks
        alike, so the largest one now is no reference). An epoch is clean when there is
        none."""
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
        before it exists, and the best epoch is restored anyway (a default path on 800
        rows of white wine spent a fifth of its epochs so). The whole stall, not a
        shorter window: 128 validation rows of red wine move the objective by +-15% from
        epoch to epoch, and a window of ``patience`` epochs read that noise as
        overfitting (one default fit kept 46 trees in transit instead of reaching 8
        clean ones)."""
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
