"""Slicing layers: a segment's removable units taken out of its producer, the batch norms
between and its consumer, with the constants of units without inputs folded into the
consumer's bias."""

from __future__ import annotations

import torch
from torch import nn


def _constant_through(fn, values, shape):
    """Per-channel constants ``values`` mapped by a per-channel operation ``fn`` (input
    shape ``shape``, one sample): the new constants, NaN where the output is not constant
    over space."""
    x = values.reshape(1, -1, *([1] * (len(shape) - 1))).expand(1, *shape).clone()
    with torch.no_grad():
        out = fn(x)[0]
    flat = out.reshape(out.shape[0], -1)
    constant = (flat == flat[:, :1]).all(dim=1)
    return torch.where(constant, flat[:, 0], torch.full_like(flat[:, 0], float("nan")))


def _slice_inputs(layer, keep, n_in):
    weight = layer.weight.data
    layer.weight = nn.Parameter(weight[:, keep].clone())
    if isinstance(layer, nn.Linear):
        layer.in_features = len(keep)
    else:
        layer.in_channels = len(keep)


def _slice_outputs(layer, keep):
    layer.weight = nn.Parameter(layer.weight.data[keep].clone())
    if layer.bias is not None:
        layer.bias = nn.Parameter(layer.bias.data[keep].clone())
    if isinstance(layer, nn.Linear):
        layer.out_features = len(keep)
    else:
        layer.out_channels = len(keep)


def _slice_channels(layer, keep):
    """Per-channel parameters and buffers of a batch norm, sliced to ``keep``."""
    if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
        for name in ("weight", "bias"):
            p = getattr(layer, name)
            if p is not None:
                setattr(layer, name, nn.Parameter(p.data[keep].clone()))
        for name in ("running_mean", "running_var"):
            buf = getattr(layer, name)
            if buf is not None:
                setattr(layer, name, buf[keep].clone())
        layer.num_features = len(keep)


def _compact_segment(producer, consumer, seg):
    """Remove the removable output units of ``producer`` (read by ``consumer`` as
    ``seg`` describes); returns the kept units and whether the one unit kept of a layer
    whose units all went had its incoming weights zeroed."""
    n = producer.weight.shape[0]
    w = consumer.weight.data
    lo, hi = seg.offset, seg.offset + n * seg.block
    zeroed = False
    if hi > w.shape[1]:
        return list(range(n)), zeroed
    # the consumer's weights per producer unit: (n, out, block)
    if isinstance(consumer, nn.Conv2d):
        blocks = w[:, lo:hi].transpose(0, 1).reshape(n, w.shape[0], -1)
    else:
        blocks = w[:, lo:hi].reshape(w.shape[0], n, seg.block).transpose(0, 1)
    # constants emitted by units with all-zero incoming weights, mapped to the consumer
    incoming = producer.weight.data.reshape(n, -1)
    bias = producer.bias.data if producer.bias is not None else torch.zeros(n)
    dead_in = incoming.abs().sum(dim=1) == 0
    nan = torch.full((n,), float("nan"), dtype=incoming.dtype)
    const = torch.where(dead_in, bias.to(incoming.dtype), nan)
    for fn, shape, _ in seg.channel_ops:
        const = _constant_through(fn, const, shape)
    for fn in seg.elementwise_after:
        const = fn(const.reshape(1, -1))[0]
    foldable = ~torch.isnan(const)
    if isinstance(consumer, nn.Conv2d):
        padded = consumer.padding == "same" or any(p != 0 for p in _pair(consumer.padding))
        if padded:  # a constant channel is not constant at a zero-padded border
            foldable &= const == 0
    dead_out = blocks.reshape(n, -1).abs().sum(dim=1) == 0
    if bool((dead_out | foldable).all()):
        # every unit goes: keep unit 0 (layers of width 0 do not run); when nothing reads
        # it, its incoming weights and bias are zeroed (its output still goes nowhere),
        # so that the layers feeding it lose their readers too: a dead branch shrinks
        # to one unit per layer
        if dead_out[0] and bool(incoming[0].any() or bias[0] != 0):
            producer.weight.data[0] = 0
            if producer.bias is not None:
                producer.bias.data[0] = 0
            zeroed = True
        foldable[0] = dead_out[0] = False
    fold = foldable & ~dead_out
    if bool(fold.any()):
        shift = (const[fold][:, None] * blocks[fold].sum(dim=2)).sum(dim=0)
        if consumer.bias is None:
            consumer.bias = nn.Parameter(torch.zeros_like(shift))
        consumer.bias.data.add_(shift.to(consumer.bias.dtype))
    keep = (~(dead_out | foldable)).nonzero().flatten()
    _slice_outputs(producer, keep)
    for _, _, module in seg.channel_ops:
        if module is not None:
            _slice_channels(module, keep)
    if isinstance(consumer, nn.Conv2d):
        consumer.weight = nn.Parameter(torch.cat([w[:, :lo], w[:, lo + keep], w[:, hi:]], 1))
        consumer.in_channels = consumer.weight.shape[1]
    else:
        cols = blocks[keep].transpose(0, 1).reshape(w.shape[0], -1)
        consumer.weight = nn.Parameter(torch.cat([w[:, :lo], cols, w[:, hi:]], dim=1))
        consumer.in_features = consumer.weight.shape[1]
    return keep.tolist(), zeroed


def _pair(value):
    return value if isinstance(value, tuple) else (value, value)
