"""A cross-validated default grid goes on below its densest lam while the folds choose it.

A default grid ends at ``lam_min_ratio * lam_max``, a depth set for the family, not by
the data. When the CV choice (the best mean score, or the one-SE lam with
``cv_rule="1se"``) is the grid's densest lam, the data have not said where to stop: the
search goes on downward, a block of lams at a time at the grid's own log spacing, on the
full data and on every fold, until the choice leaves the dense end or a limit is reached
(:data:`MIN_LAM_RATIO` of the grid's top, and as many lams as the grid has).

Each block is a path of its own, fitted in the path's order like the grid: an
ascending path (dense to sparse) starts with a cold fit (or the family's
``path_start``) at the block's densest lam and warm-starts each next lam from its own
model at the lam below; a fold's block is the fold's, fitted on its training rows alone,
so no fold starts from a model that saw its validation rows. A block does not start
from the model at the grid's densest lam: at D > 2 a group at zero stays there under a
warm start, so a path started from the sparser model could not bring back the terms
that the smaller penalty may want. (A descending, convex path reaches the same solution
from any start.) The block's top lam is one step below the grid's densest lam, as the
grid would have had it.
"""

from __future__ import annotations

import numpy as np

from ._assemble import chosen_indices, cv_statistics
from ._refine import coarse_indices

__all__ = ["MIN_LAM_RATIO", "block_lams", "extend_below"]

#: The extension's floor, relative to the grid's largest lam (lam_max for a default
#: grid): below it the penalty is negligible against the data term (the fits are the
#: nearly unpenalized model's), and further lams cost fits without changing the choice.
MIN_LAM_RATIO = 1e-4


def chosen_at(points, folds, rule):
    """Grid index of the rule's choice over the finished folds (``rule`` "1se": the
    one-SE lam; else the best mean score), or None."""
    if not folds or not points:
        return None
    _, mean, se = cv_statistics(points, folds)
    chosen = chosen_indices(points, mean, se)
    if chosen is None:
        return None
    return chosen[1] if rule == "1se" else chosen[0]


def block_lams(lams, size, floor, room):
    """The next ``size`` lams below ``lams[0]`` at the grid's log spacing
    ``lams[1] / lams[0]`` (ascending), none below ``floor`` and at most ``room``."""
    ratio = lams[1] / lams[0]
    below = lams[0] * ratio ** -np.arange(1, max(0, min(size, room)) + 1, dtype=float)
    return np.sort(below[below >= floor])


def extend_below(run, full, folds, lams, *, rule, stride):
    """Extend the path below ``lams[0]`` while the folds choose its densest lam.

    ``run(block, j)`` fits block number ``j`` (ascending lams) on the full data and
    every fold, as the first pass did, and returns ``(full_block, fold_blocks)`` in the
    records of :func:`~._points.run_path` / :func:`~._points.fold_scores` (the folds
    fitting every ``stride``-th lam of the block, both ends, and keeping their models
    when ``stride`` > 1). Each finished block is put before the path's points and the
    folds' scores (a fold's models re-indexed on the longer grid).

    Returns ``(full, folds, lams, info)``: ``lams`` the longer grid, ``info`` a dict
    with ``n_below`` (lams added), ``fitted_below`` (which of them the folds fitted) and
    ``limit`` (None, or why the choice still sits at the dense end: "floor",
    "points", or "diverged": the block's full-data path diverged, and is left out).
    """
    info = {"n_below": 0, "fitted_below": np.zeros(0, dtype=bool), "limit": None}
    if len(lams) < 2:  # no spacing to continue
        return full, folds, lams, info
    floor, room = MIN_LAM_RATIO * lams[-1], len(lams)
    size = 2 * stride + 1  # the folds fit stride + 1 lams of it, as spaced as the grid's
    j = 0
    while full["completed"] and all(f["completed"] for f in folds):
        if chosen_at(full["points"], folds, rule) != 0:
            break
        block = block_lams(lams, size, floor, room - info["n_below"])
        if block.size == 0:
            info["limit"] = "points" if info["n_below"] >= room else "floor"
            break
        full_block, fold_blocks = run(block, j)
        j += 1
        whole = full_block["completed"] and len(full_block["points"]) == block.size
        finished = len(fold_blocks) == len(folds) and all(f["completed"] for f in fold_blocks)
        if not (full_block["completed"] and finished):  # interrupted: not part of the path
            full["completed"] = False
            break
        if not whole or full_block["diverged"] is not None:
            info["limit"] = "diverged"  # its lams could not be chosen
            break
        full = {**full, "points": full_block["points"] + full["points"]}
        folds = [
            _prepend(below, fold, block.size)
            for below, fold in zip(fold_blocks, folds, strict=True)
        ]
        fitted = np.zeros(block.size, dtype=bool)
        fitted[coarse_indices(block.size, stride)] = True
        info["fitted_below"] = np.concatenate([fitted, info["fitted_below"]])
        info["n_below"] += block.size
        lams = np.concatenate([block, lams])
    return full, folds, lams, info


def _prepend(below, fold, m):
    """A fold's record with the block's record ``below`` (``m`` lams) in front."""
    out = dict(fold)
    out["scores"] = np.concatenate([below["scores"], fold["scores"]])
    out["failed"] = np.concatenate([below["failed"], fold["failed"]])
    out["not_converged"] = list(below["not_converged"]) + list(fold["not_converged"])
    out["n_fits"] = fold.get("n_fits", 0) + below.get("n_fits", 0)
    if below["diverged"] is not None:  # the grid's own divergence (if any) stays the
        # one the second pass stops at; the block's is reported beside it
        out["diverged_below"] = list(fold.get("diverged_below", [])) + [below["diverged"]]
    if "models" in fold or "models" in below:
        models = {int(i) + m: model for i, model in fold.get("models", {}).items()}
        models.update(below.get("models", {}))
        out["models"] = models
    return out
