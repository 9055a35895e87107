"""Compiled inner loop of the coordinate-descent solvers (:mod:`._coordinate_descent`).

Coordinate descent is a loop over groups whose every step reads and writes a few
entries of the residual: written with NumPy calls per group it is dominated by the
interpreter (measured: the loop was 1.7 s of a 3.8 s path on a 2000 x 10000 text-like
problem). :func:`cd_sweep` runs it compiled with numba, on the CSC arrays of a working
set (dense columns read contiguously), with no allocation per step and the
caller's arrays as the state (updated in place).

numba is imported by this module only, and this module only when a sparse logistic
problem or a least-squares working set wider than the samples is solved; compiled code
is cached on disk (``cache=True``) so the compilation (about a second) is paid once per
installation.
"""

from __future__ import annotations

import math

import numba


@numba.njit(cache=True, nogil=True)
def cd_sweep(active, starts, L, thr, gw, c, m, pos, indptr, indices, data, wdata, r, w,
             buf, S, t, sh, dense=False):  # fmt: skip
    """One pass of block coordinate descent over the groups ``active`` of the quadratic
    model ``gw^T d + d^T A^T diag(h) A d / 2 + sum_g thr_g ||x_g + d_g||``.

    Group ``g`` holds the CSC columns ``starts[g]:starts[g + 1]`` of ``A``'s sparse part
    (``indptr, indices, data``; ``wdata`` the same entries times ``h`` of their rows).
    ``w`` holds ``x + d`` and is updated in place, as is the state of ``A d``: ``r`` =
    ``h * (X d)`` (length ``n``), ``S`` = its sum and ``t`` = the constant part of
    ``A d`` (centring, ``-m^T d``); ``c`` = ``X^T h``, ``sh`` = ``sum(h)``. A group's
    step is the proximal step of its block with step ``1 / L[g]`` (projected on
    ``w >= 0`` where ``pos``). Returns the new ``(S, t)``.

    ``dense``: every column stores every row in order (``indices`` unused), read
    contiguously instead of gathered through the row indices: the same arithmetic in the
    same order (the same iterates to the bit), 3.6x faster on dense working sets.
    """
    for g in active:
        Lg = L[g]
        if not Lg > 0.0:
            continue
        ca = starts[g]
        cb = starts[g + 1]
        nrm2 = 0.0
        for j in range(ca, cb):
            lo, hi = indptr[j], indptr[j + 1]
            acc = 0.0
            if dense:
                for q in range(hi - lo):
                    acc += data[lo + q] * r[q]
            else:
                for q in range(lo, hi):
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
                lo, hi = indptr[j], indptr[j + 1]
                if dense:
                    for q in range(hi - lo):
                        r[q] += delta * wdata[lo + q]
                else:
                    for q in range(lo, hi):
                        r[indices[q]] += delta * wdata[q]
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
def add_columns(cols, delta, indptr, indices, wdata, r, dense=False):
    """``r += sum_i delta[i] * wdata[:, cols[i]]`` for CSC arrays (``indices`` unused
    when ``dense``, as in :func:`cd_sweep`), in place."""
    for i in range(cols.size):
        j = cols[i]
        lo, hi = indptr[j], indptr[j + 1]
        dj = delta[i]
        if dense:
            for q in range(hi - lo):
                r[q] += dj * wdata[lo + q]
        else:
            for q in range(lo, hi):
                r[indices[q]] += dj * wdata[q]
