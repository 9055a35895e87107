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

from sksparse_nn.solvers._kernels import add_columns, cd_sweep
from sksparse_nn.solvers._proximal import anderson_extrapolation, anderson_weights

pytestmark = pytest.mark.numerics

EPS = np.finfo(np.float64).eps


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
    wdata = X.data * h[X.indices]
    c = X.T @ h
    buf = np.empty(max(sizes))
    S, t = cd_sweep(active, starts, L, thr, gw, c, m, pos, X.indptr, X.indices, X.data, wdata,
                    r, w, buf, S, t, float(h.sum()))  # fmt: skip

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
    wdata, c = X.data * h[X.indices], X.T @ h
    out = []
    for dense in (False, True):
        w, r, buf = x.copy(), np.zeros(n), np.empty(max(sizes))
        S, t = 0.0, 0.0
        for _ in range(3):  # a few sweeps: the state feeds the next one
            S, t = cd_sweep(active, starts, L, thr, gw, c, m, pos, X.indptr, X.indices,
                            X.data, wdata, r, w, buf, S, t, float(h.sum()), dense)  # fmt: skip
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
    wdata = X.data * h[X.indices]
    cols, delta = np.array([4, 0, 7], dtype=np.intp), rng.normal(size=3)
    r0 = rng.normal(size=n)
    r = r0.copy()
    add_columns(cols, delta, X.indptr, X.indices, wdata, r, dense)
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
