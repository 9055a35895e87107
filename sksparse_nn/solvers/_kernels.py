"""Compiled inner loop of the coordinate-descent solvers (:mod:`._coordinate_descent`).

Coordinate descent is a loop over groups whose every step reads and writes a few
entries of the residual: written with NumPy calls per group it is dominated by the
interpreter. :func:`cd_sweep` runs one pass compiled with numba, on the CSC arrays of a
working set (dense columns read contiguously), with no allocation per step and the
caller's arrays as the state (updated in place); :func:`model_cd` runs the whole
minimization of one quadratic model around it (the KKT checks, Anderson's
extrapolation, the gradient), which in Python cost as much as the sweeps themselves
(about 0.1 ms per sweep on that problem, the sweep another 0.1 ms).

numba is imported by this module only, and this module only when a sparse logistic
problem or a least-squares working set wider than the samples is solved; compiled code
is cached on disk (``cache=True``) so the compilation (a few seconds) is paid once per
installation.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def cd_sweep(active, starts, L, thr, gw, c, m, pos, lo, hi, indices, data, h, r, w,
             buf, S, t, sh, dense=False):  # fmt: skip
    """One pass of block coordinate descent over the groups ``active`` of the quadratic
    model ``gw^T d + d^T A^T diag(h) A d / 2 + sum_g thr_g ||x_g + d_g||``.

    Group ``g`` holds the columns ``starts[g]:starts[g + 1]`` of ``A``'s sparse part,
    column ``j`` the entries ``lo[j]:hi[j]`` of the CSC arrays ``indices, data`` (the
    columns of a matrix's CSC arrays read in place: ``lo``/``hi`` its pointers at the
    set's columns; ``h`` the curvature of the rows, each entry weighted by
    its row's as it is added: no weighted copy of the set's entries).
    ``w`` holds ``x + d`` and is updated in place, as is the state of ``A d``: ``r`` =
    ``h * (X d)`` (length ``n``), ``S`` = its sum and ``t`` = the constant part of
    ``A d`` (centring, ``-m^T d``); ``c`` = ``X^T h``, ``sh`` = ``sum(h)``. A group's
    step is the proximal step of its block with step ``1 / L[g]`` (projected on
    ``w >= 0`` where ``pos``). Returns the new ``(S, t)``.

    ``dense``: every column stores every row in order (``indices`` unused), read
    contiguously instead of gathered through the row indices: the same arithmetic in the
    same order (the same iterates to the bit), and faster on dense working sets.
    """
    for g in active:
        Lg = L[g]
        if not Lg > 0.0:
            continue
        ca = starts[g]
        cb = starts[g + 1]
        nrm2 = 0.0
        for j in range(ca, cb):
            jlo, jhi = lo[j], hi[j]
            acc = 0.0
            if dense:
                for q in range(jhi - jlo):
                    acc += data[jlo + q] * r[q]
            else:
                for q in range(jlo, jhi):
                    acc += data[q] * r[indices[q]]
            grad = gw[j] + acc + t * c[j] - m[j] * (S + t * sh)
            v = w[j] - grad / Lg
            if pos[j] and v < 0.0:
                v = 0.0
            buf[j - ca] = v
            nrm2 += v * v
        shrink = _shrink(nrm2, thr[g] / Lg)
        for j in range(ca, cb):
            new = buf[j - ca] * shrink
            delta = new - w[j]
            if delta != 0.0:
                jlo, jhi = lo[j], hi[j]
                if dense:
                    for q in range(jhi - jlo):
                        r[q] += delta * (data[jlo + q] * h[q])
                else:
                    for q in range(jlo, jhi):
                        r[indices[q]] += delta * (data[q] * h[indices[q]])
                S += delta * c[j]
                t -= delta * m[j]
                w[j] = new
    return S, t


@numba.njit(cache=True, nogil=True, inline="always")
def _shrink(nrm2, th):
    """The group soft-threshold's factor ``max(1 - th / ||v||, 0)`` (``nrm2 = ||v||^2``)."""
    if not th > 0.0:
        return 1.0
    nrm = math.sqrt(nrm2)
    return (nrm - th) / nrm if nrm > th else 0.0


@numba.njit(cache=True, nogil=True)
def add_columns(cols, delta, lo, hi, indices, data, h, r, dense=False):
    """``r += sum_i delta[i] * h * data[:, cols[i]]`` for the columns of
    :func:`cd_sweep` (``indices`` unused when ``dense``), in place."""
    for i in range(cols.size):
        j = cols[i]
        jlo, jhi = lo[j], hi[j]
        dj = delta[i]
        if dense:
            for q in range(jhi - jlo):
                r[q] += dj * (data[jlo + q] * h[q])
        else:
            for q in range(jlo, jhi):
                r[indices[q]] += dj * (data[q] * h[indices[q]])


@numba.njit(cache=True, nogil=True)
def weighted_sums(lo, hi, indices, data, h, dense, c, diag):
    """Per column ``j`` of :func:`cd_sweep`'s layout: ``c[j] = sum_i h_i X_ij`` and
    ``diag[j] = sum_i h_i X_ij^2``, each summed from zero in the column's entry order
    (each entry weighted as it is read: no temporary)."""
    for j in range(c.size):
        jlo, jhi = lo[j], hi[j]
        acc = 0.0
        sq = 0.0
        if dense:
            for q in range(jhi - jlo):
                v = data[jlo + q]
                hv = v * h[q]
                acc += hv
                sq += v * hv
        else:
            for q in range(jlo, jhi):
                v = data[q]
                hv = v * h[indices[q]]
                acc += hv
                sq += v * hv
        c[j] = acc
        diag[j] = sq


@numba.njit(cache=True, nogil=True)
def columns_matvec(lo, hi, indices, data, w, z):
    """``z += A w`` for the sparse columns of :func:`cd_sweep`'s layout, a column at a
    time: scipy's CSC product in its order (the same bits)."""
    for j in range(w.size):
        wj = w[j]
        for q in range(lo[j], hi[j]):
            z[indices[q]] += data[q] * wj


@numba.njit(cache=True, nogil=True)
def columns_rmatvec(lo, hi, indices, data, r, g):
    """``g = A^T r`` for the sparse columns of :func:`cd_sweep`'s layout, each entry
    summed from zero in the column's order: scipy's CSR product of ``A^T``."""
    for j in range(g.size):
        acc = 0.0
        for q in range(lo[j], hi[j]):
            acc += data[q] * r[indices[q]]
        g[j] = acc


@numba.njit(cache=True, nogil=True)
def csr_columns(indptr, indices, data, where, out_ptr, out_indices, out_data):
    """The columns of a CSR matrix that ``where`` marks (column -> its place in the
    output, -1: not taken) as CSC arrays, in one pass over the rows: ``out_ptr`` the
    output's column pointers (from the columns' entry counts), ``out_indices`` /
    ``out_data`` filled (rows ascending in every column, as scipy's CSR -> CSC
    conversion orders them)."""
    fill = out_ptr[:-1].copy()
    for i in range(indptr.size - 1):
        for t in range(indptr[i], indptr[i + 1]):
            j = where[indices[t]]
            if j >= 0:
                q = fill[j]
                out_indices[q] = i
                out_data[q] = data[t]
                fill[j] = q + 1


@numba.njit(cache=True, nogil=True)
def dense_matvec(data, w, z):
    """``z += A w`` for dense columns stored one after another in ``data`` (column ``j``:
    entries ``j n`` to ``(j + 1) n``, ``n = z.size``), a column at a time: the arithmetic
    of scipy's CSC product in its order (the same bits, with no row indices)."""
    n = z.size
    for j in range(w.size):
        wj = w[j]
        base = j * n
        for q in range(n):
            z[q] += data[base + q] * wj


@numba.njit(cache=True, nogil=True)
def dense_rmatvec(data, r, g):
    """``g = A^T r`` for the dense columns of :func:`dense_matvec`, each entry summed
    from zero in row order: the arithmetic of scipy's CSR product of ``A^T``."""
    n = r.size
    for j in range(g.size):
        acc = 0.0
        base = j * n
        for q in range(n):
            acc += data[base + q] * r[q]
        g[j] = acc


@numba.njit(cache=True, nogil=True)
def group_violations(w, g, ext, lam_rho, n_groups, pos, has_pos):
    """Per group, the distance of ``-g`` to the penalty's subdifferential at ``w`` (plus
    the normal cone of ``w >= 0`` on ``pos`` when ``has_pos``), and the live groups: the
    compiled twin of :func:`._penalties.group_violations` for one-column coefficients."""
    nw = np.zeros(n_groups)
    for i in range(w.size):
        nw[ext[i]] += w[i] * w[i]
    for j in range(n_groups):
        nw[j] = math.sqrt(nw[j])
    nd = np.zeros(n_groups)
    for i in range(w.size):
        j = ext[i]
        d = g[i] + (lam_rho[j] / nw[j] * w[i] if nw[j] > 0.0 else 0.0)
        if has_pos and pos[i] and not w[i] > 0.0:
            d = min(d, 0.0)
        nd[j] += d * d
    viol = np.empty(n_groups)
    live = np.empty(n_groups, dtype=np.bool_)
    for j in range(n_groups):
        live[j] = nw[j] > 0.0
        v = math.sqrt(nd[j])
        viol[j] = v if live[j] else max(v - lam_rho[j], 0.0)
    return viol, live


@numba.njit(cache=True, nogil=True)
def extrapolation_weights(W, m):
    """Affine weights (summing to one) of Anderson extrapolation from the iterates
    ``W[0], ..., W[m]`` (``W[i + 1]`` the step from ``W[i]``), as
    :func:`._proximal.anderson_weights`: normal equations of the residuals' differences,
    solved by Gaussian elimination with partial pivoting; ``None``-like (an empty array)
    when a pivot is zero or the weights are not finite."""
    nv = W.shape[1]
    q = m - 1
    # residual i = W[i + 1] - W[i]; differences D_i = res_{i+1} - res_i, i < q
    M = np.zeros((q, q))
    b = np.zeros(q)
    for v in range(nv):
        last = W[m, v] - W[m - 1, v]
        for i in range(q):
            di = (W[i + 2, v] - W[i + 1, v]) - (W[i + 1, v] - W[i, v])
            b[i] += di * last
            for j in range(i + 1):
                M[i, j] += di * ((W[j + 2, v] - W[j + 1, v]) - (W[j + 1, v] - W[j, v]))
    for i in range(q):
        for j in range(i + 1, q):
            M[i, j] = M[j, i]
    for col in range(q):  # elimination with partial pivoting
        piv = col
        for i in range(col + 1, q):
            if abs(M[i, col]) > abs(M[piv, col]):
                piv = i
        if M[piv, col] == 0.0:
            return np.empty(0)
        if piv != col:
            for j in range(q):
                M[col, j], M[piv, j] = M[piv, j], M[col, j]
            b[col], b[piv] = b[piv], b[col]
        for i in range(col + 1, q):
            f = M[i, col] / M[col, col]
            for j in range(col, q):
                M[i, j] -= f * M[col, j]
            b[i] -= f * b[col]
    coef = np.zeros(q)
    for i in range(q - 1, -1, -1):
        acc = b[i]
        for j in range(i + 1, q):
            acc -= M[i, j] * coef[j]
        coef[i] = acc / M[i, i]
    a = np.zeros(m)
    a[m - 1] = 1.0
    for i in range(q):
        a[i] += coef[i]
        a[i + 1] -= coef[i]
    for i in range(m):
        if not math.isfinite(a[i]):
            return np.empty(0)
    return a


@numba.njit(cache=True, nogil=True)
def _model_value(w, x, gw, r, S, t, inv_h, sh, ext, lam_rho, n_groups):
    """The model's value at ``w`` (up to a constant) from its state ``(r, S, t)``:
    ``sum h u^2`` with ``u = X d + t`` is ``r^T (r / h) + 2 t S + t^2 sum(h)`` (rows of
    zero curvature hold ``r = 0``): no product with the design."""
    quad = 0.0
    for q in range(r.size):
        quad += r[q] * r[q] * inv_h[q]
    quad += t * (2.0 * S + t * sh)
    lin = 0.0
    sq = np.zeros(n_groups)
    for i in range(w.size):
        lin += gw[i] * (w[i] - x[i])
        sq[ext[i]] += w[i] * w[i]
    pen = 0.0
    for j in range(n_groups):
        pen += lam_rho[j] * math.sqrt(sq[j])
    return lin + 0.5 * quad + pen


@numba.njit(cache=True, nogil=True)
def model_cd(x, gw, h, ext, lam_rho, n_groups, group_labels, starts, L, thr, c, m, s, hb,
             pos, has_pos, lo, hi, indices, data, dense, tol_model, max_sweeps,
             per_check):  # fmt: skip
    """Block coordinate descent on the quadratic model of
    :func:`._coordinate_descent._model_cd` (its arguments prepared there): checks of the
    model's KKT conditions every ``per_check`` sweeps, each followed by Anderson's
    extrapolation of those sweeps (kept if it lowers the model), until the largest
    violation is at most ``tol_model`` or ``max_sweeps`` sweeps are done.

    The variables are the ``k`` columns (``starts[-1]``) then, if ``x`` is longer, the
    intercept (exact, unpenalized steps of curvature ``hb``, its column the constant
    ``s``). Returns ``(x + d, r, t, sweeps)``: ``r = h * (X d)`` and ``t`` the constant
    part of ``A d``.
    """
    nv = x.size
    k = starts[starts.size - 1]
    has_const = nv > k
    n = h.size
    n_col_groups = starts.size - 1
    sh = 0.0
    for q in range(n):
        sh += h[q]
    inv_h = np.zeros(n)
    for q in range(n):
        if h[q] > 0.0:
            inv_h[q] = 1.0 / h[q]
    pos_cols = pos[:k].copy()
    buf = np.empty(max(1, np.max(np.diff(starts)) if n_col_groups else 1))
    w = x.copy()
    r = np.zeros(n)
    S = 0.0
    t = 0.0
    G = gw.copy()  # the model's gradient at d = 0
    W = np.empty((per_check + 1, nv))  # the iterates of one batch of sweeps
    R = np.empty((per_check, n))  # and their states
    St = np.empty((per_check, 2))
    hu = np.empty(n)
    sweeps = 0
    while True:
        viol, live = group_violations(w, G, ext, lam_rho, n_groups, pos, has_pos)
        worst = 0.0
        for j in range(n_groups):
            worst = max(worst, viol[j])
        if n_groups == 0 or worst <= tol_model or sweeps >= max_sweeps:
            break
        n_act = 0
        active = np.empty(n_col_groups, dtype=np.intp)
        for g in range(n_col_groups):
            lab = group_labels[g]
            if live[lab] or viol[lab] > tol_model:
                active[n_act] = g
                n_act += 1
        active = active[:n_act]
        n_sw = min(per_check, max_sweeps - sweeps)
        W[0] = w
        for i in range(n_sw):
            S, t = cd_sweep(active, starts, L, thr, gw, c, m, pos_cols, lo, hi, indices,
                            data, h, r, w, buf, S, t, sh, dense)  # fmt: skip
            if has_const and hb > 0.0:  # the intercept: exact, unpenalized
                delta = -(gw[k] + s * (S + t * sh)) / hb
                t += s * delta
                w[k] += delta
            W[i + 1] = w
            R[i] = r
            St[i, 0] = S
            St[i, 1] = t
            sweeps += 1
        if n_sw > 2:
            a = extrapolation_weights(W, n_sw)
            if a.size:
                w_acc = np.zeros(nv)
                r_acc = np.zeros(n)
                S_acc = 0.0
                t_acc = 0.0
                for i in range(n_sw):
                    w_acc += a[i] * W[i + 1]
                    r_acc += a[i] * R[i]
                    S_acc += a[i] * St[i, 0]
                    t_acc += a[i] * St[i, 1]
                ok = True
                for v in range(nv):
                    ok = ok and math.isfinite(w_acc[v])
                for q in range(n):
                    ok = ok and math.isfinite(r_acc[q])
                if ok:
                    # the last sweep's zeros (and bounds) imposed, their change added
                    moved = np.empty(nv, dtype=np.intp)
                    delta = np.empty(nv)
                    n_moved = 0
                    for v in range(nv):
                        if w_acc[v] != 0.0 and (w[v] == 0.0 or (pos[v] and w_acc[v] < 0.0)):
                            dv = -w_acc[v]
                            w_acc[v] = 0.0
                            if v < k:
                                moved[n_moved] = v
                                delta[n_moved] = dv
                                n_moved += 1
                                S_acc += dv * c[v]
                                t_acc -= dv * m[v]
                            else:
                                t_acc += s * dv
                    add_columns(moved[:n_moved], delta[:n_moved], lo, hi, indices, data, h,
                                r_acc, dense)  # fmt: skip
                    if _model_value(w_acc, x, gw, r_acc, S_acc, t_acc, inv_h, sh, ext,
                                    lam_rho, n_groups) < _model_value(
                                        w, x, gw, r, S, t, inv_h, sh, ext, lam_rho,
                                        n_groups):  # fmt: skip
                        w = w_acc
                        r = r_acc
                        S = S_acc
                        t = t_acc
        # the model's gradient gw + A^T (h u), u = X d + t; the column products are
        # written out as in cd_sweep: one helper for both (numba-inlined or called) made
        # the sparse Lasso path slower
        total = 0.0
        for q in range(n):
            hu[q] = r[q] + t * h[q]
            total += hu[q]
        for j in range(k):
            jlo, jhi = lo[j], hi[j]
            acc = 0.0
            if dense:
                for q in range(jhi - jlo):
                    acc += data[jlo + q] * hu[q]
            else:
                for q in range(jlo, jhi):
                    acc += data[q] * hu[indices[q]]
            G[j] = gw[j] + acc - m[j] * total
        if has_const:
            G[k] = gw[k] + s * total
    return w, r, t, sweeps
