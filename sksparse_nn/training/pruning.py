"""Removing groups in transit to zero at once, when the objective does not need them.

At a small ``lam`` a group the data do not support shrinks by a factor of about
``1 - lr * lam`` per step: thousands of steps to reach zero, through which the rest of
the model has long settled. Zero is a resting point of a D-gated group (every factor's
gradient carries the product of the others), so setting all its factors to zero at once
is a jump to where training was going, and it is kept only if the training objective
(data term plus penalty, on all the training rows) does not rise.
"""

from __future__ import annotations

import torch

from ..sparsifiers import drop_groups_

__all__ = ["drop_if_no_worse"]


def _objective(net, dataset, devices):
    """The training objective, with dropout masks drawn from a fixed seed: the two
    evaluations of :func:`drop_if_no_worse` see the same masks, and training's random
    stream is left as it was."""
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(0)
        return net.training_objective(dataset)


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
    module = net.module_
    devices = sorted({p.device.index for p in module.parameters() if p.is_cuda})
    saved = {k: v.clone() for k, v in module.state_dict().items()}
    before = _objective(net, dataset, devices)
    touched = drop_groups_(module, drop)
    if touched is None:
        return False
    if not _objective(net, dataset, devices) <= before:
        module.load_state_dict(saved)
        return False
    for tensor, keep in touched:
        for value in net.optimizer_.state.get(tensor, {}).values():
            if torch.is_tensor(value) and value.shape == tensor.shape:
                value.mul_(keep)
    return True
