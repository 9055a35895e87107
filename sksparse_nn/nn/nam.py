r"""Neural additive models (NAM) in plain PyTorch, vectorized over features.

A NAM (Agarwal et al., NeurIPS 2021) predicts

.. math::

    f(x) = \beta + \sum_{j=1}^{p} \big(g_j(x_j) - c_j\big),

where every *shape function* :math:`g_j: \mathbb{R} \to \mathbb{R}^k` is its own small
network of the single feature :math:`x_j` and :math:`c_j` is a fixed centring constant
(a buffer, 0 until :meth:`NAM.center_` sets it to the mean of :math:`g_j` on data).

All ``p`` subnetworks have the same architecture and are evaluated at once: the
parameters of a layer are stacked along a leading feature axis, activations have shape
``(p, n, h)``, and every hidden/output layer is one batched matrix product
(:func:`torch.baddbmm` / :func:`torch.bmm` over the feature axis). There is no Python
loop over features, so the cost of a forward pass grows with ``p`` only through the
size of those batched products.

Exactly-zero removed features
-----------------------------
The first layer of feature ``j`` maps the scalar :math:`x_j` to
:math:`a_j = \sigma(x_j u_j + b_j)` with weights :math:`u_j` and bias :math:`b_j`. Both are
stored together in one parameter ``first`` of shape ``(p, 2, h_1)`` (``first[:, 0]`` the
weights, ``first[:, 1]`` the biases), so that one group per feature (``AxisGroups(0)``)
holds *everything through which* :math:`x_j` *enters its subnetwork*. Later layers have
no bias, and every activation satisfies :math:`\sigma(0) = 0`. Hence when feature ``j``'s
group is zero, :math:`a_j = 0` and every later layer maps 0 to 0: :math:`g_j \equiv 0`
*exactly*, for every input, in any floating-point arithmetic (not merely constant, as it
would be with biases in later layers, and without relying on a subtraction
:math:`g_j(x) - g_j(0)` cancelling exactly). Expressiveness is unchanged in practice: the
first layer already is a basis of hinges :math:`\sigma(x u_k + b_k)` with learnable
kinks, and a constant per feature is pointless next to the global intercept
:math:`\beta`.

Batch normalisation (used in the D-Gating paper's NAMs) is deliberately absent: its
shift would make a removed feature's contribution a non-zero constant and its batch
statistics would couple samples.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .mlp import ACTIVATIONS

__all__ = ["NAM", "compact_nam"]


class NAM(nn.Module):
    """A neural additive model whose per-feature subnetworks run as batched products.

    Parameters
    ----------
    n_features : int
        Number of input features ``p`` (one subnetwork each; may be 0).
    hidden_layer_sizes : tuple of int, default=(64,)
        Width of every hidden layer of each subnetwork (at least one layer).
    n_outputs : int, default=1
        Outputs of each subnetwork (classes for multiclass logits).
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
        All satisfy ``act(0) = 0``, which removed features rely on.
    dropout : float, default=0.0
        Dropout on every hidden activation.
    feature_dropout : float, default=0.0
        Probability of dropping a feature's whole contribution for a sample in training
        (rescaled by ``1 / (1 - feature_dropout)``, as in the NAM paper).

    Attributes
    ----------
    first : nn.Parameter of shape (p, 2, h_1)
        First layer of every subnetwork: ``first[j, 0]`` weights, ``first[j, 1]`` biases.
    hidden : nn.ParameterList
        Weights of shape ``(p, h_l, h_{l+1})`` of the later hidden layers (no bias).
    out : nn.Parameter of shape (p, h_L, n_outputs)
        Output weights of each subnetwork (no bias).
    intercept : nn.Parameter of shape (n_outputs,)
    centers : buffer of shape (p, n_outputs)
        Constants ``c_j`` subtracted from each contribution (zeros unless set).
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes=(64,),
        n_outputs=1,
        activation="relu",
        dropout=0.0,
        feature_dropout=0.0,
    ):
        super().__init__()
        sizes = [int(s) for s in hidden_layer_sizes]
        if not sizes or min(sizes) < 1:
            raise ValueError(
                f"hidden_layer_sizes needs at least one positive width, got {hidden_layer_sizes}."
            )
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}."
            )
        p, k = int(n_features), int(n_outputs)
        self.n_features, self.n_outputs = p, k
        self.hidden_layer_sizes = tuple(sizes)
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]()
        self.dropout = float(dropout)
        self.feature_dropout = float(feature_dropout)
        self.first = nn.Parameter(torch.empty(p, 2, sizes[0]))
        self.hidden = nn.ParameterList(
            nn.Parameter(torch.empty(p, a, b)) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.out = nn.Parameter(torch.empty(p, sizes[-1], k))
        self.intercept = nn.Parameter(torch.zeros(k))
        self.register_buffer("centers", torch.zeros(p, k))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """Initialize every subnetwork; the first layer small, the rest variance-preserving.

        First-layer weights and biases are drawn from ``U(-a, a)`` with
        ``a = 1/sqrt(h_1)``, so each feature's group has norm about 0.8 whatever the
        width. Small first-layer groups keep D-Gating well conditioned: gradient steps on
        the gates act on ``w_j`` with an effective learning rate that grows like
        ``||w_j||^(2(D-1)/D)``, and with ``U(-1, 1)`` (norm ~ sqrt(2 h_1 / 3)) plain SGD
        diverges for ``D = 4``. Later hidden layers use He-uniform weights (variance
        ``2 / fan_in``), the output layer ``nn.Linear``'s ``U(-1/sqrt(h_L), 1/sqrt(h_L))``.
        """
        a = 1.0 / math.sqrt(self.first.shape[2])
        self.first.uniform_(-a, a)
        for w in self.hidden:
            bound = math.sqrt(6.0 / w.shape[1])
            w.uniform_(-bound, bound)
        bound = 1.0 / math.sqrt(self.out.shape[1])
        self.out.uniform_(-bound, bound)
        self.intercept.zero_()
        self.centers.zero_()

    def _hidden_dropout(self, h):
        return F.dropout(h, self.dropout, self.training) if self.dropout > 0 else h

    def feature_outputs(self, x):
        """Centred per-feature contributions ``g_j(x_j) - c_j``, shape ``(p, n, k)``.

        Parameters
        ----------
        x : tensor of shape (n, p)
        """
        first = self.first  # (p, 2, h1); recomputed once here when D-gated
        # (p, n, 1) * (p, 1, h1) + (p, 1, h1): every feature's first layer at once
        h = torch.baddbmm(first[:, 1:2], x.t().unsqueeze(2), first[:, 0:1])
        h = self._hidden_dropout(self.activation(h))
        for w in self.hidden:  # one batched product per layer, over the feature axis
            h = self._hidden_dropout(self.activation(torch.bmm(h, w)))
        return torch.bmm(h, self.out) - self.centers.unsqueeze(1)

    def contributions(self, x):
        """Per-feature contributions ``(n, p, k)``; plus the intercept they sum to the output."""
        return self.feature_outputs(x).permute(1, 0, 2)

    def forward(self, x):
        if not self.hidden and not (self.training and self.feature_dropout > 0):
            # One hidden layer: the sum over features fuses into a single matrix product
            # on the (n, p * h) activations (about 25% faster than per-feature outputs).
            first = self.first
            h = torch.addcmul(first[:, 1], x.unsqueeze(2), first[:, 0])  # (n, p, h1)
            h = self._hidden_dropout(self.activation(h))
            out = h.reshape(x.shape[0], -1) @ self.out.reshape(-1, self.n_outputs)
            return out + (self.intercept - self.centers.sum(dim=0))
        g = self.feature_outputs(x)  # (p, n, k)
        if self.training and self.feature_dropout > 0:
            keep = torch.ones_like(g[:, :, :1])
            g = g * F.dropout(keep, self.feature_dropout, True)
        return g.sum(dim=0) + self.intercept

    @torch.no_grad()
    def center_(self, x):
        """Centre every shape function on the data ``x`` without changing the output.

        Sets ``c_j`` so that each contribution has mean zero on ``x`` and moves the sum of
        the shifts into the intercept. A removed feature (``g_j`` identically 0) keeps
        ``c_j = 0`` exactly. Works on a module without parametrizations.
        """
        was_training = self.training
        self.eval()
        self.centers.zero_()
        mean = self.feature_outputs(x).mean(dim=1)  # (p, k)
        self.centers.copy_(mean)
        self.intercept.add_(mean.sum(dim=0))
        self.train(was_training)
        return self

    def extra_repr(self):
        return (
            f"n_features={self.n_features}, hidden_layer_sizes={self.hidden_layer_sizes}, "
            f"n_outputs={self.n_outputs}, activation={self.activation_name!r}"
        )


def compact_nam(nam, keep_features):
    """A smaller copy of a (collapsed) NAM holding only the subnetworks of some features.

    Parameters
    ----------
    nam : NAM
        A module without parametrizations.
    keep_features : array-like of int
        Features to keep; the others must contribute identically 0 (zero first layer and
        centre), so that dropping them changes nothing.

    Returns
    -------
    compact : NAM
        Takes ``X[:, keep_features]`` and returns the same outputs as ``nam`` on ``X``, in
        eval mode without dropout.
    """
    keep = torch.as_tensor(keep_features, dtype=torch.long).reshape(-1)
    out = NAM(
        keep.numel(),
        nam.hidden_layer_sizes,
        nam.n_outputs,
        nam.activation_name,
    ).to(dtype=nam.first.dtype)
    with torch.no_grad():
        out.first.copy_(nam.first.detach()[keep])
        for dst, src in zip(out.hidden, nam.hidden, strict=True):
            dst.copy_(src.detach()[keep])
        out.out.copy_(nam.out.detach()[keep])
        out.intercept.copy_(nam.intercept.detach())
        out.centers.copy_(nam.centers[keep])
    return out.eval()
