"""A plain multilayer perceptron (no scikit-learn, no gating)."""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["MLP", "ACTIVATIONS", "MemberLinear"]

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
    encoding : nn.Module or None, default=None
        A fixed map of the inputs before the first layer (e.g.
        :class:`~sksparse_nn.nn.PiecewiseLinearEncoding`) with ``n_features`` and
        ``n_columns`` attributes: the first layer then has one column per encoded column.
    n_members : int, default=1
        Members of an efficient ensemble. Every member shares the first layer (and so
        the inputs it uses); member ``m`` adds its own bias ``member_bias[m]`` to the
        first layer's outputs (its own thresholds on the same projections) and has its
        own later layers. In training mode the module
        returns every member's output, shape ``(n, n_members, n_outputs)`` (each member
        is fitted to the targets); in evaluation mode their mean, ``(n, n_outputs)``.

    Attributes
    ----------
    linears : nn.ModuleList
        The ``Linear`` layers, first to last (with ``n_members > 1``: the first only);
        ``linears[0].weight`` has one column per input feature, or per encoded column
        (with ``skip``, its last ``n_outputs`` rows are the skip path).
    members : nn.ModuleList of MemberLinear
        With ``n_members > 1``: the members' later layers, first to last.
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes,
        n_outputs,
        activation="relu",
        dropout=0.0,
        skip=False,
        encoding=None,
        n_members=1,
    ):
        super().__init__()
        self.encoding = encoding
        n_in = int(n_features) if encoding is None else int(encoding.n_columns)
        sizes = [n_in, *map(int, hidden_layer_sizes), int(n_outputs)]
        self.skip = bool(skip) and len(sizes) > 2
        self.n_outputs = sizes[-1]
        self.n_members = int(n_members)
        if self.n_members > 1 and len(sizes) < 3:
            raise ValueError("An ensemble (n_members > 1) needs at least one hidden layer.")
        widths = list(sizes)
        if self.skip:  # the first layer also computes the linear skip path's outputs
            widths[1] += self.n_outputs
        pairs = list(zip(sizes[:-1], widths[1:], strict=True))
        if self.n_members > 1:  # the first layer is shared, the later ones per member
            self.linears = nn.ModuleList([nn.Linear(*pairs[0])])
            self.members = nn.ModuleList(MemberLinear(self.n_members, *p) for p in pairs[1:])
            bound = 1.0 / sizes[0] ** 0.5  # nn.Linear's bias init, one per member
            self.member_bias = nn.Parameter(
                torch.empty(self.n_members, sizes[1]).uniform_(-bound, bound)
            )
        else:
            self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in pairs)
        if self.skip:
            with torch.no_grad():
                self.linears[0].bias[-self.n_outputs :] = 0.0  # the last layer has the bias
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def n_features(self):
        """Number of input features."""
        if self.encoding is not None:
            return self.encoding.n_features
        return self.linears[0].in_features

    def forward(self, x):
        if self.encoding is not None:
            x = self.encoding(x)
        layers = list(self.linears) if self.n_members == 1 else [self.linears[0], *self.members]
        *hidden, last = layers
        skip = None
        for k, layer in enumerate(hidden):
            x = layer(x)
            if k == 0 and self.skip:
                x, skip = x[..., : -self.n_outputs], x[..., -self.n_outputs :]
            if k == 0 and self.n_members > 1:  # (n, width) -> (n, members, width)
                x = x.unsqueeze(1) + self.member_bias
            x = self.dropout(self.activation(x))
        out = last(x)
        if skip is not None:
            out = out + (skip if self.n_members == 1 else skip.unsqueeze(1))
        if self.n_members > 1 and not self.training:
            out = out.mean(dim=1)
        return out


class MemberLinear(nn.Module):
    """``n_members`` independent ``Linear`` layers applied in one batched product.

    Takes ``(n, n_members, in_features)``, returns ``(n, n_members, out_features)``;
    ``weight`` has shape ``(n_members, out_features, in_features)``, each member drawn
    as ``nn.Linear`` draws its weights.
    """

    def __init__(self, n_members, in_features, out_features):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        layers = [nn.Linear(in_features, out_features) for _ in range(int(n_members))]
        self.weight = nn.Parameter(torch.stack([layer.weight.detach() for layer in layers]))
        self.bias = nn.Parameter(torch.stack([layer.bias.detach() for layer in layers]))

    def forward(self, x):
        return torch.einsum("nmi,moi->nmo", x, self.weight) + self.bias


def compact_mlp(mlp, keep_inputs):
    """A smaller copy of a (collapsed) MLP without dropped inputs and dead neurons.

    A hidden neuron is dead when all its outgoing weights are zero: its value never
    reaches the output, so removing it (with its incoming row and bias) changes nothing.
    An encoding keeps the bins of the kept inputs; an ensemble keeps its neurons.

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
    encoding = getattr(mlp, "encoding", None)
    if encoding is not None:  # the kept features' bins, and the columns they feed
        keep, encoding = encoding.columns(keep), encoding.select(keep)
    if getattr(mlp, "n_members", 1) > 1:
        out = copy.deepcopy(mlp)
        first = mlp.linears[0]
        out.linears[0] = nn.Linear(len(keep), first.out_features)
        with torch.no_grad():
            out.linears[0].weight.copy_(first.weight.detach()[:, keep])
            out.linears[0].bias.copy_(first.bias.detach())
        out.encoding, out.dropout = encoding, nn.Identity()
        return out.to(dtype=first.weight.dtype).eval()
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
    out = MLP(new_w[0].shape[1], hidden, k_out, skip=skip, encoding=encoding)
    out.activation, out.dropout = mlp.activation, nn.Identity()
    with torch.no_grad():
        for layer, w, b in zip(out.linears, new_w, new_b, strict=True):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    return out.to(dtype=weights[0].dtype).eval()
