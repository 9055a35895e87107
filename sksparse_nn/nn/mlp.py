"""A plain multilayer perceptron (no scikit-learn, no gating)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MLP", "ACTIVATIONS"]

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU, "silu": nn.SiLU, "elu": nn.ELU}


class MLP(nn.Module):
    """Fully connected network: ``Linear`` layers with an activation between them.

    Parameters
    ----------
    n_features : int
    hidden_layer_sizes : tuple of int
        Width of each hidden layer (may be empty: a linear model).
    n_outputs : int
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
    dropout : float, default=0.0
        Dropout after each hidden activation.

    Attributes
    ----------
    linears : nn.ModuleList
        The ``Linear`` layers, first to last; ``linears[0].weight`` has one column per
        input feature.
    """

    def __init__(self, n_features, hidden_layer_sizes, n_outputs, activation="relu", dropout=0.0):
        super().__init__()
        sizes = [int(n_features), *map(int, hidden_layer_sizes), int(n_outputs)]
        self.linears = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        *hidden, last = self.linears
        for layer in hidden:
            x = self.dropout(self.activation(layer(x)))
        return last(x)


def compact_mlp(mlp, keep_inputs):
    """A smaller copy of a (collapsed) MLP without dropped inputs and dead neurons.

    A hidden neuron is dead when all its outgoing weights are zero: its value never
    reaches the output, so removing it (with its incoming row and bias) changes nothing.

    Parameters
    ----------
    mlp : MLP
        A module without parametrizations.
    keep_inputs : array-like of int
        Input columns to keep (the others must have all-zero first-layer weights).

    Returns
    -------
    compact : MLP
        Takes ``X[:, keep_inputs]`` and predicts exactly what ``mlp`` predicts on ``X``.
    """
    keep = torch.as_tensor(keep_inputs, dtype=torch.long)
    weights = [layer.weight.detach() for layer in mlp.linears]
    biases = [layer.bias.detach() for layer in mlp.linears]
    new_w, new_b = [], []
    for k, (w, b) in enumerate(zip(weights, biases, strict=True)):
        w = w[:, keep]
        if k + 1 < len(weights):
            alive = torch.nonzero(weights[k + 1].abs().sum(dim=0) > 0).flatten()
            w, b = w[alive], b[alive]
            keep = alive
        new_w.append(w)
        new_b.append(b)
    sizes = [new_w[0].shape[1]] + [w.shape[0] for w in new_w]
    out = MLP(sizes[0], sizes[1:-1], sizes[-1])
    out.activation, out.dropout = mlp.activation, nn.Identity()
    with torch.no_grad():
        for layer, w, b in zip(out.linears, new_w, new_b, strict=True):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    return out.to(dtype=weights[0].dtype).eval()
