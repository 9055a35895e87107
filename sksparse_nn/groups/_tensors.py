"""Groupings of weight tensors: which entries share a gate (torch).

:func:`resolve_groups` turns a specification ("in", "out", "element", :class:`AxisGroups`
or a label array, described in the docstring of :mod:`sksparse_nn.groups`) into a
:class:`Grouping` for tensors of one shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["AxisGroups", "Grouping", "resolve_groups"]


@dataclass(frozen=True)
class AxisGroups:
    """Group the entries of a tensor by an integer label along one axis.

    Parameters
    ----------
    dim : int
        The axis the labels run along (``1`` for the input features of a ``Linear``).
    labels : array-like of int of shape (shape[dim],), default=None
        Group label of each slice along ``dim``; ``-1`` leaves a slice ungrouped.
        ``None`` gives every slice its own group.

    Examples
    --------
    Four attention heads of size 16 in a ``(64, 64)`` query projection:

    >>> import numpy as np
    >>> spec = AxisGroups(0, np.repeat(np.arange(4), 16))
    """

    dim: int
    labels: object = None


def _as_labels(labels, expected_shape, what):
    """Validate integer labels and renumber them 0..J-1 (-1 kept as 'no group').

    Returns the index of each entry's group (J: no group), or None when that is the
    identity, the sorted unique labels and whether every entry is in a group."""
    arr = np.asarray(labels)
    if arr.shape != tuple(expected_shape):
        raise ValueError(
            f"{what} must have shape {tuple(expected_shape)}, got an array of shape {arr.shape}."
        )
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise ValueError(f"{what} must be integers, got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{what} must be integers; got non-integer values.")
        arr = arr.astype(np.int64)
    if arr.size and arr.min() < -1:
        raise ValueError(f"{what} must be >= 0, or -1 for 'in no group'; got {arr.min()}.")
    grouped = arr >= 0
    # (with return_inverse NumPy sorts, faster on many labels than the hash route it
    # takes for the values alone)
    ids, inverse = np.unique(arr[grouped], return_inverse=True)
    if ids.size == 0:
        raise ValueError(f"{what} put every entry in no group (-1): nothing to gate.")
    complete = bool(grouped.all())
    if complete and ids.size == arr.size and np.array_equal(inverse, np.arange(arr.size)):
        # one group per slice (entry), in order: the identity, which Grouping computes
        # without gathers
        return None, ids, complete
    index = np.full(arr.shape, ids.size, dtype=np.int64)  # ungrouped -> extra slot J
    index[grouped] = inverse
    return torch.as_tensor(index), ids, complete


class Grouping(nn.Module):
    """A resolved group structure for tensors of one shape (no parameters, only buffers).

    Built by :func:`resolve_groups`.

    Parameters
    ----------
    shape : tuple of int
    n_groups : int
    group_ids : array-like of shape (n_groups,)
    dim : int, default=None
        The axis of an axis grouping (one group per slice along it); None for an
        entry-wise one.
    index : tensor of int, default=None
        Group of each slice (axis grouping) or entry, ``n_groups`` for "no group";
        None for one group per slice (entry), in order.
    complete : bool, default=True
        Whether every entry belongs to a group.

    Attributes
    ----------
    shape : tuple of int
        Shape of the grouped tensor.
    n_groups : int
        Number of groups ``J``.
    group_ids : ndarray of shape (J,)
        The user's label of each group (``arange(J)`` for "in", "out", "element").
    complete : bool
        Whether every entry belongs to a group.
    """

    def __init__(self, shape, n_groups, group_ids, *, dim=None, index=None, complete=True):
        super().__init__()
        self.shape = tuple(shape)
        self.n_groups = int(n_groups)
        self.group_ids = np.asarray(group_ids)
        self.dim = dim  # axis of an axis grouping, None for an entry-wise one
        self.complete = complete
        # index maps each slice (axis grouping) or entry (entry-wise) to its group, with
        # n_groups meaning "no group"; None means the identity (one group per slice/entry).
        self.register_buffer("index", index, persistent=False)

    def _axis_view(self, values):
        view = [1] * len(self.shape)
        view[self.dim] = -1
        return values.reshape(view)

    def expand(self, values):
        """Broadcast one value per group to the tensor's shape (1 outside every group)."""
        if self.index is not None:
            values = torch.cat([values, values.new_ones(1)])[self.index]
        if self.dim is None:
            return values.reshape(self.shape)
        return self._axis_view(values)

    def group_sum(self, tensor):
        """Sum a tensor of shape ``self.shape`` within each group; returns shape ``(J,)``."""
        if self.dim is None:
            flat = tensor.reshape(-1)
        else:
            other = [d for d in range(tensor.dim()) if d != self.dim]
            flat = tensor.sum(dim=other) if other else tensor
        if self.index is None:
            return flat
        out = flat.new_zeros(self.n_groups + 1)
        return out.index_add(0, self.index.reshape(-1), flat)[: self.n_groups]

    def extra_repr(self):
        kind = "entry-wise" if self.dim is None else f"dim={self.dim}"
        return f"shape={self.shape}, n_groups={self.n_groups}, {kind}"


def resolve_groups(spec, shape):
    """Turn a group specification into a :class:`Grouping` for tensors of ``shape``.

    Parameters
    ----------
    spec : {"in", "out", "element"}, AxisGroups, Grouping or array-like of int
        See the module docstring; a :class:`Grouping` for ``shape`` is returned as it is
        (its ``n_groups`` may count groups without a slice in this tensor: the groups of
        a tie spanning several tensors).
    shape : tuple of int
        Shape of the tensor to group.

    Returns
    -------
    grouping : Grouping

    Raises
    ------
    ValueError
        If the specification is unknown or does not fit ``shape``.
    """
    shape = tuple(int(s) for s in shape)
    if isinstance(spec, Grouping):  # built elsewhere (e.g. channel groups spanning tensors)
        if spec.shape != shape:
            raise ValueError(f"The Grouping is for shape {spec.shape}, the tensor has {shape}.")
        return spec
    if isinstance(spec, str):
        if spec == "element":
            n = int(np.prod(shape))
            return Grouping(shape, n, np.arange(n))
        if spec in ("in", "out"):
            dim = 1 if spec == "in" else 0
            if len(shape) <= dim:
                raise ValueError(
                    f'groups="{spec}" needs a tensor with at least {dim + 1} dimensions, '
                    f"got shape {shape}."
                )
            return Grouping(shape, shape[dim], np.arange(shape[dim]), dim=dim)
        raise ValueError(
            f'Unknown groups "{spec}": use "in", "out", "element", AxisGroups(dim, labels) '
            "or an integer label array of the weight's shape."
        )
    if isinstance(spec, AxisGroups):
        dim = spec.dim
        if not isinstance(dim, (int, np.integer)) or not -len(shape) <= dim < len(shape):
            raise ValueError(f"AxisGroups.dim={dim!r} is not an axis of a tensor of shape {shape}.")
        dim = int(dim) % len(shape)
        if spec.labels is None:
            return Grouping(shape, shape[dim], np.arange(shape[dim]), dim=dim)
        index, ids, complete = _as_labels(
            spec.labels, (shape[dim],), f"AxisGroups labels along dim {dim}"
        )
        return Grouping(shape, ids.size, ids, dim=dim, index=index, complete=complete)
    if isinstance(spec, (np.ndarray, torch.Tensor, list, tuple)):
        labels = spec.detach().cpu().numpy() if isinstance(spec, torch.Tensor) else spec
        index, ids, complete = _as_labels(labels, shape, "Group labels")
        return Grouping(shape, ids.size, ids, index=index, complete=complete)
    raise ValueError(
        f"groups must be 'in', 'out', 'element', AxisGroups or an integer label array, "
        f"got {type(spec).__name__}."
    )
