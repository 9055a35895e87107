"""The entry points :func:`compact_sequential` and :func:`compact_module`: passes over the
traced model that remove units until nothing more goes, then the attention heads and the
first layer's inputs, and the report."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ._attention import _live_heads, compact_attention
from ._count import count_flops, count_parameters
from ._graph import _segment, trace_shapes
from ._report import CompactionReport
from ._slicing import _compact_segment, _slice_inputs


def _flatten(module, prefix=""):
    """``(qualified name, layer)`` of the leaves of nested ``Sequential`` blocks."""
    if isinstance(module, nn.Sequential):
        return [
            leaf
            for name, child in module.named_children()
            for leaf in _flatten(child, f"{prefix}.{name}" if prefix else name)
        ]
    return [(prefix, module)]


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


def _compact_pass(small, example_input, leaves, kept_units):
    """One pass over the traced model: every segment's removable units go (in place);
    ``kept_units`` (original indices per producer) is updated. Returns the producer
    nodes of the trace and whether anything changed (a unit went, or the last unit of a
    layer without readers was zeroed)."""
    gm = trace_shapes(small, example_input, leaves=leaves)
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
