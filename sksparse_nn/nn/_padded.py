"""Subnetworks that read a few input columns each, held as one padded index.

A module of ``T`` subnetworks of up to ``m`` columns keeps ``index`` of shape ``(T, m)``;
a subnetwork narrower than ``m`` is padded with the index ``n_features`` (a column of
zeros appended to the input), so that every subnetwork's first layer is one batched
product. Shared by the NAM's terms and its pairs' factor networks.
"""

from __future__ import annotations

import torch

__all__ = ["PaddedColumns"]


class PaddedColumns:
    """``width``, ``weight_mask`` and ``gather`` of a module with ``index`` (``(T, m)``)
    and ``n_features``."""

    @property
    def width(self):
        """Columns of the widest subnetwork (``m``): ``first[:, :m]`` are weights."""
        return self.index.shape[1]

    def weight_mask(self):
        """Boolean ``(T, m)``: which weight rows of ``first`` belong to a real column."""
        return self.index < self.n_features

    def gather(self, x):
        """The columns of every subnetwork, shape ``(T, n, m)`` (zeros in padding rows)."""
        padded = torch.cat([x, x.new_zeros(x.shape[0], 1)], dim=1)
        return padded[:, self.index].permute(1, 0, 2)
