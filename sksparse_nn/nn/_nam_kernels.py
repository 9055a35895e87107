"""Compiled forward and backward of the one-hidden-layer ReLU NAM (:mod:`.nam`).

Such a NAM computes ``out[i] = sum_j sum_k relu(x_ij u_jk + b_jk) v_jk``. Written with
tensor operations, every pass over its ``(n, p, h)`` activations (the first layer, the
ReLU, the product with ``v``, and about as many in the backward) is a trip through
memory; these loops keep each activation in a register and recompute it in the backward
instead of storing it.

The backward runs over the features' transposed inputs ``xT`` (``(p, n)``, contiguous)
and writes the ReLU's mask as a 0/1 factor rather than a branch, so that the loop over
the rows vectorizes; the forward accumulates in a local rather than in ``out``. Sums may
be reassociated (rounding-level differences from the tensor version); NaN and infinity
propagate as there. numba is imported by this module only, and this module only when
such a NAM first runs; compiled code is cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np

#: Floating-point licences: reassociation (vectorized sums) and contraction, but not
#: "no NaN / no infinity": a NaN in the parameters must reach the loss (the divergence
#: guard reads it) and the gradients, as it does through the tensor version.
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def forward(x, w, v, out):
    """``out[c, i] = sum_j sum_k relu(x[i, j] u[j, k] + b[j, k]) v[c, j, k]`` in place,
    ``u = w[:, 0]`` and ``b = w[:, 1]``.

    ``x`` (n, p), ``w`` (p, 2, h) (the NAM's ``first``, read in place), ``v``
    (n_out, p, h), ``out`` (n_out, n). One pass per output, the activations recomputed
    in each, so that the inner loop accumulates in a local."""
    n, p = x.shape
    h = w.shape[2]
    for c in range(v.shape[0]):
        for i in range(n):
            acc = 0.0
            for j in range(p):
                xij = x[i, j]
                for k in range(h):
                    a = xij * w[j, 0, k] + w[j, 1, k]
                    acc += (0.0 if a <= 0.0 else a) * v[c, j, k]  # relu, NaN kept
            out[c, i] = acc


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def backward(xT, w, v, g, gw, gv):
    """The gradients of ``sum(g * out)`` (``out`` of :func:`forward` on ``x = xT.T``,
    ``g`` (n_out, n)) with respect to ``w`` (p, 2, h: ``u`` and ``b``) and ``v``
    (n_out, p, h), written into ``gw`` and ``gv``.

    Per hidden unit and output ``c``, with ``m_i`` the ReLU's mask and ``a_i`` its
    value: ``gv_c = sum_i g_ci m_i a_i``; ``gu = sum_c v_c sum_i g_ci m_i x_i`` and
    ``gb = sum_c v_c sum_i g_ci m_i``."""
    p, n = xT.shape
    h = w.shape[2]
    for j in range(p):
        for k in range(h):
            ujk = w[j, 0, k]
            bjk = w[j, 1, k]
            su = 0.0
            sb = 0.0
            for c in range(v.shape[0]):
                s1 = 0.0
                s0 = 0.0
                sa = 0.0
                for i in range(n):
                    xi = xT[j, i]
                    a = xi * ujk + bjk
                    gm = g[c, i] * (1.0 if a > 0.0 else 0.0)
                    s1 += gm * xi
                    s0 += gm
                    sa += g[c, i] * (0.0 if a <= 0.0 else a)  # relu, NaN kept
                su += v[c, j, k] * s1
                sb += v[c, j, k] * s0
                gv[c, j, k] = sa
            gw[j, 0, k] = su
            gw[j, 1, k] = sb


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def forward_terms(x, cols, widths, w, v, out):
    """``out[c, i] = sum_t sum_k relu(sum_q x[i, cols[t, q]] u[t, q, k] + b[t, k])
    v[c, t, k]`` in place, ``q < widths[t]``: the NAM's terms of several columns.

    ``x`` (n, p), ``cols`` (T, m) and ``widths`` (T,) integers, ``w`` (T, m + 1, h)
    (the NAM's ``first``, read in place: ``u = w[:, :m]``, ``b = w[:, m]``), ``v``
    (n_out, T, h), ``out`` (n_out, n). A term's pre-activations are accumulated column
    by column in a vector of ``h`` (the loop over units vectorizes)."""
    n = x.shape[0]
    n_terms, m, h = w.shape[0], w.shape[1] - 1, w.shape[2]
    a = np.empty(h, dtype=w.dtype)
    for c in range(v.shape[0]):
        for i in range(n):
            acc = 0.0
            for t in range(n_terms):
                for k in range(h):
                    a[k] = w[t, m, k]
                for q in range(widths[t]):
                    xq = x[i, cols[t, q]]
                    for k in range(h):
                        a[k] += xq * w[t, q, k]
                for k in range(h):
                    acc += (0.0 if a[k] <= 0.0 else a[k]) * v[c, t, k]  # relu, NaN kept
            out[c, i] = acc


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def backward_terms(xT, cols, widths, w, v, g, gw, gv):
    """The gradients of ``sum(g * out)`` (``out`` of :func:`forward_terms` on
    ``x = xT.T``) with respect to ``w`` (T, m + 1, h: ``u`` zero beyond a term's width,
    then ``b``) and ``v`` (n_out, T, h), written into ``gw`` and ``gv``. Per term and
    unit, the pre-activations of all rows are accumulated in a vector of ``n`` and the
    rows' ``sum_c v_c g_ci m_i`` in another (the loops over rows vectorize)."""
    n = xT.shape[1]
    n_terms, m, h = w.shape[0], w.shape[1] - 1, w.shape[2]
    a = np.empty(n, dtype=w.dtype)
    gm = np.empty(n, dtype=w.dtype)
    for t in range(n_terms):
        width = widths[t]
        for k in range(h):
            bk = w[t, m, k]
            for i in range(n):
                a[i] = bk
            for q in range(width):
                uq = w[t, q, k]
                col = cols[t, q]
                for i in range(n):
                    a[i] += xT[col, i] * uq
            for i in range(n):
                gm[i] = 0.0
            for c in range(v.shape[0]):
                vc = v[c, t, k]
                sa = 0.0
                for i in range(n):
                    ai = a[i]
                    gm[i] += vc * g[c, i] * (1.0 if ai > 0.0 else 0.0)
                    sa += g[c, i] * (0.0 if ai <= 0.0 else ai)  # relu, NaN kept
                gv[c, t, k] = sa
            s0 = 0.0
            for i in range(n):
                s0 += gm[i]
            gw[t, m, k] = s0
            for q in range(width):
                col = cols[t, q]
                s1 = 0.0
                for i in range(n):
                    s1 += gm[i] * xT[col, i]
                gw[t, q, k] = s1
            for q in range(width, m):
                gw[t, q, k] = 0.0
