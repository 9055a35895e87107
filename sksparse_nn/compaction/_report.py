"""What a compaction removed and saved: the :class:`CompactionReport` it returns."""

from __future__ import annotations

from dataclasses import dataclass, field


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
