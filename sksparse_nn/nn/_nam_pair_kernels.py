"""Compiled forward and backward of the pairs' factor networks (:mod:`._nam_pairs`).

Every side ``s`` of every pair is a one-hidden-layer ReLU network of a few columns with
``R`` outputs, ``G[s, i, r] = sum_k relu(sum_q x[i, cols[s, q]] u[s, q, k] + b[s, k])
v[s, k, r]``. In tensor operations its ``(2P, n, h)`` activations pass through memory
about six times per step (the first layer as a batched product over columns that are
mostly one wide, the ReLU, the product with ``v``, and their backward) and are stored
for the backward; these loops keep each activation in a register and recompute it in
the backward, as :mod:`._nam_kernels` does for the main terms. The centring and the
products of the factors act on ``(2P, n, R)`` arrays (``R = 4``): :class:`PairSum` does
them in numpy inside one autograd node with the loops (the sum of all pairs, the
module's forward in training); :class:`PairFactors` gives the factors alone (per-pair
contributions, the exact means of ``center_``) and leaves the rest to torch.

Sums may be reassociated (rounding-level differences from the tensor version); NaN and
infinity propagate as there. numba is imported by this module only, and this module
only when such pairs first run; compiled code is cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

__all__ = ["PairFactors", "PairSum"]

#: The floating-point licences of :mod:`._nam_kernels` (no "no NaN / no infinity").
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def forward(x, cols, widths, u, b, vt, out, zero):
    """``out[s, i, r] = sum_k relu(sum_q x[i, cols[s, q]] u[s, q, k] + b[s, k])
    vt[s, r, k]`` in place, ``q < widths[s]``.

    ``x`` (n, p), ``cols`` (S, m) and ``widths`` (S,) integers, ``u`` (S, m, h), ``b``
    (S, h), ``vt`` (S, R, h), ``out`` (S, n, R). A side's pre-activations are
    accumulated column by column in a vector of ``h`` (the loop over units vectorizes)."""
    n = x.shape[0]
    n_sides, h = b.shape
    rank = vt.shape[1]
    a = np.empty(h, dtype=b.dtype)
    for s in range(n_sides):
        for i in range(n):
            for k in range(h):
                a[k] = b[s, k]
            for q in range(widths[s]):
                xq = x[i, cols[s, q]]
                for k in range(h):
                    a[k] += xq * u[s, q, k]
            for k in range(h):
                a[k] = 0.0 if a[k] <= 0.0 else a[k]  # relu, NaN kept
            for r in range(rank):
                acc = zero  # in the arrays' precision: float32 sums vectorize twice as wide
                for k in range(h):
                    acc += a[k] * vt[s, r, k]
                out[s, i, r] = acc


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def backward(xT, cols, widths, u, b, vt, g, gu, gb, gvt, zero):
    """The gradients of ``sum(g * out)`` (``out`` of :func:`forward` on ``x = xT.T``,
    ``g`` (S, R, n)) with respect to ``u`` (S, m, h; zero beyond a side's width), ``b``
    (S, h) and ``vt`` (S, R, h), written into ``gu``, ``gb`` and ``gvt``. Per side and
    unit, the pre-activations of all rows are accumulated in a vector of ``n`` and the
    rows' ``sum_r vt_r g_ri m_i`` (``m_i`` the ReLU's mask) in another."""
    n = xT.shape[1]
    n_sides, m, h = u.shape
    rank = vt.shape[1]
    a = np.empty(n, dtype=b.dtype)
    gm = np.empty(n, dtype=b.dtype)
    mask = np.empty(n, dtype=b.dtype)
    for s in range(n_sides):
        w = widths[s]
        for k in range(h):
            bk = b[s, k]
            for i in range(n):
                a[i] = bk
            for q in range(w):
                uq = u[s, q, k]
                col = cols[s, q]
                for i in range(n):
                    a[i] += xT[col, i] * uq
            for i in range(n):
                gm[i] = 0.0
                mask[i] = 1.0 if a[i] > 0.0 else 0.0
                a[i] = 0.0 if a[i] <= 0.0 else a[i]  # relu, NaN kept
            for r in range(rank):
                vr = vt[s, r, k]
                sa = zero
                for i in range(n):
                    gm[i] += vr * g[s, r, i]
                    sa += g[s, r, i] * a[i]
                gvt[s, r, k] = sa
            for i in range(n):
                gm[i] *= mask[i]
            s0 = zero
            for i in range(n):
                s0 += gm[i]
            gb[s, k] = s0
            for q in range(w):
                col = cols[s, q]
                s1 = zero
                for i in range(n):
                    s1 += gm[i] * xT[col, i]
                gu[s, q, k] = s1
            for q in range(w, m):
                gu[s, q, k] = 0.0


class PairFactors(torch.autograd.Function):
    """The factors ``G`` (``(S, n, R)``) of the pairs' sides by the loops above:
    ``first`` (``(S, m + 1, h)``: weights, then the biases' row) and ``out``
    (``(S, h, R)``) as in :class:`._nam_pairs.PairTerms`; ``cols`` (``(S, m)``) and
    ``widths`` (``(S,)``) the sides' columns. Gradients flow to ``first`` and ``out``
    (not to ``x``)."""

    @staticmethod
    def forward(ctx, x, first, out, cols, widths):
        u, b, vt = _arrays(first, out)
        g = torch.empty(first.shape[0], x.shape[0], out.shape[2], dtype=x.dtype)
        cols_, widths_ = cols.numpy(), widths.numpy()
        x_ = x.detach().contiguous().numpy()
        forward(x_, cols_, widths_, u, b, vt, g.numpy(), b.dtype.type(0))
        ctx.save_for_backward(x, first, out)  # (autograd's check of in-place changes)
        ctx.arrays = (u, b, vt, cols_, widths_)  # contiguous copies, for the backward
        return g

    @staticmethod
    def backward(ctx, grad):
        x, first, out = ctx.saved_tensors
        u, b, vt, cols, widths = ctx.arrays
        m = first.shape[1] - 1
        grad_first = torch.empty_like(first)
        grad_vt = torch.empty(vt.shape, dtype=out.dtype)  # (S, R, h)
        gu, gb = grad_first[:, :m].numpy(), grad_first[:, m].numpy()  # views, written
        xT = x.detach().t().contiguous().numpy()
        g = grad.detach().to(x.dtype).permute(0, 2, 1).contiguous().numpy()  # (S, R, n)
        backward(xT, cols, widths, u, b, vt, g, gu, gb, grad_vt.numpy(), b.dtype.type(0))
        return None, grad_first, grad_vt.permute(0, 2, 1), None, None


def _arrays(first, out):
    """``u`` (S, m, h), ``b`` (S, h) and ``vt`` (S, R, h) as contiguous arrays."""
    first = first.detach()
    m = first.shape[1] - 1
    return (
        first[:, :m].contiguous().numpy(),
        first[:, m].contiguous().numpy(),
        out.detach().permute(0, 2, 1).contiguous().numpy(),
    )


class PairSum(torch.autograd.Function):
    """The sum of all pairs' contributions, ``(n, k)``, in one autograd node: the
    factors by the loops above, then in numpy the centring (by the batch's means in
    training, which also moves the running ``means`` by ``momentum``; by ``means``
    otherwise), the products of the two sides and their weights (``weight``,
    ``(P, R, k)``), as one matrix product. The backward mirrors it, the centring's
    gradient included (``g - mean(g)`` over the batch in training). Gradients flow to
    ``first``, ``out`` and ``weight``. Each small step is a numpy call rather than a
    tensor operation with its own autograd node: per step the pairs cost their loops
    and little else."""

    @staticmethod
    def forward(ctx, x, first, out, weight, cols, widths, means, momentum, training):
        u, b, vt = _arrays(first, out)
        n, zero = x.shape[0], b.dtype.type(0)
        cols_, widths_ = cols.numpy(), widths.numpy()
        g = np.empty((u.shape[0], n, vt.shape[1]), dtype=b.dtype)
        forward(x.detach().contiguous().numpy(), cols_, widths_, u, b, vt, g, zero)
        if training:
            mean = g.mean(axis=1)  # the batch's: the backward sees it
            with torch.no_grad():
                means.lerp_(torch.from_numpy(mean).to(means.dtype), momentum)
        else:
            mean = means.detach().numpy().astype(b.dtype, copy=False)
        centred = g - mean[:, None, :]
        products = centred[0::2] * centred[1::2]  # (P, n, R)
        w = weight.detach().numpy()
        flat = products.transpose(1, 0, 2).reshape(n, -1)  # (n, P * R)
        y = flat @ w.reshape(-1, w.shape[2])
        ctx.save_for_backward(x, first, out, weight)  # (autograd's in-place check)
        ctx.arrays = (u, b, vt, cols_, widths_, centred, flat, w, training)
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, grad):
        x, first, out, weight = ctx.saved_tensors
        u, b, vt, cols, widths, centred, flat, w, training = ctx.arrays
        gy = grad.detach().to(x.dtype).numpy()  # (n, k)
        n_pairs, rank, k = w.shape
        grad_weight = torch.from_numpy((flat.T @ gy).reshape(n_pairs, rank, k))
        g_products = (gy @ w.reshape(-1, k).T).reshape(-1, n_pairs, rank).transpose(1, 0, 2)
        g_centred = np.empty_like(centred)
        g_centred[0::2] = g_products * centred[1::2]
        g_centred[1::2] = g_products * centred[0::2]
        if training:  # through the batch's means
            g_centred -= g_centred.mean(axis=1, keepdims=True)
        m = first.shape[1] - 1
        grad_first = torch.empty_like(first)
        grad_vt = torch.empty(vt.shape, dtype=out.dtype)  # (S, R, h)
        gu, gb = grad_first[:, :m].numpy(), grad_first[:, m].numpy()  # views, written
        xT = x.detach().t().contiguous().numpy()
        g = np.ascontiguousarray(g_centred.transpose(0, 2, 1))  # (S, R, n)
        backward(xT, cols, widths, u, b, vt, g, gu, gb, grad_vt.numpy(), b.dtype.type(0))
        grads = (grad_first, grad_vt.permute(0, 2, 1), grad_weight)
        return (None, *grads, None, None, None, None, None)
