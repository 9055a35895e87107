"""Channel groups that follow a CNN's couplings: batch norms, residual additions,
concatenations and depthwise convolutions.

A channel of a convolution is not one tensor slice: its filter and bias, the scale and
shift of the batch norm after it, the filters of every layer added to it in a residual
connection, a depthwise filter that keeps it, and the input slices of the layers that
read it all belong to it. A penalty on the filter alone removes nothing behind a batch
norm (which divides its scale out), and a filter removed alone from one side of an
addition leaves the channel alive. :func:`channel_groups` traces a module with
``torch.fx`` and finds, for every channel, every slice coupled to it;
:func:`gate_channels` gives each group one set of gate factors over all its penalized
slices (the sparsifiers' ties); :func:`compact_channels` removes dead groups everywhere
they appear; :func:`lam_for_target` finds the lam that keeps a share of the FLOPs or
parameters. Pure PyTorch (scikit-learn's ``clone`` in :func:`lam_for_target`).

Modules, one job each:

* ``_trace``: the ``torch.fx`` trace and the walk that follows channel ids through it
  (a union-find), with the tables of operations it follows;
* ``_groups``: :class:`ChannelGroups` and :func:`channel_groups`;
* ``_gating``: :func:`gate_channels` (ties per set of groups sharing tensors) and the
  batch norms right after a layer (:func:`norms_after`);
* ``_compact``: :func:`compact_channels`;
* ``_target``: :func:`lam_for_target` (bisection on lam for a FLOPs or parameter share).
"""

from ._compact import compact_channels
from ._gating import gate_channels, norms_after
from ._groups import ChannelGroups, TensorChannels, channel_groups
from ._target import TargetFit, lam_for_target

__all__ = [
    "ChannelGroups",
    "TargetFit",
    "TensorChannels",
    "channel_groups",
    "compact_channels",
    "gate_channels",
    "lam_for_target",
    "norms_after",
]
