"""Pieces of the working-set solvers' inner iterations, checked against dense definitions:
the block diagonal of a grouped matrix (the Newton step's penalty curvature) and the
Lipschitz constants of a sequence of Gram blocks (the largest eigenvalue)."""

import numpy as np
import pytest
import scipy.linalg

from sksparse_nn.groups import same_group_pairs
from sksparse_nn.solvers._lipschitz import BlockLipschitz

pytestmark = pytest.mark.numerics


@pytest.mark.parametrize(
    "labels",
    [[0], [2, 0, 2, 1, 0, 2], [5, 5, 5, 5], list(range(7)), [1, 0] * 6],
    ids=["one", "shuffled", "one-group", "singletons", "alternating"],
)
def test_same_group_pairs_are_the_block_diagonal(labels):
    labels = np.asarray(labels)
    rows, cols = same_group_pairs(labels)
    mask = np.zeros((labels.size, labels.size), dtype=int)
    np.add.at(mask, (rows, cols), 1)  # every pair once
    np.testing.assert_array_equal(mask, labels[:, None] == labels[None, :])


def _gram(rng, n, p):
    X = rng.standard_normal((n, p))
    return X.T @ X / n


def _top(G):
    return scipy.linalg.eigvalsh(G)[-1]


def test_block_lipschitz_bounds_the_top_eigenvalue_along_sets():
    # blocks larger than the dense-eigensolver limit go through power iterations: a
    # Rayleigh quotient (a lower bound) times 1.05, so at most 1.05 top; at least 0.95 top
    # unless the warm start misleads the iterations (the solvers then raise L when a
    # step's curvature exceeds it, but a value far below top means the wrong block)
    rng = np.random.default_rng(0)
    p = 300
    G_full = _gram(rng, 400, p)
    lipschitz = BlockLipschitz(p)
    for idx in (np.arange(0, 150), np.arange(0, 160), np.arange(20, 200)):
        G = G_full[np.ix_(idx, idx)]
        L = lipschitz(G, idx)
        assert 0.95 * _top(G) <= L <= 1.05 * _top(G) * (1 + 1e-12)


def test_block_lipschitz_reuses_a_set_and_records_raised_values():
    rng = np.random.default_rng(1)
    G = _gram(rng, 100, 80)
    idx = np.arange(80)
    lipschitz = BlockLipschitz(80)
    L = lipschitz(G, idx)
    assert lipschitz(2 * G, idx) == L  # the same set: the same Gram block by contract
    lipschitz.update(3 * L)
    assert lipschitz(G, idx) == 3 * L
    # without features (Hessians that change) the value is always recomputed
    hessians = BlockLipschitz()
    assert hessians(2 * G) == pytest.approx(2 * hessians(G), rel=0.05)


def test_block_lipschitz_cap_and_small_blocks():
    rng = np.random.default_rng(2)
    G = _gram(rng, 50, 10)  # dense eigensolver: exact up to 1e-12 relative
    lipschitz = BlockLipschitz(10)
    assert lipschitz(G, np.arange(10)) == pytest.approx(_top(G), rel=1e-10)
    assert BlockLipschitz(10)(G, np.arange(10), cap=0.5 * _top(G)) == 0.5 * _top(G)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ratio", [1e-5, 1e-2])
def test_newton_steps_finish_a_singular_block(seed, ratio):
    # centred 60 x 60 data: the Gram block has rank 59. At lam = 1e-5 lam_max the flat
    # direction makes FISTA crawl (condition ~1e6); Newton steps on the support finish the
    # block once the full step is backtracked on the objective (the KKT violation first
    # rises along it: a full step judged by the KKT violation was refused, and FISTA ran
    # out of 400 iterations short of the tolerance on 3 of these 4 seeds)
    from sksparse_nn.solvers._working_set import ws_fista

    rng = np.random.default_rng(seed)
    n = p = 60
    X = rng.standard_normal((n, p))
    X -= X.mean(axis=0)
    y = X[:, :10] @ rng.standard_normal(10) + rng.standard_normal(n)
    G, c = X.T @ X / n, X.T @ (y - y.mean()) / n
    ext = np.repeat(np.arange(p // 5), 5)
    lam_max = np.sqrt(np.bincount(ext, weights=c * c)).max()
    lam_rho = np.full(p // 5, ratio * lam_max)
    L = BlockLipschitz(p)(G, np.arange(p), np.trace(G))
    tol = 1e-9 * lam_max  # the solvers' relative KKT stopping rule
    x, n_iter, kkt, _ = ws_fista(G, c, lam_rho, ext, p // 5, np.zeros(p), L, tol, 400, False)
    assert kkt <= tol and n_iter < 100
    # the KKT conditions, written here from their definition
    grad = G @ x - c
    for j in range(p // 5):
        w, g = x[ext == j], grad[ext == j]
        norm = np.linalg.norm(w)
        if norm > 0:
            assert np.linalg.norm(g + lam_rho[j] * w / norm) <= tol * (1 + 1e-6)
        else:
            assert np.linalg.norm(g) <= lam_rho[j] + tol
