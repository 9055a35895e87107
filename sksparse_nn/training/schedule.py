"""When training stops: the learning-rate plan of a fit and the "settled" stopping rule.

With the automatic budget (``max_epochs=None``) a fit has a cap long enough for a cold
start and stops earlier once it is done. :class:`LRPlan` sets every optimizer parameter
group's learning rate to its base rate times a factor per epoch (a warm-up, then cosine
decay or constant, with anneals and restarts on request); :class:`StopWhenSettled` asks
it to anneal once the support, the selected groups and the objective have stopped moving
beyond mini-batch noise, and ends training when the anneal is over.
"""

from __future__ import annotations

import copy
import math
from collections import deque

import numpy as np
import torch
from skorch.callbacks import Callback

from ..sparsifiers import can_drop, group_norms
from ..utils.convergence import warn_convergence
from .net import StopTraining
from .pruning import drop_if_no_worse
from .signals import (
    IN_TRANSIT,
    TINY,
    on_plateau,
    still_shrinking,
)

__all__ = ["LRPlan", "StopWhenSettled"]

#: An epoch's training loss this many times the median of the window before it ends a
#: held learning rate (halved at once, then annealed to a stop): mini-batch noise moves
#: a settled loss by a fraction of itself, a blow-up by orders of magnitude.
SPIKE = 3.0
#: Returns of a warm start to where it began (at half the rate each time) after its
#: loss rose over ``SPIKE`` times the start's objective or spiked.
RESTARTS = 2


class LRPlan(Callback):
    """Learning rate of every parameter group = its base rate x a factor set per epoch.

    Parameters
    ----------
    max_epochs : int
        The cap; the cosine decays to zero over it.
    schedule : {"cosine", "constant"}, default="cosine"
        The factor after the warm-up: a cosine decay to zero, or 1.
    warmup : int, default=0
        Epochs of linear warm-up (factor ``(e + 1) / (warmup + 1)`` in epoch ``e``): a
        warm start begins at a sharp minimum of the previous lam, where the full rate can
        be unstable.
    scale : float, default=1.0
        The base rates are ``scale`` times the optimizer's (``lr`` and the factors' step
        sizes): a warm start continues at the share of them its predecessor ended at
        (halved by each :meth:`restart`; ``scale_`` holds it).
    hold : int, default=0
        With ``"cosine"``: epochs at the full rate (after the warm-up) before the cosine,
        which then decays to zero over the rest of the cap. A group on its way to zero
        shrinks at a rate proportional to the learning rate, so under a cosine over the
        whole cap it can stall just above ``zero_tol``; warm starts with the automatic
        budget, and cold fits of families whose traits set ``hold_cold_rate``, hold the rate and
        end with the settled rule's anneal instead.
    """

    def __init__(self, max_epochs, schedule="cosine", warmup=0, hold=0, scale=1.0):
        self.max_epochs, self.schedule, self.warmup = max_epochs, schedule, warmup
        self.hold = hold
        self.scale = scale

    def initialize(self):
        self.segment_ = None  # (first epoch, length, from, to, shape) overriding the plan
        self.scale_ = self.scale  # the base rates' share of the optimizer's rates
        return self

    def on_train_begin(self, net, **kwargs):
        self.scale_ = self.scale
        self.base_ = [self.scale * group["lr"] for group in net.optimizer_.param_groups]
        self.segment_ = None

    def factor(self, epoch):
        """The factor of epoch ``epoch`` (0-based)."""
        segment = self.segment_
        if segment is not None and not (segment[4] == "linear" and epoch >= sum(segment[:2])):
            start, length, f0, f1, shape = segment
            t = min(epoch - start, length) / length
            weight = 0.5 * (1.0 - math.cos(math.pi * t)) if shape == "cosine" else t
            return f0 + (f1 - f0) * weight
        return self._scheduled(epoch)

    def _scheduled(self, epoch):
        """The plan's own factor: warm-up, then constant, or cosine after ``hold``."""
        if epoch < self.warmup:
            return (epoch + 1) / (self.warmup + 1)
        if self.schedule == "constant" or epoch < self.hold:
            return 1.0
        t = (epoch - self.hold) / max(1, self.max_epochs - self.hold)
        return 0.5 * (1.0 + math.cos(math.pi * t))

    def anneal(self, epoch, length, scale=1.0):
        """From epoch ``epoch`` on, decay ``scale`` times the current factor to zero over
        ``length`` (cosine-shaped). A running anneal is kept, unless ``scale < 1`` (a
        cut of the rate, which always applies)."""
        if scale < 1.0 or not self.annealing:
            start = scale * self.factor(epoch)
            self.segment_ = (epoch, max(1, length), start, 0.0, "cosine")

    def resume(self, epoch, length):
        """Cancel an anneal: from epoch ``epoch`` on, ramp the current factor linearly
        back to the plan's own over ``length`` epochs (a warm-up from where the anneal had
        got to), then follow the plan again."""
        length = max(1, length)
        target = self._scheduled(epoch + length)
        self.segment_ = (epoch, length, self.factor(epoch), target, "linear")

    def restart(self, epoch, length):
        """Halve every base rate and, from epoch ``epoch`` on, warm up to it again over
        ``length`` epochs (a warm start restored to where it began after its loss rose:
        see :class:`StopWhenSettled`)."""
        self.base_ = [0.5 * base for base in self.base_]
        self.scale_ *= 0.5
        length = max(1, length)
        target = self._scheduled(epoch + length)
        self.segment_ = (epoch, length, target / (length + 1), target, "linear")

    @property
    def annealing(self):
        """Whether an anneal has been asked for (and not cancelled)."""
        return self.segment_ is not None and self.segment_[3] == 0.0

    def annealed(self, epoch):
        """Whether an anneal started and has finished by the end of epoch ``epoch``."""
        return self.annealing and epoch + 1 >= self.segment_[0] + self.segment_[1]

    def on_epoch_begin(self, net, **kwargs):
        factor = self.factor(len(net.history) - 1)
        for group, base in zip(net.optimizer_.param_groups, self.base_, strict=True):
            group["lr"] = base * factor


class StopWhenSettled(Callback):
    """End a fit once its support, its selected groups and its objective have settled.

    Checked at the end of every epoch after the warm-up: over the last ``window`` epochs
    the set of groups above ``zero_tol`` did not change, and between the last two windows
    no selected group is :func:`still_shrinking` and the training objective is
    :func:`on_plateau` (both beyond mini-batch noise; with ``watch_transit=False`` the
    shrinking groups are not waited for). Then the plan anneals the learning
    rate over ``anneal`` epochs and training ends (a constant plan stops at once). Should
    a selected group start to collapse during the anneal (leave the support, halve, or
    turn tiny), the fit had not settled: the plan ramps back to where it was and the
    watch starts again.

    With ``nonconvex=True`` (D > 2) a selected group below ``TINY`` times the largest
    of its tensor has not settled either: the penalty ``||w||^(2/D)`` has an infinite
    slope at 0, so its local minima keep every non-zero group away from 0, and a tiny
    group is one still on its way there, however slowly.

    Parameters
    ----------
    plan : LRPlan
    window : int
        Epochs the support must stay the same (and the length of the loss windows).
    zero_tol : float
        Group norms below it count as zero (as in the fit's collapse).
    anneal : int
        Epochs of the final anneal.
    nonconvex : bool, default=False
        Whether the induced penalty is non-convex (D > 2).
    recover : int, default=None
        Epochs of the anneal after a loss spike (``anneal`` when None): long enough for
        the halved rate to bring the loss back down before training ends. Should the
        loss still be above ``SPIKE`` times its level before the jump when it ends, a
        ConvergenceWarning says the model is not a minimum.
    restore : bool, default=False
        A warm start (from a previous fit's model): when an epoch's training objective
        is over ``SPIKE`` times the objective at the start, or spikes, the module goes
        back to the start, the base rates are halved and warmed up to again, and the
        watch starts over, up to ``RESTARTS`` times; then a spike anneals to a stop as
        above. A warm start begins at a minimum of the previous lam, where the rate that
        got there can be unstable; the model a blow-up leaves is never kept.
    ramp : int, default=None
        Epochs of the warm-up after a restart (the plan's warm-up when None): longer and
        gentler than a warm start's first, whose abrupt step to the full rate is what
        breaks.
    earliest : int, default=0
        Epochs before which the fit never counts as settled (nor is checked for loss
        spikes). For a cold start: from a random init, training can rest on a plateau
        for hundreds of steps before it finds the rest of the signal.
    watch_transit : bool, default=True
        Whether a selected group still on its way to zero (:meth:`_in_transit`) keeps
        the fit from settling. False: the objective on a plateau and the support the
        same over the last window settle it, groups in transit left where they are (they
        are still dropped as they go), for models that are only scored, such as a CV
        fold's.
    drop_in_transit : bool, default=True
        Once the objective is on a plateau and the fit has not settled only because
        groups are still shrinking (or, non-convex, tiny), those groups are set to zero
        at once if the training objective does not rise
        (:func:`~sksparse_nn.training.pruning.drop_if_no_worse`), tried at most once a
        ``window``: at a small lam a group the data do not need shrinks by a factor of
        about ``1 - lr * lam`` per step, thousands of steps. Not with a held-out validation
        split (the rows passed to fit include it), nor where a sparsifier cannot drop
        (:func:`~sksparse_nn.sparsifiers.can_drop`).
    """

    def __init__(
        self,
        plan,
        window,
        zero_tol,
        anneal,
        nonconvex=False,
        recover=None,
        restore=False,
        ramp=None,
        earliest=0,
        watch_transit=True,
        drop_in_transit=True,
    ):
        self.plan, self.window, self.zero_tol, self.anneal = plan, window, zero_tol, anneal
        self.nonconvex = nonconvex
        self.recover = recover
        self.restore = restore
        self.ramp = ramp
        self.earliest = earliest
        self.watch_transit = watch_transit
        self.drop_in_transit = drop_in_transit

    def initialize(self):
        self.norms_ = deque(maxlen=2 * self.window)
        self.settled_ = None  # the group norms when the fit looked settled
        self.resumed_ = 0  # anneals cancelled because a group started to collapse
        self.spiked_ = False  # the loss jumped: annealing to a stop
        self.spike_ = None  # (epoch, loss before the jump, loss at the jump)
        self.start_ = None  # (module state, training objective) at a warm start
        self.restarts_ = 0  # returns to the start after the loss rose
        self.origin_ = 0  # the first epoch of the current attempt
        # the training objective per epoch, kept as it comes: reading the whole column
        # from skorch's history every epoch would make this callback quadratic in epochs
        self.losses_ = []
        self.data_ = None  # the training rows (to judge a drop of groups in transit)
        self.next_drop_ = 0  # the first epoch a drop may be tried again
        return self

    def on_train_begin(self, net, X=None, **kwargs):
        self.initialize()
        # epochs of an earlier call on the same net keep their places (epoch numbers
        # index this list)
        self.losses_ = [row.get("train_loss", np.nan) for row in net.history]
        if self.restore and X is not None:
            state = copy.deepcopy(net.module_.state_dict())
            self.start_ = (state, net.training_objective(X))
        # the objective a drop is judged by is on the rows passed to fit: with a held-out
        # split those include the validation rows, which no training decision may read
        if self.drop_in_transit and X is not None and getattr(net, "train_split", None) is None:
            self.data_ = X if can_drop(net.module_) else None

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history) - 1
        self.losses_.append(net.history[-1, "train_loss"])
        losses = self.losses_
        if self.spiked_:
            if self.plan.annealed(epoch):
                self._warn_unrecovered(losses[-1])
                raise StopTraining
            return
        spike = self._spike(losses)
        if self.start_ is not None and self.restarts_ < RESTARTS:
            if spike or losses[-1] > SPIKE * self.start_[1]:
                self._restart(net, epoch)
                return
        if spike:
            # the held rate has become too large for where training is (the loss jumped
            # far above its recent level): halve it now and anneal, then stop; over
            # ``recover`` epochs, so that the halved rate brings the loss back down first
            self.spiked_ = True
            before = float(np.median(np.asarray(losses[-self.window - 1 : -1], dtype=float)))
            self.spike_ = (epoch, before, float(losses[-1]))
            length = self.anneal if self.recover is None else self.recover
            self.plan.anneal(epoch + 1, length, scale=0.5)
            return
        with torch.no_grad():
            norms = {k: v.cpu().double().numpy() for k, v in group_norms(net.module_).items()}
        if self.settled_ is not None:
            if self.plan.annealed(epoch):
                raise StopTraining
            if not self._collapsing(norms):
                return
            # a selected group started to collapse during the anneal: not settled after
            # all; back to the full rate (ramped) and watch again
            self.settled_, self.resumed_ = None, self.resumed_ + 1
            self.norms_.clear()
            self.plan.resume(epoch + 1, self.anneal)
        self.norms_.append(norms)
        first = self.origin_ + self._warmup()
        too_early = epoch + 1 < max(first + 2 * self.window, self.earliest)
        if too_early or len(self.norms_) < 2 * self.window:
            return
        if self._settled(losses):
            if self.plan.schedule == "constant":
                raise StopTraining
            self.settled_ = norms
            self.plan.anneal(epoch + 1, self.anneal)
        elif self.data_ is not None and epoch >= self.next_drop_:
            # groups in transit keep it from settling: dropped at once if the objective
            # does not need them (then the new support is watched from scratch)
            self._drop_in_transit(net, epoch, losses)

    def _drop_in_transit(self, net, epoch, losses):
        """Drop the groups in transit (shrinking or tiny) at once if the objective is
        on a plateau and does not rise; whether they were dropped."""
        losses = np.asarray(losses[self.origin_ + self._warmup() :], dtype=np.float64)
        if not on_plateau(losses, self.window, noise=True):
            return False
        drop = self._in_transit()
        if not drop:
            return False
        self.next_drop_ = epoch + self.window
        if not drop_if_no_worse(net, self.data_, drop):
            return False
        self.norms_.clear()
        return True

    def _in_transit(self):
        """Per tensor, the selected groups still shrinking over the last two windows
        (or, non-convex, tiny): groups on their way to zero, which keep a fit from
        settling (empty when there are none)."""
        history, last = list(self.norms_), self.norms_[-1]
        drop = {}
        for key, norms in last.items():
            support = norms >= self.zero_tol
            trajectory = np.stack([old[key][support] for old in history])
            mask = np.zeros_like(support)
            mask[np.flatnonzero(support)] = still_shrinking(trajectory, self.window, self.zero_tol)
            if self.nonconvex:
                mask |= support & (norms < TINY * norms.max(initial=0.0))
            if mask.any():
                drop[key] = mask
        return drop

    def _restart(self, net, epoch):
        """Back to the warm start's module, a fresh optimizer state (momentum), half the
        base rates warmed up to again, and a new watch."""
        net.module_.load_state_dict(self.start_[0])
        net.optimizer_.state.clear()
        self.restarts_ += 1
        self.origin_ = epoch + 1
        self.plan.restart(self.origin_, self._warmup())
        self.norms_.clear()
        self.settled_ = None

    def _warmup(self):
        """Epochs of the current attempt's warm-up: the plan's, or after a restart the
        ramp."""
        if not self.restarts_ or self.ramp is None:
            return self.plan.warmup
        return max(1, self.ramp)

    def _collapsing(self, norms):
        """Whether a group selected when the fit looked settled has since left the
        support, halved, or (non-convex) become tiny."""
        for key, now in norms.items():
            then = self.settled_[key]
            selected = then >= self.zero_tol
            if np.any(selected & ((now < self.zero_tol) | (now < IN_TRANSIT * then))):
                return True
            if self.nonconvex and np.any(selected & (now < TINY * now.max(initial=0.0))):
                return True
        return False

    def _warn_unrecovered(self, final):
        """A ConvergenceWarning when the anneal after a spike ends with the training loss
        still over ``SPIKE`` times its level before the jump."""
        epoch, before, jump = self.spike_
        if not final > SPIKE * before:
            return
        warn_convergence(
            f"The training loss jumped at epoch {epoch + 1} ({before:.3g} -> {jump:.3g}) "
            f"while the learning rate was held; the rate was halved and "
            f"annealed to a stop, and the loss ended at {final:.3g}, still far above its "
            "level before the jump: the model is not a minimum. Lower lr.",
            stacklevel=2,
        )

    def _spike(self, losses):
        """Whether, while the plan holds its rate, the last epoch's training loss is over
        ``SPIKE`` times the median of the ``window`` epochs before it (the held rate at
        the edge of stability). The first check is a window after the warm-up, and for
        a cold fit a window after ``earliest``: from a random init its early losses may
        jump while it finds its way."""
        epoch = len(losses) - 1
        first = max(self.origin_ + self._warmup(), self.earliest)
        if epoch >= self.plan.hold or len(losses) < first + self.window + 1:
            return False
        recent = np.asarray(losses[-self.window - 1 : -1], dtype=np.float64)
        return bool(losses[-1] > SPIKE * np.median(recent))

    def _settled(self, losses):
        """The support unchanged over the last window, (with ``watch_transit``) no group
        in transit (:meth:`_in_transit`) and the objective on a plateau."""
        recent, last = list(self.norms_)[-self.window - 1 :], self.norms_[-1]
        for key, norms in last.items():
            support = norms >= self.zero_tol
            if any(not np.array_equal(old[key] >= self.zero_tol, support) for old in recent):
                return False
        if self.watch_transit and self._in_transit():
            return False
        losses = np.asarray(losses[self.origin_ + self._warmup() :], dtype=np.float64)
        return on_plateau(losses, self.window, noise=True)
