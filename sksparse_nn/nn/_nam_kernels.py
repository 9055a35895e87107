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


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def training_step(
    xT, cols, widths, omega, gates, group, rho, v, intercept, centers,
    y, codes, weights, loss, ridge, lam, z, g_omega, g_gates, g_v, g_intercept,
):  # fmt: skip
    """One training step's gradients of a one-hidden-layer ReLU NAM whose first layer is
    factorized per term, ``w_t = omega_t * prod_d gates[d, group[t]]`` (``group[t] < 0``:
    no factor), under the objective

    ``mean_i weights_i l(z_i, y_i) + lam / D sum_j rho_j (||omega_j||^2 + ||gates_j||^2)
    + lam sum_t ridge_t ||v_t||^2``

    (``D = gates.shape[0] + 1``, ``omega_j`` the terms of group ``j``). ``xT`` (p, n):
    the batch, transposed; ``cols`` and ``widths``: each term's columns, as in
    :func:`forward_terms` (one column per term is ``cols[t, 0] = t``). ``loss`` 0: half
    squared error against ``y`` (n, k); 1: logistic loss of one logit against
    ``codes``; 2: softmax cross-entropy against ``codes``.

    Writes the outputs ``z`` (n, k) and the gradients of every factor (``g_omega``,
    ``g_gates``, ``g_v`` (T, h, k) like ``v``, ``g_intercept``); returns the mean loss,
    the penalty ``sum_j rho_j (...) / D`` and the ridge ``sum_t ridge_t ||v_t||^2``.
    The arithmetic of the autograd graph (the gated weight, the terms' outputs, the
    loss's closed-form gradient, the backward of :func:`backward_terms`, the chain rule
    through the product, the penalty's pulls ``2 lam rho_j / D`` times each factor and
    the ridge's ``2 lam ridge_t v_t``), with the pre-activations of the forward kept for
    the backward (``(T, h, n)``, rows innermost: every loop over rows vectorizes)."""
    n = xT.shape[1]
    zero = np.zeros(1, dtype=xT.dtype)[0]  # sums over rows in the batch's dtype (SIMD)
    n_terms, m, h = omega.shape[0], omega.shape[1] - 1, omega.shape[2]
    k = v.shape[2]
    n_gates, n_groups = gates.shape
    # each term's gate product (1 for ungated terms) and its gated first layer
    scale = np.ones(n_terms, dtype=omega.dtype)
    for t in range(n_terms):
        j = group[t]
        if j >= 0:
            s = gates[0, j]
            for d in range(1, n_gates):
                s *= gates[d, j]
            scale[t] = s
    # forward: pre-activations (kept) and outputs, term by term and unit by unit
    pre = np.empty((n_terms, h, n), dtype=xT.dtype)
    out = np.zeros((k, n), dtype=xT.dtype)
    for t in range(n_terms):
        st = scale[t]
        for u in range(h):
            a = pre[t, u]
            b = omega[t, m, u] * st
            for i in range(n):
                a[i] = b
            for q in range(widths[t]):
                wq = omega[t, q, u] * st
                col = cols[t, q]
                for i in range(n):
                    a[i] += xT[col, i] * wq
            for c in range(k):
                vc = v[t, u, c]
                for i in range(n):
                    out[c, i] += (0.0 if a[i] <= 0.0 else a[i]) * vc  # relu, NaN kept
    # the loss and its gradient with respect to the outputs, (k, n)
    g = np.empty((k, n), dtype=xT.dtype)
    total = 0.0
    for i in range(n):
        wi = weights[i] / n
        for c in range(k):
            z[i, c] = out[c, i] + (intercept[c] - centers[c])
        if loss == 0:
            li = 0.0
            for c in range(k):
                r = z[i, c] - y[i, c]
                li += 0.5 * r * r
                g[c, i] = r * wi
        elif loss == 1:
            zi, yi = z[i, 0], float(codes[i])
            li = max(zi, 0.0) - zi * yi + np.log1p(np.exp(-abs(zi)))
            g[0, i] = (1.0 / (1.0 + np.exp(-zi)) - yi) * wi
        else:
            top = z[i, 0]
            for c in range(1, k):
                top = max(top, z[i, c])
            norm = 0.0
            for c in range(k):
                norm += np.exp(z[i, c] - top)
            li = top + np.log(norm) - z[i, codes[i]]
            for c in range(k):
                g[c, i] = np.exp(z[i, c] - top) / norm * wi
            g[codes[i], i] -= wi
        total += li * wi
    for c in range(k):
        acc = 0.0
        for i in range(n):
            acc += g[c, i]
        g_intercept[c] = acc
    # backward, per term and unit, straight into the factors' gradients with the pulls
    pull = 2.0 * lam / (n_gates + 1)
    g_scale = np.zeros(n_groups, dtype=np.float64)
    penalty, ridged = 0.0, 0.0
    gm = np.empty(n, dtype=xT.dtype)
    for t in range(n_terms):
        j, st = group[t], scale[t]
        rj = rho[j] if j >= 0 else 0.0
        c2 = 2.0 * lam * ridge[t]
        dot, sq = 0.0, 0.0
        for u in range(h):
            a = pre[t, u]
            for i in range(n):
                gm[i] = 0.0
            for c in range(k):
                vc = v[t, u, c]
                sa = zero
                for i in range(n):
                    gm[i] += vc * g[c, i] * (1.0 if a[i] > 0.0 else 0.0)
                    sa += g[c, i] * (0.0 if a[i] <= 0.0 else a[i])  # relu, NaN kept
                g_v[t, u, c] = sa + c2 * vc
                ridged += ridge[t] * vc * vc
            for r in range(m + 1):  # the columns' weights, then the bias
                if r < widths[t]:
                    col = cols[t, r]
                    acc = zero
                    for i in range(n):
                        acc += gm[i] * xT[col, i]
                elif r == m:
                    acc = zero
                    for i in range(n):
                        acc += gm[i]
                else:  # padding rows
                    acc = zero
                o = omega[t, r, u]
                dot += acc * o
                sq += o * o
                g_omega[t, r, u] = acc * st + pull * rj * o
        if j >= 0:
            g_scale[j] += dot
            penalty += rj * sq
    for j in range(n_groups):
        for d in range(n_gates):
            others = 1.0
            for e in range(n_gates):
                if e != d:
                    others *= gates[e, j]
            gate = gates[d, j]
            g_gates[d, j] = g_scale[j] * others + pull * rho[j] * gate
            penalty += rho[j] * gate * gate
    return total, penalty / (n_gates + 1), ridged
