"""The compiled coordinate-descent sweep of the sparse logistic solver against a NumPy
reference written here from its definition.

One sweep visits the active groups in order; group ``g`` (columns ``J``) takes the
proximal step of its block of the quadratic model ``gw^T d + d^T A^T diag(h) A d / 2``
(``A = X - 1 m^T``, ``d = w - x``) with step ``1 / L_g``: ``v = w_J - grad_J / L_g``,
clipped at 0 where non-negative, then shrunk by the group soft-threshold
``max(1 - thr_g / (L_g ||v||), 0)``. The kernel keeps ``r = h * (X d)``, ``S = sum r``
and ``t = -m^T d`` up to date instead of recomputing the gradient; both must agree to
rounding.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from sksparse_nn.solvers import _kernels
from sksparse_nn.solvers._kernels import add_columns, cd_sweep
from sksparse_nn.solvers._penalties import group_violations
from sksparse_nn.solvers._proximal import anderson_extrapolation, anderson_weights

pytestmark = pytest.mark.numerics

EPS = np.finfo(np.float64).eps


def _assert_sums_close(got, want, magnitude, terms):
    """``got`` and ``want``: two summations of the same ``terms`` products in any order
    (a fused multiply-add or another order is allowed: they differ by rounding only);
    each is within ``terms * eps`` of the exact sum, relative to the sum of the terms'
    magnitudes ``magnitude`` (the classic bound of a recursive sum, ``gamma_n``), so
    they differ by at most twice that."""
    bound = 2 * (terms + 1) * EPS * np.asarray(magnitude, dtype=float)
    assert np.all(np.abs(np.asarray(got) - np.asarray(want)) <= bound)


def _reference_sweep(X, h, m, gw, x, w, active, starts, L, thr, pos):
    A = X.toarray() - m[None, :]
    w = w.copy()
    for g in active:
        J = slice(starts[g], starts[g + 1])
        grad = gw[J] + A[:, J].T @ (h * (A @ (w - x)))
        v = w[J] - grad / L[g]
        v = np.where(pos[J], np.maximum(v, 0.0), v)
        nrm = np.linalg.norm(v)
        w[J] = v * max(1.0 - thr[g] / (L[g] * nrm), 0.0) if nrm > 0 else 0.0
    return w


@pytest.mark.parametrize("sizes", [[1] * 12, [3, 1, 4, 2, 2]], ids=["singletons", "groups"])
@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("positive", [False, True])
def test_cd_sweep_is_the_proximal_block_step(sizes, centred, positive):
    rng = np.random.default_rng(len(sizes) + 2 * centred + 4 * positive)
    n, k = 40, sum(sizes)
    X = sp.random(n, k, density=0.3, format="csc", random_state=rng, dtype=np.float64)
    X.sort_indices()
    h = rng.uniform(0.05, 0.25, size=n)
    m = np.asarray(X.mean(axis=0)).ravel() if centred else np.zeros(k)
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    x = rng.normal(size=k)
    gw = rng.normal(size=k)
    A = X.toarray() - m
    L = np.array([np.linalg.eigvalsh(A[:, a:b].T @ (h[:, None] * A[:, a:b]))[-1]
                  for a, b in zip(starts[:-1], starts[1:], strict=True)])  # fmt: skip
    # thresholds that zero some groups and keep others
    thr = rng.uniform(0.0, 1.5, size=len(sizes)) * np.abs(gw).max()
    thr[0], thr[2] = 1e6, 0.0  # one group certainly zeroed, one unpenalized
    pos = np.full(k, positive)
    active = np.array([g for g in range(len(sizes)) if g != 1], dtype=np.int64)  # one skipped

    w = x.copy()
    r, S, t = np.zeros(n), 0.0, 0.0  # d = 0
    c = X.T @ h
    buf = np.empty(max(sizes))
    S, t = cd_sweep(active, starts, L, thr, gw, c, m, pos, X.indptr[:-1], X.indptr[1:],
                    X.indices, X.data, h, r, w, buf, S, t, float(h.sum()))  # fmt: skip

    expected = _reference_sweep(X, h, m, gw, x, x, active, starts, L, thr, pos)
    scale = np.abs(expected).max() + np.abs(x).max()
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e3 * EPS * scale)
    assert np.all(w[starts[0] : starts[1]] == 0.0)
    assert np.any(w[starts[2] : starts[3]] != x[starts[2] : starts[3]])
    assert np.array_equal(w[starts[1] : starts[2]], x[starts[1] : starts[2]])  # not active
    if positive:
        assert np.all(w[np.concatenate([np.arange(starts[g], starts[g + 1]) for g in active])] >= 0)
    # the state the kernel carries is the state of the new point
    d = w - x
    np.testing.assert_allclose(r, h * (X @ d), rtol=0, atol=1e3 * EPS * scale)
    np.testing.assert_allclose(S, (h * (X @ d)).sum(), rtol=0, atol=1e4 * EPS * scale)
    np.testing.assert_allclose(t, -m @ d, rtol=0, atol=1e3 * EPS * scale)


@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("positive", [False, True])
def test_dense_sweep_is_the_sparse_sweep_on_every_entry(centred, positive):
    # dense columns (every entry stored, zeros included) give the CSC kernel and the
    # dense one the same arithmetic in the same order: equal to the bit, state included
    rng = np.random.default_rng(7 + 2 * centred + positive)
    sizes = [3, 1, 4, 2, 2]
    n, k = 30, sum(sizes)
    D = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.7)  # some exact zeros
    X = sp.csc_matrix(
        (D.ravel(order="F"), np.tile(np.arange(n, dtype=np.int32), k), np.arange(0, n * k + 1, n)),
        shape=(n, k),
    )
    h = rng.uniform(0.05, 0.25, size=n)
    m = D.mean(axis=0) if centred else np.zeros(k)
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    x, gw = rng.normal(size=k), rng.normal(size=k)
    L = rng.uniform(1.0, 3.0, size=len(sizes))
    thr = rng.uniform(0.0, 1.0, size=len(sizes)) * np.abs(gw).max()
    pos = np.full(k, positive)
    active = np.arange(len(sizes))
    c = X.T @ h
    out = []
    for dense in (False, True):
        w, r, buf = x.copy(), np.zeros(n), np.empty(max(sizes))
        S, t = 0.0, 0.0
        for _ in range(3):  # a few sweeps: the state feeds the next one
            S, t = cd_sweep(active, starts, L, thr, gw, c, m, pos, X.indptr[:-1],
                            X.indptr[1:], X.indices, X.data, h, r, w, buf, S, t,
                            float(h.sum()), dense)  # fmt: skip
        out.append((w, r, S, t))
    (w0, r0, S0, t0), (w1, r1, S1, t1) = out
    assert np.any(w0 != x) and np.array_equal(w0, w1) and np.array_equal(r0, r1)
    assert S0 == S1 and t0 == t1


@pytest.mark.parametrize("dense", [False, True])
def test_add_columns_adds_the_weighted_columns(dense):
    rng = np.random.default_rng(3 + dense)
    n, k = 25, 9
    X = sp.random(n, k, density=1.0 if dense else 0.3, format="csc", random_state=rng)
    X.sort_indices()
    h = rng.uniform(0.1, 1.0, size=n)
    cols, delta = np.array([4, 0, 7], dtype=np.intp), rng.normal(size=3)
    r0 = rng.normal(size=n)
    r = r0.copy()
    add_columns(cols, delta, X.indptr[:-1], X.indptr[1:], X.indices, X.data, h, r, dense)
    expected = r0 + h * (X[:, cols].toarray() @ delta)
    np.testing.assert_allclose(r, expected, rtol=0, atol=64 * EPS * np.abs(expected).max())


def test_anderson_weights_find_the_fixed_point_of_a_linear_iteration():
    # x <- M x + b in 3 dimensions: 5 steps (4 residual differences) span the residual
    # space, so the extrapolation is the fixed point itself, to rounding of the solve
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    M = Q @ np.diag([0.9, 0.5, -0.7]) @ Q.T
    b = rng.normal(size=3)
    fixed = np.linalg.solve(np.eye(3) - M, b)
    x, history = rng.normal(size=3), []
    for _ in range(5):
        history.append((x, M @ x + b))
        x = history[-1][1]
    a = anderson_weights(history)
    assert a.sum() == pytest.approx(1.0, abs=16 * EPS)
    # an affine image of the iterates extrapolates with the same weights
    Z = rng.normal(size=(4, 3))
    z_acc = np.array([Z @ after for _, after in history]).T @ a
    np.testing.assert_allclose(anderson_extrapolation(history), fixed, rtol=1e-9)
    np.testing.assert_allclose(z_acc, Z @ fixed, rtol=1e-9)


@pytest.mark.parametrize("positive", [False, True])
def test_compiled_group_violations_are_the_numpy_ones(positive):
    rng = np.random.default_rng(11 + positive)
    ext = rng.permutation(np.repeat(np.arange(6), [1, 3, 2, 4, 1, 2]))
    lam_rho = rng.uniform(0.5, 2.0, size=6)
    lam_rho[4] = 0.0  # an unpenalized group
    w = rng.normal(size=ext.size)
    w[np.isin(ext, [1, 5])] = 0.0  # zero groups
    w[0] = 0.0  # and one zero entry of a live group
    g = rng.normal(size=ext.size) * 2.0
    pos = np.zeros(ext.size, dtype=bool)
    if positive:
        pos[::2] = True
        w[pos] = np.abs(w[pos])
    viol, live = _kernels.group_violations(w, g, ext, lam_rho, 6, pos, positive)
    ref_viol, ref_live = group_violations(w, g, ext, lam_rho, 6, pos if positive else False)
    assert np.array_equal(live, ref_live)
    # the same sums in the same order, up to how the division is grouped
    np.testing.assert_allclose(viol, ref_viol, rtol=0, atol=16 * EPS * np.abs(g).sum())
    assert np.any(viol > 0) and np.any(~live)


def test_compiled_extrapolation_weights_are_anderson_weights():
    rng = np.random.default_rng(5)
    M = 0.3 * rng.normal(size=(7, 7))
    b = rng.normal(size=7)
    W = np.empty((6, 7))
    W[0] = rng.normal(size=7)
    for i in range(5):
        W[i + 1] = M @ W[i] + b
    for m in (3, 4, 5):
        a = _kernels.extrapolation_weights(W, m)
        ref = anderson_weights([(W[i], W[i + 1]) for i in range(m)])
        # both solve the same normal equations (LU with partial pivoting), formed in
        # different orders: they agree to the system's condition number times eps
        res = np.diff(W[: m + 1], axis=0).T
        diffs = np.diff(res, axis=1)
        cond = np.linalg.cond(diffs.T @ diffs)
        assert np.abs(a - ref).max() <= 64 * cond * EPS * np.abs(ref).max()
    # residual differences that are linearly dependent (a constant step): no weights
    W_const = np.arange(7.0) + np.arange(6.0)[:, None]  # exact: differences are 0
    assert _kernels.extrapolation_weights(W_const, 4).size == 0


def _dense_model(X, m, s, h, gw, x, d):
    """The model's gradient ``gw + A^T (h * (A d))`` with ``A = [X - 1 m^T, s 1]``."""
    A = X.toarray() - m
    if s is not None:
        A = np.hstack([A, np.full((A.shape[0], 1), s)])
    return gw + A.T @ (h * (A @ d))


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("positive", [False, True])
@pytest.mark.parametrize("dense", [False, True])
def test_model_cd_reaches_the_models_kkt_point(intercept, positive, dense):
    # the compiled loop stops at the model's KKT point (checked here on the dense model,
    # not on the kernel's own state), and the state it returns is that point's
    rng = np.random.default_rng(20 + 4 * intercept + 2 * positive + dense)
    sizes = [2, 1, 3, 1, 2, 1, 1, 3]
    n, k = 50, sum(sizes)
    X = sp.random(n, k, density=1.0 if dense else 0.3, format="csc", random_state=rng)
    X.sort_indices()
    m = np.asarray(X.mean(axis=0)).ravel()
    s = 1.0 if intercept else None
    h = rng.uniform(0.2, 1.0, size=n) / n
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    ext = np.repeat(np.arange(len(sizes)), sizes)
    nv = k + intercept
    if intercept:
        ext = np.append(ext, len(sizes))
    n_groups = len(sizes) + intercept
    x = rng.normal(size=nv) * (rng.random(nv) < 0.5)
    gw = rng.normal(size=nv) * 0.3
    A = X.toarray() - m
    L = np.array([np.linalg.eigvalsh(A[:, a:b].T @ (h[:, None] * A[:, a:b]))[-1]
                  for a, b in zip(starts[:-1], starts[1:], strict=True)])  # fmt: skip
    lam_rho = np.append(rng.uniform(0.02, 0.2, size=len(sizes)), [0.0] * intercept)
    lam_rho[1] = 1e3  # a group the model certainly zeroes
    pos = np.zeros(nv, dtype=bool)
    if positive:
        pos[:k:2] = True
        x[pos] = np.abs(x[pos])
    c = X.T @ h
    hb = float(h.sum()) if intercept else 0.0
    tol = 1e-10
    w, r, t, sweeps = _kernels.model_cd(
        x, gw, h, ext, lam_rho, n_groups, np.arange(len(sizes)), starts, L,
        lam_rho[: len(sizes)], c, m, 1.0 if intercept else 0.0, hb, pos, positive,
        X.indptr[:-1], X.indptr[1:], X.indices, X.data, dense, tol, 10_000, 5,
    )  # fmt: skip
    d = w - x
    G = _dense_model(X, m, s, h, gw, x, d)
    viol, live = group_violations(w, G, ext, lam_rho, n_groups, pos if positive else False)
    # the loop's own check used its gradient; the dense one differs by rounding only
    assert viol.max() <= tol + 1e3 * EPS * np.abs(G).sum()
    assert 0 < sweeps < 10_000 and np.any(~live[: len(sizes)]) and np.any(live)
    if positive:
        assert np.all(w[pos] >= 0)
    scale = np.abs(d).max() + 1.0
    np.testing.assert_allclose(r, h * (X @ d[:k]), rtol=0, atol=1e3 * EPS * scale)
    t_ref = -m @ d[:k] + (d[k] if intercept else 0.0)
    np.testing.assert_allclose(t, t_ref, rtol=0, atol=1e3 * EPS * scale)


@pytest.mark.parametrize("n, k", [(1, 1), (7, 3), (40, 130)])
def test_dense_products_are_scipys_csc_products(n, k):
    # a dense set stores no row indices: its products must be scipy's CSC ones (the
    # products of the same columns with every row stored), to the rounding of a sum
    rng = np.random.default_rng(n + k)
    D = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.7)
    data = np.ascontiguousarray(D.T).ravel()
    A = sp.csc_matrix(
        (data, np.tile(np.arange(n, dtype=np.int32), k), np.arange(0, n * k + 1, n)),
        shape=(n, k),
    )
    w, r = rng.normal(size=k) * (rng.random(k) < 0.5), rng.normal(size=n)
    z, g = np.zeros(n), np.zeros(k)
    _kernels.dense_matvec(data, w, z)
    _kernels.dense_rmatvec(data, r, g)
    _assert_sums_close(z, A @ w, abs(A) @ abs(w), k)
    _assert_sums_close(g, A.T @ r, abs(A).T @ abs(r), n)


@pytest.mark.parametrize("dense", [False, True])
def test_column_kernels_read_picked_columns_as_scipy_computes_them(dense):
    # a set's columns read in place (pointers lo/hi into a CSC matrix, in any order):
    # the products are scipy's on the sliced columns, the weighted sums bincount's
    # over their entries, to the rounding of a sum
    rng = np.random.default_rng(11 + dense)
    n, p = 50, 40
    X = sp.random(n, p, density=1.0 if dense else 0.2, format="csc", random_state=rng)
    X.sort_indices()
    picked = np.array([7, 3, 30, 0, 12, 39], dtype=np.intp)
    ptr = X.indptr.astype(np.int64)
    lo, hi = ptr[picked], ptr[picked + 1]
    A = X[:, picked]
    h = rng.uniform(0.1, 1.0, size=n)
    entries = A.data if not dense else A.toarray().T.ravel()
    if dense:  # every row stored, in order: the dense layout
        lo = np.arange(0, n * picked.size, n, dtype=np.int64)
        hi = lo + n
    cols = np.repeat(np.arange(picked.size), np.diff(A.indptr)) if not dense else np.repeat(
        np.arange(picked.size), n)  # fmt: skip
    rows = A.indices if not dense else np.tile(np.arange(n), picked.size)
    weighted = entries * h[rows]
    c_ref = np.bincount(cols, weights=weighted, minlength=picked.size)
    d_ref = np.bincount(cols, weights=entries * weighted, minlength=picked.size)
    data, indices = (X.data, X.indices) if not dense else (entries, np.zeros(0, np.int32))
    c, diag = np.zeros(picked.size), np.zeros(picked.size)
    _kernels.weighted_sums(lo, hi, indices, data, h, dense, c, diag)
    c_abs = np.bincount(cols, weights=np.abs(weighted), minlength=picked.size)
    _assert_sums_close(c, c_ref, c_abs, n)
    _assert_sums_close(diag, d_ref, d_ref, n)  # a sum of non-negative terms
    if dense:
        return
    w, r = rng.normal(size=picked.size), rng.normal(size=n)
    z, g = np.zeros(n), np.zeros(picked.size)
    _kernels.columns_matvec(lo, hi, X.indices, X.data, w, z)
    _kernels.columns_rmatvec(lo, hi, X.indices, X.data, r, g)
    _assert_sums_close(z, A @ w, abs(A) @ abs(w), picked.size)
    _assert_sums_close(g, A.T @ r, abs(A).T @ abs(r), n)


def test_csr_columns_copies_the_marked_columns_as_scipys_csc_conversion():
    # the columns `where` marks, copied out of CSR rows into CSC arrays at the given
    # pointers (here after an offset, as CSRColumns appends them): the entries and
    # rows of scipy's CSR -> CSC conversion, column by column; the rest untouched
    rng = np.random.default_rng(13)
    X = sp.random(30, 25, density=0.3, format="csr", random_state=rng)
    picked = np.array([4, 0, 17, 24], dtype=np.intp)
    csc = X.tocsc()
    csc.sort_indices()
    counts = np.diff(csc.indptr)[picked]
    offset = 3
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64) + offset
    where = np.full(X.shape[1], -1, dtype=np.int32)
    where[picked] = np.arange(picked.size, dtype=np.int32)
    indices = np.full(ptr[-1], -7, dtype=np.int32)
    data = np.full(ptr[-1], np.nan)
    _kernels.csr_columns(X.indptr, X.indices, X.data, where, ptr, indices, data)
    assert np.all(indices[:offset] == -7) and np.all(np.isnan(data[:offset]))
    for i, j in enumerate(picked):
        part = slice(csc.indptr[j], csc.indptr[j + 1])
        np.testing.assert_array_equal(indices[ptr[i] : ptr[i + 1]], csc.indices[part])
        np.testing.assert_array_equal(data[ptr[i] : ptr[i + 1]], csc.data[part])
