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
:func:`count_parameters` and :func:`count_flops` measure what was gained;
:func:`trace_shapes` is the ``torch.fx`` trace they read (also the channel groups'). Pure
PyTorch.

Modules, one job each:

* ``_compact``: :func:`compact_sequential` and :func:`compact_module`, the passes that
  remove units until nothing more goes;
* ``_graph``: the ``torch.fx`` data flow, read as segments from a producer to its reader;
* ``_slicing``: the layers of a segment sliced, constants folded into the next bias;
* ``_attention``: :class:`CompactAttention` and :func:`compact_attention`;
* ``_count``: :func:`count_parameters` and :func:`count_flops`;
* ``_report``: :class:`CompactionReport`.
"""

from ._attention import CompactAttention, compact_attention
from ._compact import compact_module, compact_sequential
from ._count import count_flops, count_parameters
from ._graph import trace_shapes
from ._report import CompactionReport

__all__ = [
    "CompactAttention",
    "CompactionReport",
    "compact_attention",
    "compact_module",
    "compact_sequential",
    "count_flops",
    "count_parameters",
    "trace_shapes",
]
