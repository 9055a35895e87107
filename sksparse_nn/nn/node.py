r"""Neural Oblivious Decision Ensembles (NODE) in plain PyTorch (no scikit-learn, no gating).

NODE (Popov, Morozov and Babenko, ICLR 2020) is a layer of differentiable *oblivious*
decision trees: every tree of depth ``d`` asks the same ``d`` questions at every node of a
level, so a tree is a table of ``2**d`` leaves indexed by ``d`` binary answers. Each
question ``k`` of tree ``t`` is made differentiable in two ways:

* **feature choice** -- the tested value is a convex combination
  :math:`v_{tk}(x) = \sum_f c_{tkf} x_f` whose weights
  :math:`c_{tk} = \mathrm{entmax}_{1.5}(\text{logits}_{tk})` are sparse: most features get
  an exact 0, so trained trees read few features;
* **soft split** -- the answer is
  :math:`b_{tk}(x) = \mathrm{entmoid}_{1.5}\big((v_{tk}(x) - \theta_{tk})\,
  e^{-\log\tau_{tk}}\big) \in [0, 1]`, a sigmoid that reaches exactly 0 and 1 beyond
  :math:`\pm 2`.

A leaf's weight is the product over levels of :math:`b_{tk}` or :math:`1 - b_{tk}` (a
distribution over the ``2**d`` leaves), and the tree's output is the leaf-weighted sum of
its leaf responses ``response[t]`` of shape ``(tree_dim, 2**d)``. The ensemble output is

.. math::

    f(x) = \mu + \sigma \Big(\text{bias} + s \sum_t \text{tree}_t(x)_{[:n_\text{outputs}]}\Big),

with the fixed scale ``s = 1 / (number of trees)`` stored as a buffer (and a fixed map
``mu, sigma`` to the target's units, identity unless a regressor sets it), so that removing
trees whose responses are zero (see :func:`compact_node`) does not change the output.
Stacked layers optionally see the input and all earlier layers' outputs (dense
connections, as in the paper); with dense connections every layer's trees feed the output,
without them only the last layer's.

Everything is vectorized over trees: the only Python loops run over the depth and the
layers. Internally the layers compute with the samples on the last (contiguous) axis,
``(features, n)`` in and ``(trees, tree_dim, n)`` out, so that the many small
elementwise products of the soft splits and leaves run over rows of ``n`` values.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable

from ._tracing import tracing

__all__ = ["NODE", "ObliviousTreeLayer", "compact_node", "entmax15", "entmoid15"]


def _sorted_descending(z):
    """``z`` sorted along its last axis, largest first (values only, no gradient).

    CPU tensors are sorted by numpy, far faster than torch's CPU sort of many short rows
    (NODE sorts its choice logits at every step); torch's sort while a graph is traced
    (numpy's result would be a constant of the exported graph)."""
    if z.device.type == "cpu" and not tracing():
        return torch.from_numpy(-np.sort(-z.detach().numpy(), axis=-1))  # a new array
    return torch.sort(z.detach(), dim=-1, descending=True).values


class _Entmax15(torch.autograd.Function):
    """1.5-entmax along the last axis (see :func:`entmax15`)."""

    @staticmethod
    def forward(ctx, x):
        z = (x - x.amax(dim=-1, keepdim=True)) / 2
        ordered = _sorted_descending(z)
        # tau for each candidate support of the k largest entries (sum of p = 1 on it);
        # the support is the largest k whose tau lies below its k-th entry
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
        mean = ordered.cumsum(dim=-1) / k
        spread = (ordered * ordered).cumsum(dim=-1) / k - mean * mean
        tau = mean - ((1.0 - k * spread) / k).clamp_min(0.0).sqrt()
        support = (tau <= ordered).sum(dim=-1, keepdim=True)
        p = (z - tau.gather(-1, support - 1)).clamp_min(0.0).square()
        ctx.save_for_backward(p)
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (p,) = ctx.saved_tensors
        root = p.sqrt()  # the Jacobian is diag(root) - root root^T / sum(root)
        scaled = grad * root
        return scaled - root * (scaled.sum(dim=-1, keepdim=True) / root.sum(dim=-1, keepdim=True))


def entmax15(x, dim=-1):
    r"""1.5-entmax along ``dim``: a sparse softmax.

    ``p_i = [x_i / 2 - \tau]_+^2`` with the threshold ``tau`` that makes ``p`` sum to 1
    (Peters, Niculae and Martins, "Sparse Sequence-to-Sequence Models", 2019): entries
    far below the largest get exactly 0. The threshold is found exactly by sorting; the
    derivative is the closed form (first derivatives only).
    """
    return _Entmax15.apply(x.movedim(dim, -1)).movedim(-1, dim)


class _Entmoid15(torch.autograd.Function):
    """:func:`entmoid15` with its derivative in closed form (one fused backward)."""

    @staticmethod
    def forward(ctx, x):
        x = x.clamp(-2.0, 2.0)
        root = torch.sqrt(8.0 - x * x)
        ctx.save_for_backward(x, root)
        return (x + root).square_().div_(16.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, root = ctx.saved_tensors
        return grad * (4.0 - x * x) / (4.0 * root)


def entmoid15(x):
    r"""Two-class 1.5-entmax: ``entmax15([x, 0])[0]``, a sparse sigmoid.

    Closed form :math:`(x + \sqrt{8 - x^2})^2 / 16` for :math:`|x| < 2`, exactly 0 below
    ``-2`` and exactly 1 above ``2``; ``entmoid15(-x) = 1 - entmoid15(x)``. Its derivative
    :math:`(4 - x^2) / (4 \sqrt{8 - x^2})` is continuous, vanishes at :math:`\pm 2` (and
    beyond) and is computed in that closed form (first derivatives only).
    """
    return _Entmoid15.apply(x)


def _gather_quantiles(values, levels):
    """Per-column quantiles: ``values`` (n, m), ``levels`` (m,) in [0, 1] -> (m,).

    Linear interpolation between order statistics, like ``numpy.quantile``.
    """
    n = values.shape[0]
    ordered = values.sort(dim=0).values
    pos = levels.to(values.dtype) * (n - 1)
    lo = pos.floor().long().clamp(0, n - 1)
    hi = (lo + 1).clamp(max=n - 1)
    frac = pos - lo.to(values.dtype)
    below = ordered.gather(0, lo[None]).squeeze(0)
    above = ordered.gather(0, hi[None]).squeeze(0)
    return below + frac * (above - below)


def _leaf_products(right):
    """Leaf weights of the questions along axis 1, samples last: (T, k, n) -> (T, 2**k, n).

    The first question is the most significant bit of the leaf index (1 = "right"). The
    samples are the contiguous axis, so every product runs over rows of ``n`` values.
    """
    trees, k, n = right.shape
    leaves = right.new_ones(trees, 1, n)
    for j in range(k):
        b = right[:, j : j + 1]
        pairs = torch.stack((leaves * (1.0 - b), leaves * b), dim=2)
        leaves = pairs.reshape(trees, 2 ** (j + 1), n)
    return leaves


def _evaluate_trees(right, response):
    """Tree outputs ``sum_l leaf_weight_l * response_l`` without the (T, 2**d, n) leaves.

    ``right`` (T, d, n) are the soft answers (samples last), ``response`` (T, C, 2**d);
    returns (T, C, n). The leaf weight factorizes over the two halves of the questions,
    ``w_{ab} = u_a v_b`` (``a`` indexes the answers to the first ``d1`` questions, ``b``
    to the rest), so the sum is ``sum_a u_a sum_b R_{ab} v_b``: a batched matrix product
    over trees plus a small weighted sum: for depth 6, ``2 * 8`` leaf weights per sample
    and tree instead of ``64``.
    """
    trees, depth, n = right.shape
    c = response.shape[1]
    d1 = depth // 2
    u = _leaf_products(right[:, :d1])  # (T, 2**d1, n)
    v = _leaf_products(right[:, d1:])  # (T, 2**(d - d1), n)
    blocks = response.reshape(trees, c * 2**d1, 2 ** (depth - d1))
    partial = torch.bmm(blocks, v).reshape(trees, c, 2**d1, n)
    return (partial * u.unsqueeze(1)).sum(dim=2)


class ObliviousTreeLayer(nn.Module):
    """A layer of ``num_trees`` differentiable oblivious decision trees.

    Parameters
    ----------
    in_features : int
    num_trees : int
        May be 0 (an empty layer that outputs nothing), which :func:`compact_node` uses
        when every tree of a layer was removed.
    depth : int
        Number of levels; each tree has ``2**depth`` leaves.
    tree_dim : int
        Length of each tree's output (the response of each leaf).
    fixed_choice : bool, default=False
        Store the feature-choice weights themselves (buffer ``choice_fixed``) instead of
        trainable logits. Used by :func:`compact_node`: removing input columns must not
        renormalize the entmax weights of the remaining ones.
    response_std : float, default=1.0
        Standard deviation of the initial leaf responses (NODE uses 1).

    Attributes
    ----------
    choice_logits : Parameter of shape (num_trees, depth, in_features)
        Feature-choice scores; the weights are ``entmax15`` along the last axis.
    thresholds : Parameter of shape (num_trees, depth)
    log_temperatures : Parameter of shape (num_trees, depth)
    response : Parameter of shape (num_trees, tree_dim, 2**depth)
        Leaf responses. Row ``t`` is everything tree ``t`` contributes to later layers
        and to the output: if it is zero the tree outputs 0 for every input.
    """

    def __init__(
        self, in_features, num_trees, depth, tree_dim, *, fixed_choice=False, response_std=1.0
    ):
        super().__init__()
        for name, value, low in (
            ("in_features", in_features, 0),
            ("num_trees", num_trees, 0),
            ("depth", depth, 1),
            ("tree_dim", tree_dim, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
        self.in_features, self.num_trees = int(in_features), int(num_trees)
        self.depth, self.tree_dim = int(depth), int(tree_dim)
        shape = (self.num_trees, self.depth)
        if fixed_choice:
            self.choice_logits = None
            self.register_buffer("choice_fixed", torch.zeros(*shape, self.in_features))
        else:
            self.choice_logits = nn.Parameter(torch.rand(*shape, self.in_features))
            self.choice_fixed = None
        self.thresholds = nn.Parameter(torch.zeros(shape))
        self.log_temperatures = nn.Parameter(torch.zeros(shape))
        response = torch.randn(self.num_trees, self.tree_dim, 2**self.depth) * float(response_std)
        self.response = nn.Parameter(response)

    def choice_weights(self):
        """Feature-choice weights, shape ``(num_trees, depth, in_features)``; rows sum to 1."""
        if self.choice_fixed is not None:
            return self.choice_fixed
        if not bool(torch.isfinite(self.choice_logits).all()):
            raise FloatingPointError(
                "NODE's feature-choice logits are not finite: training diverged. "
                "Lower the learning rate(s)."
            )
        return entmax15(self.choice_logits, dim=-1)

    def _answers(self, xt):
        """Soft answers with the samples last: ``xt`` (in_features, n) -> (T, depth, n)."""
        weights = self.choice_weights()
        values = weights.reshape(self.num_trees * self.depth, self.in_features) @ xt
        values = values.reshape(self.num_trees, self.depth, xt.shape[1])
        scale = torch.exp(-self.log_temperatures)
        return entmoid15((values - self.thresholds[..., None]) * scale[..., None])

    def split_values(self, x):
        """Tested values ``v_{tk}(x)``, shape ``(n, num_trees, depth)``."""
        weights = self.choice_weights()
        flat = x @ weights.reshape(self.num_trees * self.depth, self.in_features).T
        return flat.reshape(x.shape[0], self.num_trees, self.depth)

    def split_probabilities(self, x):
        """Soft answer ``b_{tk}(x)`` of every question ("go right"), shape ``(n, T, depth)``."""
        return self._answers(x.T).permute(2, 0, 1)

    def leaf_weights(self, x):
        """Weight of each leaf, shape ``(n, num_trees, 2**depth)``; sums to 1 per tree.

        Level ``k`` is bit ``depth - 1 - k`` of the leaf index (1 = "right"). For
        inspection only: :meth:`forward` never materializes the leaf weights.
        """
        return _leaf_products(self._answers(x.T)).permute(2, 0, 1)

    def forward_t(self, xt):
        """:meth:`forward` with the samples last: ``xt`` (in_features, n) -> (T, tree_dim, n),
        the layout the computation runs in and :class:`NODE` chains its layers in."""
        return _evaluate_trees(self._answers(xt), self.response)

    def forward(self, x):
        """Tree outputs ``sum_l leaf_weights[..., l] * response[..., l]``: ``(n, T, tree_dim)``."""
        return self.forward_t(x.T).permute(2, 0, 1)

    @torch.no_grad()
    def data_init(self, x, temperature_quantile=1.0):
        """Data-aware init of thresholds and temperatures from a batch ``x``.

        Each threshold is the value of its (initial, soft) chosen feature at a uniformly
        random quantile of the batch, so splits start inside the data; each temperature is
        the ``temperature_quantile`` quantile of ``|v - threshold|`` over the batch, so the
        initial split logits lie in ``[-1, 1]`` (where entmoid15 is neither flat nor
        saturated) for that fraction of the batch. A question whose tested value does
        not vary over the batch (e.g. a batch of one row) gets temperature 1.
        """
        if self.num_trees == 0 or x.shape[0] == 0:
            return
        values = self.split_values(x).reshape(x.shape[0], -1)
        levels = torch.rand(values.shape[1], dtype=values.dtype, device=values.device)
        thresholds = _gather_quantiles(values, levels)
        spread = (values - thresholds).abs()
        cut = torch.full_like(levels, float(temperature_quantile))
        temperatures = _gather_quantiles(spread, cut)
        # no spread (one row, or a constant tested value): unit temperature, not a step
        temperatures = torch.where(temperatures > 1e-6, temperatures, torch.ones_like(cut))
        self.thresholds.copy_(thresholds.reshape(self.thresholds.shape))
        self.log_temperatures.copy_(temperatures.log().reshape(self.log_temperatures.shape))

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, num_trees={self.num_trees}, depth={self.depth}, "
            f"tree_dim={self.tree_dim}, fixed_choice={self.choice_fixed is not None}"
        )


class NODE(nn.Module):
    """Neural Oblivious Decision Ensemble: one or more layers of oblivious trees.

    Parameters
    ----------
    n_features : int
    n_outputs : int
    num_trees : int or sequence of int, default=128
        Trees per layer; a sequence gives each layer its own count (and the number of
        layers).
    depth : int, default=6
    tree_dim : int, default=None
        Output length of each tree; ``None`` means ``n_outputs``. The first ``n_outputs``
        entries of each output tree form the prediction; the rest (if any) only feed later
        layers.
    num_layers : int, default=1
        Number of layers when ``num_trees`` is an int.
    dense : bool, default=True
        Layer ``k`` reads the input and the outputs of all layers before it, and every
        layer's trees feed the prediction. ``False``: layer ``k`` reads only layer
        ``k - 1`` and only the last layer feeds the prediction.
    output_scale : float, default=None
        Fixed factor ``s`` of the sum over output trees; ``None`` means
        ``1 / (number of output trees)`` (the ensemble average).
    fixed_choice : bool, default=False
        See :class:`ObliviousTreeLayer`.
    response_std : float, default=1.0
        See :class:`ObliviousTreeLayer`.

    Attributes
    ----------
    layers : nn.ModuleList of ObliviousTreeLayer
    bias : Parameter of shape (n_outputs,)
    output_scale : buffer, 0-dim
    target_mean, target_scale : buffers of shape (n_outputs,)
        Fixed affine map of the output, ``target_mean + target_scale * f``: lets the trees
        work in standardized units (0 and 1 by default).
    """

    def __init__(
        self,
        n_features,
        n_outputs,
        num_trees=128,
        depth=6,
        tree_dim=None,
        num_layers=1,
        dense=True,
        output_scale=None,
        fixed_choice=False,
        response_std=1.0,
    ):
        super().__init__()
        if isinstance(num_trees, Integral) and not isinstance(num_trees, bool):
            if isinstance(num_layers, bool) or not isinstance(num_layers, Integral):
                raise ValueError(f"num_layers must be an integer >= 1, got {num_layers!r}.")
            if num_layers < 1:
                raise ValueError(f"num_layers must be an integer >= 1, got {num_layers!r}.")
            trees = [int(num_trees)] * int(num_layers)
        else:
            trees = [int(t) for t in num_trees]
            if not trees:
                raise ValueError("num_trees must name at least one layer.")
        self.n_features, self.n_outputs = int(n_features), int(n_outputs)
        self.tree_dim = self.n_outputs if tree_dim is None else int(tree_dim)
        if self.tree_dim < self.n_outputs:
            raise ValueError(
                f"tree_dim={tree_dim} is smaller than the number of outputs ({n_outputs})."
            )
        self.depth, self.dense = int(depth), bool(dense)
        layers, width = [], self.n_features
        for t in trees:
            layers.append(
                ObliviousTreeLayer(
                    width,
                    t,
                    self.depth,
                    self.tree_dim,
                    fixed_choice=fixed_choice,
                    response_std=response_std,
                )
            )
            width = width + t * self.tree_dim if self.dense else t * self.tree_dim
        self.layers = nn.ModuleList(layers)
        self.bias = nn.Parameter(torch.zeros(self.n_outputs))
        n_out_trees = sum(trees) if self.dense else trees[-1]
        if output_scale is None:
            output_scale = 1.0 / max(n_out_trees, 1)
        self.register_buffer("output_scale", torch.tensor(float(output_scale)))
        # affine map to the target's units (set by the regressor; identity by default)
        self.register_buffer("target_mean", torch.zeros(self.n_outputs))
        self.register_buffer("target_scale", torch.ones(self.n_outputs))

    @property
    def num_trees(self):
        """Number of trees in each layer (tuple)."""
        return tuple(layer.num_trees for layer in self.layers)

    def _layer_outputs(self, x, init=False, temperature_quantile=1.0):
        """Each layer's tree outputs, samples last: a list of (T, tree_dim, n)."""
        outputs, inputs = [], x.T  # (features, n): see ObliviousTreeLayer.forward_t
        for layer in self.layers:
            if init:
                layer.data_init(inputs.T, temperature_quantile)
            out = layer.forward_t(inputs)
            outputs.append(out)
            flat = out.reshape(layer.num_trees * layer.tree_dim, x.shape[0])  # tree-major
            inputs = torch.cat((inputs, flat), dim=0) if self.dense else flat
        return outputs

    def forward(self, x):
        outputs = self._layer_outputs(x)
        used = outputs if self.dense else outputs[-1:]
        total = sum(out[:, : self.n_outputs].sum(dim=0) for out in used).T
        return self.target_mean + self.target_scale * (self.bias + self.output_scale * total)

    @torch.no_grad()
    def data_init(self, x, temperature_quantile=1.0):
        """Data-aware initialization of every layer from a batch ``x`` (layer by layer).

        See :meth:`ObliviousTreeLayer.data_init`; later layers are initialized on the
        outputs of the already initialized earlier ones.
        """
        self._layer_outputs(x, init=True, temperature_quantile=temperature_quantile)
        return self


@torch.no_grad()
def compact_node(node, keep_inputs=None):
    """A smaller copy of a (collapsed) NODE holding only the trees with non-zero responses.

    A tree whose ``response`` is all zero outputs 0 for every input: it adds nothing to
    the prediction and feeds zero columns to later layers. Removing it, and removing those
    columns (and unused input features) from the later trees' feature-choice weights,
    changes no output. The copy stores the choice weights themselves (``fixed_choice``),
    because removing entries from entmax *logits* would renormalize the rest, and keeps
    ``output_scale`` so that the sum over the remaining trees is scaled as before.

    Parameters
    ----------
    node : NODE
        A module without parametrizations.
    keep_inputs : array-like of int, default=None
        Input columns to keep (every live tree must give the others zero weight);
        ``None`` keeps all.

    Returns
    -------
    compact : NODE
        Takes ``X[:, keep_inputs]`` and returns the same outputs as ``node`` on ``X``.
    """
    device = node.bias.device
    if keep_inputs is None:
        keep_inputs = torch.arange(node.n_features, device=device)
    cols = torch.as_tensor(keep_inputs, dtype=torch.long, device=device).reshape(-1)
    alive = [
        torch.nonzero(layer.response.detach().flatten(start_dim=1).abs().sum(dim=1) > 0).flatten()
        for layer in node.layers
    ]
    out = NODE(
        cols.numel(),
        node.n_outputs,
        num_trees=[int(a.numel()) for a in alive],
        depth=node.depth,
        tree_dim=node.tree_dim,
        dense=node.dense,
        output_scale=float(node.output_scale),
        fixed_choice=True,
    ).to(device=device, dtype=node.bias.dtype)
    block = torch.arange(node.tree_dim, device=device)
    offset = node.n_features
    for old, new, keep in zip(node.layers, out.layers, alive, strict=True):
        new.choice_fixed.copy_(old.choice_weights().detach()[keep][:, :, cols])
        new.thresholds.copy_(old.thresholds[keep])
        new.log_temperatures.copy_(old.log_temperatures[keep])
        new.response.copy_(old.response[keep])
        # the columns the next layer reads from this one: tree-major blocks of tree_dim
        local = (keep[:, None] * node.tree_dim + block).reshape(-1)
        if node.dense:
            cols = torch.cat((cols, offset + local))
            offset += old.num_trees * node.tree_dim
        else:
            cols = local
    out.bias.copy_(node.bias)
    out.target_mean.copy_(node.target_mean)
    out.target_scale.copy_(node.target_scale)
    return out.eval()
