"""Screening of candidate interaction pairs for the NAM: a test of interaction on bins.

Every main term is cut into bins (quantiles of a feature; the levels of a multi-column
term, the rarest pooled), about :data:`ROWS_PER_CELL` rows per cell of a pair's two-way
table. An additive model of bin means is fitted by backfitting; for every pair of terms,
the interaction sum of squares of its two-way table of residuals (what the cell means
remove beyond the table's best additive fit) is divided by the residual variance. With
no interaction it is close to a chi-square variable with the table's interaction degrees
of freedom (occupied cells minus occupied rows minus occupied columns plus one), which
gives each pair a p-value: pairs are ranked by it, so a table of many cells does not win
by fitting noise, and ``"auto"`` keeps the pairs significant at a family-wise level
(Bonferroni over the candidates). Numpy and scipy only; its cost is ``n_passes`` passes
over ``n x T`` codes for the mains and one pass over ``n`` rows per candidate pair (a
bincount), so ``O(n T^2)`` in all, far below one training epoch of the NAM for the
tables it is meant for (the ``benchmarks/ga2m.py`` timings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

__all__ = ["Screening", "default_bins", "screen_pairs"]

#: Backfitting passes of the main effects and of each pair's additive fit.
_PASSES = 4

#: Rows per cell of a pair's two-way table that the default number of bins aims at. With
#: fewer the cell means are mostly noise: on a table of 1,209 training rows, 16 x 16
#: cells of ~5 rows each ranked two continuous-by-continuous pairs that EBM does not take
#: 2nd and 3rd; with 8 x 8 cells its top three were EBM's.
ROWS_PER_CELL = 20

#: Cells of a pair's table with fewer rows are left out of its test: the mean of a cell
#: of one or two rows is mostly noise, and with heavy-tailed residuals a rare level's few
#: rows alone made 61 of 2,016 pairs "significant" on a housing table (every one with a
#: level of 5 to 10 rows, such as the few houses with a pool).
MIN_CELL_ROWS = 5

#: With ``robust=True`` (continuous targets) the residuals the pairs are tested on are
#: clipped at their median +- this many robust standard deviations: the chi-square
#: needs residuals near normal, and a few outlying rows (heavy-tailed prices) otherwise
#: make a table of any two variables look interacting. Normal residuals are clipped in
#: 0.3% of rows, so the test keeps its level on them.
WINSOR_WIDTH = 3.0


@dataclass(frozen=True)
class Screening:
    """Candidate pairs of terms, most significant first.

    Attributes
    ----------
    pairs : list of (int, int)
        Term indices ``(a, b)``, ``a < b``, in increasing order of ``p_values``.
    gains : ndarray
        The residual sum of squares each pair's interaction removes, per row.
    dof : ndarray of int
        The interaction degrees of freedom of each pair's table (times the outputs).
    p_values : ndarray
        Chi-square p-values of ``gains`` against no interaction.
    """

    pairs: list
    gains: np.ndarray
    dof: np.ndarray
    p_values: np.ndarray

    def significant(self, level=0.05):
        """The pairs whose interaction is significant at family-wise ``level``
        (Bonferroni over all candidates), most significant first."""
        bound = level / max(len(self.pairs), 1)
        return [p for p, v in zip(self.pairs, self.p_values, strict=True) if v <= bound]


def default_bins(n_rows):
    """Bins per term for ``n_rows`` rows: about :data:`ROWS_PER_CELL` rows in every cell
    of a pair's two-way table, between 4 and 16 bins."""
    return int(np.clip(round(np.sqrt(n_rows / ROWS_PER_CELL)), 4, 16))


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


def _bin_sums(codes, n_levels, r):
    """Sum of every column of ``r`` per code, ``(n_levels, k)``."""
    return np.stack(
        [np.bincount(codes, weights=r[:, c], minlength=n_levels) for c in range(r.shape[1])],
        axis=1,
    )


def _bin_means(codes, n_levels, r):
    """Mean of every column of ``r`` per code, ``(n_levels, k)`` (0 for empty bins)."""
    counts = np.bincount(codes, minlength=n_levels).astype(np.float64)
    return _bin_sums(codes, n_levels, r) / np.maximum(counts, 1.0)[:, None]


def _interaction_gain(cell_sums, counts, na, nb):
    """Per output, the residual sum of squares an interaction removes from a two-way
    table: with cell means ``m`` and the weighted additive fit ``a_i + b_j``
    (backfitting), the sum of ``count * (m - a_i - b_j)^2`` over cells, ``(k,)``."""
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
    return (w * (means - a - b) ** 2).sum(axis=(0, 1))


def _interaction_dof(counts, na, nb):
    """Interaction degrees of freedom of a two-way table: occupied cells minus occupied
    rows minus occupied columns plus one (at least 1)."""
    occupied = counts.reshape(na, nb) > 0
    dof = occupied.sum() - occupied.any(axis=1).sum() - occupied.any(axis=0).sum() + 1
    return max(int(dof), 1)


def _winsorize(r, width=WINSOR_WIDTH):
    """Each column of ``r`` clipped to its median +- ``width`` robust standard deviations
    (1.4826 median absolute deviations; a column of MAD 0 is left as it is)."""
    median = np.median(r, axis=0)
    spread = width * 1.4826 * np.median(np.abs(r - median), axis=0)
    spread = np.where(spread > 0, spread, np.inf)
    return np.clip(r, median - spread, median + spread)


def screen_pairs(X, y, terms, n_bins=None, max_terms=64, robust=False):
    """Test every pair of terms for an interaction; candidates most significant first.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, p)
    y : ndarray of shape (n, k)
        Targets as floats (class indicators for a classifier).
    terms : list of list of int
        The columns of every main term.
    n_bins : int, default=None
        Bins per term; None: :func:`default_bins` of the number of rows (about
        :data:`ROWS_PER_CELL` rows per cell of a pair's table).
    max_terms : int, default=64
        Only pairs among the ``max_terms`` terms of largest fitted main effect are
        candidates (all pairs when there are no more terms), which bounds the cost for
        wide tables.
    robust : bool, default=False
        Test on residuals clipped at :data:`WINSOR_WIDTH` robust standard deviations
        (for continuous targets; class indicators' residuals are bounded already, and
        clipping them would cut a rare class's rows).

    Returns
    -------
    Screening
    """
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    n = len(y)
    n_bins = default_bins(n) if n_bins is None else int(n_bins)
    binned = [bin_codes(X, cols, n_bins) for cols in terms]
    r = y - y.mean(axis=0)
    effects = [np.zeros((levels, y.shape[1])) for _, levels in binned]
    for _ in range(_PASSES):  # backfitting of the binned main effects
        for t, (codes, levels) in enumerate(binned):
            r += effects[t][codes]
            effects[t] = _bin_means(codes, levels, r)
            r -= effects[t][codes]
    if robust:
        r = _winsorize(r)
    # the residual variance per output, on the degrees of freedom the mains leave
    used = 1 + sum(levels - 1 for _, levels in binned)
    variance = np.maximum((r**2).sum(axis=0) / max(n - used, 1), np.finfo(np.float64).tiny)
    strength = np.array(
        [np.var(e[codes], axis=0).sum() for e, (codes, _) in zip(effects, binned, strict=True)]
    )
    chosen = np.sort(np.argsort(-strength, kind="stable")[:max_terms])
    pairs, gains, statistics, dofs = [], [], [], []
    for i, a in enumerate(chosen):
        ca, na = binned[a]
        for b in chosen[i + 1 :]:
            cb, nb = binned[b]
            cell = ca * nb + cb
            counts = np.bincount(cell, minlength=na * nb).astype(np.float64)
            counts[counts < MIN_CELL_ROWS] = 0.0  # left out of the test
            gain = _interaction_gain(_bin_sums(cell, na * nb, r), counts, na, nb)
            pairs.append((int(a), int(b)))
            gains.append(gain.sum() / n)
            statistics.append((gain / variance).sum())
            dofs.append(_interaction_dof(counts, na, nb) * y.shape[1])
    dof = np.asarray(dofs, dtype=np.intp)
    log_p = chi2.logsf(np.asarray(statistics, dtype=np.float64), dof)  # no underflow
    order = np.argsort(log_p, kind="stable")
    return Screening(
        [pairs[i] for i in order],
        np.asarray(gains, dtype=np.float64)[order],
        dof[order],
        np.exp(log_p[order]),
    )
