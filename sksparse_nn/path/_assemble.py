"""The :class:`RegularizationPath` built from the finished points and CV folds, with
``best_lam_`` and ``lam_1se_`` chosen by the one-standard-error rule (also used by the
folds' second pass, :mod:`._refine`)."""

from __future__ import annotations

import numpy as np

from ._result import RegularizationPath


def one_se_indices(mean, se, converged=None):
    """(best, one_se): indices of the best mean CV score and of the one-SE choice (NaN
    means: not eligible), or None when no mean is finite.

    ``one_se`` is the largest index (lam) at or above the best one whose mean is within
    one standard error of the best. With ``converged`` (the lams whose full-data fit
    converged, i.e. has a clean gap) both prefer those within that band: ``one_se`` the
    largest converged lam in it, ``best`` the best converged lam in it; a band without
    one keeps the plain choices.
    """
    ok = np.isfinite(mean)
    if not ok.any():
        return None
    best = int(np.nanargmax(np.where(ok, mean, -np.inf)))
    band = ok & (mean >= mean[best] - se[best])
    one_se = int(np.flatnonzero(band[best:]).max()) + best  # sparser (larger) lams only
    if converged is not None:
        clean = band & converged
        if clean.any():  # (the largest clean lam is at or above the best clean one)
            best = int(np.nanargmax(np.where(clean, mean, -np.inf)))
            one_se = int(np.flatnonzero(clean).max())
    return best, one_se


def _one_se_rule(lams, mean, se, converged=None):
    """(best_lam, lam_1se) of :func:`one_se_indices` as lams, or (None, None)."""
    chosen = one_se_indices(mean, se, converged)
    return (None, None) if chosen is None else tuple(float(lams[i]) for i in chosen)


def cv_statistics(points, folds):
    """(scores, mean, se) of the finished folds over the full-data path's ``points``
    (NaN where a fold has no score: it failed there, or did not fit that lam)."""
    scores = np.vstack([f["scores"][: len(points)] for f in folds])
    se = (
        scores.std(axis=0, ddof=1) / np.sqrt(len(scores))
        if len(scores) > 1
        else np.zeros(scores.shape[1])
    )
    return scores, scores.mean(axis=0), se


def chosen_indices(points, mean, se):
    """(best, one_se) indices along the full-data ``points``: only lams whose full-data
    fit exists and that no fold failed at or skipped (NaN mean); within one SE of the
    best, converged ones first: the chosen model is that fit, and one with groups half-way
    to zero has no clean gap. None when nothing is eligible."""
    failed = np.array([p["failed"] for p in points], dtype=bool)
    converged = np.array([not p["failed"] and p["not_converged"] is None for p in points])
    return one_se_indices(np.where(failed, np.nan, mean), se, converged)


def _rows(points, key):
    """The points' vectors under ``key`` as one (n_points, width) array; failed points
    (None) become NaN rows."""
    width = max((len(p[key]) for p in points if p[key] is not None), default=0)
    if not points:
        return np.empty((0, 0))
    return _take(points, key, (width,), lambda v: v is None)


def _take(points, key, shape, failed):
    """The points' arrays under ``key`` stacked into one ``(n_points, *shape)`` array
    (NaN where ``failed(value)``), each dropped from its point once copied: the
    assembled path is the last reader of the points, and the result, larger than ``X``
    on wide data, is never held twice."""
    dtypes = {np.asarray(p[key]).dtype for p in points if not failed(p[key])}
    if len(dtypes) < 1 or any(failed(p[key]) for p in points):  # NaN rows, as stacking
        dtypes.add(np.dtype(np.float64))  # with NaN placeholders gives
    dtype = np.result_type(*dtypes)
    out = np.full((len(points), *shape), np.nan, dtype=dtype)
    for i, point in enumerate(points):
        value, point[key] = point[key], None
        if not failed(value):
            out[i] = value
    return out


def _assemble(full, folds, splits, estimator, completed):
    points = full["points"]
    n = len(points)
    lams = np.array([p["lam"] for p in points], dtype=float)
    failed = np.array([p["failed"] for p in points], dtype=bool)
    norms, importances = _rows(points, "norms"), _rows(points, "importances")
    has_coef = full["has_coef"] and n > 0
    path = RegularizationPath(
        lams=lams,
        n_selected=np.array([p["selected"].size for p in points], dtype=int),
        selected=[p["selected"] for p in points],
        group_norms=norms,
        importances=importances,
        coefs=_stack(points, "coefs") if has_coef else None,
        intercepts=_stack(points, "intercepts") if has_coef else None,
        train_objective=np.array([p["obj"] for p in points], dtype=float),
        train_score=np.array([p["train"] for p in points], dtype=float),
        val_score=(
            np.array([p["val"] for p in points], dtype=float)
            if points and "val" in points[0]
            else None
        ),
        feature_names=full["feature_names"],
        D=getattr(estimator, "D", None),
        estimators=[p["estimator"] for p in points if "estimator" in p],
        completed=completed,
        failed=failed,
        converged=np.array(
            [not p["failed"] and p["not_converged"] is None for p in points], dtype=bool
        ),
        selection_unit=full.get("selection_unit", "features"),
        n_terms=_n_terms(points),
    )
    if splits and folds:
        # every finished fold covers the whole grid; keep the lams of the full-data path
        path.cv_scores, path.cv_mean, path.cv_se = cv_statistics(points, folds)
        path.cv_failed = np.vstack([f["failed"][:n] for f in folds])
        chosen = chosen_indices(points, path.cv_mean, path.cv_se) if completed else None
        if chosen is not None:
            path.best_lam_, path.lam_1se_ = float(lams[chosen[0]]), float(lams[chosen[1]])
    return path


def _n_terms(points):
    """Kept terms per point, or None when the estimator has no terms (a failed point
    keeps none)."""
    counts = [p.get("n_terms") for p in points]
    known = [p for p, c in zip(points, counts, strict=True) if c is not None and not p["failed"]]
    if not known:
        return None
    return np.array([c or 0 for c in counts], dtype=int)


def _stack(points, key):
    """Stack the points' per-lam arrays under ``key`` (see :func:`_take`); a failed
    point's NaN placeholder takes the others' shape."""
    shapes = [np.shape(p[key]) for p in points if np.ndim(p[key]) > 0]
    if not shapes:
        return np.asarray([p[key] for p in points], dtype=float)
    return _take(points, key, shapes[0], lambda v: np.ndim(v) == 0)
