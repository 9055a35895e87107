"""A small grouped regression shared by the solver-equivalence tests."""

import numpy as np


def grouped_problem(seed):
    """``X, y, codes, labels, rho, sample_weight``: n = 40 rows > p = 12 Gaussian
    columns in 4 groups of 3 (well conditioned: solvers stopped at a relative KKT
    violation of 1e-10 agree to a few times it over the smallest curvature), ``y``
    from the first group plus noise, ``codes`` its two halves, unit group weights and
    sample weights in [0.2, 2]."""
    rng = np.random.RandomState(seed)
    n, p = 40, 12
    X = rng.randn(n, p)
    y = X[:, :3] @ np.array([1.0, -2.0, 1.0]) + 0.5 * rng.randn(n)
    codes = (y > np.median(y)).astype(int)
    return X, y, codes, np.repeat(np.arange(4), 3), np.ones(4), rng.uniform(0.2, 2.0, n)
