"""Removing groups in transit to zero at once, when the objective does not need them.

At a small ``lam`` a group the data do not support shrinks by a factor of about
``1 - lr * lam`` per step: thousands of steps to reach zero, through which the rest of
the model has long settled. Zero is a resting point of a D-gated group (every factor's
gradient carries the product of the others), so setting all its factors to zero at once
is a jump to where training was going, and it is kept only if the training objective
(data term plus penalty, on all the training rows) does not rise.

Two rules use that one test: the automatic budget's :class:`~.schedule.StopWhenSettled`
during training (:func:`drop_if_no_worse`), and, at the end of a fit with a fixed
``max_epochs``, :class:`DropInTransitAtEnd`, which asks it for the longest run of the
shrinking groups, smallest first, in which each group's own drop does not raise the
objective and the run leaves the data term where training would not notice
(:func:`drop_smallest_first`).
"""

from __future__ import annotations

import numpy as np
import torch
from skorch.callbacks import Callback

from ..sparsifiers import can_drop, drop_groups_, group_norms, sparsified_tensors
from .signals import ending_width, plateau_tolerance, still_falling

__all__ = [
    "DropInTransitAtEnd",
    "drop_if_no_worse",
    "drop_smallest_first",
    "refresh_running_stats",
]

#: Most drops :func:`drop_smallest_first` tries (each one pass over the training rows
#: without gradients): a bisection on the length of the run of candidates, so 8 tries
#: settle the length to one group among up to 127.
MAX_TRIES = 8


#: Rows per forward pass of the objective a drop is judged by, where no layer uses batch
#: statistics: four default batches (each pass has a fixed cost per batch).
OBJECTIVE_ROWS = 256


def _devices(module):
    return sorted({p.device.index for p in module.parameters() if p.is_cuda})


def _seed(devices):
    """Seed the generators of ``devices`` (inside a fork): the CPU's alone where no GPU is
    used (``torch.manual_seed`` also queues a seed for every lazy accelerator backend,
    recording a stack trace each time: most of the cost of a drop on a small model)."""
    if devices:
        torch.manual_seed(0)
    else:
        torch.default_generator.manual_seed(0)


def _terms(net, dataset, devices):
    """``(objective, data term)`` of the training objective, with dropout masks drawn
    from a fixed seed: every evaluation of a drop sees the same masks, and training's
    random stream is left as it was. Over batches of at least ``OBJECTIVE_ROWS`` rows
    where no layer normalizes by batch statistics (the same value up to rounding and
    dropout masks, in fewer passes through the module); over the training batches
    otherwise."""
    batch_size = None
    if not _running_stats_modules(net.module_):
        batch_size = max(OBJECTIVE_ROWS, net.batch_size or 0)
    with torch.random.fork_rng(devices=devices):
        _seed(devices)
        data, penalized = net.training_terms(dataset, batch_size)
    return data + penalized, data


def _objective(net, dataset, devices):
    """The training objective of :func:`_terms`."""
    return _terms(net, dataset, devices)[0]


def _try_drop(net, dataset, drop, before, devices):
    """Drop ``drop`` if the objective stays at most ``before``: ``(kept, objective of
    the module as it is left)``."""
    saved = {id(p): p.detach().clone() for p in net.module_.parameters()}
    touched = drop_groups_(net.module_, drop)
    if touched is None:
        return False, before
    after = _objective(net, dataset, devices)
    if not after <= before:
        for tensor, _ in touched:  # what the drop changed, back as it was
            tensor.copy_(saved[id(tensor)])
        return False, before
    for tensor, keep in touched:
        for value in net.optimizer_.state.get(tensor, {}).values():
            if torch.is_tensor(value) and value.shape == tensor.shape:
                value.mul_(keep)
    return True, after


@torch.no_grad()
def drop_if_no_worse(net, dataset, drop):
    """Set the groups ``drop`` of ``net``'s module to zero if that does not raise the
    training objective on ``dataset``; whether it did.

    Parameters
    ----------
    net : PenalizedNet
        Initialized and training.
    dataset : Dataset
        The training rows.
    drop : dict of str to bool ndarray of shape (J,)
        Per sparsified tensor, the candidate groups (all dropped, or none).

    Returns
    -------
    dropped : bool
        False also when a tensor's method cannot drop a group (nothing is changed).
        When True, the optimizer's state of every changed factor (momentum, moment
        estimates) is zero where the groups were: no step moves them off zero.
    """
    devices = _devices(net.module_)
    before = _objective(net, dataset, devices)
    return _try_drop(net, dataset, drop, before, devices)[0]


def _masks(candidates, norms):
    """``{tensor: bool mask}`` of the ``(tensor, group)`` pairs ``candidates``."""
    drop = {}
    for key, j in candidates:
        drop.setdefault(key, np.zeros(len(norms[key]), dtype=bool))[j] = True
    return drop


def _terms_without(net, dataset, drop, devices):
    """``(objective, data term)`` with the groups ``drop`` at zero; the module is left
    as it was (None when a tensor's method cannot drop a group)."""
    saved = {id(p): p.detach().clone() for p in net.module_.parameters()}
    touched = drop_groups_(net.module_, drop)
    if touched is None:
        return None
    value = _terms(net, dataset, devices)
    for tensor, _ in touched:
        tensor.copy_(saved[id(tensor)])
    return value


@torch.no_grad()
def drop_smallest_first(net, dataset, candidates, max_tries=MAX_TRIES, data_tolerance=np.inf):
    """Drop the longest run ``candidates[:k]`` in which every group pays for its own
    drop: the objective on ``dataset`` with ``candidates[:k]`` at zero is at most the
    one with ``candidates[:k-1]`` at zero, and at most the objective before, and the
    data term at most ``data_tolerance`` above the one before; ``k``.

    The test is at the margin, group by group, not on the run's total: a run's total
    lets the penalty that many unneeded groups save pay for a needed group dropped with
    them, a jump to a sparser model than training was going to (nothing is retrained
    after the drop). The run is found by bisection on ``k`` (all candidates first, then
    half of what lies between the longest run that passed and the shortest that
    failed), each try two passes over the rows (``candidates[:k-1]`` and
    ``candidates[:k]`` at zero): smallest first, a group's share of the penalty falls
    and its share of the fit grows along the run, so the test passes up to a point.

    Parameters
    ----------
    net : PenalizedNet
        Initialized.
    dataset : Dataset
        The training rows.
    candidates : list of (str, int)
        Sparsified tensor (as :func:`~sksparse_nn.sparsifiers.group_norms` keys it)
        and group, in the order to drop them (the smallest first).
    max_tries : int, default=MAX_TRIES
        Most runs tried.
    data_tolerance : float, default=inf
        Most the data term may rise: a drop that changes the fit visibly is not made,
        however much penalty it saves.

    Returns
    -------
    k : int
    """
    if not candidates:
        return 0
    module = net.module_
    devices = _devices(module)
    norms = {k: v.cpu().numpy() for k, v in group_norms(module).items()}
    before, data_before = _terms(net, dataset, devices)
    values = {0: (before, data_before)}  # (objective, data term), candidates[:k] at zero

    def value(k):
        if k not in values:
            values[k] = _terms_without(net, dataset, _masks(candidates[:k], norms), devices)
        return values[k]

    def passes(last, prior):
        if last is None or prior is None:
            return False
        (objective, data), (prior_objective, _) = last, prior
        return objective <= min(prior_objective, before) and data - data_before <= data_tolerance

    passed, failed = 0, len(candidates) + 1
    for _ in range(max_tries):
        if failed - passed <= 1:
            break
        k = len(candidates) if failed > len(candidates) else (passed + failed) // 2
        if passes(value(k), value(k - 1)):
            passed = k
        else:
            failed = k
    if not passed:
        return 0
    dropped, _ = _try_drop(net, dataset, _masks(candidates[:passed], norms), before, devices)
    return passed if dropped else 0


def _running_stats_modules(module):
    return [
        m
        for m in module.modules()
        if getattr(m, "track_running_stats", False) and hasattr(m, "reset_running_stats")
    ]


@torch.no_grad()
def refresh_running_stats(net, dataset):
    """Recompute the running statistics of ``net``'s normalization layers (BatchNorm)
    over one pass of ``dataset`` in training mode, as the mean over its batches: after
    a drop at the end of training, the statistics of the layers behind the dropped
    channels describe the model before it. The module's mode is left as it was; the
    random stream (dropout) is forked and seeded, as for the objective."""
    module = net.module_
    layers = _running_stats_modules(module)
    if not layers:
        return
    was_training = module.training
    momenta = [m.momentum for m in layers]
    try:
        devices = _devices(module)
        with torch.random.fork_rng(devices=devices):
            _seed(devices)
            for m in layers:
                m.reset_running_stats()
                m.momentum = None  # a cumulative mean over the pass
            module.train()
            for Xi, _ in net.get_iterator(dataset, training=False):
                net.infer(Xi)
    finally:
        for m, momentum in zip(layers, momenta, strict=True):
            m.momentum = momentum
        module.train(was_training)


class DropInTransitAtEnd(Callback):
    """At the end of a fit with a fixed budget, drop the groups still on their way to
    zero, smallest first, as far as the training objective does not rise and the fit
    does not notice.

    A fixed ``max_epochs`` can end while groups the data do not support are still
    shrinking (at a rate proportional to the learning rate, which a cosine plan takes to
    zero at the end): they count as selected, however small. The candidates are the
    selected groups whose norm fell from the epoch three quarters into the budget to the
    end (the :class:`~.guards.ConvergenceMonitor`'s window; by any amount: the last
    quarter of a cosine plan holds 2.5% of its steps' summed rate, over which a group in
    transit falls by a few percent, and the objective is the judge), in the order of
    their norm relative to the largest group of their tensor (a tie's groups once, by
    their norm over all its tensors); :func:`drop_smallest_first` keeps the longest run
    of them in which each group's own drop does not raise the training objective
    (nothing is retrained after the drop, so a group the fit needs must not go because
    the others' penalty pays for it) and the run's data term rises by no more than the
    loss may move on a plateau (:func:`~.signals.plateau_tolerance`): a group the
    model still uses is not in transit as far as this budget can tell, and dropping it
    would trade the fit for the penalty it saves; it stays, and the sparsity gap lists
    it among the live groups. Normalization layers' running
    statistics are then recomputed over the training rows (:func:`refresh_running_stats`).

    Only when the rest of the fit is done: not while the training loss is still falling
    (:func:`~.signals.still_falling` over the last two tenths of the epochs, the
    ConvergenceMonitor's test, which then warns): a fit stopped early would lose groups
    it had not finished growing. Not with ``lam=0``, nor with a held-out validation split
    (the rows passed to fit include it, which no training decision may read), nor where
    a sparsifier cannot drop (:func:`~sksparse_nn.sparsifiers.can_drop`); not after a
    fit cut short before the window began.

    Parameters
    ----------
    max_epochs : int
        The budget.
    zero_tol : float
        Group norms below it count as zero (as in the fit's collapse).
    max_tries : int, default=MAX_TRIES
        Most drops tried (passes over the training rows).

    Attributes
    ----------
    dropped_ : dict of str to ndarray
        Per tensor (tie leaders only), the norms the dropped groups had (empty when none
        was dropped).
    live_min_ : float
        The smallest norm of a group left selected (inf when none), to compare with
        the largest of ``dropped_``.
    """

    def __init__(self, max_epochs, zero_tol, max_tries=MAX_TRIES):
        self.max_epochs, self.zero_tol, self.max_tries = max_epochs, zero_tol, max_tries

    @property
    def snapshot_epoch(self):
        """The epoch (1-based) whose group norms the end is compared with."""
        return max(1, (3 * self.max_epochs) // 4)

    def initialize(self):
        self.data_ = None
        self.snapshot_ = None
        self.dropped_ = {}
        self.live_min_ = np.inf
        return self

    def on_train_begin(self, net, X=None, **kwargs):
        self.initialize()
        usable = X is not None and net.lam and getattr(net, "train_split", None) is None
        if usable and can_drop(net.module_):
            self.data_ = X

    def on_epoch_end(self, net, **kwargs):
        if self.data_ is not None and len(net.history) == self.snapshot_epoch:
            self.snapshot_ = self._norms(net)

    def _norms(self, net):
        with torch.no_grad():
            return {k: v.cpu().double().numpy() for k, v in group_norms(net.module_).items()}

    def _candidates(self, norms, leaders):
        """``(tensor, group)`` of the leaders' selected groups whose norm fell since the
        snapshot, by norm relative to the largest group of their tensor."""
        ranked = []
        for key in leaders:
            now, then = norms[key], self.snapshot_[key]
            top = now.max(initial=0.0)
            for j in np.flatnonzero((now >= self.zero_tol) & (now < then)):
                ranked.append((now[j] / top, key, int(j)))
        return [(key, j) for _, key, j in sorted(ranked)]

    def on_train_end(self, net, **kwargs):
        if self.data_ is None or self.snapshot_ is None:
            return
        if len(net.history) <= self.snapshot_epoch:
            return
        losses = net.history[:, "train_loss"]
        if still_falling(losses, ending_width(len(losses)))[0]:
            return  # not done training, rather than groups left in transit (warned)
        norms = self._norms(net)
        leaders = [q for q, *_, s in sparsified_tensors(net.module_) if not s.tied]
        candidates = self._candidates(norms, leaders)
        # a jump the fit would notice is not made: the data term may rise by no more
        # than the loss moves on a plateau (a group the fit still uses stays, listed
        # live with its norm by the sparsity gap)
        tolerance = plateau_tolerance(losses)
        k = drop_smallest_first(net, self.data_, candidates, self.max_tries, tolerance)
        if not k:
            return
        for key, j in candidates[:k]:
            self.dropped_.setdefault(key, []).append(norms[key][j])
        self.dropped_ = {key: np.array(v) for key, v in self.dropped_.items()}
        after = self._norms(net)
        live = [after[key][after[key] >= self.zero_tol] for key in leaders]
        self.live_min_ = float(np.concatenate([*live, [np.inf]]).min())
        refresh_running_stats(net, self.data_)
