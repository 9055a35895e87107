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


def test_norms_by_label_without_copies_agrees_with_the_masked_route():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(7, 1))
    every = np.array([0, 0, 1, 2, 2, 2, 1])
    some = np.array([0, 0, 1, 2, 2, -1, 1])
    masked = norms_by_label(np.vstack([W, [[5.0]]]), np.append(every, -1), 3)  # a free row
    np.testing.assert_array_equal(norms_by_label(W, every, 3), masked)  # the same sums
    np.testing.assert_allclose(norms_by_label(W, every, 3)[2], np.linalg.norm(W[3:6]))
    np.testing.assert_allclose(norms_by_label(W, some, 3)[2], np.linalg.norm(W[3:5]))
    assert norms_by_label(W, -np.ones(7, dtype=int), 2).dtype == np.float64  # no group


def test_spec_keys_follow_values_not_objects():
    from sksparse_nn.groups import spec_key
    from sksparse_nn.utils.digest import array_key

    labels = np.array([0, 0, 1, -1])
    key = spec_key(labels)
    assert spec_key(labels.copy()) == key  # equal values, another array
    labels[3] = 1
    assert spec_key(labels) != key  # changed in place
    assert spec_key(None) != spec_key(0) and spec_key(3) == spec_key(3)
    assert spec_key([[0, 1], [2]]) is None  # ragged index lists: no key, never held
    assert array_key(np.array([0.0])) == array_key(np.zeros(1))
    assert array_key(np.array([-0.0])) != array_key(np.array([0.0]))  # bytes, not values
