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
    skip : bool, default=False
        Add a linear path from the inputs to the outputs. Its weights are the last
        ``n_outputs`` rows of the first layer, so a column of ``linears[0].weight`` holds
        everything through which an input feature enters the network (one group for
        feature selection: a feature is used linearly, non-linearly, or not at all).

    Attributes
    ----------
    linears : nn.ModuleList
        The ``Linear`` layers, first to last; ``linears[0].weight`` has one column per
        input feature (with ``skip``, its last ``n_outputs`` rows are the skip path).
    """

    def __init__(
        self, n_features, hidden_layer_sizes, n_outputs, activation="relu", dropout=0.0, skip=False
    ):
        super().__init__()
        sizes = [int(n_features), *map(int, hidden_layer_sizes), int(n_outputs)]
        self.skip = bool(skip) and len(sizes) > 2
        self.n_outputs = sizes[-1]
        widths = list(sizes)
        if self.skip:  # the first layer also computes the linear skip path's outputs
            widths[1] += self.n_outputs
        self.linears = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(sizes[:-1], widths[1:], strict=True)
        )
        if self.skip:
            with torch.no_grad():
                self.linears[0].bias[-self.n_outputs :] = 0.0  # the last layer has the bias
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        *hidden, last = self.linears
        skip = None
        for k, layer in enumerate(hidden):
            x = layer(x)
            if k == 0 and self.skip:
                x, skip = x[:, : -self.n_outputs], x[:, -self.n_outputs :]
            x = self.dropout(self.activation(x))
        out = last(x)
        return out if skip is None else out + skip


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
    skip = getattr(mlp, "skip", False)
    k_out = mlp.linears[-1].weight.shape[0]
    new_w, new_b = [], []
    for k, (w, b) in enumerate(zip(weights, biases, strict=True)):
        w = w[:, keep]
        if k + 1 < len(weights):
            alive = torch.nonzero(weights[k + 1].abs().sum(dim=0) > 0).flatten()
            rows = alive
            if k == 0 and skip:  # the skip path's rows stay
                n_hidden = w.shape[0] - k_out
                rows = torch.cat([alive, torch.arange(n_hidden, n_hidden + k_out)])
            w, b = w[rows], b[rows]
            keep = alive
        new_w.append(w)
        new_b.append(b)
    hidden = [w.shape[0] for w in new_w[:-1]]
    if skip and hidden:
        hidden[0] -= k_out
    out = MLP(new_w[0].shape[1], hidden, k_out, skip=skip)
    out.activation, out.dropout = mlp.activation, nn.Identity()
    with torch.no_grad():
        for layer, w, b in zip(out.linears, new_w, new_b, strict=True):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    return out.to(dtype=weights[0].dtype).eval()
