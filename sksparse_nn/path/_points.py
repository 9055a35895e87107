"""One warm-started path on one data set: the points of a regularization path.

Used by :mod:`sksparse_nn.path` for the full-data path and for every CV fold. It uses
only the path protocol of the estimators (``set_params``, ``fit`` and public fitted
attributes; see :func:`sksparse_nn.regularization_path`).
"""

from __future__ import annotations

import copy
from numbers import Real

import numpy as np
from sklearn import config_context
from sklearn.base import clone
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from ..exceptions import TrainingDivergedError
from ..utils.convergence import collecting_convergence
from ..utils.interrupt import InterruptRequested, interrupt_requested
from ..utils.threads import torch_threads
from ..utils.validation import fit_params_rows

__all__ = ["extended_grid", "fold_scores", "run_path"]


#: Most points a default grid grows by beyond lam_max (see extended_grid).
MAX_EXTRA_POINTS = 20
#: Largest factor between two points of the upward extension (see extended_grid).
MAX_EXTENSION_STEP = 10.0


def extended_grid(lams, extend, points, max_extra=None):
    """Yield the grid; a default grid grows (appending to ``lams``) until all is zero.

    lam_max zeroes the convex D=2 problem, but a warm-started non-convex fit (D > 2) can
    keep a local minimum with live groups beyond it, so default paths continue upward
    until no feature is selected, by ``max_extra`` points at most (the caller warns when
    the last one still selects something). The extension starts with the grid's own
    ratio and squares it (up to ``MAX_EXTENSION_STEP``) after every step that left the
    selection unchanged: it looks for the empty end, whose distance is unknown, and a
    step that removed something keeps its size.
    """
    yield from list(lams)
    step = lams[-1] / lams[-2] if len(lams) > 1 else 2.0
    max_step = max(step, MAX_EXTENSION_STEP)
    max_extra = MAX_EXTRA_POINTS if max_extra is None else max_extra
    for _ in range(max_extra if extend else 0):
        if points[-1]["selected"].size == 0:
            return
        if len(points) > 1 and np.array_equal(points[-1]["selected"], points[-2]["selected"]):
            step = min(step * step, max_step)
        lams.append(lams[-1] * step)
        yield lams[-1]


def run_path(
    estimator,
    X,
    y,
    lams,
    *,
    extend=False,
    X_val=None,
    y_val=None,
    scorer=None,
    keep_estimators=False,
    verbose=0,
    threads=None,
    desc="path",
    checkpoint=None,
    fit_params=None,
):
    """The warm-started path on one data set: a dict with the list of finished points.

    Every point is recorded whole or not at all (one list append), so a KeyboardInterrupt
    keeps exactly the points finished so far (``completed=False``; ``interrupted`` is
    "here" for a Ctrl-C that reached this thread, "forwarded" for an
    :func:`~sksparse_nn.utils.interrupt.interrupt_on` flag). A point whose training
    diverges is recorded as failed (NaN scores) and ends the path: later points would
    start from a broken warm start (``diverged`` holds its lam and message). Nothing is
    warned here (workers' warnings are lost): the caller reports. What a point's fit says
    through :func:`~sksparse_nn.utils.convergence.warn_convergence` (it did not converge) is
    kept per point (``not_converged``) and reported once by the caller; the collection is
    per thread, so the paths of a thread-based joblib backend's folds keep their own.
    (An estimator that raises a plain ConvergenceWarning instead is heard by the caller
    at every point, and its points count as converged.)

    An estimator whose ``path_start()`` (optional, path protocol) returns a lam first
    fits there, unrecorded, and warm-starts the first point of an ascending path from
    that model (it is not a result: whether it converged is not reported; should it
    diverge, the first point is a cold fit and speaks for itself).

    Once a point selects nothing, every larger lam gives that same empty model (the
    intercept alone: zero groups get no gradient along a warm-started path, and the
    penalty of an empty model is zero), so those points are recorded without a fit.

    An estimator whose ``path_order()`` (optional, path protocol) is ``"descending"`` is
    fitted from the largest lam down (a convex problem: sparse to dense, no extension);
    the points are returned in ascending lam order either way, and an interrupted or
    diverged descending path keeps its sparse end.

    ``checkpoint`` (a :class:`~sksparse_nn.path._checkpoint.PathStore`, or None): every
    finished point (and the start model) is written there as it finishes, and the
    points found there are taken instead of fitted, the next point warm-starting from
    the last one's saved model.

    ``fit_params``: keyword arguments of every fit (e.g. ``sample_weight``), checked by
    the caller.
    """
    fit_params = fit_params or {}
    est = clone(estimator)
    user_warm_start = est.get_params()["warm_start"]
    descending = _path_order(est) == "descending"
    points, lams, warm, empty = [], list(lams), False, None
    grid = lams[::-1] if descending else extended_grid(lams, extend, points)
    out = {"completed": True, "interrupted": None, "diverged": None}
    progress = _progress(len(lams), desc) if verbose else None
    try:
        with torch_threads(threads):
            start = None if descending else _path_start(est)
            if start is not None:
                est, warm = _start_model(est, start, X, y, checkpoint, fit_params)
            for i, lam in enumerate(grid):
                if interrupt_requested():
                    raise InterruptRequested
                if empty is not None:  # the same empty model at every larger lam
                    points.append(_carried(empty, float(lam)))
                    if progress is not None:
                        progress.update(1)
                    continue
                saved = None if checkpoint is None else checkpoint.restore(i, float(lam))
                if saved is not None and saved[2] is not None:  # a saved diverged point
                    points.append(saved[0])
                    out["diverged"] = tuple(saved[2])
                    break
                if saved is not None:
                    point, est = saved[0], saved[1]
                else:
                    try:
                        point = fit_point(
                            est, float(lam), X, y, warm, X_val, y_val, scorer, fit_params
                        )
                    except TrainingDivergedError as exc:
                        points.append(failed_point(float(lam), X_val is not None))
                        out["diverged"] = (float(lam), str(exc))
                        if checkpoint is not None:
                            checkpoint.save(i, points[-1], None, out["diverged"])
                        break
                    if checkpoint is not None:
                        checkpoint.save(i, point, est)
                if keep_estimators:  # as the user configured it
                    kept = copy.deepcopy(est).set_params(warm_start=user_warm_start)
                    point["estimator"] = kept
                points.append(point)
                warm = True
                if point["selected"].size == 0 and not descending:
                    empty = point
                if progress is not None:
                    progress.update(1)
    except KeyboardInterrupt as exc:
        out["completed"] = False
        out["interrupted"] = "forwarded" if isinstance(exc, InterruptRequested) else "here"
    finally:
        if progress is not None:
            progress.close()
    if extend and not descending and out["completed"] and out["diverged"] is None and points:
        # the extension ran out of points before the model was empty
        out["unfinished_extension"] = points[-1]["selected"].size > 0
    out["points"] = points[::-1] if descending else points
    out["has_coef"] = hasattr(est, "coef_")
    out["feature_names"] = getattr(est, "feature_names_in_", None)
    components = getattr(est, "selected_components_", None) is not None
    out["selection_unit"] = "components" if components else "features"
    return out


def _path_order(est):
    """The estimator's ``path_order()`` (optional in the path protocol: "ascending")."""
    order = est.path_order() if hasattr(est, "path_order") else "ascending"
    if order not in ("ascending", "descending"):
        raise ValueError(
            f'{type(est).__name__}.path_order() must return "ascending" or "descending", '
            f"got {order!r}."
        )
    return order


def _path_start(est):
    """The estimator's ``path_start()`` (optional in the path protocol: None)."""
    start = est.path_start() if hasattr(est, "path_start") else None
    if start is None:
        return None
    if isinstance(start, bool) or not isinstance(start, Real) or not 0 <= start < np.inf:
        raise ValueError(
            f"{type(est).__name__}.path_start() must return None or a finite lam >= 0, "
            f"got {start!r}."
        )
    return float(start)


def _start_model(est, lam, X, y, checkpoint, fit_params=None):
    """(model, warm) of the path's start model at ``lam``: the checkpoint's, or fitted
    (and saved there)."""
    saved = None if checkpoint is None else checkpoint.load_start()
    if saved is not None:
        return saved
    warm = _fit_start(est, lam, X, y, fit_params)
    if checkpoint is not None:
        checkpoint.save_start(est, warm)
    return est, warm


def _fit_start(est, lam, X, y, fit_params=None):
    """Fit the path's start model at ``lam`` (not a point: whether it converged is not
    reported); whether the first point can warm-start from it."""
    est.set_params(lam=lam, warm_start=False)
    try:
        _fit(est, X, y, fit_params)
    except TrainingDivergedError:
        return False
    return True


def _fit(est, X, y, fit_params=None):
    """``est.fit(X, y, **fit_params)`` without re-validating parameters; the first message of the
    fit's :func:`~sksparse_nn.utils.convergence.warn_convergence` (it did not converge), or
    None. Other warnings pass on as they are."""
    # the path checked the estimator's parameters before any work (scikit-learn's
    # nested-validation skip; lam comes from a checked grid)
    with config_context(skip_parameter_validation=True), collecting_convergence() as said:
        est.fit(X, y, **(fit_params or {}))
    return said[0] if said else None


def _carried(empty, lam):
    """The record of the empty model ``empty`` at a larger ``lam`` (no fit)."""
    point = {**empty, "lam": lam, "not_converged": None}
    if "estimator" in empty:
        point["estimator"] = copy.deepcopy(empty["estimator"]).set_params(lam=lam)
    return point


def fit_point(est, lam, X, y, warm, X_val, y_val, scorer, fit_params=None):
    """Fit ``est`` at ``lam`` (from its previous fit when ``warm``) and return the point's
    record, read from the path protocol's public attributes."""
    est.set_params(lam=lam, warm_start=warm)
    not_converged = _fit(est, X, y, fit_params)  # what the fit said, or None
    point = {
        "lam": lam,
        "failed": False,
        "not_converged": not_converged,
        "selected": selection(est).copy(),
        "n_terms": _n_terms(est),
        "norms": np.copy(est.group_norms_),
        "importances": np.copy(getattr(est, "feature_importances_", np.zeros(0))),
        "coefs": np.copy(getattr(est, "coef_", np.nan)),
        "intercepts": np.copy(getattr(est, "intercept_", np.nan)),
        "obj": getattr(est, "objective_", np.nan),
        "train": _score(est, X, y),
    }
    if X_val is not None:
        point["val"] = scorer(est, X_val, y_val) if scorer else _score(est, X_val, y_val)
    return point


def _score(est, X, y):
    """``est.score(X, y)`` without re-validating the metric's arguments: they are the
    estimator's own predictions and targets of a checked shape (scikit-learn's nested
    validation skip; the data are still checked by ``predict``), a cost otherwise paid
    at every path point."""
    with config_context(skip_parameter_validation=True):
        return est.score(X, y)


def selection(est):
    """What a path point selects: ``selected_components_`` for estimators that select
    components of a representation (the autoencoder), else ``selected_features_``."""
    components = getattr(est, "selected_components_", None)
    return est.selected_features_ if components is None else components


def _n_terms(est):
    """How many additive terms the fit keeps (``selected_terms_``), or None."""
    terms = getattr(est, "selected_terms_", None)
    return None if terms is None else len(terms)


def failed_point(lam, has_val):
    """A diverged point: NaN wherever a score or norm would be, nothing selected."""
    point = {
        "lam": lam,
        "failed": True,
        "not_converged": None,
        "selected": np.zeros(0, dtype=int),
        "n_terms": 0,
        "norms": None,  # NaN of the other points' width (see _assemble)
        "importances": None,
        "coefs": np.nan,
        "intercepts": np.nan,
        "obj": np.nan,
        "train": np.nan,
    }
    if has_val:
        point["val"] = np.nan
    return point


def _progress(total, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def _rows(y, index):
    return None if y is None else _safe_indexing(y, index)


def _for_scoring(estimator):
    """The estimator with its ``fold_params()`` (path protocol, optional: none) set: the
    configuration of fits that are only scored."""
    params = getattr(estimator, "fold_params", dict)()
    return clone(estimator).set_params(**params) if params else estimator


def fold_scores(
    estimator, X, y, train, test, lams, scorer, threads, checkpoint=None, fit_params=None,
    fit_at=None, keep_models=False,
):  # fmt: skip
    """Validation scores of the warm-started path fitted on one fold's training part
    (``y`` None for unsupervised estimators such as the autoencoder; ``checkpoint``: the
    fold's store, see :func:`run_path`; ``fit_params``: per-row values indexed with the
    fold's training rows), over the grid ``lams``.

    The path fits the estimator with its ``fold_params()`` set (path protocol).
    ``fit_at``: the lams of ``lams`` this path fits (all when None; the others score
    NaN). ``keep_models``: the record's ``models`` maps each fitted grid index to the
    fold's model there (for :func:`~._refine.refine_fold`)."""
    rec = run_path(
        _for_scoring(estimator),
        _safe_indexing(X, train),
        _rows(y, train),
        lams if fit_at is None else fit_at,
        X_val=_safe_indexing(X, test),
        y_val=_rows(y, test),
        scorer=scorer,
        keep_estimators=keep_models,
        threads=threads,
        checkpoint=checkpoint,
        fit_params=fit_params_rows(fit_params or {}, train, _num_samples(X)),
    )
    points = rec["points"]
    # a diverged fold scores NaN from there on (in the order the path was fitted)
    where = {float(lam): i for i, lam in enumerate(lams)}
    index = np.array([where[float(p["lam"])] for p in points], dtype=int)
    scores = np.full(len(lams), np.nan)
    scores[index] = [p["val"] for p in points]
    failed = np.zeros(len(lams), dtype=bool)
    failed[index] = [p["failed"] for p in points]
    out = {
        "scores": scores,
        "failed": failed,
        "completed": rec["completed"],
        "interrupted": rec["interrupted"],
        "diverged": rec["diverged"],
        "not_converged": [(p["lam"], p["not_converged"]) for p in points if p["not_converged"]],
        "n_fits": len(points),
    }
    if keep_models:
        kept = zip(index, points, strict=True)
        out["models"] = {int(i): p["estimator"] for i, p in kept if "estimator" in p}
    return out
