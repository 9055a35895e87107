"""An autoencoder whose bottleneck units are rows of one tensor (no scikit-learn, no gating).

Bottleneck unit ``j`` owns the weights that bring its value in (row ``j`` of the encoder's
last map and its bias) and the weights that carry it out (column ``j`` of the decoder's
first map). Both live in row ``j`` of one ``(k, m + 1 + q)`` parameter ``units``, so that a
group structure on rows (``groups="out"``) removes a unit whole: its code is then exactly 0
and nothing of it reaches the output. The code itself is linear (no activation), as PCA's.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .mlp import ACTIVATIONS

__all__ = ["Autoencoder", "compact_autoencoder"]


class Bottleneck(nn.Module):
    """``z = h W_in^T + b_in`` and ``z W_out``, with ``[W_in | b_in | W_out^T]`` one tensor.

    Parameters
    ----------
    n_in, n_units, n_out : int

    Attributes
    ----------
    units : nn.Parameter of shape (n_units, n_in + 1 + n_out)
        Row ``j``: the encoder weights of unit ``j``, its bias, its decoder weights.
    """

    def __init__(self, n_in, n_units, n_out):
        super().__init__()
        self.n_in, self.n_units, self.n_out = int(n_in), int(n_units), int(n_out)
        enc, dec = nn.Linear(n_in, n_units), nn.Linear(n_units, n_out, bias=False)
        with torch.no_grad():
            units = torch.cat([enc.weight, enc.bias[:, None], dec.weight.t()], dim=1)
        self.units = nn.Parameter(units)

    def encode(self, h):
        units = self.units
        return h @ units[:, : self.n_in].t() + units[:, self.n_in]

    def decode(self, z):
        return z @ self.units[:, self.n_in + 1 :]


class Autoencoder(nn.Module):
    """Autoencoder with a linear bottleneck of ``k`` units, the decoder mirroring the encoder.

    ``x -> MLP -> z -> MLP -> x_hat``, where ``z`` has ``k`` linear units.

    Parameters
    ----------
    n_features : int
    hidden_layer_sizes : tuple of int
        Encoder hidden widths (the decoder uses them reversed); empty: a linear
        autoencoder (PCA's model).
    n_components : int
        Bottleneck width ``k`` (an upper bound: sparsity removes units).
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
    """

    def __init__(self, n_features, hidden_layer_sizes, n_components, activation="relu"):
        super().__init__()
        sizes = [int(n_features), *map(int, hidden_layer_sizes)]
        self.encoder = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        back = sizes[::-1]
        self.bottleneck = Bottleneck(sizes[-1], n_components, back[0])
        self.out_bias = nn.Parameter(torch.zeros(back[0]))
        self.decoder = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(back[:-1], back[1:], strict=True)
        )
        self.activation = ACTIVATIONS[activation]()

    @property
    def n_components(self):
        return self.bottleneck.n_units

    def encode(self, x):
        for layer in self.encoder:
            x = self.activation(layer(x))
        return self.bottleneck.encode(x)

    def decode(self, z):
        h = self.bottleneck.decode(z) + self.out_bias
        for layer in self.decoder:
            h = layer(self.activation(h))
        return h

    def forward(self, x):
        return self.decode(self.encode(x))


def compact_autoencoder(model, keep_units):
    """A copy of a (collapsed) autoencoder with only the bottleneck units ``keep_units``.

    Parameters
    ----------
    model : Autoencoder
        A module without parametrizations.
    keep_units : array-like of int
        Bottleneck units to keep, in the order the compact codes list them.

    Returns
    -------
    compact : Autoencoder
        Its codes are the kept columns of ``model.encode(x)``, in the order given, and
        ``compact.decode`` of them equals ``model.decode`` of the full codes whenever the
        removed units are exactly zero.
    """
    keep = torch.as_tensor(keep_units, dtype=torch.long)
    out = copy.deepcopy(model)
    units = model.bottleneck.units.detach()[keep]
    out.bottleneck = Bottleneck(model.bottleneck.n_in, len(keep), model.bottleneck.n_out)
    with torch.no_grad():
        out.bottleneck.units.copy_(units)
    return out.to(dtype=units.dtype).eval()
