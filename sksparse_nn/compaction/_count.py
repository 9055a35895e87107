"""Measuring a model's size: its parameters and the FLOPs of one sample's forward pass."""

from __future__ import annotations

import torch
from torch import nn

from ._attention import CompactAttention


def count_parameters(model):
    """Number of scalar parameters of ``model``.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    n_parameters : int
    """
    return int(sum(p.numel() for p in model.parameters()))


def count_flops(model, example_input):
    """FLOPs of one sample's forward pass through ``Linear``, ``Conv1d`` / ``Conv2d`` and
    attention.

    2 per multiply-add: ``Linear(i, o)``: ``2 i o`` per position; ``Conv2d``: ``2 (C_in /
    groups) k_h k_w C_out H_out W_out`` (``Conv1d`` likewise over its length);
    :class:`CompactAttention` and ``nn.MultiheadAttention``: their projections plus
    ``4 L S h d`` for the scores and the weighted sum (``h`` heads of width ``d``, ``L``
    queries, ``S`` keys). Element-wise layers, normalization and pooling are not counted.

    Parameters
    ----------
    model : nn.Module
    example_input : tensor or tuple of tensors
        One batch of inputs; the count is divided by its first axis.

    Returns
    -------
    flops : int
        Per sample.
    """
    total = [0]

    def linear(module, inputs, output):
        positions = output.numel() // output.shape[-1] if output.shape[-1] else 0
        total[0] += 2 * module.in_features * module.out_features * positions

    def conv(module, inputs, output):
        k = module.weight[0].numel()  # (C_in / groups) * k_h * k_w
        total[0] += 2 * k * output.numel()

    def attention(module, inputs, output):
        query, key = inputs[0], inputs[1]
        L, S = query.shape[-2], key.shape[-2]
        batch = query.numel() // (L * query.shape[-1])
        if isinstance(module, CompactAttention):  # its projections are Linear modules
            total[0] += batch * 4 * L * S * module.inner_dim
            return
        E = module.embed_dim  # nn.MultiheadAttention projects functionally: count them
        total[0] += batch * (4 * L * S * E + 2 * E * E * (2 * L + 2 * S))

    hooks = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(linear))
        elif isinstance(module, (nn.Conv1d, nn.Conv2d)):
            hooks.append(module.register_forward_hook(conv))
        elif isinstance(module, (nn.MultiheadAttention, CompactAttention)):
            hooks.append(module.register_forward_hook(attention))
    try:
        with torch.no_grad():
            if isinstance(example_input, tuple):
                model(*example_input)
                n = len(example_input[0])
            else:
                model(example_input)
                n = len(example_input)
    finally:
        for hook in hooks:
            hook.remove()
    return int(total[0] // n)
