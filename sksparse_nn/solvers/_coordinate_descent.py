"""Block coordinate descent on working sets (compiled, extrapolated): binary logistic
sets on sparse ``X`` (proximal Newton steps whose quadratic models it minimizes), and
least-squares sets wider than the samples (:func:`least_squares_cd`, whose model is the
objective itself).

A working set's dense Hessian costs ``n m^2`` flops and ``8 m^2`` bytes for ``m`` columns;
on sparse data (text-like designs, ``m`` in the thousands) that is most of the work and
memory of a path. Here the model ``g^T d + d^T A^T diag(h) A d / 2`` plus the penalty is
minimized one group at a time, keeping ``diag(h) A d`` up to date: a group's update costs
the nonzeros of its columns (CSC slices), never a dense column or a Hessian. Centring
(an intercept) stays implicit: ``A d = X d - (m^T d) 1 + s d_b 1`` is held as the sparse
part ``X d`` and one scalar.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.special

from ._column_store import CSRColumns
from ._logistic_newton import _NEAR_VIOLATION, backtrack
from ._penalties import ext_penalty, group_violations, kkt_setup
from ._working_set import gradient_ranked_working_set, inner_tolerance

# Most coordinate-descent sweeps on one quadratic model.
_MAX_SWEEPS = 500
# Sweeps between two checks of the model's KKT conditions; their iterates are
# extrapolated (Anderson) at each check.
_SWEEPS_PER_CHECK = 5
# Narrowest least-squares working set solved by coordinate descent (see wide_set).
_CD_MIN_FEATURES = 256
# Entries of the dense column chunks that the groups' curvature bounds are formed from
# (0.5 MB of floats: the bounds are the same to the bit for any chunk, see group_bound).
_BOUND_CHUNK = 1 << 16


class SparseColumns:
    """The columns ``cols`` of ``X`` (sparse, a :class:`~._column_store.CSRColumns`, or
    dense: every entry stored, column after column) as a working set's design, centred
    at ``mean`` (or not, ``mean`` None), with an optional constant column of value
    ``const`` as the last variable (the intercept).

    The variables are reordered by group (``ext``, one label per variable, the constant
    column alone in its group) so that a group's columns and nonzeros are contiguous
    slices of one CSC matrix; :meth:`solve` works in that order and returns the
    caller's. Column ``j`` is the entries ``lo[j]:hi[j]`` of ``indices`` / ``data``: a
    CSC ``X`` with sorted indices is read in place (its own arrays, no copy of the
    set's entries), a ``CSRColumns`` gives the columns it holds (copied out of the
    rows, kept along a path); other sparse ``X`` give one sorted copy of the set's
    columns; dense
    columns are copied (every entry, no row indices: ``indices`` empty). The products
    are compiled (:func:`._kernels.columns_matvec` / ``columns_rmatvec``, and
    ``dense_matvec`` / ``dense_rmatvec``), scipy's CSC arithmetic in its order.
    """

    def __init__(self, X, cols, ext, mean=None, const=None):
        k = cols.size
        self.has_const = const is not None
        self.s = float(const) if self.has_const else 0.0
        ext_cols = ext[:k]
        order = np.argsort(ext_cols, kind="stable")
        self.order = order
        self.n = X.shape[0]
        self.dense = not (sp.issparse(X) or isinstance(X, CSRColumns))
        if isinstance(X, CSRColumns):  # CSR X: the set's columns as it holds them
            self.lo, self.hi, self.indices, self.data = X.pointers(cols[order])
        elif not self.dense:
            picked = cols[order]
            if X.format == "csc" and X.has_sorted_indices:
                # the set's columns read in place: pointers into X's CSC arrays, no copy
                # of its entries (the same entries in the same order as a sorted copy)
                src = X
            else:  # CSR, or unsorted CSC: one sorted copy of the set's columns
                src = X[:, picked]
                src = src.tocsc() if src.format != "csc" else src
                src.sort_indices()
                picked = np.arange(k)
            ptr = src.indptr  # the set's pointers only, as int64 (not all of X's)
            self.lo = ptr[picked].astype(np.int64, copy=False)
            self.hi = ptr[picked + 1].astype(np.int64, copy=False)
            self.indices, self.data = src.indices, src.data
        else:  # dense columns: every entry stored, built in the group order directly
            n = self.n
            # rows of X^T: one copy, already in column-major order (X[:, cols] then
            # ravel(order="F") made two)
            self.data = np.asarray(X, dtype=np.float64).T[cols[order]].ravel()
            ptr = np.arange(0, n * k + 1, n, dtype=np.int64)
            self.lo, self.hi = ptr[:-1], ptr[1:]
            self.indices = np.zeros(0, dtype=np.int32)  # rows in order: none stored
        self.m = np.zeros(k) if mean is None else np.asarray(mean, dtype=np.float64)[cols[order]]
        self.centred = mean is not None and bool(np.any(self.m))
        # groups of the columns, in the new order: [start, stop) column ranges
        e = ext_cols[order]
        self.ext_cols = e
        uniq, starts = np.unique(e, return_index=True)
        self.group_labels = uniq
        self.starts = np.append(starts, k).astype(np.intp)
        self.singletons = uniq.size == k
        self.k = k
        self.weights = None  # the samples' weights (set by solve_set_cd)
        self._lam_w = None

    def perm(self, x):
        """The caller's variables in the internal order."""
        out = x[self.order]
        return np.append(out, x[self.k]) if self.has_const else out

    def unperm(self, xi, x_like):
        out = np.empty_like(x_like)
        out[self.order] = xi[: self.k]
        if self.has_const:
            out[self.k] = xi[self.k]
        return out

    def matvec(self, w):
        """``X_set w`` (the set's columns, no centring; internal order)."""
        from ._kernels import columns_matvec, dense_matvec

        z = np.zeros(self.n)
        w = np.ascontiguousarray(w, dtype=np.float64)
        if self.dense:
            dense_matvec(self.data, w, z)
        else:
            columns_matvec(self.lo, self.hi, self.indices, self.data, w, z)
        return z

    def rmatvec(self, r):
        """``X_set^T r`` (internal order)."""
        from ._kernels import columns_rmatvec, dense_rmatvec

        g = np.zeros(self.k)
        r = np.ascontiguousarray(r, dtype=np.float64)
        if self.dense:
            dense_rmatvec(self.data, r, g)
        else:
            columns_rmatvec(self.lo, self.hi, self.indices, self.data, r, g)
        return g

    def toarray(self, cols):
        """The columns ``cols`` (internal order) as a dense ``(n, len(cols))`` array."""
        if self.dense:
            return np.ascontiguousarray(self.data.reshape(self.k, self.n)[cols].T)
        B = np.zeros((self.n, len(cols)))
        for i, j in enumerate(cols):
            part = slice(self.lo[j], self.hi[j])
            B[:, i] = np.bincount(self.indices[part], weights=self.data[part], minlength=self.n)
        return B

    def dot(self, x):
        """``A x`` (internal order)."""
        w = x[: self.k]
        z = self.matvec(w)
        shift = (self.s * x[self.k] if self.has_const else 0.0) - (
            float(self.m @ w) if self.centred else 0.0
        )
        if shift:
            z = z + shift
        return z

    def tdot(self, r):
        """``A^T r`` (internal order)."""
        g = self.rmatvec(r)
        total = float(r.sum()) if (self.centred or self.has_const) else 0.0
        if self.centred:
            g = g - self.m * total
        if self.has_const:
            g = np.append(g, self.s * total)
        return g

    def group_bound(self, weights):
        """Per column group: the largest eigenvalue of ``A_g^T diag(weights) A_g`` (a
        curvature bound of groups of several columns; computed once per set).

        Groups of one size are done together: their columns, densified a chunk of
        groups at a time (at most ``_BOUND_CHUNK`` entries: temporaries of about a MB,
        not of the set's size), give the blocks by one ``einsum`` and their top
        eigenvalues by one batched ``eigvalsh`` (each group's alone: the chunk changes
        no bit)."""
        if self._lam_w is None:
            st = self.starts
            sizes = np.diff(st)
            out = np.zeros(sizes.size)
            for size in np.unique(sizes[sizes > 1]):
                groups = np.flatnonzero(sizes == size)
                per_chunk = max(1, _BOUND_CHUNK // (self.n * size))
                for lo in range(0, groups.size, per_chunk):
                    part = groups[lo : lo + per_chunk]
                    cols = (st[part][:, None] + np.arange(size)).ravel()
                    B = self.toarray(cols).reshape(self.n, part.size, size)
                    G = np.einsum("rgi,r,rgj->gij", B, weights, B)
                    if self.centred:
                        mg = self.m[cols].reshape(part.size, size)
                        c = np.einsum("rgi,r->gi", B, weights)
                        G -= mg[:, :, None] * c[:, None, :] + c[:, :, None] * mg[:, None, :]
                        G += weights.sum() * mg[:, :, None] * mg[:, None, :]
                    out[part] = np.linalg.eigvalsh(0.5 * (G + G.transpose(0, 2, 1)))[:, -1]
            self._lam_w = out
        return self._lam_w


def _weighted_sums(cols, h):
    """Per column of the set, ``X_j^T h`` and the weighted squared norm
    ``sum_i h_i X_ij^2`` (compiled: each entry weighted as it is read, no temporary
    beyond the two results)."""
    from ._kernels import weighted_sums

    c, diag = np.zeros(cols.k), np.zeros(cols.k)
    weighted_sums(cols.lo, cols.hi, cols.indices, cols.data, h, cols.dense, c, diag)
    return c, diag


def _model_cd(cols, gw, x, h, ext, lam_rho, n_groups, tol_model, positive, max_sweeps):
    """Minimize ``gw^T d + d^T A^T diag(h) A d / 2 + penalty(x + d)`` by block coordinate
    descent over the groups (internal order); returns ``(x + d, A d, sweeps)``.

    A sweep visits the groups that are live or violated the model's KKT conditions at the
    last check: a group's update is the proximal step of its block with step ``1 / L_g``,
    ``L_g`` the exact curvature of a one-column group, else the smaller of two upper
    bounds of the block's largest eigenvalue (its trace; its value at ``h = weights``
    times ``max h / weights``). The loop runs compiled (:func:`._kernels.model_cd`,
    numba's cached kernel), ``_SWEEPS_PER_CHECK`` sweeps between
    two checks; at each check (all groups, one product with ``A^T``) the last sweeps'
    iterates are extrapolated (Anderson acceleration, as in *Anderson acceleration of
    coordinate descent*), with the zeros
    of the last sweep kept and the extrapolation taken only if it lowers the model. The
    sweeps' states extrapolate with the same weights (they are affine in the iterate),
    so neither the extrapolation nor the comparison costs a product with ``A``.
    Coordinate descent identifies the support fast but converges linearly on it; the
    extrapolation is what makes it fast there. The loop around the sweeps is compiled
    too.
    """
    from ._kernels import model_cd  # the compiled kernel, imported with the first set

    k = cols.k
    nv = k + (1 if cols.has_const else 0)
    c, diag = _weighted_sums(cols, h)
    m = cols.m
    sh = float(h.sum())
    if cols.centred:
        diag = diag - 2.0 * m * c + m * m * sh
    diag = np.maximum(diag, 0.0)
    s = cols.s
    hb = s * s * sh  # the intercept's curvature
    st = cols.starts
    n_col_groups = st.size - 1
    if cols.singletons:
        L = diag
    else:
        trace = np.add.reduceat(diag, st[:-1]) if k else np.zeros(0)
        L = trace
        multi = np.diff(st) > 1
        if multi.any():
            base = cols.group_bound(cols.weights)
            wpos = cols.weights > 0  # zero-weight samples have no curvature
            ratio = float(np.max(h[wpos] / cols.weights[wpos], initial=0.0))
            L = np.where(multi, np.minimum(trace, base * ratio * (1.0 + 1e-12)), trace)
    thr_group = lam_rho[cols.group_labels] if n_col_groups else np.zeros(0)
    pos = np.zeros(nv, dtype=bool) if positive is None else np.asarray(positive, dtype=bool)
    w, _, t, sweeps = model_cd(
        x, gw, h, ext, lam_rho, n_groups, cols.group_labels, st, L, thr_group, c, m, s, hb,
        pos, bool(pos.any()), cols.lo, cols.hi, cols.indices, cols.data, cols.dense, tol_model,
        max_sweeps, _SWEEPS_PER_CHECK,
    )  # fmt: skip
    # A d, the sparse part recomputed (exact, not accumulated)
    Ad = cols.matvec(w[:k] - x[:k]) + t
    return w, Ad, sweeps


def solve_set_cd(cols, y, wn, x, ext, lam_rho, n_groups, tol_in, scale, max_iter, positive=None):
    """The binary logistic group lasso on a working set of sparse columns, to the absolute
    KKT tolerance ``tol_in`` (the caller's variable order).

    Proximal Newton: at ``x`` the mean log-loss (sample weights ``wn`` summing to 1) is
    replaced by its quadratic model, which :func:`_model_cd` minimizes to a tolerance that
    shrinks with the violation (``max(kkt min(0.1, kkt / scale), tol_in / 4)``: inexact
    far from the solution, superlinear near it); the step to the model's minimizer is
    damped by backtracking until the objective decreases by a quarter of the model's
    predicted decrease (as in *Proximal Newton-type methods for minimizing composite
    functions*). Near the solution, where the decrease is below the objective's rounding,
    the full step is judged by the KKT violation instead. ``positive``: a mask of the
    variables held ``>= 0``.

    Returns ``(x, z, n_iter, kkt, n_newton)``: the solution, its scores ``A x``, the
    sweeps plus Newton steps taken, the set's absolute KKT violation and the Newton
    steps alone.
    """
    xi = cols.perm(x)
    gi = ext[np.append(cols.order, cols.k)] if cols.has_const else ext[cols.order]
    pos = None
    if positive is not None and np.any(positive):
        pos = cols.perm(np.asarray(positive, dtype=bool))
    cols.weights = wn
    expit, logaddexp = scipy.special.expit, np.logaddexp
    z = cols.dot(xi)

    def penalty(v):
        return ext_penalty(v, gi, lam_rho, n_groups)

    f = float(wn @ (logaddexp(0.0, z) - y * z)) + penalty(xi)
    n_iter = n_newton = 0
    blind = None
    kkt = np.inf
    while True:
        P = expit(z)
        gw = cols.tdot(wn * (P - y))
        viol, _ = group_violations(xi, gw, gi, lam_rho, n_groups, pos)
        kkt = float(viol.max()) if viol.size else 0.0
        if blind is not None and not kkt < blind[3]:
            xi, z, f, kkt = blind  # the unchecked step did not help: undo it, stop
            break
        blind = None
        if kkt <= tol_in or n_iter >= max_iter:
            break
        h = wn * P * (1.0 - P)
        tol_model = max(kkt * min(0.1, kkt / scale), 0.25 * tol_in)
        v, Ad, sweeps = _model_cd(
            cols, gw, xi, h, gi, lam_rho, n_groups, tol_model, pos,
            min(_MAX_SWEEPS, max(1, max_iter - n_iter)),
        )  # fmt: skip
        n_iter += sweeps + 1
        n_newton += 1
        d = v - xi
        if not np.any(d):
            break
        delta = float(gw @ d) + penalty(v) - penalty(xi)  # the model's predicted decrease
        step = backtrack(xi, z, f, d, Ad, delta, wn, y, penalty)
        if step is None:
            break
        if step[3]:  # below the objective's rounding: judged by the KKT violation
            blind = (xi, z, f, kkt)
        xi, z, f = step[:3]
    return cols.unperm(xi, x), z, n_iter, kkt, n_newton


def logistic_ws_cd(design, X, lam, ext, rho_ext, x, tol, max_iter, near=_NEAR_VIOLATION):
    """Binary logistic group lasso on sparse ``X`` by working sets (as
    ``logistic_ws_newton``: full gradient, violations of all groups, the live and
    unpenalized groups plus the worst and the near violators) whose problems
    :func:`solve_set_cd` solves. Returns ``(x, n_iter, relative kkt)``."""
    n_ext, lam_rho, scale, abs_tol = kkt_setup(design.c, ext, rho_ext, lam, tol)
    y = design.Y[:, 0]
    n, p = X.shape
    sw = design.sample_weight
    wn = np.full(n, 1.0 / n) if sw is None else sw / n
    mean = design.x_mean if design.fit_intercept else None
    free = rho_ext == 0
    n_iter = stalled = 0
    while True:
        g = design.grad(x)
        viol, live = group_violations(x, g, ext, lam_rho, n_ext)
        kkt = float(viol.max())
        if kkt <= abs_tol or n_iter >= max_iter:
            break
        idx, outside = gradient_ranked_working_set(ext, g, viol, live, free, lam_rho,
                                                   abs_tol, near)  # fmt: skip
        groups_ws, ext_ws = np.unique(ext[idx], return_inverse=True)
        tol_in = inner_tolerance(abs_tol, outside, stalled)
        if tol_in is None:
            break
        feats = idx[idx < p]
        const = design.s if feats.size < idx.size else None
        cols = SparseColumns(X, feats, ext_ws, mean, const)
        xw, _, it, _, _ = solve_set_cd(
            cols, y, wn, x[idx], ext_ws, lam_rho[groups_ws], groups_ws.size, tol_in, scale,
            max_iter - n_iter,
        )  # fmt: skip
        n_iter += it
        stalled = stalled + 1 if it == 0 else 0
        x = np.zeros_like(x)
        x[idx] = xw
    return x + 0.0, min(n_iter, max_iter), kkt / scale


def column_entries(X):
    """Stored entries per column of ``X``: ``n`` for a dense array, the mean number of
    nonzeros per column for a sparse matrix (what a sweep of coordinate descent reads
    per column)."""
    n, p = X.shape
    return X.nnz / max(p, 1) if sp.issparse(X) else float(n)


def wide_set(size, entries):
    """Whether a least-squares working set of ``size`` features is solved by
    :func:`least_squares_cd`: when its columns hold fewer entries than its Gram block
    (``entries``, the stored entries per column of :func:`column_entries`, below
    ``size``: a dense set wider than the samples, whose Gram block is singular and whose
    Newton factorizations cost ``size^3``; a sparse set whose sweeps cost its nonzeros
    while a Gram-block step costs ``size^2``), and when it is wider than
    ``_CD_MIN_FEATURES`` (below which the Gram route is cheap and ends at rounding
    level, not at the tolerance)."""
    return size > max(entries, _CD_MIN_FEATURES)


def least_squares_cd(cols, c, x, ext, lam_rho, n_groups, tol_in, max_sweeps, positive=None):
    """The (weighted, centred) group lasso on a working set's columns, to the absolute
    KKT tolerance ``tol_in``: ``min_w ||A w||^2 / (2n) - c^T w + sum_g lam rho_g ||w_g||``
    (``A`` the set's centred, row-scaled design, ``c = A^T y_c / n``), by the compiled
    block coordinate descent of :func:`_model_cd`, whose quadratic model is here the
    objective itself (curvature ``1/n`` on every row). A sweep costs the set's nonzeros,
    not its Gram block: the route for sets wider than the number of samples, where a
    Gram block and Newton's factorizations of it cost ``|set|^2`` and ``|set|^3``.

    Returns ``(x, n_sweeps, kkt)`` in the caller's variable order.
    """
    xi = cols.perm(x)
    gi = ext[cols.order]
    pos = None
    if positive is not None and np.any(positive):
        pos = cols.perm(np.asarray(positive, dtype=bool))
    h = np.full(cols.n, 1.0 / cols.n)
    cols.weights = h
    gw = cols.tdot(h * cols.dot(xi)) - c[cols.order]
    sweeps = 0
    kkt = np.inf
    while sweeps < max_sweeps:
        v, _, done = _model_cd(cols, gw, xi, h, gi, lam_rho, n_groups, tol_in, pos,
                               max_sweeps - sweeps)  # fmt: skip
        sweeps += max(done, 1)
        # the gradient at the new point, recomputed (not accumulated)
        gw = cols.tdot(h * cols.dot(v)) - c[cols.order]
        xi = v
        viol, _ = group_violations(xi, gw, gi, lam_rho, n_groups, pos)
        kkt = float(viol.max()) if viol.size else 0.0
        if kkt <= tol_in or not done:
            break
    return cols.unperm(xi, x), sweeps, kkt
