"""Channel groups of a traced module: every parameter slice coupled to one channel."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from torch import nn

from ._trace import CONVS, follow, trace

__all__ = ["ChannelGroups", "TensorChannels", "channel_groups"]

#: Reasons that make a channel unremovable without being an error (the model's own ends).
_ENDS = ("the model's input", "the model's output")


@dataclass
class TensorChannels:
    """The slices of one parameter or buffer along ``dim``: ``labels[k]`` is the group of
    slice ``k`` (-1: in no group). ``role``: "gated" (the slice carries the channel: a
    filter, a bias, a batch norm's scale or shift; penalized), "reader" (a consumer's
    input slice: removed with the group, not penalized) or "stat" (running statistics,
    per-channel activation parameters: removed with the group)."""

    dim: int
    role: str
    labels: np.ndarray


@dataclass
class ChannelGroups:
    """Groups of coupled channels of a module, as :func:`channel_groups` finds them.

    Attributes
    ----------
    n_groups : int
        Number of groups ``J``.
    tensors : dict of (str, int) to TensorChannels
        By qualified parameter / buffer name and axis, the group of every slice.
    producers : list of tuple of str
        Per group, the layers (``Conv1d`` / ``Conv2d`` / ``Linear``) whose output channels
        it joins (more than one behind a residual addition).
    skipped : dict of str to str
        Layers of the requested scope whose channels stay (some or all), with the reason
        (the model's output, the model's input joined to them by an addition, or the
        operation the channels could not be followed through).
    """

    n_groups: int
    tensors: dict = field(default_factory=dict)
    producers: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    node_labels: dict = field(default_factory=dict, repr=False)

    def gated(self):
        """``{name: TensorChannels}`` of the penalized slices (one axis per tensor)."""
        return {k[0]: v for k, v in self.tensors.items() if v.role == "gated"}

    def components(self):
        """Sets of groups that share a tensor: each is one tie of gate factors (lists of
        group indices, and of the gated tensor names that hold them)."""
        parent = list(range(self.n_groups))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        gated = self.gated()
        for t in gated.values():
            present = np.unique(t.labels[t.labels >= 0])
            for g in present[1:].tolist():
                parent[find(g)] = find(int(present[0]))
        comps = {}
        for g in range(self.n_groups):
            comps.setdefault(find(g), []).append(g)
        out = []
        for groups in comps.values():
            members = set(groups)
            names = [n for n, t in gated.items() if members.intersection(t.labels.tolist())]
            out.append((groups, names))
        return out


def _in_scope(name, layer, scope, types):
    if not isinstance(layer, types):
        return False
    return scope is None or any(name == p or name.startswith(p + ".") for p in scope)


def channel_groups(model, example_input, scope=None, layers=CONVS, strict=True):
    """Find the channel groups of ``model`` by tracing it.

    Every output channel of a ``Conv1d`` / ``Conv2d`` (``groups=1``) or ``Linear`` starts
    a group; the trace follows it through batch norms, element-wise activations,
    dropout, pooling, a flatten, ``torch.cat`` along the channel axis (offsets), additions
    (``+``, ``+=``, ``torch.add``: the channels of both sides become one group, e.g. a
    residual connection) and depthwise convolutions (``groups == in_channels ==
    out_channels``: channel ``c`` in, channel ``c`` out, its filter joins the group) to
    the layers that read it; an affine ``GroupNorm`` joins the channels of each of its
    groups into one (its statistics mix them). A group holds the producers' filters and
    biases, the batch and group norms' scales and shifts (penalized together), and the
    readers' input slices and running statistics (removed with it).

    Parameters
    ----------
    model : nn.Module
        Traceable by ``torch.fx`` (no data-dependent control flow).
    example_input : tensor or tuple of tensors
        One batch (its shapes are read).
    scope : list of str, default=None
        Module name prefixes (e.g. ``["layer3"]``): only groups with a producer under one
        of them; ``None``: every producer.
    layers : tuple of module classes, default=(Conv1d, Conv2d)
        The producers whose channels are grouped (add ``nn.Linear`` for hidden units).
    strict : bool or tuple of module classes, default=True
        Raise when a producer of the scope feeds an operation the trace cannot follow;
        ``False`` leaves its channels out (``skipped`` says why); a tuple of classes
        raises for those producers only (e.g. convolutions strict, ``Linear`` layers
        over a sequence left out).

    Returns
    -------
    groups : ChannelGroups

    Raises
    ------
    ValueError
        When a producer of the scope feeds an operation the trace cannot follow (named,
        with what to declare instead), or ``torch.fx`` cannot trace the model.
    """
    gm, modules = trace(model, example_input)
    ch = follow(gm, modules)
    n = len(ch.parent)
    roots = np.array([ch.find(i) for i in range(n)], dtype=np.int64)
    reasons = {}
    for i, reason in ch.blocked.items():
        reasons.setdefault(int(roots[i]), reason)
    wanted = {}  # root -> producers
    skipped = {}
    for i in range(n):
        origin = ch.origin[i]
        if origin is None or not _in_scope(origin, modules[origin], scope, layers):
            continue
        root = int(roots[i])
        if root in reasons:
            skipped.setdefault(origin, reasons[root])
            continue
        wanted.setdefault(root, set()).add(origin)
    for i in range(n):  # other producers joined in (by an addition)
        root = int(roots[i])
        if root in wanted and ch.origin[i] is not None:
            wanted[root].add(ch.origin[i])
    strict_layers = layers if strict is True else (strict or ())
    errors = {
        k: v for k, v in skipped.items() if v not in _ENDS and isinstance(modules[k], strict_layers)
    }
    if errors:
        layer, reason = next(iter(errors.items()))
        raise ValueError(
            f"The channels of layer '{layer}' reach {reason}, which channel groups cannot "
            "follow (they follow batch norm, element-wise activations, dropout, pooling, "
            "flatten, additions, torch.cat and depthwise convolutions). Leave that layer "
            "out (gates={'channels': [module name prefixes]}) or declare its tensors by "
            "name (gates={'" + layer + ".weight': 'out'})."
        )
    order = sorted(wanted)
    index = np.full(n, -1, dtype=np.int64)
    lookup = {root: k for k, root in enumerate(order)}
    for i in range(n):
        index[i] = lookup.get(int(roots[i]), -1)
    tensors = {}
    for (name, dim), (role, ids) in ch.slices.items():
        labels = index[ids]
        if (labels >= 0).any():
            tensors[name, dim] = TensorChannels(dim, role, labels)
    producers = [tuple(sorted(wanted[root])) for root in order]
    node_labels = {}
    for node, node_ids in ch.ids.items():
        labels = index[node_ids]
        if (labels >= 0).any():
            node_labels[node.name] = labels
    return ChannelGroups(len(order), tensors, producers, skipped, node_labels)


def is_producer(layer):
    """Whether ``layer``'s output channels can start a group."""
    return isinstance(layer, nn.Linear) or (isinstance(layer, CONVS) and layer.groups == 1)
