"""The error bound of stability selection and the choice of threshold and lam region
from it (complementary pairs; see :class:`~sksparse_nn.selection.StabilitySelection`)."""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_THRESHOLD", "THRESHOLD_CAP", "choose_region", "cpss_bound", "region_sizes"]

#: The largest threshold the default (``max_false_selections``) rule uses: the region
#: grows until its bound needs this threshold.
THRESHOLD_CAP = 0.9
#: The smallest threshold the default rule uses (the bound allows any value above 1/2,
#: but a probability near 1/2 is a coin flip between the halves of a pair).
MIN_THRESHOLD = 0.6


def cpss_bound(q, n_units, threshold):
    """``q**2 / ((2 threshold - 1) n_units)``: the bound on the expected number of
    selected units of low selection probability (complementary pairs; ``q`` the mean
    number of units a half-sample path selects over the lam region)."""
    threshold = np.asarray(threshold, dtype=float)
    if np.any(threshold <= 0.5) or np.any(threshold > 1):
        raise ValueError(f"threshold must be in (0.5, 1], got {threshold}.")
    return np.asarray(q, dtype=float) ** 2 / ((2 * threshold - 1) * n_units)


def region_sizes(halves):
    """``q[j]``: the mean over half-sample paths of the number of units selected at some
    lam of the region ``lams[j:]`` (a boolean array (n_halves, n_lams, n_units))."""
    halves = np.asarray(halves, dtype=bool)
    # union over the region: a running OR from the sparse end down
    union = np.logical_or.accumulate(halves[:, ::-1, :], axis=1)[:, ::-1, :]
    return union.sum(axis=2).mean(axis=0)


def choose_region(q, n_units, threshold=None, max_false_selections=None):
    """(first index of the region, threshold, bound achieved, target bound).

    With ``max_false_selections`` (the default, 1): the region is the widest (from the
    sparse end down) whose ``q`` keeps the bound within it at threshold
    ``THRESHOLD_CAP``, and the threshold the smallest that keeps it there (at least
    ``MIN_THRESHOLD``). With ``threshold``: that threshold, and the widest region whose
    bound at it stays within one false selection. ``None`` as index: not even the
    sparsest lam keeps the bound (nothing is selected).
    """
    q = np.asarray(q, dtype=float)
    target = 1.0 if max_false_selections is None else float(max_false_selections)
    cap = THRESHOLD_CAP if threshold is None else float(threshold)
    q_max = np.sqrt((2 * cap - 1) * n_units * target)
    inside = np.flatnonzero(q <= q_max * (1 + 1e-12))
    if not inside.size:
        return None, cap, float(cpss_bound(q[-1], n_units, cap)), target
    start = int(inside[0])  # q falls with lam: the region is lams[start:]
    if threshold is None:
        needed = 0.5 + q[start] ** 2 / (2 * n_units * target)
        chosen = float(min(cap, max(MIN_THRESHOLD, needed)))
    else:
        chosen = cap
    return start, chosen, float(cpss_bound(q[start], n_units, chosen)), target
