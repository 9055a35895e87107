"""The group penalty's arithmetic on labelled rows (sksparse_nn.groups) against explicit loops."""

import numpy as np
import pytest

from sksparse_nn.groups import norms_by_label, penalty_value


@pytest.mark.parametrize("columns", [None, 3])
def test_norms_by_label_equal_the_norm_of_each_groups_block(columns):
    rng = np.random.default_rng(0)
    labels = rng.integers(-1, 5, size=20)  # -1: rows outside every group
    W = rng.normal(size=20 if columns is None else (20, columns))
    norms = norms_by_label(W, labels, 6)  # group 5 has no rows
    for g in range(6):
        expected = np.linalg.norm(W[labels == g])
        assert norms[g] == pytest.approx(expected, rel=1e-14)  # float64 sums of <= 60 terms
    assert norms[5] == 0.0


@pytest.mark.parametrize("D", [2, 3, 4])
def test_penalty_value_is_the_weighted_sum_of_powered_norms(D):
    norms, rho = np.array([0.0, 1.0, 8.0]), np.array([5.0, 2.0, 0.5])
    expected = sum(r * n ** (2.0 / D) for r, n in zip(rho, norms, strict=True))
    assert penalty_value(norms, rho, D) == pytest.approx(expected, rel=1e-15)
