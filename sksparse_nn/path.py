"""Regularization paths for every estimator: one warm-started fit per lam, dense to sparse.

For ``D > 2`` a group at exactly zero is a local minimum that never comes back, so paths
run from small lam (dense) to large lam (sparse), each fit starting from the previous
solution re-split into balanced factors. The engine only calls the estimator's private
``_fit(X, y, warm_module=...)`` and reads fitted attributes; it knows nothing of gating.

With ``cv``, every fold runs the same warm-started path on a common grid, in parallel
through joblib (so ``joblib.parallel_config(backend="dask")`` spreads the folds over a
cluster), next to the path on all the data; the result then holds per-fold scores, their
mean and standard error, ``best_lam_`` and ``lam_1se_``.
"""

from __future__ import annotations

import copy
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing, indexable

from .exceptions import TrainingDivergedError

__all__ = ["RegularizationPath", "lambda_grid", "lambda_max", "regularization_path"]


def lambda_max(X, targets, labels, rho, fit_intercept=True):
    """Smallest lam at which the D=2 (group-lasso) solution is all zero.

    ``max_j ||X_j^T R||_F / (n rho_j)`` over penalized groups, with ``R`` the centered
    targets (one column per output or class) and ``X`` centered when ``fit_intercept``.
    Unpenalized features are ignored (exact when there are none).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    targets : ndarray of shape (n_samples, n_columns)
    labels : ndarray of int of shape (n_features,)
        Group of each feature, -1 for none.
    rho : ndarray of shape (n_groups,)
    fit_intercept : bool, default=True

    Returns
    -------
    lam_max : float
    """
    R = np.asarray(targets, dtype=np.float64)
    if fit_intercept:
        R = R - R.mean(axis=0)  # centering R also centers X^T R
    grad = np.asarray(X.T @ R) / X.shape[0]  # (n_features, n_columns)
    grouped = labels >= 0
    sq = np.bincount(labels[grouped], weights=(grad[grouped] ** 2).sum(axis=1), minlength=rho.size)
    ok = rho > 0
    return float(np.max(np.sqrt(sq[ok]) / rho[ok])) if ok.any() else 0.0


def lambda_grid(lam_max, n_lams=30, lam_min_ratio=1e-3):
    """Log-spaced grid from ``lam_max * lam_min_ratio`` up to ``lam_max`` (ascending)."""
    if not lam_max > 0:
        raise ValueError(f"Cannot build a lam grid: lam_max={lam_max} (is y constant?).")
    return np.geomspace(lam_max * lam_min_ratio, lam_max, int(n_lams))


@dataclass
class RegularizationPath:
    """The fits of one estimator along a lam grid (ascending lam: dense to sparse).

    Attributes
    ----------
    lams : ndarray of shape (n_lams,)
    n_selected : ndarray of int of shape (n_lams,)
        Number of selected features at each lam.
    selected : list of ndarray
        ``selected_features_`` at each lam.
    group_norms : ndarray of shape (n_lams, n_groups)
        Norm of every penalized group (features, or feature groups for linear models).
    coefs : ndarray of shape (n_lams, ...) or None
        ``coef_`` at each lam for models that have one.
    intercepts : ndarray or None
    train_objective : ndarray of shape (n_lams,)
        Non-smooth training objective (NaN where the model does not report one).
    train_score : ndarray of shape (n_lams,)
        ``score`` on the training data.
    val_score : ndarray of shape (n_lams,) or None
        ``score`` on the validation data, when given.
    feature_names : ndarray of str or None
    D : int
    cv_scores : ndarray of shape (n_folds, n_lams) or None
        Validation score of every fold's path (with ``cv``).
    cv_mean, cv_se : ndarray of shape (n_lams,) or None
        Mean over folds and its standard error ``std / sqrt(n_folds)``.
    best_lam_ : float or None
        The lam with the best mean CV score.
    lam_1se_ : float or None
        The largest (sparsest) lam whose mean CV score is within one standard error of
        the best.
    completed : bool
        False when the computation was interrupted (Ctrl-C): the points computed so far
        are kept, CV scores come from the folds that finished, and ``best_lam_`` /
        ``lam_1se_`` are left ``None`` (never chosen from part of the work).
    failed : ndarray of bool of shape (n_lams,)
        Points whose training diverged (:class:`~sksparse_nn.TrainingDivergedError`):
        NaN scores and norms, nothing selected. A path stops at its first failed point.
    """

    lams: np.ndarray
    n_selected: np.ndarray
    selected: list
    group_norms: np.ndarray
    coefs: np.ndarray | None
    intercepts: np.ndarray | None
    train_objective: np.ndarray
    train_score: np.ndarray
    val_score: np.ndarray | None
    feature_names: np.ndarray | None = None
    D: int | None = None
    estimators: list = field(default_factory=list, repr=False)
    cv_scores: np.ndarray | None = None
    cv_mean: np.ndarray | None = None
    cv_se: np.ndarray | None = None
    best_lam_: float | None = None
    lam_1se_: float | None = None
    completed: bool = True
    failed: np.ndarray | None = None

    def __len__(self):
        return len(self.lams)

    def index_of(self, lam):
        """Position of the grid's lam closest to ``lam`` (on a log scale)."""
        if not len(self.lams):
            raise ValueError("This path has no points (it was interrupted before its first fit).")
        if lam is None or not np.isfinite(lam) or not lam > 0:
            raise ValueError(f"lam must be a positive number, got {lam!r}.")
        return int(np.argmin(np.abs(np.log(self.lams) - np.log(lam))))

    def selected_at(self, lam):
        """Selected features (names where known) of the full-data fit at ``lam``."""
        chosen = self.selected[self.index_of(lam)]
        return self.feature_names[chosen] if self.feature_names is not None else chosen

    def to_frame(self):
        """One row per lam: lam, n_selected, objective and scores (pandas DataFrame)."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "lam": self.lams,
                "n_selected": self.n_selected,
                "train_objective": self.train_objective,
                "train_score": self.train_score,
            }
        )
        if self.val_score is not None:
            frame["val_score"] = self.val_score
        if self.cv_mean is not None:
            frame["cv_mean"], frame["cv_se"] = self.cv_mean, self.cv_se
        names = self.feature_names
        frame["selected"] = [
            list(names[s]) if names is not None else s.tolist() for s in self.selected
        ]
        return frame

    def plot(self, ax=None, *, kind="norms"):
        """Plot the path (needs matplotlib, the ``plot`` extra).

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        kind : {"norms", "score", "cv"}, default="norms"
            ``"norms"``: every group norm against lam (log-log; dropped groups fall to
            zero and sit on the bottom line). ``"score"``: train and validation score with
            the number of selected features on a second axis. ``"cv"``: mean CV score
            with its standard-error band, selected features, ``best_lam_`` and
            ``lam_1se_``.

        Returns
        -------
        ax : matplotlib Axes
        """
        from .plotting import plot_cv_path, plot_path

        if kind == "cv":
            return plot_cv_path(self, ax=ax)
        return plot_path(self, ax=ax, kind=kind)


@contextmanager
def _torch_threads(n):
    """Temporarily set torch's intra-op threads (no-op for ``None``)."""
    if n is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _grid(lams, extend, selected, max_extra=20):
    """Yield the grid; a default grid grows (appending to ``lams``) until all is zero.

    lam_max zeroes the convex D=2 problem, but a warm-started non-convex fit (D > 2) can
    keep a local minimum with live groups beyond it, so default paths continue upward
    with the grid's own ratio until no feature is selected.
    """
    yield from list(lams)
    ratio = lams[-1] / lams[-2] if len(lams) > 1 else 2.0
    for _ in range(max_extra if extend else 0):
        if selected[-1].size == 0:
            return
        lams.append(lams[-1] * ratio)
        yield lams[-1]


def _run_path(
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
):
    """The warm-started path on one data set; returns a dict of per-lam records.

    A KeyboardInterrupt ends the loop and keeps the points finished so far
    (``completed=False``); the point in training is dropped. A point whose training
    diverges is recorded as failed (NaN scores) and ends the path: later points would
    start from a broken warm start. ConvergenceWarnings of the points are collected
    (``rec["not_converged"]``) and reported once by the caller.
    """
    est = clone(estimator)
    keys = ("lams", "selected", "norms", "coefs", "intercepts", "obj", "train", "val",
            "estimators", "failed", "not_converged")  # fmt: skip
    rec = {k: [] for k in keys}
    lams, warm, completed = list(lams), None, True
    progress = _progress(len(lams), desc) if verbose else None
    try:
        with _torch_threads(threads):
            for lam in _grid(lams, extend, rec["selected"]):
                est.set_params(lam=float(lam))
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always", ConvergenceWarning)
                        est._fit(X, y, warm_module=warm)
                except TrainingDivergedError as exc:
                    _record_failure(rec, float(lam), exc, X_val is not None, est)
                    break
                for w in caught:  # re-emit others; collect ConvergenceWarnings
                    if issubclass(w.category, ConvergenceWarning):
                        rec["not_converged"].append(float(lam))
                    else:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                warm = est.module_
                rec["lams"].append(float(lam))
                rec["failed"].append(False)
                rec["selected"].append(est.selected_features_.copy())
                rec["norms"].append(est._path_group_norms())
                rec["coefs"].append(np.copy(getattr(est, "coef_", np.nan)))
                rec["intercepts"].append(np.copy(getattr(est, "intercept_", np.nan)))
                rec["obj"].append(getattr(est, "objective_", np.nan))
                rec["train"].append(est.score(X, y))
                if X_val is not None:
                    rec["val"].append(
                        scorer(est, X_val, y_val) if scorer else est.score(X_val, y_val)
                    )
                if keep_estimators:
                    rec["estimators"].append(copy.deepcopy(est))
                if progress is not None:
                    progress.update(1)
    except KeyboardInterrupt:
        completed = False
        warnings.warn(
            f"Regularization path interrupted: returning the {len(rec['lams'])} points "
            "finished so far (completed=False).",
            UserWarning,
            stacklevel=3,
        )
    finally:
        if progress is not None:
            progress.close()
    rec["completed"] = completed
    rec["has_coef"] = hasattr(est, "coef_")
    rec["feature_names"] = getattr(est, "feature_names_in_", None)
    return rec


def _record_failure(rec, lam, exc, has_val, est):
    """A diverged point: NaN everywhere a score or norm would be, nothing selected."""
    warnings.warn(
        f"Training diverged at lam={lam:.4g}; the path stops there. {exc}",
        UserWarning,
        stacklevel=4,
    )
    width = len(rec["norms"][-1]) if rec["norms"] else None
    rec["lams"].append(lam)
    rec["failed"].append(True)
    rec["selected"].append(np.zeros(0, dtype=int))
    rec["norms"].append(np.full(width, np.nan) if width is not None else None)
    rec["coefs"].append(np.full_like(rec["coefs"][-1], np.nan) if rec["coefs"] else np.nan)
    rec["intercepts"].append(
        np.full_like(rec["intercepts"][-1], np.nan) if rec["intercepts"] else np.nan
    )
    rec["obj"].append(np.nan)
    rec["train"].append(np.nan)
    if has_val:
        rec["val"].append(np.nan)
    rec["failed_error"] = str(exc)


def _progress(total, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def _fold_scores(estimator, X, y, train, test, lams, scorer, threads):
    """Validation scores of the warm-started path fitted on one fold's training part."""
    rec = _run_path(
        estimator,
        _safe_indexing(X, train),
        _safe_indexing(y, train),
        lams,
        X_val=_safe_indexing(X, test),
        y_val=_safe_indexing(y, test),
        scorer=scorer,
        threads=threads,
    )
    scores = np.full(len(lams), np.nan)  # a diverged fold scores NaN from there on
    scores[: len(rec["val"])] = rec["val"]
    return {"scores": scores, "completed": rec["completed"],
            "not_converged": rec["not_converged"]}  # fmt: skip


def _workers(n_jobs, n_tasks):
    if n_jobs is None or n_jobs == 1:
        return 1
    n = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
    return max(1, min(n, n_tasks))


def _one_se_rule(lams, mean, se):
    """(best_lam, lam_1se): largest lam whose mean is within one SE of the best mean."""
    ok = np.isfinite(mean)
    if not ok.any():
        return None, None
    best = int(np.nanargmax(np.where(ok, mean, -np.inf)))
    within = ok & (mean >= mean[best] - se[best])
    within[:best] = False  # only sparser (larger) lams than the best
    return float(lams[best]), float(lams[np.flatnonzero(within).max()])


def regularization_path(
    estimator,
    X,
    y,
    *,
    lams=None,
    n_lams=30,
    lam_min_ratio=1e-3,
    X_val=None,
    y_val=None,
    cv=None,
    scoring=None,
    n_jobs=None,
    verbose=0,
    keep_estimators=False,
):
    """Fit ``estimator`` along a lam grid with warm starts from dense to sparse.

    Parameters
    ----------
    estimator : a D-gated estimator of this package
        Not modified (cloned).
    X, y : training data
    lams : array-like of float, default=None
        The grid; sorted ascending before fitting. ``None`` builds ``n_lams`` log-spaced
        values from ``lam_min_ratio * lam_max`` to ``lam_max``, where ``lam_max`` is the
        smallest lam with an all-zero group-lasso (D=2) solution; without ``cv`` the
        grid is extended upward (same ratio) until no feature is selected (a non-convex
        fit, D > 2, can keep live groups beyond ``lam_max``).
    n_lams : int, default=30
    lam_min_ratio : float, default=1e-3
    X_val, y_val : validation data, default=None
        Scored at every lam (``val_score``).
    cv : int, cross-validation generator or iterable, default=None
        Also run the path on every fold (common grid, in parallel) and record its
        validation scores: ``cv_scores``, ``cv_mean``, ``cv_se``, ``best_lam_`` and
        ``lam_1se_``. Integers mean (Stratified)KFold as in scikit-learn.
    scoring : str or callable, default=None
        Scorer for validation and CV scores; ``None`` uses ``estimator.score``.
    n_jobs : int, default=None
        Parallel jobs over the folds and the full-data path (joblib; ``-1`` all cores).
        Each job uses ``cpu_count // n_jobs`` torch threads.
    verbose : int, default=0
        Progress bars over lams (and folds).
    keep_estimators : bool, default=False
        Keep a fitted copy of the estimator at every lam in ``path.estimators``.

    Returns
    -------
    path : RegularizationPath
        An interrupted computation (Ctrl-C) returns the points computed so far with
        ``completed=False``.
    """
    base = clone(estimator)
    X, y = indexable(X, y)  # row-indexable for the folds (sparse -> CSR)
    _check_path_args(n_lams, lam_min_ratio)
    extend = lams is None and cv is None
    if lams is None:
        lams = lambda_grid(base._default_lambda_max(X, y), n_lams, lam_min_ratio)
    lams = _check_lams(lams)
    if (X_val is None) != (y_val is None):
        raise ValueError("Give both X_val and y_val, or neither.")
    scorer = check_scoring(base, scoring) if scoring is not None else None

    splits = []
    if cv is not None:
        splitter = check_cv(cv, y, classifier=is_classifier(base))
        splits = list(splitter.split(X, y))
    workers = _workers(n_jobs, len(splits) + 1)
    threads = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
    full_kwargs = {
        "extend": extend,
        "X_val": X_val,
        "y_val": y_val,
        "scorer": scorer,
        "keep_estimators": keep_estimators,
    }

    folds, completed = [], True
    if workers == 1:
        full = _run_path(base, X, y, lams, verbose=verbose, **full_kwargs)
        completed = full["completed"]
        try:
            for k, (train, test) in enumerate(splits):
                if not completed:
                    break
                if verbose:
                    print(f"[regularization_path] fold {k + 1}/{len(splits)}")
                fold = _fold_scores(base, X, y, train, test, lams, scorer, None)
                completed = fold["completed"]
                folds.append(fold)
        except KeyboardInterrupt:
            completed = False
    else:
        tasks = [delayed(_tagged)(0, _run_path, base, X, y, lams, threads=threads, **full_kwargs)]
        tasks += [
            delayed(_tagged)(k + 1, _fold_scores, base, X, y, train, test, lams, scorer, threads)
            for k, (train, test) in enumerate(splits)
        ]
        results = {}
        try:
            parallel = Parallel(n_jobs=workers, return_as="generator_unordered", verbose=verbose)
            for index, out in parallel(tasks):
                results[index] = out
        except KeyboardInterrupt:
            completed = False
        if 0 not in results:
            raise KeyboardInterrupt(
                f"regularization_path interrupted before the full-data path finished "
                f"({len(results)} of {len(splits)} folds had finished)."
            )
        full = results.pop(0)
        folds = [results[k] for k in sorted(results)]
        completed = completed and full["completed"] and len(folds) == len(splits)
    finished = [f for f in folds if f["completed"]]  # an interrupted fold is dropped
    if not completed and splits:
        warnings.warn(
            f"Cross-validation interrupted: {len(finished)} of {len(splits)} folds finished; "
            "their scores are kept, best_lam_ and lam_1se_ are not chosen "
            "(completed=False).",
            UserWarning,
            stacklevel=2,
        )
    _warn_not_converged(full, finished, base)
    return _assemble(full, [f["scores"] for f in finished], splits, base, completed)


def _tagged(index, function, *args, **kwargs):
    """Run a path task and tag its result (results arrive in any order)."""
    return index, function(*args, **kwargs)


def _check_path_args(n_lams, lam_min_ratio):
    if isinstance(n_lams, bool) or not isinstance(n_lams, Integral) or n_lams < 1:
        raise ValueError(f"n_lams must be an integer >= 1, got {n_lams!r}.")
    if (
        isinstance(lam_min_ratio, bool)
        or not isinstance(lam_min_ratio, Real)
        or not 0 < lam_min_ratio <= 1
    ):
        raise ValueError(f"lam_min_ratio must be in (0, 1], got {lam_min_ratio!r}.")


def _check_lams(lams):
    """The grid as a sorted float array: non-empty, finite and positive."""
    try:
        lams = np.asarray(lams, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lams must be an array of positive numbers: {exc}") from None
    if lams.size == 0:
        raise ValueError("lams must hold at least one value, got an empty grid.")
    if not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        raise ValueError(
            f"lams must be finite and > 0 (a path is log-spaced), got {lams.tolist()}."
        )
    return np.sort(lams)


def _warn_not_converged(full, folds, estimator):
    """One ConvergenceWarning for all path points that hit max_epochs."""
    lams = sorted(set(full["not_converged"]).union(*(f["not_converged"] for f in folds)))
    if not lams:
        return
    n_fits = len(full["lams"]) + sum(len(f["scores"]) for f in folds)
    shown = ", ".join(f"{lam:.3g}" for lam in lams[:5]) + (", ..." if len(lams) > 5 else "")
    warnings.warn(
        f"{type(estimator).__name__}: at {len(lams)} of the path's lams (of {n_fits} fits) "
        f"max_epochs ended training before it converged (lam={shown}). Raise "
        "max_epochs, or set max_epochs=None for the automatic budget.",
        ConvergenceWarning,
        stacklevel=3,
    )


def _assemble(rec, fold_scores, splits, estimator, completed):
    lams = np.asarray(rec["lams"])
    n = len(lams)
    failed = np.asarray(rec["failed"], dtype=bool)
    width = max((len(v) for v in rec["norms"] if v is not None), default=0)
    norms = [np.full(width, np.nan) if v is None else v for v in rec["norms"]]
    path = RegularizationPath(
        lams=lams,
        n_selected=np.array([s.size for s in rec["selected"]], dtype=int),
        selected=rec["selected"],
        group_norms=np.vstack(norms) if n else np.empty((0, 0)),
        coefs=_stack(rec["coefs"]) if rec["has_coef"] and n else None,
        intercepts=_stack(rec["intercepts"]) if rec["has_coef"] and n else None,
        train_objective=np.asarray(rec["obj"], dtype=float),
        train_score=np.asarray(rec["train"], dtype=float),
        val_score=np.asarray(rec["val"], dtype=float) if rec["val"] else None,
        feature_names=rec["feature_names"],
        D=getattr(estimator, "D", None),
        estimators=rec["estimators"],
        completed=completed,
        failed=failed,
    )
    if splits and fold_scores:
        scores = np.vstack([s[:n] for s in fold_scores])  # every finished fold: full grid
        path.cv_scores = scores
        path.cv_mean = scores.mean(axis=0)
        path.cv_se = (
            scores.std(axis=0, ddof=1) / np.sqrt(len(scores))
            if len(scores) > 1
            else np.zeros(scores.shape[1])
        )
        if completed:
            # only lams whose full-data fit exists (a path stops at a diverged point)
            usable = ~failed
            mean = np.where(usable, path.cv_mean, np.nan)
            path.best_lam_, path.lam_1se_ = _one_se_rule(lams, mean, path.cv_se)
    return path


def _stack(values):
    """Stack per-lam arrays; a failed point's NaN placeholder takes the others' shape."""
    shapes = [np.shape(v) for v in values if np.ndim(v) > 0]
    if not shapes:
        return np.asarray(values, dtype=float)
    return np.stack([np.full(shapes[0], np.nan) if np.ndim(v) == 0 else v for v in values])
