"""Physically smaller models from structured zeros: neurons, filters and attention heads.

After training with a sparsifier and :func:`~sksparse_nn.sparsifiers.collapse`, whole
groups of weights are exactly zero, but the model still computes them.
:func:`compact_sequential` rebuilds a ``nn.Sequential`` of ``Linear`` / ``Conv2d`` layers
(with batch norm, element-wise activations, pooling, dropout and ``Flatten`` between
them) without the units that cannot change its output:

* a unit (neuron or filter) whose **outgoing** weights in the next ``Linear`` / ``Conv2d``
  are all zero;
* a unit whose **incoming** weights are all zero: it emits a constant (its bias, mapped
  through the batch norm and activation that follow), which is added to the next layer's
  bias instead, exactly (a ``Linear`` consumer, or a ``Conv2d`` without padding; behind a
  zero-padded convolution only a constant of exactly 0 can go, the others stay);
* an input column (feature or channel) of the first layer whose weights are all zero
  (reported as ``kept_inputs``; the compact model takes the kept ones only when
  ``drop_inputs=True``).

:func:`compact_attention` does the same for the heads of a ``nn.MultiheadAttention``.
:func:`count_parameters` and :func:`count_flops` measure what was gained. Pure PyTorch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "CompactAttention",
    "CompactionReport",
    "compact_attention",
    "compact_sequential",
    "count_flops",
    "count_parameters",
]

_PER_CHANNEL = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Softplus,
    nn.Identity,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
)


@dataclass
class CompactionReport:
    """What :func:`compact_sequential` removed and what it saved.

    Attributes
    ----------
    params_before, params_after : int
    flops_before, flops_after : int
        Floating-point operations of one sample's forward pass through the ``Linear`` and
        ``Conv2d`` layers (2 per multiply-add; see :func:`count_flops`).
    kept_units : dict of str to list of int
        For every ``Linear`` / ``Conv2d`` of the chain (by its name in the original model,
        e.g. ``"4.0"`` for the first layer of the block at index 4), the output units
        (neurons, filters) it keeps.
    kept_inputs : list of int
        Input columns / channels of the first layer with a non-zero weight.
    """

    params_before: int
    params_after: int
    flops_before: int
    flops_after: int
    kept_units: dict = field(default_factory=dict)
    kept_inputs: list = field(default_factory=list)

    def __str__(self):
        return (
            f"parameters {self.params_before} -> {self.params_after} "
            f"({self.params_after / max(self.params_before, 1):.1%}), FLOPs "
            f"{self.flops_before} -> {self.flops_after} "
            f"({self.flops_after / max(self.flops_before, 1):.1%})"
        )


def count_parameters(model):
    """Number of scalar parameters of ``model``."""
    return int(sum(p.numel() for p in model.parameters()))


def count_flops(model, example_input):
    """FLOPs of one sample's forward pass through ``Linear``, ``Conv2d`` and attention.

    2 per multiply-add: ``Linear(i, o)``: ``2 i o`` per position; ``Conv2d``: ``2 (C_in /
    groups) k_h k_w C_out H_out W_out``; :class:`CompactAttention` and
    ``nn.MultiheadAttention``: their projections plus ``4 L S h d`` for the scores and the
    weighted sum (``h`` heads of width ``d``, ``L`` queries, ``S`` keys). Element-wise
    layers, normalization and pooling are not counted. ``example_input`` is one batch
    (its first axis is divided out).
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
        elif isinstance(module, nn.Conv2d):
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


def _flatten(module, prefix=""):
    """``(qualified name, layer)`` of the leaves of nested ``Sequential`` blocks."""
    if isinstance(module, nn.Sequential):
        return [
            leaf
            for name, child in module.named_children()
            for leaf in _flatten(child, f"{prefix}.{name}" if prefix else name)
        ]
    return [(prefix, module)]


def _shapes(layers, example_input):
    """The input shape of every layer (one sample) for ``example_input``."""
    shapes, x = [], example_input
    with torch.no_grad():
        for layer in layers:
            shapes.append(tuple(x.shape[1:]))
            x = layer(x)
    return shapes


def _constant_through(layer, values, shape):
    """Per-channel constants ``values`` mapped by a per-channel ``layer`` (input shape
    ``shape``): the new constants, NaN where the output is not constant over space."""
    x = values.reshape(1, -1, *([1] * (len(shape) - 1))).expand(1, *shape).clone()
    with torch.no_grad():
        out = layer.eval()(x)[0]
    flat = out.reshape(out.shape[0], -1)
    constant = (flat == flat[:, :1]).all(dim=1)
    return torch.where(constant, flat[:, 0], torch.full_like(flat[:, 0], float("nan")))


def compact_sequential(model, example_input, *, drop_inputs=False):
    """A smaller copy of a (collapsed) ``nn.Sequential`` with the same outputs.

    Parameters
    ----------
    model : nn.Sequential
        ``Linear`` and ``Conv2d`` (``groups=1``) layers with per-channel layers
        (batch norm in eval mode, element-wise activations, pooling, dropout) and
        ``Flatten`` between them; nested ``Sequential`` blocks are flattened. Any other
        layer ends compaction across it (the units before it are kept).
    example_input : tensor
        One batch of inputs (shapes after ``Flatten`` are read from it).
    drop_inputs : bool, default=False
        Also drop the first layer's all-zero input columns / channels (the compact model
        then takes ``x[:, report.kept_inputs]``).

    Returns
    -------
    compact : nn.Sequential
        In eval mode; equal outputs up to float rounding.
    report : CompactionReport
    """
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"compact_sequential needs an nn.Sequential, got {type(model).__name__}.")
    was_training = model.training
    model.eval()
    try:
        named = _flatten(model)
        names = [name for name, _ in named]
        layers = [copy.deepcopy(layer) for _, layer in named]
        shapes = _shapes(layers, example_input)
        params_before = count_parameters(model)
        flops_before = count_flops(model, example_input)
    finally:
        model.train(was_training)
    producers = [i for i, layer in enumerate(layers) if isinstance(layer, (nn.Linear, nn.Conv2d))]
    for i in producers:
        layer = layers[i]
        if isinstance(layer, nn.Conv2d) and layer.groups != 1:
            raise ValueError(f"Layer {names[i]!r}: grouped convolutions are not supported.")
    kept_units = {}
    with torch.no_grad():
        for a, b in zip(producers, producers[1:] + [None], strict=True):
            kept_units[names[a]] = _compact_segment(layers, shapes, a, b)
        first = layers[producers[0]] if producers else None
        kept_inputs = []
        if first is not None:
            w = first.weight
            alive = w.transpose(0, 1).reshape(w.shape[1], -1).abs().sum(dim=1) > 0
            kept_inputs = alive.nonzero().flatten().tolist()
            if drop_inputs:
                _slice_inputs(first, torch.as_tensor(kept_inputs), w.shape[1])
    compact = nn.Sequential(*layers).eval()
    x = example_input[:, kept_inputs] if drop_inputs else example_input
    report = CompactionReport(
        params_before,
        count_parameters(compact),
        flops_before,
        count_flops(compact, x),
        kept_units,
        kept_inputs,
    )
    return compact, report


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


def _compact_segment(layers, shapes, a, b):
    """Remove the removable output units of producer ``a`` whose consumer is ``b`` (the
    next producer, ``None`` at the end); returns the kept units."""
    producer = layers[a]
    n = producer.weight.shape[0]
    everything = list(range(n))
    if b is None:
        return everything  # the model's outputs
    between, consumer = layers[a + 1 : b], layers[b]
    flat = [k for k, layer in enumerate(between) if isinstance(layer, nn.Flatten)]
    if any(not isinstance(layer, (*_PER_CHANNEL, nn.Flatten)) for layer in between):
        return everything  # something we cannot see through
    if len(shapes[a + 1]) != (1 if isinstance(producer, nn.Linear) else 3):
        return everything  # channels not on axis 1 (e.g. a Linear over a sequence)
    per_channel = between[: flat[0]] if flat else between
    if flat and (len(flat) > 1 or between[flat[0]].start_dim != 1):
        return everything
    if flat and not isinstance(consumer, nn.Linear):
        return everything
    if not flat and isinstance(producer, nn.Conv2d) != isinstance(consumer, nn.Conv2d):
        return everything
    # the consumer's weights per producer channel: (n, out, block)
    w = consumer.weight.data
    if isinstance(consumer, nn.Conv2d):
        blocks = w.transpose(0, 1).reshape(n, w.shape[0], -1)
    else:
        if w.shape[1] % n:
            return everything
        blocks = w.reshape(w.shape[0], n, -1).transpose(0, 1)
    # constants emitted by units with all-zero incoming weights, mapped to the consumer
    incoming = producer.weight.data.reshape(n, -1)
    bias = producer.bias.data if producer.bias is not None else torch.zeros(n)
    dead_in = incoming.abs().sum(dim=1) == 0
    const = torch.where(dead_in, bias.to(incoming.dtype), torch.full((n,), float("nan")))
    for k, layer in enumerate(per_channel):
        const = _constant_through(layer, const, shapes[a + 1 + k])
    foldable = ~torch.isnan(const)
    if isinstance(consumer, nn.Conv2d):
        padded = consumer.padding == "same" or any(p != 0 for p in _pair(consumer.padding))
        if padded:  # a constant channel is not constant at a zero-padded border
            foldable &= const == 0
    dead_out = blocks.reshape(n, -1).abs().sum(dim=1) == 0
    if bool((dead_out | foldable).all()):
        # every unit goes: keep unit 0 as it is (layers of width 0 do not run)
        foldable[0] = dead_out[0] = False
    fold = foldable & ~dead_out
    if bool(fold.any()):
        shift = (const[fold][:, None] * blocks[fold].sum(dim=2)).sum(dim=0)
        if consumer.bias is None:
            consumer.bias = nn.Parameter(torch.zeros_like(shift))
        consumer.bias.data.add_(shift.to(consumer.bias.dtype))
    keep = (~(dead_out | foldable)).nonzero().flatten()
    _slice_outputs(producer, keep)
    for layer in per_channel:
        _slice_channels(layer, keep)
    if isinstance(consumer, nn.Conv2d):
        consumer.weight = nn.Parameter(w[:, keep].clone())
        consumer.in_channels = len(keep)
    else:
        cols = blocks[keep].transpose(0, 1).reshape(w.shape[0], -1)
        consumer.weight = nn.Parameter(cols.clone())
        consumer.in_features = cols.shape[1]
    return keep.tolist()


def _pair(value):
    return value if isinstance(value, tuple) else (value, value)


class CompactAttention(nn.Module):
    """Multi-head attention with ``n_heads`` heads of width ``head_dim`` (any
    ``n_heads * head_dim``): what :func:`compact_attention` returns.

    Same call as ``nn.MultiheadAttention(embed_dim, ..., batch_first=...)`` for query, key
    and value (``key_padding_mask``, ``attn_mask`` and ``need_weights`` included; the
    returned weights are averaged over heads).
    """

    def __init__(self, embed_dim, n_heads, head_dim, batch_first=False, bias=True):
        super().__init__()
        self.embed_dim, self.n_heads, self.head_dim = embed_dim, n_heads, head_dim
        self.batch_first = batch_first
        inner = n_heads * head_dim
        self.q_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.k_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.v_proj = nn.Linear(embed_dim, inner, bias=bias)
        self.out_proj = nn.Linear(inner, embed_dim, bias=bias)

    @property
    def inner_dim(self):
        return self.n_heads * self.head_dim

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B, L, _ = query.shape
        S = key.shape[1]
        h, d = self.n_heads, self.head_dim
        q = self.q_proj(query).reshape(B, L, h, d).transpose(1, 2)
        k = self.k_proj(key).reshape(B, S, h, d).transpose(1, 2)
        v = self.v_proj(value).reshape(B, S, h, d).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / (d**0.5)
        if attn_mask is not None:
            mask = attn_mask if attn_mask.dim() == 2 else attn_mask.reshape(B, h, L, S)
            scores = (
                scores.masked_fill(mask, float("-inf"))
                if mask.dtype == torch.bool
                else (scores + mask)
            )
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, L, h * d)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights


@torch.no_grad()
def compact_attention(mha, keep_heads=None):
    """A :class:`CompactAttention` with only the heads ``keep_heads`` of ``mha``.

    Parameters
    ----------
    mha : nn.MultiheadAttention
        Without separate key/value dimensions, with ``add_bias_kv=False``.
    keep_heads : array-like of int, default=None
        ``None``: the heads whose query, key and value rows or output columns are not all
        zero. A head whose value rows and biases are zero contributes nothing; one whose
        value rows are zero but value bias is not contributes a constant, which goes into
        the output bias (exactly: its attention weights sum to 1).

    Returns
    -------
    compact : CompactAttention
    """
    if not mha._qkv_same_embed_dim or mha.bias_k is not None:
        raise ValueError(
            "compact_attention supports nn.MultiheadAttention with kdim = vdim = "
            "embed_dim and add_bias_kv=False."
        )
    E, h = mha.embed_dim, mha.num_heads
    d = E // h
    W = mha.in_proj_weight.reshape(3, h, d, E)
    b = (
        mha.in_proj_bias.reshape(3, h, d)
        if mha.in_proj_bias is not None
        else torch.zeros(3, h, d, dtype=W.dtype)
    )
    Wo = mha.out_proj.weight.reshape(E, h, d)
    bo = mha.out_proj.bias.clone() if mha.out_proj.bias is not None else torch.zeros(E)
    value_dead = W[2].reshape(h, -1).abs().sum(dim=1) == 0
    out_dead = Wo.permute(1, 0, 2).reshape(h, -1).abs().sum(dim=1) == 0
    if keep_heads is None:
        keep = (~(value_dead | out_dead)).nonzero().flatten()
    else:
        keep = torch.as_tensor(keep_heads, dtype=torch.long)
    dropped = torch.ones(h, dtype=torch.bool)
    dropped[keep] = False
    # a dropped head with zero value rows outputs its value bias whatever it attends to
    for j in dropped.nonzero().flatten().tolist():
        if not bool(out_dead[j]):
            if not bool(value_dead[j]):
                raise ValueError(f"Head {j} is live (non-zero value rows and output columns).")
            bo += Wo[:, j] @ b[2, j]
    out = CompactAttention(
        E, len(keep), d, batch_first=mha.batch_first, bias=mha.in_proj_bias is not None
    )
    for proj, part in zip((out.q_proj, out.k_proj, out.v_proj), range(3), strict=True):
        proj.weight.copy_(W[part, keep].reshape(-1, E))
        if proj.bias is not None:
            proj.bias.copy_(b[part, keep].reshape(-1))
    out.out_proj.weight.copy_(Wo[:, keep].reshape(E, -1))
    if out.out_proj.bias is not None:
        out.out_proj.bias.copy_(bo)
    return out.to(W.dtype).eval()
