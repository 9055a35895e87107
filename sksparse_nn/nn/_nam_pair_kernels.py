"""Compiled forward and backward of the pairs' factor networks (:mod:`._nam_pairs`).

Every side ``s`` of every pair is a one-hidden-layer ReLU network of a few columns with
``R`` outputs, ``G[s, i, r] = sum_k relu(sum_q x[i, cols[s, q]] u[s, q, k] + b[s, k])
v[s, k, r]``. In tensor operations its ``(2P, n, h)`` activations pass through memory
about six times per step (the first layer as a batched product over columns that are
mostly one wide, the ReLU, the product with ``v``, and their backward) and are stored
for the backward; these loops keep each activation in a register and recompute it in
the backward, as :mod:`._nam_kernels` does for the main terms. Only the factors are
compiled: the centring and the products of the factors act on ``(2P, n, R)`` tensors
(``R = 4``), where torch's autograd costs little.

Sums may be reassociated (rounding-level differences from the tensor version); NaN and
infinity propagate as there. numba is imported by this module only, and this module
only when such pairs first run; compiled code is cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

__all__ = ["PairFactors"]

#: The floating-point licences of :mod:`._nam_kernels` (no "no NaN / no infinity").
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def forward(x, cols, widths, u, b, vt, out):
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
                acc = 0.0
                for k in range(h):
                    acc += a[k] * vt[s, r, k]
                out[s, i, r] = acc


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def backward(xT, cols, widths, u, b, vt, g, gu, gb, gvt):
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
                sa = 0.0
                for i in range(n):
                    gm[i] += vr * g[s, r, i]
                    sa += g[s, r, i] * a[i]
                gvt[s, r, k] = sa
            for i in range(n):
                gm[i] *= mask[i]
            s0 = 0.0
            for i in range(n):
                s0 += gm[i]
            gb[s, k] = s0
            for q in range(w):
                col = cols[s, q]
                s1 = 0.0
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
        first_ = first.detach()
        m = first_.shape[1] - 1
        u = first_[:, :m].contiguous().numpy()
        b = first_[:, m].contiguous().numpy()
        vt = out.detach().permute(0, 2, 1).contiguous().numpy()  # (S, R, h)
        g = torch.empty(first_.shape[0], x.shape[0], out.shape[2], dtype=x.dtype)
        cols_, widths_ = cols.numpy(), widths.numpy()
        forward(x.detach().contiguous().numpy(), cols_, widths_, u, b, vt, g.numpy())
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
        backward(xT, cols, widths, u, b, vt, g, gu, gb, grad_vt.numpy())
        return None, grad_first, grad_vt.permute(0, 2, 1), None, None
