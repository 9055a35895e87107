"""The CV folds in two passes: every ``cv_stride``-th lam first, then the lams next to
the chosen ones.

Every point of a network's fold path trains a model that is only scored, and the choice
of lam needs the grid's full resolution only near the lams it chooses. So, with
``cv_stride = s > 1``, each fold first fits every ``s``-th lam of the grid (both ends
included), warm-started along that coarser path; the mean CV curve over those lams
chooses (the best and the one-standard-error lam, as the final choice does); then each
fold fits the grid's lams next to those two that it has not fitted, each warm-started
from the fold's own model at the nearest fitted lam below it. A fold never starts from a
model that saw its validation rows. The full-data path fits every lam.
"""

from __future__ import annotations

import copy
import os

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from ..exceptions import TrainingDivergedError
from ..utils.interrupt import InterruptRequested, interrupt_requested
from ..utils.threads import torch_threads
from ..utils.validation import fit_params_rows
from ._assemble import chosen_indices, cv_statistics
from ._points import failed_point, fit_point

__all__ = ["coarse_indices", "refine_fold", "refine_folds", "refine_targets"]


def coarse_indices(n, stride):
    """Indices of the folds' first pass over a grid of ``n`` lams: every ``stride``-th,
    the last one included (the sparse end, where the one-SE rule looks)."""
    index = list(range(0, n, max(1, int(stride))))
    if index[-1] != n - 1:
        index.append(n - 1)
    return np.asarray(index, dtype=int)


def refine_targets(points, folds, fitted, rule=None):
    """Grid indices of the second pass (``fitted``: a boolean mask over the grid of the
    lams the first pass fitted), from the first pass's mean CV scores: next to the best
    lam, the one on each side (the peak of a noisy curve can lie on the side of the
    worse fitted neighbour: on the GA2M's attrition search the better neighbour's side
    kept 5 terms where the lam on the other side scored better); next to the one-SE
    lam, the one above it (the rule takes the largest lam within one standard error of
    the best, and the band's edge lies above it)."""
    if not folds or not points:
        return []
    _, mean, se = cv_statistics(points, folds)
    chosen = chosen_indices(points, mean, se)
    if chosen is None:
        return []
    n, (best, one_se) = len(points), chosen
    near = set()
    if rule in (None, "best"):
        near.update((best - 1, best + 1))
    if rule in (None, "1se"):
        near.add(one_se + 1)
    return sorted(j for j in near if 0 <= j < n and not fitted[j])


def refine_fold(
    fold, X, y, train, test, lams, targets, scorer, threads=None, store=None, fit_params=None
):
    """The second pass of one fold: its scores at ``targets`` (grid indices), each fit
    warm-started from a copy of the fold's model at the nearest fitted lam below.

    ``fold`` is :func:`~._points.fold_scores`'s record with its ``models`` (grid index ->
    fitted estimator), which it no longer holds afterwards. A target at or beyond the lam
    where the fold's path diverged keeps its NaN (a diverged fold scores NaN from there
    on); a target whose fit diverges is marked failed. A Ctrl-C ends the pass with
    ``completed=False``. ``store``: a checkpoint store (see
    :class:`~._checkpoint.PathStore`) where every fit's record is written, and read
    instead of fitting on a rerun. ``fit_params``: keyword arguments of every fit, per-row
    values indexed with the fold's training rows (see ``regularization_path``).
    """
    fold = dict(fold)
    models = fold.pop("models", None) or {}
    scores, failed = fold["scores"].copy(), fold["failed"].copy()
    not_converged = list(fold["not_converged"])
    stop = np.inf if fold["diverged"] is None else fold["diverged"][0]
    X_fit, X_val = _safe_indexing(X, train), _safe_indexing(X, test)
    y_fit = None if y is None else _safe_indexing(y, train)
    y_val = None if y is None else _safe_indexing(y, test)
    rows = fit_params_rows(fit_params or {}, train, _num_samples(X))
    done = 0  # the fits of this pass, numbered as the store numbers them
    try:
        with torch_threads(threads):
            for t in targets:
                if interrupt_requested():
                    raise InterruptRequested
                below = [i for i in models if i < t]
                if not below or lams[t] >= stop:
                    continue
                lam = float(lams[t])
                saved = None if store is None else store.restore(done, lam)
                if saved is not None:
                    point, diverged = saved[0], saved[2]
                else:
                    point, diverged = _fit_from(models[max(below)], lam, X_fit, y_fit, X_val,
                                                y_val, scorer, rows)  # fmt: skip
                    if store is not None:
                        store.save(done, point, None, diverged)
                done += 1
                fold["n_fits"] = fold.get("n_fits", 0) + 1
                if diverged is not None:
                    failed[t] = True
                    continue
                scores[t] = point["val"]
                if point["not_converged"]:
                    not_converged.append((point["lam"], point["not_converged"]))
    except KeyboardInterrupt as exc:
        fold["completed"] = False
        fold["interrupted"] = "forwarded" if isinstance(exc, InterruptRequested) else "here"
    fold.update(scores=scores, failed=failed, not_converged=not_converged)
    return fold


def _fit_from(model, lam, X, y, X_val, y_val, scorer, fit_params):
    """(point, diverged) of a fit at ``lam`` warm-started from a copy of ``model``;
    ``diverged`` is ``(lam, message)`` when its training diverged, else None."""
    try:
        est = copy.deepcopy(model)
        return fit_point(est, lam, X, y, True, X_val, y_val, scorer, fit_params), None
    except TrainingDivergedError as exc:
        return failed_point(lam, True), (lam, str(exc))


def refine_folds(
    folds, X, y, splits, lams, targets, scorer, workers=1, verbose=0, stores=None, fit_params=None
):
    """:func:`refine_fold` over all ``folds`` (finished first passes, in the order of
    ``splits``; ``stores``: their second passes' checkpoint stores, or None), in this
    process or over ``workers`` joblib workers; after a Ctrl-C the folds not refined are
    returned as they were and the pass is marked unfinished (``fit_params``: see
    :func:`refine_fold`)."""
    if not targets:
        return folds
    stores = stores or [None] * len(folds)
    if verbose:
        shown = ", ".join(f"{lams[t]:.3g}" for t in targets)
        print(f"[regularization_path] folds: refining at lam={shown}")
    if workers == 1:
        out = []
        for fold, (train, test), store in zip(folds, splits, stores, strict=True):
            if out and not out[-1]["completed"]:
                out.append(fold)
                continue
            args = (lams, targets, scorer, None, store, fit_params)
            out.append(refine_fold(fold, X, y, train, test, *args))
        return out
    threads = max(1, (os.cpu_count() or 1) // workers)
    tasks = [
        delayed(refine_fold)(
            fold, X, y, train, test, lams, targets, scorer, threads, store, fit_params
        )
        for fold, (train, test), store in zip(folds, splits, stores, strict=True)
    ]
    try:
        return Parallel(n_jobs=workers, verbose=verbose)(tasks)
    except KeyboardInterrupt:
        return [{**fold, "completed": False, "interrupted": "here"} for fold in folds]
