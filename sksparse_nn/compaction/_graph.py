"""Reading a model's data flow from its ``torch.fx`` trace: the segments from a producer
``Linear`` / ``Conv2d``, through per-channel operations only, to the one layer that reads
its units (the operations that may lie between them, and how each node is classified)."""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

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


def trace_shapes(
    model,
    example_input,
    *,
    leaves=False,
    reader="Compaction reads",
    instead="Compact its traceable parts (compact_module on a submodule, compact_attention) "
    "instead.",
):
    """``model``'s ``torch.fx`` trace with every node's shape (``node.meta["tensor_meta"]``),
    propagated through a copy in eval mode, so that batch-norm statistics are not touched.

    Parameters
    ----------
    model : nn.Module
    example_input : tensor or tuple of tensors
    leaves : bool, default=False
        Trace a flat ``nn.Sequential`` with every child a leaf (an unknown layer stays
        opaque) instead of through every submodule.
    reader, instead : str
        Who reads the trace and what to do instead, for the ValueError raised when
        ``torch.fx`` cannot trace ``model``.

    Returns
    -------
    graph_module : torch.fx.GraphModule
    """
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        if leaves:
            gm = torch.fx.GraphModule(model, _LeafTracer().trace(model))
        else:
            gm = torch.fx.symbolic_trace(model)
    except Exception as exc:  # torch.fx raises TraceError, TypeError, ...
        raise ValueError(
            f"{reader} the model's data flow with torch.fx, which cannot trace this "
            f"{type(model).__name__} ({type(exc).__name__}: {exc}). {instead}"
        ) from exc
    probe = copy.deepcopy(gm).eval()
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    with torch.no_grad():
        ShapeProp(probe).propagate(*inputs)
    for node, probed in zip(gm.graph.nodes, probe.graph.nodes, strict=True):
        node.meta["tensor_meta"] = probed.meta.get("tensor_meta")
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
