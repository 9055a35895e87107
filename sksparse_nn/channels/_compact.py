"""Removing dead channel groups everywhere they appear: producers' filters and biases,
batch norms' parameters and statistics, depthwise filters, readers' input slices."""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.fx
from torch import nn

from ..compaction import CompactionReport, count_flops, count_parameters
from ._groups import channel_groups
from ._trace import CONVS, NORMS, trace

__all__ = ["compact_channels"]

_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Linear)


def _dead_groups(model, groups, example_input):
    """Groups whose penalized slices are all exactly zero and whose channels are exactly
    zero wherever the trace sees them (an activation with ``f(0) != 0`` keeps them)."""
    n = groups.n_groups
    live = np.zeros(n, dtype=bool)
    for name, t in groups.gated().items():
        data = model.get_parameter(name).detach()
        moved = data.movedim(t.dim, 0).reshape(data.shape[t.dim], -1)
        nonzero = (moved != 0).any(dim=1).numpy()
        live[np.unique(t.labels[nonzero & (t.labels >= 0)])] = True
    if live.all():
        return ~live
    gm, _ = trace(model, example_input)
    labels = groups.node_labels
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    values = {}

    class _Probe(torch.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if node.name in labels and isinstance(out, torch.Tensor):
                values[node.name] = out.detach().movedim(1, 0).reshape(out.shape[1], -1)
            return out

    with torch.no_grad():
        _Probe(gm.eval()).run(*inputs)
    for name, value in values.items():
        lab = labels[name]
        nonzero = (value != 0).any(dim=1).numpy()
        live[np.unique(lab[nonzero & (lab >= 0)])] = True
    return ~live


def _keep_one(groups, dead):
    """Undo removals that would leave a tensor without slices (a layer of width 0): its
    first group stays (all zero: same outputs)."""
    changed = True
    while changed:
        changed = False
        for t in groups.tensors.values():
            if (t.labels < 0).any():
                continue
            if dead[t.labels].all():
                dead[t.labels[0]] = False
                changed = True
    return dead


def _slice(model, name, dim, keep):
    path, _, attr = name.rpartition(".")
    owner = model.get_submodule(path) if path else model
    value = getattr(owner, attr)
    index = torch.as_tensor(np.flatnonzero(keep), device=value.device)
    sliced = value.detach().index_select(dim, index).clone()
    if isinstance(value, nn.Parameter):
        setattr(owner, attr, nn.Parameter(sliced, requires_grad=value.requires_grad))
    else:
        owner.register_buffer(attr, sliced)


def _fix_sizes(model):
    for module in model.modules():
        if isinstance(module, CONVS):
            out, per_group = module.weight.shape[:2]
            if module.groups > 1 and module.groups == module.in_channels:  # depthwise
                module.groups = out
            module.out_channels, module.in_channels = out, per_group * module.groups
        elif isinstance(module, nn.Linear):
            module.out_features, module.in_features = module.weight.shape
        elif isinstance(module, NORMS):
            ref = module.weight if module.weight is not None else module.running_mean
            module.num_features = ref.shape[0]
        elif isinstance(module, nn.GroupNorm):  # whole groups of channels go (the trace)
            per = module.num_channels // module.num_groups
            module.num_channels = module.weight.shape[0]
            module.num_groups = module.num_channels // per
        elif isinstance(module, nn.PReLU):
            module.num_parameters = module.weight.shape[0]


def compact_channels(model, example_input):
    """A smaller copy of a (collapsed) module without its dead channel groups.

    The groups are those of :func:`channel_groups` for every ``Conv1d`` / ``Conv2d`` /
    ``Linear`` (layers whose channels cannot be followed are left as they are). A group
    goes when all its penalized slices (filters, biases, batch-norm scales and shifts)
    are exactly zero and its channels are exactly zero on ``example_input`` wherever the
    trace sees them: with zero filters, bias, scale and shift such a channel is zero for
    every input, so removing it everywhere (with the readers' input slices, running
    statistics and depthwise filters) leaves the outputs unchanged. A layer keeps at
    least one channel.

    Parameters
    ----------
    model : nn.Module
        With exact zeros, traceable by ``torch.fx``.
    example_input : tensor or tuple of tensors
        One batch.

    Returns
    -------
    compact : nn.Module
        A copy of ``model`` (same class and ``forward``) with smaller layers, in eval mode.
    report : CompactionReport
        ``kept_units``: the output channels each ``Conv`` / ``Linear`` keeps.
    """
    small = copy.deepcopy(model).eval()
    groups = channel_groups(small, example_input, layers=_LAYERS, strict=False)
    before = {
        name: m.weight.shape[0] for name, m in small.named_modules() if isinstance(m, _LAYERS)
    }
    params_before = count_parameters(small)
    flops_before = count_flops(small, example_input)
    dead = _keep_one(groups, _dead_groups(small, groups, example_input))
    kept_units = {name: list(range(n)) for name, n in before.items()}
    with torch.no_grad():
        for (name, _), t in groups.tensors.items():
            keep = (t.labels < 0) | ~dead[np.maximum(t.labels, 0)]
            if keep.all():
                continue
            _slice(small, name, t.dim, keep)
            layer = name.rpartition(".")[0]
            if t.dim == 0 and layer in kept_units and name.endswith(".weight"):
                kept_units[layer] = np.flatnonzero(keep).tolist()
    _fix_sizes(small)
    report = CompactionReport(
        params_before,
        count_parameters(small),
        flops_before,
        count_flops(small, example_input),
        kept_units,
        [],
    )
    return small.eval(), report
