"""Gating channel groups: one set of gate factors per group, over every tensor it spans
(the sparsifiers' ties), and the batch norms a declared filter gate takes along."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..groups import Grouping
from ..sparsifiers import sparsify
from ._trace import NORMS, trace

__all__ = ["gate_channels", "groupings", "norms_after"]


def _owner(model, name):
    path, _, attr = name.rpartition(".")
    return (model.get_submodule(path) if path else model), attr


def groupings(model, groups):
    """Per tie (a set of groups sharing tensors): ``[(tensor name, Grouping)]`` with the
    leader (the tensor holding most of the tie's groups) first, and whether the leader
    holds them all."""
    ties = []
    for members, names in groups.components():
        local = {g: k for k, g in enumerate(sorted(members))}
        n = len(local)
        entries = []
        for name in names:
            t = groups.gated()[name]
            shape = tuple(getattr(_owner(model, name)[0], _owner(model, name)[1]).shape)
            index = np.array([local.get(int(g), n) for g in t.labels], dtype=np.int64)
            complete = bool((index < n).all())
            identity = complete and n == len(index) and np.array_equal(index, np.arange(n))
            grouping = Grouping(
                shape,
                n,
                np.arange(n),
                dim=t.dim,
                index=None if identity else torch.as_tensor(index),
                complete=complete,
            )
            held = len(np.unique(index[index < n]))
            entries.append((held, name, grouping))
        entries.sort(key=lambda e: -e[0])  # stable: trace order among equals
        ties.append(([(name, g) for _, name, g in entries], entries[0][0] == n))
    return ties


def gate_channels(model, groups, sparsify_leader, init="identity"):
    """Sparsify every group of ``groups`` in ``model``: one tie per set of groups sharing
    tensors, its leader through ``sparsify_leader(owner, attr, grouping, init)`` (the
    method and options of the caller), the other tensors tied to it.

    A leader that does not hold every group of its tie starts at ``init="identity"``
    (a balanced start would read only its own slices).

    Returns
    -------
    ties : list of (list of str, list of int)
        Per tie: its gated tensors, leader first, and its groups (indices into
        ``groups``) in the order of the leader's gates.
    """
    out = []
    for (entries, whole), (members, _) in zip(
        groupings(model, groups), groups.components(), strict=True
    ):
        (name, grouping), rest = entries[0], entries[1:]
        owner, attr = _owner(model, name)
        sparsify_leader(owner, attr, grouping, init if whole else "identity")
        leader = owner.parametrizations[attr][0]
        for other, other_grouping in rest:
            o, a = _owner(model, other)
            sparsify(o, a, groups=other_grouping, tie=leader)
        out.append(([name for name, _ in entries], sorted(members)))
    return out


def norms_after(model, example_input, layer):
    """Names of the batch norms that normalize ``layer``'s output channels directly
    (through identities and dropout only)."""
    gm, modules = trace(model, example_input)
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_module" or node.target != layer:
            continue
        cur = node
        while len(cur.users) == 1:
            (user,) = cur.users
            if user.op != "call_module" or user.args[:1] != (cur,):
                break
            module = modules[user.target]
            if isinstance(module, NORMS):
                if user.target not in found:
                    found.append(user.target)
                break
            if not isinstance(module, (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d)):
                break
            cur = user
    return found
