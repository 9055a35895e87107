"""Screening of candidate interaction pairs for the NAM: a residual ranking on bins.

Every main term is cut into at most ``n_bins`` bins (quantiles of a feature; the levels
of a multi-column term, the rarest pooled); an additive model of bin means is fitted
by backfitting, and every pair of terms is scored by how much the cell means of its
two-way table of residuals improve on the best additive fit of that table: the
residual sum of squares that an interaction on those bins would remove. Numpy only;
its cost is ``n_passes`` passes over ``n x T`` codes for the mains and one pass over
``n`` rows per candidate pair (a bincount), so ``O(n T^2)`` in all, far below one
training epoch of the NAM for the tables it is meant for (the ``benchmarks/ga2m.py``
timings).
"""

from __future__ import annotations

import numpy as np

__all__ = ["screen_pairs"]

#: Backfitting passes of the main effects and of each pair's additive fit.
_PASSES = 4


def _column(X, j):
    col = X[:, j]
    return np.asarray(col.toarray()).ravel() if hasattr(col, "toarray") else np.asarray(col)


def bin_codes(X, cols, n_bins):
    """Integer codes ``(n,)`` of the rows of ``X[:, cols]`` and their number of bins.

    One column: quantile bins (at most ``n_bins``, ties merged); several columns: one
    code per distinct row, the rarest beyond ``n_bins - 1`` pooled in one code.
    """
    if len(cols) == 1:
        x = _column(X, cols[0]).astype(np.float64)
        edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1]))
        codes = np.searchsorted(edges, x, side="right")
        return codes, len(edges) + 1
    block = np.column_stack([_column(X, j) for j in cols])
    _, codes, counts = np.unique(block, axis=0, return_inverse=True, return_counts=True)
    codes = codes.ravel()
    if len(counts) > n_bins:
        order = np.argsort(-counts, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        codes = np.minimum(rank[codes], n_bins - 1)
        return codes, n_bins
    return codes, len(counts)


def _bin_means(codes, n_levels, r):
    """Mean of every column of ``r`` per code, ``(n_levels, k)`` (0 for empty bins)."""
    counts = np.bincount(codes, minlength=n_levels).astype(np.float64)
    sums = np.stack(
        [np.bincount(codes, weights=r[:, c], minlength=n_levels) for c in range(r.shape[1])],
        axis=1,
    )
    return sums / np.maximum(counts, 1.0)[:, None]


def _interaction_gain(cell_sums, counts, na, nb):
    """Residual sum of squares an interaction removes from a two-way table: with cell
    means ``m`` and the weighted additive fit ``a_i + b_j`` (backfitting), the sum of
    ``count * (m - a_i - b_j)^2`` over cells and outputs."""
    k = cell_sums.shape[1]
    means = (cell_sums / np.maximum(counts, 1.0)[:, None]).reshape(na, nb, k)
    w = counts.reshape(na, nb, 1)
    a, b = np.zeros((na, 1, k)), np.zeros((1, nb, k))
    for _ in range(_PASSES):
        a = ((means - b) * w).sum(axis=1, keepdims=True) / np.maximum(
            w.sum(axis=1, keepdims=True), 1
        )
        b = ((means - a) * w).sum(axis=0, keepdims=True) / np.maximum(
            w.sum(axis=0, keepdims=True), 1
        )
    return float((w * (means - a - b) ** 2).sum())


def screen_pairs(X, y, terms, n_bins=16, max_terms=64):
    """Candidate pairs of terms, best first, with their scores.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, p)
    y : ndarray of shape (n, k)
        Targets as floats (class indicators for a classifier).
    terms : list of list of int
        The columns of every main term.
    n_bins : int, default=16
        Bins per term.
    max_terms : int, default=64
        Only pairs among the ``max_terms`` terms of largest fitted main effect are
        candidates (all pairs when there are no more terms), which bounds the cost for
        wide tables.

    Returns
    -------
    pairs : list of (int, int)
        Term indices ``(a, b)``, ``a < b``, in decreasing order of score.
    scores : ndarray
        The residual sum of squares each pair's interaction removes, per row.
    """
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    binned = [bin_codes(X, cols, n_bins) for cols in terms]
    r = y - y.mean(axis=0)
    effects = [np.zeros((levels, y.shape[1])) for _, levels in binned]
    for _ in range(_PASSES):  # backfitting of the binned main effects
        for t, (codes, levels) in enumerate(binned):
            r += effects[t][codes]
            effects[t] = _bin_means(codes, levels, r)
            r -= effects[t][codes]
    strength = np.array(
        [np.var(e[codes], axis=0).sum() for e, (codes, _) in zip(effects, binned, strict=True)]
    )
    chosen = np.sort(np.argsort(-strength, kind="stable")[:max_terms])
    pairs, scores = [], []
    for i, a in enumerate(chosen):
        ca, na = binned[a]
        for b in chosen[i + 1 :]:
            cb, nb = binned[b]
            cell = ca * nb + cb
            counts = np.bincount(cell, minlength=na * nb).astype(np.float64)
            sums = np.stack(
                [np.bincount(cell, weights=r[:, c], minlength=na * nb) for c in range(r.shape[1])],
                axis=1,
            )
            pairs.append((int(a), int(b)))
            scores.append(_interaction_gain(sums, counts, na, nb) / len(y))
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return [pairs[i] for i in order], scores[order]
