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

:func:`compact_module` does this for any module whose forward ``torch.fx`` can trace
(branches joined by ``torch.cat`` included), keeping its class and ``forward``.
:func:`compact_attention` does the same for the heads of a ``nn.MultiheadAttention``.
:func:`count_parameters` and :func:`count_flops` measure what was gained. Pure PyTorch.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

__all__ = [
    "CompactAttention",
    "CompactionReport",
    "compact_attention",
    "compact_module",
    "compact_sequential",
    "count_flops",
    "count_parameters",
]


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


def compact_sequential(model, example_input, *, drop_inputs=False):
    """A smaller copy of a (collapsed) ``nn.Sequential`` with the same outputs.

    Parameters
    ----------
    model : nn.Sequential
        ``Linear`` and ``Conv2d`` (``groups=1``) layers with per-channel layers
        (batch norm in eval mode, element-wise activations, pooling, dropout) and
        ``Flatten`` between them; nested ``Sequential`` blocks are flattened. Any other
        layer (a grouped convolution, a layer of your own) ends compaction across it
        (the units before it are kept).
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

    See Also
    --------
    compact_module : the same for any module that ``torch.fx`` can trace.
    """
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"compact_sequential needs an nn.Sequential, got {type(model).__name__}.")
    named = _flatten(model)
    flat = nn.Sequential(*[layer for _, layer in named])
    small, report = _compact(flat, example_input, leaves=True, drop_inputs=drop_inputs)
    names = [name for name, _ in named]
    report.kept_units = {names[int(k)]: v for k, v in report.kept_units.items()}
    return small, report


def compact_module(model, example_input, *, drop_inputs=False):
    """A smaller copy of any (collapsed) module with the same outputs.

    The module's forward pass is traced with :func:`torch.fx.symbolic_trace` and its
    data flow read from the graph: wherever a ``Linear`` or ``Conv2d`` (``groups=1``)
    feeds, through per-channel operations only, exactly one ``Linear`` / ``Conv2d``, the
    units that cannot change the output are removed as in :func:`compact_sequential`.
    Per-channel operations are batch norm (modules), element-wise activations and
    dropout (modules, ``torch`` / ``torch.nn.functional`` functions, tensor methods),
    arithmetic with a number, pooling, and a flatten from axis 1; one ``torch.cat``
    along the channel axis may join several producers before their consumer (the
    branches of a late-fusion model), element-wise operations may follow it. Whatever
    else the graph does (residual sums, reshapes, a layer used twice, an output read by
    two layers) is left as it is: the units it touches are kept. Every
    ``nn.MultiheadAttention`` is replaced by a :class:`CompactAttention` with its live
    heads (:func:`compact_attention`).

    Removal repeats until nothing more goes: a layer whose units all lost their readers
    leaves the layers before it without readers too, so a branch that the model never
    reads (a dropped modality) shrinks to one unit per layer (a layer of width 0 does
    not run; the one unit kept has zero weights).

    The module's own class and ``forward`` are kept (its layers are replaced by smaller
    ones), so a ``forward`` that hard-codes a width (``x.view(-1, 400)``) is found by the
    trace and the units behind it are kept.

    Parameters
    ----------
    model : nn.Module
        With exact zeros (e.g. after :func:`~sksparse_nn.sparsifiers.collapse`).
    example_input : tensor or tuple of tensors
        One batch of inputs (shapes are read from it).
    drop_inputs : bool, default=False
        Also drop the all-zero input columns / channels of the first ``Linear`` /
        ``Conv2d`` that reads the input directly (the compact model then takes
        ``x[:, report.kept_inputs]``).

    Returns
    -------
    compact : nn.Module
        A copy of ``model`` with smaller layers, in eval mode; equal outputs up to float
        rounding.
    report : CompactionReport
        ``kept_units`` by qualified layer name (attention layers: their kept heads).

    Raises
    ------
    ValueError
        When ``torch.fx`` cannot trace the module (data-dependent control flow).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> class TwoBranch(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.a, self.b, self.head = nn.Linear(3, 4), nn.Linear(2, 4), nn.Linear(8, 1)
    ...     def forward(self, x):
    ...         h = torch.cat([self.a(x[:, :3]), self.b(x[:, 3:])], dim=1)
    ...         return self.head(torch.relu(h))
    >>> model = TwoBranch().eval()
    >>> with torch.no_grad():
    ...     model.head.weight[:, 4:] = 0  # branch b is never read
    >>> small, report = compact_module(model, torch.randn(5, 5))
    >>> report.kept_units["b"], small.b
    ([0], Linear(in_features=2, out_features=1, bias=True))
    """
    return _compact(model, example_input, leaves=False, drop_inputs=drop_inputs)


#: Element-wise, parameter-free operations (their constants map value by value).
_ELEMENTWISE_MODULES = (
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
)
#: Per-channel operations that may change space (pooling) or carry per-channel
#: parameters (batch norm, sliced with the channels).
_CHANNEL_MODULES = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
)
_PER_CHANNEL = _ELEMENTWISE_MODULES + _CHANNEL_MODULES
_ELEMENTWISE_FUNCTIONS = {
    F.relu, F.relu6, F.leaky_relu, F.elu, F.gelu, F.silu, F.softplus, F.dropout,
    F.hardtanh, F.tanh, F.sigmoid, torch.relu, torch.tanh, torch.sigmoid,
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg,
}  # fmt: skip
_ELEMENTWISE_METHODS = {"relu", "tanh", "sigmoid", "neg", "contiguous"}
_CHANNEL_FUNCTIONS = {F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d, F.adaptive_max_pool2d}


@dataclass
class _Segment:
    """A producer's units, the per-channel operations between it and the one layer that
    reads them, and where they sit in that layer's input (``offset``, ``block`` columns
    per unit after a flatten)."""

    producer: str
    consumer: str
    order: int
    channel_ops: list  # (fn, input shape of one sample, module or None), before flatten/cat
    elementwise_after: list  # element-wise fns after a flatten or cat
    offset: int
    block: int


class _LeafTracer(torch.fx.Tracer):
    """Traces a flat Sequential with every child a leaf (an unknown layer stays opaque)."""

    def is_leaf_module(self, m, module_qualified_name):
        return "." not in module_qualified_name


def _trace(model, example_input, leaves):
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        if leaves:
            graph = _LeafTracer().trace(model)
            gm = torch.fx.GraphModule(model, graph)
        else:
            gm = torch.fx.symbolic_trace(model)
    except Exception as exc:  # torch.fx raises TraceError, TypeError, ...
        raise ValueError(
            f"Compaction reads the model's data flow with torch.fx, which cannot trace this "
            f"{type(model).__name__} ({type(exc).__name__}: {exc}). Compact its traceable "
            "parts (compact_module on a submodule, compact_attention) instead."
        ) from exc
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    with torch.no_grad():
        ShapeProp(gm).propagate(*inputs)
    return gm


def _shape(node):
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _has_node(values):
    found = []
    torch.fx.node.map_arg(values, lambda a: found.append(a))
    return bool(found)


def _bound(node, modules):
    """The operation of ``node`` as a function of its first argument."""
    if node.op == "call_module":
        return modules[node.target]
    rest, kwargs = node.args[1:], node.kwargs
    if node.op == "call_method":
        return lambda t: getattr(t, node.target)(*rest, **kwargs)
    return lambda t: node.target(t, *rest, **kwargs)


def _kind(node, cur, modules, calls):
    """What ``node`` does to its input ``cur``: "consumer", "elementwise", "channel",
    "flatten", "cat", or None (opaque)."""
    if node.op == "call_module":
        if node.args[:1] != (cur,) or len(node.args) != 1 or node.kwargs:
            return None
        if calls[node.target] != 1:
            return None  # a layer used twice: its slices would change both uses
        m = modules[node.target]
        if isinstance(m, nn.Linear) or (isinstance(m, nn.Conv2d) and m.groups == 1):
            return "consumer"
        if isinstance(m, _ELEMENTWISE_MODULES):
            return "elementwise"
        if isinstance(m, _CHANNEL_MODULES):
            return "channel"
        if isinstance(m, nn.Flatten) and m.start_dim == 1 and m.end_dim == -1:
            return "flatten"
        return None
    if node.op == "call_function" and node.target is torch.cat:
        tensors = node.args[0] if node.args else node.kwargs.get("tensors")
        ok = isinstance(tensors, (list, tuple)) and sum(t is cur for t in tensors) == 1
        return "cat" if ok else None
    if node.op not in ("call_function", "call_method") or not node.args:
        return None
    if node.args[0] is not cur or _has_node((node.args[1:], node.kwargs)):
        return None
    target = node.target
    if node.op == "call_method":
        if target in _ELEMENTWISE_METHODS:
            return "elementwise"
        if target == "flatten" and _flatten_args(node.args[1:], node.kwargs):
            return "flatten"
        return None
    if target is torch.flatten and _flatten_args(node.args[1:], node.kwargs):
        return "flatten"
    if target in _ELEMENTWISE_FUNCTIONS:
        return "elementwise"
    if target in _CHANNEL_FUNCTIONS:
        return "channel"
    return None


def _flatten_args(args, kwargs):
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    return start == 1 and end == -1


def _segment(node, order, modules, calls):
    """The segment from producer ``node`` to the layer reading its units, or None."""
    out = _shape(node)
    m = modules[node.target]
    if out is None or len(out) != (2 if isinstance(m, nn.Linear) else 4):
        return None  # channels not on axis 1 (e.g. a Linear over a sequence)
    cur, channel_ops, after, flat, catted, offset, block = node, [], [], False, False, 0, 1
    while True:
        users = list(cur.users)
        if len(users) != 1:
            return None  # read twice, or a model output
        user = users[0]
        kind = _kind(user, cur, modules, calls)
        if kind == "consumer":
            break
        shape = _shape(cur)
        if kind == "elementwise":
            if flat or catted:
                after.append(_bound(user, modules))
            else:
                channel_ops.append((_bound(user, modules), shape[1:], None))
        elif kind == "channel" and not (flat or catted):
            module = modules[user.target] if user.op == "call_module" else None
            if module is not None and calls[user.target] != 1:
                return None
            channel_ops.append((_bound(user, modules), shape[1:], module))
        elif kind == "flatten" and not (flat or catted):
            flat, block = True, int(np.prod(shape[2:], dtype=np.int64))
        elif kind == "cat" and not catted:
            tensors = user.args[0] if user.args else user.kwargs["tensors"]
            dim = user.args[1] if len(user.args) > 1 else user.kwargs.get("dim", 0)
            if dim % len(shape) != 1:
                return None
            before = tensors[: [t is cur for t in tensors].index(True)]
            shapes = [_shape(t) if isinstance(t, torch.fx.Node) else None for t in before]
            if any(s is None or len(s) != len(shape) for s in shapes):
                return None
            # the columns (after a flatten) or channels before this producer's
            offset = sum(int(np.prod(s[1:])) if flat else s[1] for s in shapes)
            catted = True
        else:
            return None
        cur = user
    consumer = modules[user.target]
    if isinstance(consumer, nn.Conv2d) and (flat or not isinstance(m, nn.Conv2d)):
        return None
    if isinstance(consumer, nn.Linear) and len(_shape(cur)) != 2:
        return None
    return _Segment(node.target, user.target, order, channel_ops, after, offset, block)


def _compact_pass(small, example_input, leaves, kept_units):
    """One pass over the traced model: every segment's removable units go (in place);
    ``kept_units`` (original indices per producer) is updated. Returns the producer
    nodes of the trace and whether anything changed (a unit went, or the last unit of a
    layer without readers was zeroed)."""
    gm = _trace(small, example_input, leaves)
    modules = dict(small.named_modules())
    nodes = list(gm.graph.nodes)
    calls = {}
    for node in nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    producers = [
        node
        for node in nodes
        if node.op == "call_module"
        and (
            isinstance(modules[node.target], nn.Linear)
            or (isinstance(modules[node.target], nn.Conv2d) and modules[node.target].groups == 1)
        )
    ]
    order = {node.target: k for k, node in enumerate(nodes) if node.op == "call_module"}
    segments = []
    for node in producers:
        kept_units.setdefault(node.target, list(range(modules[node.target].weight.shape[0])))
        if calls[node.target] == 1:
            seg = _segment(node, order[node.target], modules, calls)
            if seg is not None:
                segments.append(seg)
    # a consumer's input columns from the right: earlier offsets stay valid; consumers
    # in graph order: a layer's bias has its folded constants before it is a producer
    segments.sort(key=lambda s: (order[s.consumer], -s.offset))
    removed = False
    for seg in segments:
        keep, zeroed = _compact_segment(modules[seg.producer], modules[seg.consumer], seg)
        before = kept_units[seg.producer]
        removed |= zeroed or len(keep) < len(before)
        kept_units[seg.producer] = [before[k] for k in keep]
    return producers, removed


def _compact(model, example_input, leaves, drop_inputs):
    small = copy.deepcopy(model).eval()  # the user's model is not touched (nor its modes)
    params_before = count_parameters(small)
    flops_before = count_flops(small, example_input)
    kept_units = {}
    with torch.no_grad():
        # units removed from a layer can leave the layer before it without readers (a
        # dead branch): passes until nothing more goes, each on a fresh trace (shapes
        # and concatenation offsets change)
        removed = True
        while removed:
            producers, removed = _compact_pass(small, example_input, leaves, kept_units)
        modules = dict(small.named_modules())
        for name, module in list(small.named_modules()):
            if isinstance(module, nn.MultiheadAttention) and name:
                compact = compact_attention(module)
                if compact.n_heads < module.num_heads:
                    parent, _, child = name.rpartition(".")
                    setattr(small.get_submodule(parent) if parent else small, child, compact)
                    kept_units[name] = _live_heads(module)
        kept_inputs = []
        first = next(
            (node for node in producers if node.args and node.args[0].op == "placeholder"),
            None,
        )
        if first is not None:
            layer = modules[first.target]
            w = layer.weight
            alive = w.transpose(0, 1).reshape(w.shape[1], -1).abs().sum(dim=1) > 0
            kept_inputs = alive.nonzero().flatten().tolist()
            if drop_inputs:
                _slice_inputs(layer, torch.as_tensor(kept_inputs), w.shape[1])
    if drop_inputs:
        x = example_input[:, kept_inputs]
    else:
        x = example_input
    report = CompactionReport(
        params_before,
        count_parameters(small),
        flops_before,
        count_flops(small, x),
        kept_units,
        kept_inputs,
    )
    return small.eval(), report


def _live_heads(mha):
    E, h = mha.embed_dim, mha.num_heads
    d = E // h
    W = mha.in_proj_weight.reshape(3, h, d, E)
    Wo = mha.out_proj.weight.reshape(E, h, d)
    value_dead = W[2].reshape(h, -1).abs().sum(dim=1) == 0
    out_dead = Wo.permute(1, 0, 2).reshape(h, -1).abs().sum(dim=1) == 0
    return (~(value_dead | out_dead)).nonzero().flatten().tolist()


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
