"""When training stops: the learning-rate plan of a fit and the "settled" stopping rule.

A fit with the automatic budget (``max_epochs=None``) has a cap, long enough for a cold
start, and stops earlier once it is done:

- :class:`LRPlan` sets every optimizer parameter group's learning rate to its base rate
  times a factor per epoch: a linear warm-up (for warm starts: a path point starts at a
  sharp minimum of the previous lam, where the full rate can be unstable), then cosine
  decay over the cap, or constant; :meth:`LRPlan.anneal` switches to a short cosine
  from the current factor down to zero.
- :class:`StopWhenSettled` watches the training objective and the group norms once per
  epoch; when, over a window of epochs, the support (groups above ``zero_tol``) has not
  changed, no selected group is on its way to zero (:func:`in_transit`) and the objective
  has stopped falling (:func:`still_falling`), it asks the plan to anneal and ends
  training when the anneal is over.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import torch
from skorch.callbacks import Callback

from ..gating import group_norms
from ._training import StopTraining

__all__ = ["LRPlan", "StopWhenSettled", "in_transit", "still_falling"]

#: The objective is "still falling" when the last window lowered its mean by more than
#: this fraction of the fit's whole decrease so far (scale-free; SGD noise around a
#: plateau stays far below it) ...
STILL_FALLING = 1e-2
#: ... and by more than this fraction of its value (a warm start that begins at its
#: plateau has almost no "whole decrease").
FLAT = 1e-4
#: A group above ``zero_tol`` is "in transit" to zero when over a window its norm fell
#: below ``IN_TRANSIT`` times its value, or fell at all (by ``1 - SHRINKING``) while being
#: below ``TINY`` times the largest group of its tensor (a slow tail: no clean sparsity
#: gap).
IN_TRANSIT = 0.5
TINY = 1e-3
SHRINKING = 0.9
#: A fit has settled only when no selected group shrank by more than ``1 - STEADY`` over
#: the window (SGD noise moves a group at its equilibrium far less; a group that keeps
#: shrinking at this rate is on its way to zero, however slowly).
STEADY = 0.95


def still_falling(losses, width):
    """Whether the mean of the last ``width`` losses is clearly below the ``width`` before.

    Parameters
    ----------
    losses : array-like of float
        Training objective per epoch.
    width : int
        Epochs per window.

    Returns
    -------
    falling : bool
    before, recent : float
        Means of the two windows.
    """
    losses = np.asarray(losses, dtype=np.float64)
    recent, before = losses[-width:].mean(), losses[-2 * width : -width].mean()
    drop = before - recent
    falling = drop > STILL_FALLING * (losses[0] - recent) and drop > FLAT * abs(recent)
    return bool(falling), float(before), float(recent)


def in_transit(norms, before, zero_tol):
    """Mask of selected groups (norm >= ``zero_tol``) that are on their way to zero.

    Parameters
    ----------
    norms, before : ndarray of shape (n_groups,)
        Group norms of one tensor now and one window earlier.
    zero_tol : float

    Returns
    -------
    mask : ndarray of bool of shape (n_groups,)
    """
    norms, before = np.asarray(norms, np.float64), np.asarray(before, np.float64)
    tiny = norms < TINY * norms.max(initial=0.0)
    shrinking = (norms < SHRINKING * before) & (tiny | (norms < IN_TRANSIT * before))
    return (norms >= zero_tol) & shrinking


class LRPlan(Callback):
    """Learning rate of every parameter group = its base rate x a factor set per epoch.

    Parameters
    ----------
    max_epochs : int
        The cap; the cosine decays to zero over it.
    schedule : {"cosine", "constant"}
    warmup : int, default=0
        Epochs of linear warm-up (factor ``(e + 1) / (warmup + 1)`` in epoch ``e``).
    """

    def __init__(self, max_epochs, schedule="cosine", warmup=0):
        self.max_epochs, self.schedule, self.warmup = max_epochs, schedule, warmup

    def initialize(self):
        self.anneal_ = None  # (first epoch, length, starting factor) once annealing
        return self

    def on_train_begin(self, net, **kwargs):
        self.base_ = [group["lr"] for group in net.optimizer_.param_groups]
        self.anneal_ = None

    def factor(self, epoch):
        """The factor of epoch ``epoch`` (0-based)."""
        if self.anneal_ is not None:
            start, length, f0 = self.anneal_
            return f0 * 0.5 * (1.0 + math.cos(math.pi * min(epoch - start, length) / length))
        if epoch < self.warmup:
            return (epoch + 1) / (self.warmup + 1)
        if self.schedule == "constant":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * epoch / self.max_epochs))

    def anneal(self, epoch, length):
        """From epoch ``epoch`` on, decay the current factor to zero over ``length``."""
        if self.anneal_ is None:
            self.anneal_ = (epoch, max(1, length), self.factor(epoch))

    def annealed(self, epoch):
        """Whether an anneal started and has finished by the end of epoch ``epoch``."""
        return self.anneal_ is not None and epoch + 1 >= self.anneal_[0] + self.anneal_[1]

    def on_epoch_begin(self, net, **kwargs):
        factor = self.factor(len(net.history) - 1)
        for group, base in zip(net.optimizer_.param_groups, self.base_):
            group["lr"] = base * factor


class StopWhenSettled(Callback):
    """End a fit once its support, its selected groups and its objective have settled.

    Checked at the end of every epoch after the warm-up, over the last ``window`` epochs:
    the set of groups above ``zero_tol`` did not change, no selected group is
    :func:`in_transit` and the training objective is not :func:`still_falling`. Then the
    plan anneals the learning rate over ``anneal`` epochs (a cosine plan; a constant one
    stops at once) and training ends.

    Parameters
    ----------
    plan : LRPlan
    window : int
        Epochs the support must stay the same (and the length of the loss windows).
    zero_tol : float
        Group norms below it count as zero (as in the fit's collapse).
    anneal : int
        Epochs of the final anneal.
    """

    def __init__(self, plan, window, zero_tol, anneal):
        self.plan, self.window, self.zero_tol, self.anneal = plan, window, zero_tol, anneal

    def initialize(self):
        self.norms_ = deque(maxlen=self.window + 1)
        self.settled_epoch_ = None
        return self

    def on_train_begin(self, net, **kwargs):
        self.initialize()

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history) - 1
        if self.settled_epoch_ is not None:
            if self.plan.annealed(epoch):
                raise StopTraining
            return
        with torch.no_grad():
            norms = {k: v.detach().cpu().double().numpy() for k, v in group_norms(net.module_).items()}
        self.norms_.append(norms)
        if epoch + 1 < self.plan.warmup + 2 * self.window or len(self.norms_) <= self.window:
            return
        if self._settled(net.history[:, "train_loss"]):
            self.settled_epoch_ = epoch
            if self.plan.schedule == "constant":
                raise StopTraining
            self.plan.anneal(epoch + 1, self.anneal)

    def _settled(self, losses):
        first, last = self.norms_[0], self.norms_[-1]
        for key, norms in last.items():
            support = norms >= self.zero_tol
            if any(not np.array_equal(old[key] >= self.zero_tol, support) for old in self.norms_):
                return False
            if np.any(support & (norms < STEADY * first[key])):  # still shrinking
                return False
        losses = np.asarray(losses, dtype=np.float64)[self.plan.warmup :]
        return not still_falling(losses, self.window)[0]
