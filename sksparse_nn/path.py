"""Regularization paths for every estimator: one warm-started fit per lam, dense to sparse.

For ``D > 2`` a group at exactly zero is a local minimum that never comes back, so paths
run from small lam (dense) to large lam (sparse), each fit starting from the previous
solution re-split into balanced factors. An estimator whose problem is convex may ask for
the other order (``path_order()``: the D = 2 linear models run sparse to dense, their
working sets growing from the empty model). The engine uses only the estimators' public
path protocol (see :func:`regularization_path`); it knows nothing of gating.

With ``cv``, every fold runs the same warm-started path on a common grid, in parallel
through joblib (so ``joblib.parallel_config(backend="dask")`` spreads the folds over a
cluster), while the calling process runs the path on all the data; the result then holds
per-fold scores, their mean and standard error, ``best_lam_`` and ``lam_1se_``.

Failures: a diverged point is recorded as failed and ends its path; Ctrl-C returns the
finished points and folds (``completed=False``) and chooses no lam. Parallel folds do not
receive the calling process's SIGINT: it is forwarded to them through a flag file
(:func:`sksparse_nn._interrupt.interrupt_on`), and a fold that received the
signal itself (a terminal signals the whole process group) raises the flag for the others.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import indexable

from ._path_parallel import n_workers, parallel_path
from ._path_points import fold_scores, run_path

__all__ = ["RegularizationPath", "lambda_grid", "regularization_path"]


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
        Number of selected features at each lam (of components, for estimators with
        ``selected_components_`` such as :class:`~sksparse_nn.DGatedAutoencoder`; of
        variables, for :meth:`sksparse_nn.compose.VariableModel.regularization_path`).
    selected : list of ndarray
        ``selected_features_`` (or ``selected_components_``) at each lam.
    group_norms : ndarray of shape (n_lams, n_groups)
        ``group_norms_`` at each lam: the norm of every penalized group (input features
        for the networks, feature groups for linear models, trees for NODE).
    importances : ndarray of shape (n_lams, n_features)
        ``feature_importances_`` at each lam (exactly 0 for removed features).
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
    cv_scores : ndarray of shape (n_folds_finished, n_lams) or None
        Validation score of every CV fold whose path finished (with ``cv``): all folds,
        unless the computation was interrupted (then ``completed`` is False and
        ``len(cv_scores)`` says how many folds finished). A fold whose training diverged
        scores NaN from that lam on.
    cv_failed : ndarray of bool of shape (n_folds_finished, n_lams) or None
        The fold points whose training diverged.
    cv_mean, cv_se : ndarray of shape (n_lams,) or None
        Mean over the finished folds and its standard error ``std / sqrt(n_folds)``.
    best_lam_ : float or None
        The lam with the best mean CV score, among lams whose full-data fit exists and
        that no fold failed at; where that fit did not converge (see ``converged``),
        the best converged lam within one standard error of it instead, if any.
        ``None`` when the computation was interrupted or no lam qualifies.
    lam_1se_ : float or None
        The largest (sparsest) such lam whose mean CV score is within one standard error
        of the best (the largest converged lam of that band, if any converged).
    completed : bool
        False when the computation was interrupted (Ctrl-C): the points finished so far
        are kept (never a partial one), CV scores come from the folds that finished, and
        ``best_lam_`` / ``lam_1se_`` are left ``None`` (never chosen from part of the
        work).
    failed : ndarray of bool of shape (n_lams,)
        Points whose training diverged (:class:`~sksparse_nn.TrainingDivergedError`):
        NaN scores and norms, nothing selected (``n_selected`` 0). A path stops at its
        first failed point (a default grid stops growing).
    converged : ndarray of bool of shape (n_lams,)
        Points whose full-data fit did not warn that it had not converged (a
        ConvergenceWarning of the package's estimators): for the networks and
        NODE, training ended with a clean sparsity gap (no group half-way to zero).
        ``best_lam_`` and ``lam_1se_`` prefer these within one standard error of the
        best mean CV score, so the chosen model has exact zeros and a clear gap
        whenever one as good exists.
    selection_unit : str
        What ``selected`` counts: ``"features"``, ``"components"`` (the autoencoder) or
        ``"variables"`` (a :class:`~sksparse_nn.compose.VariableModel`); plots label
        their axes with it.
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
    cv_failed: np.ndarray | None = None
    cv_mean: np.ndarray | None = None
    cv_se: np.ndarray | None = None
    best_lam_: float | None = None
    lam_1se_: float | None = None
    completed: bool = True
    failed: np.ndarray | None = None
    converged: np.ndarray | None = None
    importances: np.ndarray | None = None
    selection_unit: str = "features"

    def __len__(self):
        return len(self.lams)

    def __repr__(self):
        """A summary (the arrays are attributes): grid, selection sizes, choices."""
        n = len(self.lams)
        parts = [f"{n} lams" + (f" from {self.lams[0]:.3g} to {self.lams[-1]:.3g}" if n else "")]
        if n:
            parts.append(f"{self.selection_unit} selected {[int(k) for k in self.n_selected]}")
        if self.D is not None:
            parts.append(f"D={self.D}")
        if self.cv_scores is not None:
            parts.append(f"cv folds={len(self.cv_scores)}")
        for name in ("best_lam_", "lam_1se_"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name):.4g}")
        if not self.completed:
            parts.append("completed=False")
        return f"RegularizationPath({', '.join(parts)})"

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
        """One row per lam: lam, n_selected, objective, scores and whether the fit
        converged (pandas DataFrame)."""
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
        if self.converged is not None:
            frame["converged"] = self.converged
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


def _one_se_rule(lams, mean, se, converged=None):
    """(best_lam, lam_1se) from the mean CV scores (NaN: not eligible).

    ``lam_1se`` is the largest lam at or above the best one whose mean is within one
    standard error of the best. With ``converged`` (the lams whose full-data fit
    converged, i.e. has a clean gap) both prefer those within that band: ``lam_1se``
    the largest converged lam in it, ``best_lam`` the best converged lam in it; a band
    without one keeps the plain choices.
    """
    ok = np.isfinite(mean)
    if not ok.any():
        return None, None
    best = int(np.nanargmax(np.where(ok, mean, -np.inf)))
    band = ok & (mean >= mean[best] - se[best])
    one_se = int(np.flatnonzero(band[best:]).max()) + best  # sparser (larger) lams only
    if converged is not None:
        clean = band & converged
        if clean.any():  # (the largest clean lam is at or above the best clean one)
            best = int(np.nanargmax(np.where(clean, mean, -np.inf)))
            one_se = int(np.flatnonzero(clean).max())
    return float(lams[best]), float(lams[one_se])


def regularization_path(
    estimator,
    X,
    y,
    *,
    lams=None,
    n_lams=None,
    lam_min_ratio=None,
    X_val=None,
    y_val=None,
    cv=None,
    scoring=None,
    n_jobs=None,
    verbose=0,
    keep_estimators=False,
):
    """Fit ``estimator`` along a lam grid with warm starts from dense to sparse (or, for
    an estimator whose ``path_order()`` is ``"descending"``, from sparse to dense).

    An estimator whose ``path_start()`` returns a lam first fits there, a start model
    that is not a point, and warm-starts the first point from it (NODERegressor starts
    from its dense ensemble).

    Parameters
    ----------
    estimator : a D-gated estimator of this package
        Not modified (cloned). Its parameters are validated before any work.
    X, y : training data
    lams : array-like of float, default=None
        The grid: finite values > 0, sorted ascending before fitting. ``None`` builds
        ``n_lams`` log-spaced values from ``lam_min_ratio * lam_max`` to ``lam_max``,
        where ``lam_max`` is the smallest lam with an all-zero group-lasso (D=2)
        solution; without ``cv`` the grid is extended upward until no feature is
        selected (a non-convex fit, D > 2, can keep live groups beyond ``lam_max``), by
        20 points at most (a warning says when that was not enough): with the grid's
        ratio, squared after each step that changed no selection (at most 10x a step).
    n_lams : int >= 1, default=None
    lam_min_ratio : float in (0, 1], default=None
        ``None``: the estimator's ``default_grid()`` (30 and 1e-3 for an estimator
        without one): networks, whose points each train a model, use a shorter grid
        that stops above the nearly unpenalized end.
    X_val, y_val : validation data, default=None
        Scored at every lam (``val_score``).
    cv : int, cross-validation generator or iterable, default=None
        Also run the path on every fold (common grid, in parallel) and record its
        validation scores: ``cv_scores``, ``cv_mean``, ``cv_se``, ``best_lam_`` and
        ``lam_1se_``. Integers mean (Stratified)KFold as in scikit-learn.
    scoring : str or callable, default=None
        Scorer for validation and CV scores; ``None`` uses ``estimator.score``.
    n_jobs : int, default=None
        Parallel jobs over the folds (joblib; ``-1`` all cores); the full-data path runs
        in the calling process meanwhile. Each of these processes uses
        ``cpu_count // (n_jobs + 1)`` torch threads.
    verbose : int, default=0
        Progress bars over lams (and folds).
    keep_estimators : bool, default=False
        Keep a fitted copy of the estimator at every lam in ``path.estimators``.

    Returns
    -------
    path : RegularizationPath
        A point whose training diverges is recorded as failed and ends the path, with a
        warning. An interrupted computation (Ctrl-C) returns the points and the CV folds
        finished so far with ``completed=False`` and a warning, and chooses no lam.
    """
    base = clone(estimator)
    if hasattr(base, "_validate_params"):  # scikit-learn's parameter errors, before work
        base._validate_params()
    n_lams, lam_min_ratio = _grid_args(base, n_lams, lam_min_ratio)
    if lams is not None:
        lams = _check_lams(lams)
    if (X_val is None) != (y_val is None) and y is not None:
        raise ValueError("Give both X_val and y_val, or neither.")
    X, y = indexable(X, y)  # row-indexable for the folds (sparse -> CSR)
    extend = lams is None and cv is None
    if lams is None:
        lams = _check_lams(lambda_grid(base.lambda_max(X, y), n_lams, lam_min_ratio))
    scorer = check_scoring(base, scoring) if scoring is not None else None

    splits = []
    if cv is not None:
        splitter = check_cv(cv, y, classifier=is_classifier(base))
        splits = list(splitter.split(X, y))
    workers = n_workers(n_jobs, len(splits))
    full_kwargs = {
        "extend": extend,
        "X_val": X_val,
        "y_val": y_val,
        "scorer": scorer,
        "keep_estimators": keep_estimators,
    }

    if workers == 1 or not splits:
        full = run_path(base, X, y, lams, verbose=verbose, **full_kwargs)
        folds = []
        for k, (train, test) in enumerate(splits):
            if not full["completed"] or (folds and not folds[-1]["completed"]):
                break
            if verbose:
                print(f"[regularization_path] fold {k + 1}/{len(splits)}")
            try:
                folds.append(fold_scores(base, X, y, train, test, lams, scorer, None))
            except KeyboardInterrupt:  # outside a fit (e.g. while splitting the data)
                folds.append({"completed": False})
    else:
        full, folds, error = parallel_path(
            base, X, y, lams, splits, scorer, workers, verbose, full_kwargs
        )
        if error is not None:
            raise error
    finished = [f for f in folds if f["completed"]]  # an interrupted fold is dropped
    completed = full["completed"] and len(finished) == len(splits)
    _report(full, finished, splits, completed, base)
    return _assemble(full, finished, splits, base, completed)


def _report(full, folds, splits, completed, estimator):
    """The path's warnings, once, in the calling process (workers' warnings are lost)."""
    if full["diverged"] is not None:
        lam, message = full["diverged"]
        warnings.warn(
            f"Training diverged at lam={lam:.4g}; the path stops there (recorded as failed). "
            f"{message}",
            UserWarning,
            stacklevel=3,
        )
    for k, fold in enumerate(folds):
        if fold["diverged"] is not None:
            lam, message = fold["diverged"]
            warnings.warn(
                f"CV fold {k + 1}: training diverged at lam={lam:.4g}; its scores are NaN "
                f"from there on, and those lams cannot be chosen. {message}",
                UserWarning,
                stacklevel=3,
            )
    if full.get("unfinished_extension"):
        lam = full["points"][-1]["lam"]
        warnings.warn(
            f"The default grid, extended upward beyond lam_max as far as it grows (up to "
            f"lam={lam:.4g}), ends at a model that still selects something: the path does "
            "not reach the empty model. Pass lams reaching higher to see the rest.",
            UserWarning,
            stacklevel=3,
        )
    if not completed:
        n = len(full["points"])
        text = f"Regularization path interrupted: returning the {n} points finished so far"
        if splits:
            text += (
                f" and the {len(folds)} of {len(splits)} CV folds that finished (their scores "
                "are kept); best_lam_ and lam_1se_ are not chosen from part of the work"
            )
        warnings.warn(text + " (completed=False).", UserWarning, stacklevel=3)
    _warn_not_converged(full, folds, estimator)


def _grid_args(estimator, n_lams, lam_min_ratio):
    """``n_lams`` and ``lam_min_ratio``, ``None`` replaced by the estimator's defaults."""
    defaults = {"n_lams": 30, "lam_min_ratio": 1e-3}
    if hasattr(estimator, "default_grid"):
        defaults.update(estimator.default_grid())
    n_lams = defaults["n_lams"] if n_lams is None else n_lams
    lam_min_ratio = defaults["lam_min_ratio"] if lam_min_ratio is None else lam_min_ratio
    _check_path_args(n_lams, lam_min_ratio)
    return n_lams, lam_min_ratio


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
    """One ConvergenceWarning for all path points whose fit warned that it had not
    converged, quoting the first such fit's own message (what moved, and the advice)."""
    found = [(p["lam"], p["not_converged"]) for p in full["points"] if p["not_converged"]]
    for fold in folds:
        found.extend(fold["not_converged"])
    if not found:
        return
    lams = sorted({lam for lam, _ in found})
    n_fits = len(full["points"]) + sum(len(f["scores"]) for f in folds)
    shown = ", ".join(f"{lam:.3g}" for lam in lams[:5]) + (", ..." if len(lams) > 5 else "")
    lam, first = found[0]
    warnings.warn(
        f"{type(estimator).__name__}: at {len(lams)} of the path's lams (of {n_fits} fits) "
        f"training ended before it converged (lam={shown}). The fit at lam={lam:.3g} "
        f"said: {first}",
        ConvergenceWarning,
        stacklevel=4,
    )


def _rows(points, key):
    """The points' vectors under ``key`` as one (n_points, width) array; failed points
    (None) become NaN rows."""
    width = max((len(p[key]) for p in points if p[key] is not None), default=0)
    rows = [np.full(width, np.nan) if p[key] is None else p[key] for p in points]
    return np.vstack(rows) if rows else np.empty((0, 0))


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
        coefs=_stack([p["coefs"] for p in points]) if has_coef else None,
        intercepts=_stack([p["intercepts"] for p in points]) if has_coef else None,
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
    )
    if splits and folds:
        # every finished fold covers the whole grid; keep the lams of the full-data path
        scores = np.vstack([f["scores"][:n] for f in folds])
        path.cv_scores = scores
        path.cv_failed = np.vstack([f["failed"][:n] for f in folds])
        path.cv_mean = scores.mean(axis=0)
        path.cv_se = (
            scores.std(axis=0, ddof=1) / np.sqrt(len(scores))
            if len(scores) > 1
            else np.zeros(scores.shape[1])
        )
        if completed:
            # only lams whose full-data fit exists and that no fold failed at (NaN mean);
            # within one SE of the best, converged ones first: the chosen model is that
            # fit, and one with groups half-way to zero has no clean gap
            mean = np.where(failed, np.nan, path.cv_mean)
            path.best_lam_, path.lam_1se_ = _one_se_rule(lams, mean, path.cv_se, path.converged)
    return path


def _stack(values):
    """Stack per-lam arrays; a failed point's NaN placeholder takes the others' shape."""
    shapes = [np.shape(v) for v in values if np.ndim(v) > 0]
    if not shapes:
        return np.asarray(values, dtype=float)
    return np.stack([np.full(shapes[0], np.nan) if np.ndim(v) == 0 else v for v in values])
