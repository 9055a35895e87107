"""Pieces of the working-set solvers' inner iterations, checked against dense definitions:
the block diagonal of a grouped matrix (the Newton step's penalty curvature) and the
Lipschitz constants of a sequence of Gram blocks (the largest eigenvalue)."""

import numpy as np
import pytest
import scipy.linalg

from sksparse_nn.solvers._lipschitz import BlockLipschitz
from sksparse_nn.solvers._working_set import _same_group_pairs

pytestmark = pytest.mark.numerics


@pytest.mark.parametrize(
    "labels",
    [[0], [2, 0, 2, 1, 0, 2], [5, 5, 5, 5], list(range(7)), [1, 0] * 6],
    ids=["one", "shuffled", "one-group", "singletons", "alternating"],
)
def test_same_group_pairs_are_the_block_diagonal(labels):
    labels = np.asarray(labels)
    rows, cols = _same_group_pairs(labels)
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
