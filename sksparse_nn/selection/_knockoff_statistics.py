"""The arithmetic of the knockoff filter: the statistics ``W`` of units against their
knockoffs from a path on ``[X, X~]`` (the lam at which each leaves the model, or the
difference of importances at the path's CV-chosen lam), the knockoff(+) threshold, one
draw's e-values and the e-BH procedure. Plain functions of arrays and paths;
:class:`~sksparse_nn.selection.KnockoffFilter` composes them.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "e_bh",
    "importance_statistics",
    "knockoff_e_values",
    "knockoff_threshold",
    "path_statistics",
]


def knockoff_threshold(W, fdr, offset=1):
    """The knockoff(+) threshold of the statistics ``W`` at level ``fdr``.

    ``T = min { t in {|W_j| > 0} : (offset + #{W_j <= -t}) / max(1, #{W_j >= t}) <= fdr }``.
    With ``offset=1`` (knockoff+) the selection ``{W_j >= T}`` has FDR at most ``fdr``;
    a selection needs at least ``1 / fdr`` positive statistics, so at 0.1 it holds
    nothing or at least 10 units. ``offset=0`` controls a modified FDR only.

    Parameters
    ----------
    W : array-like of shape (n_units,)
    fdr : float in (0, 1)
    offset : {0, 1}, default=1

    Returns
    -------
    T : float
        ``inf`` when no ``t`` qualifies (nothing is selected).
    """
    W = np.asarray(W, dtype=np.float64)
    for t in np.unique(np.abs(W[W != 0])):  # ascending: the smallest qualifying t
        if (offset + np.sum(W <= -t)) / max(1, np.sum(W >= t)) <= fdr:
            return float(t)
    return np.inf


def knockoff_e_values(W, fdr, offset=1):
    """One draw's e-values: ``e_j = n_units * 1{W_j >= T} / (offset + #{W_k <= -T})``,
    ``T`` the knockoff(+) threshold at ``fdr``; all 0 when ``T`` is infinite.

    Their mean under the nulls is at most 1 for every draw, so an average over draws
    is again an e-value (derandomized knockoffs).

    Parameters
    ----------
    W : array-like of shape (n_units,)
    fdr : float in (0, 1)
        The draws' knockoff level (``alpha_kn``).
    offset : {0, 1}, default=1

    Returns
    -------
    e : ndarray of shape (n_units,)
    T : float
    """
    W = np.asarray(W, dtype=np.float64)
    T = knockoff_threshold(W, fdr, offset)
    if not np.isfinite(T):
        return np.zeros_like(W), T
    return W.size * (W >= T) / max(offset + np.sum(W <= -T), 1), T


def e_bh(e, fdr):
    """The e-BH procedure: the largest ``k`` with ``e_(k) >= n / (fdr k)`` (``e`` sorted
    descending); the units with ``e_j >= n / (fdr k)`` are selected. FDR at most ``fdr``
    for e-values under any dependence.

    Parameters
    ----------
    e : array-like of shape (n_units,)
    fdr : float in (0, 1)

    Returns
    -------
    selected : ndarray of bool of shape (n_units,)
    threshold : float
        The e-value cut-off ``n / (fdr k)`` (``inf`` when nothing is selected).
    """
    e = np.asarray(e, dtype=np.float64)
    n = e.size
    ranked = np.sort(e)[::-1]
    k = np.arange(1, n + 1)
    passing = np.flatnonzero(ranked >= n / (fdr * k))
    if not passing.size:
        return np.zeros(n, dtype=bool), np.inf
    threshold = n / (fdr * (passing[-1] + 1))
    return e >= threshold, float(threshold)


def path_statistics(path, units, n_units):
    """Signed-max statistics ``W`` of units and their knockoffs from a path on ``[X, X~]``.

    ``Z_u``: the largest lam at which some column of unit ``u`` is selected (0 if none
    ever is); ``W_u = max(Z_u, Z~_u) * sign(Z_u - Z~_u)``, ties in ``Z`` broken by the
    unit's importance (root sum of squares of ``feature_importances_`` over its columns)
    at that lam: a swap of a unit with its knockoff flips the sign of ``W_u`` only.
    Units never selected, or tied in both, get 0.

    Parameters
    ----------
    path : RegularizationPath
        On ``[X, X~]`` (ascending lams, reaching the empty model).
    units : ndarray of int of shape (2 * n_columns,)
        Unit of each column: ``u`` for the originals, ``n_units + u`` for the knockoffs.
    n_units : int

    Returns
    -------
    W : ndarray of shape (n_units,)
    """
    lams = np.asarray(path.lams, dtype=np.float64)
    Z = np.zeros(2 * n_units)
    where = np.full(2 * n_units, -1)
    for i, chosen in enumerate(path.selected):  # ascending: later points overwrite
        live = np.unique(units[np.asarray(chosen, dtype=np.intp)])
        Z[live] = lams[i]
        where[live] = i
    importance = np.zeros(2 * n_units)
    if path.importances is not None and np.ndim(path.importances) == 2:
        squares = np.nan_to_num(np.asarray(path.importances, dtype=np.float64)) ** 2
        for u in np.flatnonzero(where >= 0):
            importance[u] = np.sqrt(squares[where[u], units == u].sum())
    original, knockoff = Z[:n_units], Z[n_units:]
    sign = np.sign(original - knockoff)
    tied = sign == 0
    sign[tied] = np.sign(importance[:n_units] - importance[n_units:])[tied]
    return np.maximum(original, knockoff) * sign


def importance_statistics(path, units, n_units):
    """Importance-difference statistics ``W`` of units and their knockoffs at the lam a
    cross-validated path on ``[X, X~]`` chose.

    ``W_u = ||I_u|| - ||I~_u||``: the root sum of squares of ``feature_importances_``
    over the unit's columns at ``best_lam_`` (for the linear models ``|coef|``, for the
    networks the norms of the input groups), minus its knockoff's. A swap of a unit with
    its knockoff swaps their importances, so it flips the sign of ``W_u`` only. Units
    that the chosen model drops, with their knockoffs, get 0.

    Parameters
    ----------
    path : RegularizationPath
        On ``[X, X~]``, with CV (``best_lam_`` set) and ``importances``.
    units : ndarray of int of shape (2 * n_columns,)
        Unit of each column: ``u`` for the originals, ``n_units + u`` for the knockoffs.
    n_units : int

    Returns
    -------
    W : ndarray of shape (n_units,)
    """
    if path.best_lam_ is None or path.importances is None:
        raise ValueError(
            "importance statistics need a cross-validated path with importances "
            "(best_lam_ and importances set); the CV path on [X, X~] chose no lam (did "
            "its folds fail?): use KnockoffFilter(statistic='lam')."
        )
    lams = np.asarray(path.lams, dtype=np.float64)
    i = int(np.argmin(np.abs(np.log(lams) - np.log(path.best_lam_))))
    squares = np.nan_to_num(np.asarray(path.importances[i], dtype=np.float64)) ** 2
    norms = np.sqrt(np.bincount(units, weights=squares, minlength=2 * n_units))
    return norms[:n_units] - norms[n_units:]
