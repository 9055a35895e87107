"""Following channels through a ``torch.fx`` trace: which parameter slices carry the same
channel (a union-find over channel ids, one id per channel of every producer)."""

from __future__ import annotations

import operator

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from ..compaction import trace_shapes

#: Modules that map each channel to itself (element-wise, or over space only).
PASS_MODULES = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Mish, nn.Hardswish,
    nn.Hardtanh, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.PReLU, nn.Identity,
    nn.Dropout, nn.Dropout1d, nn.Dropout2d,
    nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
)  # fmt: skip
#: Functions and tensor methods that map each channel to itself.
PASS_FUNCTIONS = {
    F.relu, F.relu6, F.leaky_relu, F.elu, F.gelu, F.silu, F.mish, F.hardswish, F.softplus,
    F.hardtanh, F.tanh, F.sigmoid, F.dropout, F.dropout1d, F.dropout2d,
    torch.relu, torch.tanh, torch.sigmoid, torch.nn.functional.relu_,
    F.max_pool1d, F.max_pool2d, F.avg_pool1d, F.avg_pool2d, F.adaptive_avg_pool1d,
    F.adaptive_avg_pool2d, F.adaptive_max_pool1d, F.adaptive_max_pool2d,
    operator.mul, operator.truediv, operator.neg, operator.pos, torch.mul, torch.div,
}  # fmt: skip
PASS_METHODS = {"relu", "relu_", "tanh", "sigmoid", "neg", "contiguous", "clone", "mul", "div"}
#: Operations joining two tensors of the same channels: their channels become one.
JOIN_FUNCTIONS = {operator.add, operator.iadd, operator.sub, operator.isub, torch.add, torch.sub}
JOIN_METHODS = {"add", "add_", "sub", "sub_"}
#: Reductions (a global pooling written as ``x.mean((2, 3))``).
REDUCE = {"mean", "sum", "amax", torch.mean, torch.sum, torch.amax}

CONVS = (nn.Conv1d, nn.Conv2d)
NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)


def trace(model, example_input):
    """``(graph module, modules)``: ``model``'s ``torch.fx`` trace with every node's shape
    (:func:`~sksparse_nn.compaction.trace_shapes`), or a ValueError saying what to
    declare instead."""
    gm = trace_shapes(
        model,
        example_input,
        reader="Channel groups follow",
        instead="Declare the gated tensors by name instead (gates={'conv1.weight': 'out', ...}).",
    )
    return gm, dict(model.named_modules())


def shape_of(node):
    meta = node.meta.get("tensor_meta") if isinstance(node, torch.fx.Node) else None
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


class Channels:
    """The union-find over channel ids and what each parameter slice reads or carries.

    ``slices[name, dim] = [role, ids]``: the ids along ``dim`` of the parameter or buffer
    ``name`` (``role``: "gated" carries the channel, "reader" reads it, "stat" is a
    statistic of it); ``blocked[id]``: why a channel cannot go; ``origin[id]``: the
    module that creates it.
    """

    def __init__(self):
        self.parent = []
        self.slices = {}
        self.blocked = {}
        self.origin = []

    def fresh(self, n, origin):
        start = len(self.parent)
        self.parent.extend(range(start, start + n))
        self.origin.extend([origin] * n)
        return np.arange(start, start + n)

    def find(self, i):
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a, b):
        for i, j in zip(a.tolist(), b.tolist(), strict=True):
            ri, rj = self.find(i), self.find(j)
            if ri != rj:
                self.parent[max(ri, rj)] = min(ri, rj)

    def block(self, ids, reason):
        for i in np.unique(ids).tolist():
            self.blocked.setdefault(i, reason)

    def record(self, name, dim, role, ids):
        if (name, dim) in self.slices:  # a layer called twice: its slices carry both
            self.union(self.slices[name, dim][1], ids)
        else:
            self.slices[name, dim] = [role, np.asarray(ids)]


def follow(gm, modules):
    """Walk the trace; returns :class:`Channels` (ids per node in ``ids``)."""
    ch = Channels()
    ids = {}
    made = {}  # module name -> its output ids (a layer called twice makes them once)

    def tensor_args(node):
        found = []
        torch.fx.node.map_arg((node.args, node.kwargs), found.append)
        return [a for a in found if a in ids]

    def block_inputs(node, what):
        for arg in tensor_args(node):
            ch.block(ids[arg], what)

    for node in gm.graph.nodes:
        shape = shape_of(node)
        if node.op == "placeholder":
            if shape is not None and len(shape) >= 2:
                ids[node] = ch.fresh(shape[1], None)
                ch.block(ids[node], "the model's input")
            continue
        if node.op == "output":
            block_inputs(node, "the model's output")
            continue
        if node.op == "get_attr" or shape is None:
            if node.op != "get_attr" and not _reads_metadata(node):
                block_inputs(node, _describe(node, modules))
            continue
        out = _step(node, shape, ids, ch, modules, made, tensor_args)
        if out is None:
            block_inputs(node, _describe(node, modules))
            if len(shape) >= 2:
                ids[node] = ch.fresh(shape[1], None)
                ch.block(ids[node], _describe(node, modules))
        else:
            ids[node] = out
    ch.ids = ids
    return ch


def _reads_metadata(node):
    """``x.size(0)``, ``x.shape``, ``x.dim()``: no values read."""
    if node.op == "call_method":
        return node.target in ("size", "dim")
    return node.target is getattr and node.args[1] in ("shape", "ndim", "dtype", "device")


def _describe(node, modules):
    if node.op == "call_module":
        return f"layer '{node.target}' ({type(modules[node.target]).__name__})"
    target = getattr(node.target, "__name__", node.target)
    return f"operation '{node.name}' ({target})"


def _first(node, ids):
    arg = node.args[0] if node.args else next(iter(node.kwargs.values()), None)
    return ids.get(arg) if isinstance(arg, torch.fx.Node) else None


def _step(node, shape, ids, ch, modules, made, tensor_args):
    """The channel ids of ``node``'s output, recording the slices it touches; None for an
    operation the channels cannot be followed through."""
    if node.op == "call_module":
        return _module_step(node, shape, ids, ch, modules, made, tensor_args)
    args = tensor_args(node)
    a = _first(node, ids)
    target = node.target
    fn = node.op == "call_function"
    if (fn and target in JOIN_FUNCTIONS) or (not fn and target in JOIN_METHODS):
        same = [ids[x] for x in args if len(ids[x]) == shape[1] and shape_of(x) == shape]
        if len(same) != len(args) or not same:
            return None  # broadcasting a channel against another axis
        for other in same[1:]:
            ch.union(same[0], other)
        return same[0]
    if (fn and target in PASS_FUNCTIONS) or (not fn and target in PASS_METHODS):
        if a is None or len(a) != shape[1]:
            return None
        if len(args) > 1:  # x * y of two channel maps: a zero channel stays zero
            if target not in (operator.mul, torch.mul, "mul"):
                return None  # dividing by a channel that may go
            if any(shape_of(x) != shape for x in args):
                return None  # broadcast against a map of other channels or axes
            for x in args:
                ch.union(a, ids[x])
        return a
    if fn and target is torch.cat:
        return _cat(node, shape, ids, ch)
    if a is None or len(args) != 1:
        return None
    in_shape = shape_of(node.args[0])
    if target in ("flatten", "view", "reshape", torch.flatten, torch.reshape):
        if len(shape) == 2 and in_shape[0] == shape[0] and shape[1] == np.prod(in_shape[1:]):
            return np.repeat(a, int(np.prod(in_shape[2:], dtype=np.int64)))
        return a if shape == in_shape else None
    if target in REDUCE and len(shape) >= 2 and shape[:2] == in_shape[:2]:
        return a
    return None


def _cat(node, shape, ids, ch):
    tensors = node.args[0] if node.args else node.kwargs.get("tensors")
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if not all(isinstance(t, torch.fx.Node) and t in ids for t in tensors):
        return None
    if dim % len(shape) == 1:
        return np.concatenate([ids[t] for t in tensors])
    first = ids[tensors[0]]
    for t in tensors[1:]:  # joined along another axis: the channels are one
        ch.union(first, ids[t])
    return first


def _module_step(node, shape, ids, ch, modules, made, tensor_args):
    m, name = modules[node.target], node.target
    a = _first(node, ids)
    if a is None or len(tensor_args(node)) != 1:
        return None
    if isinstance(m, CONVS):
        if m.groups == 1:
            ch.record(f"{name}.weight", 1, "reader", a)
            out = made.setdefault(name, ch.fresh(m.out_channels, name))
        elif m.groups == m.in_channels == m.out_channels:  # depthwise: channel in = out
            out = a
        else:
            return None
        ch.record(f"{name}.weight", 0, "gated", out)
        if m.bias is not None:
            ch.record(f"{name}.bias", 0, "gated", out)
        return out
    if isinstance(m, nn.Linear):
        if len(shape) != 2:
            return None  # over a sequence: its features are not on axis 1
        ch.record(f"{name}.weight", 1, "reader", a)
        out = made.setdefault(name, ch.fresh(m.out_features, name))
        ch.record(f"{name}.weight", 0, "gated", out)
        if m.bias is not None:
            ch.record(f"{name}.bias", 0, "gated", out)
        return out
    if isinstance(m, NORMS):
        for attr, role in (("weight", "gated"), ("bias", "gated")):
            if getattr(m, attr) is not None:
                ch.record(f"{name}.{attr}", 0, role, a)
        for attr in ("running_mean", "running_var"):
            if getattr(m, attr) is not None:
                ch.record(f"{name}.{attr}", 0, "stat", a)
        return a
    if isinstance(m, nn.GroupNorm) and m.affine:
        # statistics over each group of channels: its channels stay or go together (a
        # removed channel would change the others' mean and variance); a group norm
        # without affine parameters keeps no per-channel tensor to size it by
        per = m.num_channels // m.num_groups
        for first in range(0, m.num_channels, per):
            block = a[first : first + per]
            ch.union(np.full(per - 1, block[0]), block[1:])
        for attr in ("weight", "bias"):
            ch.record(f"{name}.{attr}", 0, "gated", a)
        return a
    if isinstance(m, PASS_MODULES):
        if isinstance(m, nn.PReLU) and m.num_parameters > 1:
            ch.record(f"{name}.weight", 0, "stat", a)
        return a
    if isinstance(m, nn.Flatten):
        in_shape = shape_of(node.args[0])
        if m.start_dim == 1 and m.end_dim == -1 and len(shape) == 2:
            return np.repeat(a, int(np.prod(in_shape[2:], dtype=np.int64)))
    return None
