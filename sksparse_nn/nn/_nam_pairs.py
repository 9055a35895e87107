r"""Pairwise interaction terms of the NAM, pure by construction.

A pair of terms :math:`(a, b)` contributes

.. math::

    f_{ab}(x) = \sum_{r=1}^{R} w_r \,\big(G_r(x_a) - \mu_r\big)\big(H_r(x_b) - \nu_r\big),

where :math:`G = (G_1, \dots, G_R)` is a one-hidden-layer network of the columns of term
:math:`a` (one feature, or a categorical's one-hot columns), :math:`H` one of the columns
of term :math:`b`, and :math:`\mu, \nu` the means of :math:`G` and :math:`H` over the
training rows. Whatever the networks, averaging :math:`f_{ab}(x_a, \cdot)` over the
training data's values of :math:`x_b` gives exactly 0 for every :math:`x_a` (and the
same along the other axis): the pair holds no main effect, so it cannot take over one
from the main terms, and a selection of terms means one thing (functional ANOVA under
the training data's marginals). A sum of ``R`` products approximates any smooth
interaction as a rank-``R`` expansion.

Both factor networks' first layers (weights and biases) form one penalty group per pair
(``first``, shape ``(2P, m + 1, h)``, slices ``2t`` and ``2t + 1``); their later layers
have no bias and :math:`\sigma(0) = 0`, so a pair whose group is zero has
:math:`G = H = 0`, means 0 and contributes exactly 0.

In training the factors are centred by their means over the batch (the gradient sees
the centring, so no step can move a main effect into a pair); the running means follow
them, and the estimator sets ``means`` to the exact training means after the fit.

On CPU, with a ReLU and inputs that need no gradient, the factor networks run as
compiled loops (:mod:`._nam_pair_kernels`), the module's forward as one autograd node;
otherwise (a gradient for the input, a tracer, another device) as batched tensor
products. Both compute the same sums, up to their order.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._padded import PaddedColumns
from ._tracing import loops_take

__all__ = ["PairTerms"]

#: Weight of the current batch in the running means used outside training.
_MOMENTUM = 0.1


class PairTerms(PaddedColumns, nn.Module):
    """Pairwise interactions as purified products of two factor networks each.

    Parameters
    ----------
    n_features : int
        Columns of the input.
    pairs : sequence of (sequence of int, sequence of int)
        The columns of each side of each pair (non-empty; a pair's sides disjoint).
    hidden : int, default=64
        Hidden width of every factor network (one layer of hinges, as a main term).
    rank : int, default=4
        Products per pair ``R``: factors of each side.
    n_outputs : int, default=1
    activation : module, default=ReLU()
        Satisfies ``act(0) = 0``, which a removed pair relies on.

    Attributes
    ----------
    first : nn.Parameter of shape (2P, m + 1, hidden)
        First layers of the factor networks, side ``a`` of pair ``t`` at ``2t``, side
        ``b`` at ``2t + 1``; rows past a side's width are 0, row ``m`` the biases.
    out : nn.Parameter of shape (2P, hidden, rank)
        Output weights of the factor networks (no bias).
    weight : nn.Parameter of shape (P, rank, n_outputs)
        Weight of each product in each output.
    means : buffer of shape (2P, rank)
        Means of the factors subtracted outside training.
    index : buffer of shape (2P, m)
        Column of each weight row of ``first`` (padding rows: ``n_features``).
    """

    def __init__(self, n_features, pairs, hidden=64, rank=4, n_outputs=1, activation=None):
        super().__init__()
        self.n_features = int(n_features)
        self.pairs = _check_pairs(pairs, self.n_features)
        self.rank, self.n_outputs = int(rank), int(n_outputs)
        self.activation = nn.ReLU() if activation is None else activation
        sides = [cols for pair in self.pairs for cols in pair]
        width = max((len(s) for s in sides), default=1)
        index = torch.full((len(sides), width), self.n_features, dtype=torch.long)
        for s, cols in enumerate(sides):
            index[s, : len(cols)] = torch.as_tensor(cols, dtype=torch.long)
        self.register_buffer("index", index)
        self.first = nn.Parameter(torch.empty(len(sides), width + 1, int(hidden)))
        self.out = nn.Parameter(torch.empty(len(sides), int(hidden), self.rank))
        self.weight = nn.Parameter(torch.empty(len(self.pairs), self.rank, self.n_outputs))
        self.register_buffer("means", torch.zeros(len(sides), self.rank))
        self.reset_parameters()

    @property
    def n_pairs(self):
        """Number of pairs ``P``."""
        return len(self.pairs)

    @torch.no_grad()
    def reset_parameters(self):
        """First layers ``U(-a, a)``, ``a = 1/sqrt(hidden)`` (a main term's start); the
        factor networks' output weights ``U(-1, 1)`` and the products' ``U(-1, 1)``:
        a pair's output is a product of five layers, and with a main term's scales in
        each its gradients start 100 times smaller than a main term's (a saddle at 0
        that the penalty then keeps it in); means 0."""
        a = 1.0 / math.sqrt(self.first.shape[2])
        self.first.uniform_(-a, a)
        self.first[:, :-1].mul_(self.weight_mask().unsqueeze(2))
        self.out.uniform_(-1.0, 1.0)
        self.weight.uniform_(-1.0, 1.0)
        self.means.zero_()

    def factors(self, x, first=None):
        """The factor networks' outputs ``G`` and ``H``, shape ``(2P, n, rank)``: by the
        compiled loops of :mod:`._nam_pair_kernels` where they apply
        (:meth:`_compiled_path`), else as batched tensor products."""
        first = self.first if first is None else first
        if self._compiled_path(x, first):
            from ._nam_pair_kernels import PairFactors  # numba, imported on first use

            widths = self.weight_mask().sum(dim=1)
            return PairFactors.apply(x, first, self.out, self.index, widths)
        m = first.shape[1] - 1
        h = self.activation(torch.baddbmm(first[:, m:], self.gather(x), first[:, :m]))
        return torch.bmm(h, self.out)

    def _compiled_path(self, x, first):
        """Whether the compiled loops compute the factors: a ReLU, CPU tensors of one
        float dtype, inputs that need no gradient (the loops give none), not traced."""
        return isinstance(self.activation, nn.ReLU) and loops_take(x, first, self.out)

    def pair_outputs(self, x):
        """Every pair's contribution, shape ``(P, n, n_outputs)``."""
        g = self.factors(x)
        if self.training and x.shape[0] > 0:
            mean = g.mean(dim=1, keepdim=True)  # the batch's: the gradient sees it
            with torch.no_grad():
                self.means.lerp_(mean[:, 0].detach().to(self.means.dtype), _MOMENTUM)
        else:
            mean = self.means.unsqueeze(1)
        centred = g - mean
        return torch.bmm(centred[0::2] * centred[1::2], self.weight)

    def forward(self, x):
        """The sum of the pairs' contributions, shape ``(n, n_outputs)``."""
        if not self.pairs:
            return x.new_zeros(x.shape[0], self.n_outputs)
        first = self.first  # recomputed once here when D-gated
        if self._compiled_path(x, first) and self.weight.dtype == x.dtype:
            from ._nam_pair_kernels import PairSum  # numba, imported on first use

            widths = self.weight_mask().sum(dim=1)
            args = (self.index, widths, self.means, _MOMENTUM, self.training)
            return PairSum.apply(x, first, self.out, self.weight, *args)
        return self.pair_outputs(x).sum(dim=0)

    @torch.no_grad()
    def center_(self, x, batch=8192):
        """Set ``means`` to the factors' exact means over the rows of ``x`` (in batches):
        each pair then averages to 0 along each of its axes over these rows."""
        was_training = self.training
        self.eval()
        total = torch.zeros_like(self.means, dtype=torch.float64)
        for start in range(0, x.shape[0], batch):
            total += self.factors(x[start : start + batch]).double().sum(dim=1)
        self.means.copy_(total / max(1, x.shape[0]))
        self.train(was_training)
        return self

    def subset(self, keep, columns):
        """A copy holding the pairs ``keep`` only, reading ``x[:, columns]``."""
        position = {c: i for i, c in enumerate(columns)}
        pairs = [[[position[c] for c in side] for side in self.pairs[t]] for t in keep]
        new = PairTerms(
            len(columns), pairs, self.first.shape[2], self.rank, self.n_outputs, self.activation
        ).to(dtype=self.first.dtype)
        sides = torch.as_tensor([s for t in keep for s in (2 * t, 2 * t + 1)], dtype=torch.long)
        m = new.width
        with torch.no_grad():
            first = self.first.detach()[sides]
            new.first[:, :m].copy_(first[:, :m])
            new.first[:, m].copy_(first[:, -1])
            new.out.copy_(self.out.detach()[sides])
            new.weight.copy_(self.weight.detach()[torch.as_tensor(keep, dtype=torch.long)])
            new.means.copy_(self.means[sides])
        return new

    def extra_repr(self):
        return f"n_pairs={self.n_pairs}, rank={self.rank}, hidden={self.first.shape[2]}"


def _check_pairs(pairs, n_features):
    """``pairs`` as a list of ``[cols_a, cols_b]`` lists of column indices."""
    out = []
    for t, pair in enumerate(pairs):
        if len(pair) != 2:
            raise ValueError(f"Pair {t} must have two sides, got {len(pair)}.")
        sides = [[int(c) for c in side] for side in pair]
        for side in sides:
            if not side:
                raise ValueError(f"Pair {t} has an empty side.")
            bad = [c for c in side if not 0 <= c < n_features]
            if bad:
                raise ValueError(f"Pair {t} names column {bad[0]}, out of range for {n_features}.")
        if set(sides[0]) & set(sides[1]):
            raise ValueError(f"Pair {t}'s two sides share a column.")
        out.append(sides)
    return out
