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

Terms of several features (group additive models)
--------------------------------------------------
``terms`` lets one subnetwork take several columns, e.g. the one-hot columns of a
categorical variable or a block of measurements of one modality: term ``t`` is a
network :math:`g_t(x_{G_t})` of the columns :math:`G_t`. Terms are padded to the width
``m`` of the largest one: ``first`` has shape ``(T, m + 1, h_1)`` (rows ``0..m-1`` the
weights of the term's columns, zero past its own width, row ``m`` the biases), so one
group per term again holds everything through which its inputs enter, and a removed
term is exactly zero. With one column per term (the default) this is the layout above.

Pairwise interactions (GA2M)
----------------------------
``pairs`` adds one interaction term per pair of main terms (:mod:`._nam_pairs`): a sum
of products of two centred factor networks, one per side, which averages to zero along
each of its axes over the training data (it holds no main effect). Its parameters live
in the submodule ``interactions``; without ``pairs`` it is ``None`` and the module is
the plain NAM above.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ._nam_pairs import PairTerms
from ._padded import PaddedColumns
from ._tracing import loops_take, tracing
from .mlp import ACTIVATIONS

__all__ = ["NAM", "compact_nam"]

#: Activations per chunk of features in the one-hidden-layer forward (1 MB of float32).
_CHUNK_ELEMENTS = 2**18


class NAM(PaddedColumns, nn.Module):
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
        Probability of dropping a term's whole contribution for a sample in training
        (rescaled by ``1 / (1 - feature_dropout)``, as in the NAM paper).
    terms : sequence of sequences of int, default=None
        The input columns of each subnetwork (non-empty, disjoint; columns in no term are
        ignored). ``None``: one term per column, ``[[0], [1], ..., [p - 1]]``.
    pairs : sequence of (sequence of int, sequence of int), default=None
        The columns of the two sides of each interaction term (see
        ``PairTerms`` of ``_nam_pairs``); ``None`` or empty: no interactions.
    pair_rank : int, default=4
        Products of factor networks per interaction term.

    Attributes
    ----------
    first : nn.Parameter of shape (T, m + 1, h_1)
        First layer of every subnetwork: ``first[t, :m]`` the weights of the term's
        columns (rows past its width are 0), ``first[t, m]`` the biases. ``m = 1`` without
        ``terms``: ``first[j, 0]`` weights, ``first[j, 1]`` biases.
    hidden : nn.ParameterList
        Weights of shape ``(T, h_l, h_{l+1})`` of the later hidden layers (no bias).
    out : nn.Parameter of shape (T, h_L, n_outputs)
        Output weights of each subnetwork (no bias).
    intercept : nn.Parameter of shape (n_outputs,)
    centers : buffer of shape (T, n_outputs)
        Constants ``c_t`` subtracted from each contribution (zeros unless set).
    index : buffer of shape (T, m)
        Column of each weight row of ``first``; padding rows point at ``p`` (a zero
        column appended to the input).
    interactions : PairTerms or None
        The interaction terms (``pairs``), after the ``T`` main terms.
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes=(64,),
        n_outputs=1,
        activation="relu",
        dropout=0.0,
        feature_dropout=0.0,
        terms=None,
        pairs=None,
        pair_rank=4,
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
        self.terms = _check_terms(terms, p)
        n_terms = len(self.terms)
        width = max((len(t) for t in self.terms), default=1)
        index = torch.full((n_terms, width), p, dtype=torch.long)
        for t, cols in enumerate(self.terms):
            index[t, : len(cols)] = torch.as_tensor(cols, dtype=torch.long)
        self.register_buffer("index", index)
        # one column per term, in column order: the input needs no gathering
        self._plain = terms is None or self.terms == [[j] for j in range(p)]
        # the compiled loops' view of the terms: columns (padded) and widths
        self._term_widths = torch.tensor([len(t) for t in self.terms], dtype=torch.long)
        self.first = nn.Parameter(torch.empty(n_terms, width + 1, sizes[0]))
        self.hidden = nn.ParameterList(
            nn.Parameter(torch.empty(n_terms, a, b))
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.out = nn.Parameter(torch.empty(n_terms, sizes[-1], k))
        self.intercept = nn.Parameter(torch.zeros(k))
        self.register_buffer("centers", torch.zeros(n_terms, k))
        self.interactions = None
        if pairs is not None and len(pairs):
            act = ACTIVATIONS[activation]()
            self.interactions = PairTerms(p, pairs, sizes[0], pair_rank, k, act)
        self.reset_parameters()

    @property
    def n_terms(self):
        """Number of subnetworks (additive terms)."""
        return len(self.terms)

    @property
    def n_pairs(self):
        """Number of interaction terms (after the ``n_terms`` main terms)."""
        return 0 if self.interactions is None else self.interactions.n_pairs

    def gather(self, x):
        """The columns of every term, shape ``(T, n, m)`` (zeros in padding rows)."""
        if self._plain:
            return x.t().unsqueeze(2)
        return super().gather(x)

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
        self.first[:, :-1].mul_(self.weight_mask().unsqueeze(2))  # padding rows stay 0
        for w in self.hidden:
            bound = math.sqrt(6.0 / w.shape[1])
            w.uniform_(-bound, bound)
        bound = 1.0 / math.sqrt(self.out.shape[1])
        self.out.uniform_(-bound, bound)
        self.intercept.zero_()
        self.centers.zero_()
        if self.interactions is not None:
            self.interactions.reset_parameters()

    def _hidden_dropout(self, h):
        return F.dropout(h, self.dropout, self.training) if self.dropout > 0 else h

    def feature_outputs(self, x, first=None):
        """Centred per-term contributions ``g_t(x_{G_t}) - c_t``, shape ``(T, n, k)``.

        Parameters
        ----------
        x : tensor of shape (n, p)
        first : tensor, optional
            The first layer's tensor when already at hand (D-gated: recomputed from its
            factors at every access).
        """
        first = self.first if first is None else first  # (T, m + 1, h1)
        m = first.shape[1] - 1
        # (T, n, m) @ (T, m, h1) + (T, 1, h1): every term's first layer at once
        h = torch.baddbmm(first[:, m:], self.gather(x), first[:, :m])
        h = self._hidden_dropout(self.activation(h))
        for w in self.hidden:  # one batched product per layer, over the feature axis
            h = self._hidden_dropout(self.activation(torch.bmm(h, w)))
        return torch.bmm(h, self.out) - self.centers.unsqueeze(1)

    def contributions(self, x):
        """Per-term contributions ``(n, T + P, k)``, the interactions after the main terms;
        plus the intercept they sum to the output."""
        g = self.feature_outputs(x)
        if self.interactions is not None:
            g = torch.cat([g, self.interactions.pair_outputs(x)])
        return g.permute(1, 0, 2)

    def _compiled_path(self, x, first=None):
        """Whether :class:`_OneLayerReLU` computes the forward: one hidden ReLU layer,
        nothing random in training, CPU tensors of one float dtype and inputs that need
        no gradient (the kernels give none). ``first``: the first layer's tensor when
        already at hand (D-gated: a product of factors)."""
        first = self.first if first is None else first
        return (
            self._one_relu_layer
            and not (self.training and (self.dropout > 0 or self.feature_dropout > 0))
            and loops_take(x, first, self.out)
        )

    @property
    def _one_relu_layer(self):
        """One hidden ReLU layer over at least one feature: the compiled loops' model."""
        return not self.hidden and self.activation_name == "relu" and self.n_features > 0

    def forward(self, x):
        if self.interactions is None:
            return self._main_forward(x)
        return self._main_forward(x) + self.interactions(x)

    def _main_forward(self, x):
        first = self.first  # recomputed once here when D-gated
        if self._compiled_path(x, first):
            # the activations never stored: compiled loops (see _nam_kernels)
            terms = None if self._plain else (self.index, self._term_widths)
            return _OneLayerReLU.apply(x, first, self.out, self.intercept, self.centers, terms)
        if self._plain and not self.hidden and not (self.training and self.feature_dropout > 0):
            # One hidden layer: the sum over features fuses into one matrix product on the
            # (n, p * h) activations per chunk of features. Chunks keep the activations
            # near _CHUNK_ELEMENTS floats: cache-sized, and bounded for large batches.
            out_weight = self.out
            n, h1 = x.shape[0], first.shape[2]
            step = max(1, _CHUNK_ELEMENTS // max(1, n * h1))
            if tracing():  # one chunk: a traced graph must hold for any batch size
                step = max(1, self.n_features)
            out = None
            for start in range(0, self.n_features, step):
                part = slice(start, start + step)
                h = torch.addcmul(first[part, 1], x[:, part].unsqueeze(2), first[part, 0])
                h = self._hidden_dropout(self.activation(h))  # (n, chunk, h1)
                term = h.reshape(n, -1) @ out_weight[part].reshape(-1, self.n_outputs)
                out = term if out is None else out + term
            if out is None:  # no features
                out = x.new_zeros(n, self.n_outputs)
            return out + (self.intercept - self.centers.sum(dim=0))
        if not self.hidden and not (self.training and self.feature_dropout > 0):
            return self._one_layer_terms(x, first)
        g = self.feature_outputs(x, first)  # (p, n, k)
        if self.training and self.feature_dropout > 0:
            keep = torch.ones_like(g[:, :, :1])
            g = g * F.dropout(keep, self.feature_dropout, True)
        return g.sum(dim=0) + self.intercept

    def _one_layer_terms(self, x, first):
        """The output of one hidden layer over terms of several columns: every term's
        first layer as one batched product, and the sum over terms as one matrix product
        on the ``(n, T * h1)`` activations (a batched product per term with one output
        column is several times slower), over cache-sized chunks of terms."""
        m, (n, h1) = first.shape[1] - 1, (x.shape[0], first.shape[2])
        columns = self.gather(x)  # (T, n, m)
        step = max(1, _CHUNK_ELEMENTS // max(1, n * h1))
        if tracing():  # one chunk: a traced graph must hold for any batch size
            step = max(1, self.n_terms)
        out = x.new_zeros(n, self.n_outputs)
        for start in range(0, self.n_terms, step):
            part = slice(start, start + step)
            h = torch.baddbmm(first[part, m:], columns[part], first[part, :m])
            h = self._hidden_dropout(self.activation(h))  # (chunk, n, h1)
            flat = h.transpose(0, 1).reshape(n, -1)
            out = out + flat @ self.out[part].reshape(-1, self.n_outputs)
        return out + (self.intercept - self.centers.sum(dim=0))

    @torch.no_grad()
    def center_(self, x):
        """Centre every shape function on the data ``x`` without changing the output.

        Sets ``c_j`` so that each contribution has mean zero on ``x`` and moves the sum of
        the shifts into the intercept. A removed feature (``g_j`` identically 0) keeps
        ``c_j = 0`` exactly. Interaction terms get their factors' means on ``x``
        (``PairTerms.center_``: zero mean along each axis). Works on a module without
        parametrizations.
        """
        was_training = self.training
        self.eval()
        self.centers.zero_()
        mean = self.feature_outputs(x).mean(dim=1)  # (p, k)
        self.centers.copy_(mean)
        self.intercept.add_(mean.sum(dim=0))
        if self.interactions is not None:
            self.interactions.center_(x)
        self.train(was_training)
        return self

    def extra_repr(self):
        terms = "" if self._plain else f", n_terms={self.n_terms}"
        return (
            f"n_features={self.n_features}{terms}, hidden_layer_sizes="
            f"{self.hidden_layer_sizes}, n_outputs={self.n_outputs}, "
            f"activation={self.activation_name!r}"
        )


class _OneLayerReLU(torch.autograd.Function):
    """``sum_t relu(x_{G_t} u_t + b_t) @ v_t + (intercept - sum_t c_t)``, the output of a
    one-hidden-layer ReLU NAM (``first`` holds ``u`` and ``b``, ``out`` is ``v``, ``c``
    the centres), by the compiled loops of :mod:`._nam_kernels`: forward and backward
    each one pass over the activations per output, kept in registers. ``terms``: None
    for one column per term, else the terms' padded columns ``(T, m)`` and widths
    ``(T,)``. Gradients flow to ``first``, ``out`` and ``intercept`` (not to ``x``).

    The intercept's shift is the same two tensor operations as outside a Function, and
    its gradient the same sum over the rows as autograd's: one node of the backward
    graph instead of three (an addition's and a subtraction's nodes cost about as much
    as the kernels' Python glue on a small batch)."""

    @staticmethod
    def forward(ctx, x, first, out, intercept, centers, terms=None):
        from . import _nam_kernels as kernels  # numba, imported on first use

        factors = _factors(first, out)  # ``first`` (T, m + 1, h) read in place
        v = factors[-1]
        y = torch.empty(v.shape[0], x.shape[0], dtype=x.dtype)  # (outputs, rows)
        x_ = x.detach().contiguous().numpy()
        if terms is None:
            kernels.forward(x_, *factors, y.numpy())
        else:
            cols, widths = terms[0].numpy(), terms[1].numpy()
            kernels.forward_terms(x_, cols, widths, *factors, y.numpy())
        ctx.save_for_backward(x, first, out)  # (autograd's check of in-place changes)
        ctx.factors, ctx.terms = factors, terms  # contiguous arrays, for the backward
        return y.t() + (intercept - centers.sum(dim=0))

    @staticmethod
    def backward(ctx, grad):
        from . import _nam_kernels as kernels

        x, first, out = ctx.saved_tensors
        v = ctx.factors[-1]
        grad_first = torch.empty(first.shape, dtype=first.dtype)  # contiguous, written
        grad_v = torch.empty(v.shape, dtype=out.dtype)  # (outputs, T, h)
        xT = x.detach().t().contiguous().numpy()
        g = grad.detach().to(x.dtype).t().contiguous().numpy()
        if ctx.terms is None:
            kernels.backward(xT, *ctx.factors, g, grad_first.numpy(), grad_v.numpy())
        else:
            cols, widths = (t.numpy() for t in ctx.terms)
            args = (*ctx.factors, g, grad_first.numpy(), grad_v.numpy())
            kernels.backward_terms(xT, cols, widths, *args)
        grad_intercept = grad.sum(dim=0) if ctx.needs_input_grad[3] else None
        return None, grad_first, grad_v.permute(1, 2, 0), grad_intercept, None, None


def _factors(first, out):
    """``first`` (T, m + 1, h: the first layer's weights then its biases, in place) and
    ``v`` (output weights, (outputs, T, h)) as contiguous arrays."""
    v = out.detach().permute(2, 0, 1).contiguous().numpy()
    return first.detach().contiguous().numpy(), v


def _check_terms(terms, n_features):
    """``terms`` as a list of lists of column indices (one per column when None)."""
    if terms is None:
        return [[j] for j in range(n_features)]
    out, seen = [], set()
    for t, cols in enumerate(terms):
        cols = [int(c) for c in cols]
        if not cols:
            raise ValueError(f"Term {t} is empty; every term needs at least one column.")
        bad = [c for c in cols if not 0 <= c < n_features]
        if bad:
            raise ValueError(f"Term {t} names column {bad[0]}, out of range for {n_features}.")
        if seen.intersection(cols) or len(set(cols)) < len(cols):
            raise ValueError(f"Terms must not overlap; term {t} repeats a column.")
        seen.update(cols)
        out.append(cols)
    return out


def compact_nam(nam, keep_terms):
    """A smaller copy of a (collapsed) NAM holding only some of its subnetworks.

    Parameters
    ----------
    nam : NAM
        A module without parametrizations.
    keep_terms : array-like of int
        Terms to keep (features, for a NAM with one term per column; ``T + t`` for
        interaction ``t``); the others must contribute identically 0 (zero first layer
        and centre), so that dropping them changes nothing.

    Returns
    -------
    compact : NAM
        Takes ``X[:, columns]``, ``columns`` the sorted columns of the kept terms, and
        returns the same outputs as ``nam`` on ``X``, in eval mode without dropout.
    """
    keep_all = torch.as_tensor(keep_terms, dtype=torch.long).reshape(-1)
    keep = keep_all[keep_all < nam.n_terms]
    keep_pairs = (keep_all[keep_all >= nam.n_terms] - nam.n_terms).tolist()
    pair_cols = [c for t in keep_pairs for side in nam.interactions.pairs[t] for c in side]
    columns = sorted({c for t in keep.tolist() for c in nam.terms[t]} | set(pair_cols))
    position = {c: i for i, c in enumerate(columns)}
    terms = [[position[c] for c in nam.terms[t]] for t in keep.tolist()]
    plain = all(len(t) == 1 for t in terms) and [t[0] for t in terms] == list(range(len(columns)))
    out = NAM(
        len(columns),
        nam.hidden_layer_sizes,
        nam.n_outputs,
        nam.activation_name,
        terms=None if plain else terms,
    ).to(dtype=nam.first.dtype)
    m = out.width
    with torch.no_grad():
        first = nam.first.detach()[keep]
        out.first[:, :m].copy_(first[:, :m])  # the kept terms' widths fit in m
        out.first[:, m].copy_(first[:, -1])
        for dst, src in zip(out.hidden, nam.hidden, strict=True):
            dst.copy_(src.detach()[keep])
        out.out.copy_(nam.out.detach()[keep])
        out.intercept.copy_(nam.intercept.detach())
        out.centers.copy_(nam.centers[keep])
    if keep_pairs:
        out.interactions = nam.interactions.subset(keep_pairs, columns)
    return out.eval()
