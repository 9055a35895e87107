"""The engine: :func:`regularization_path` checks its arguments, builds the grid, runs the
full-data path and the CV folds (in this process or in parallel) and assembles the
result."""

from __future__ import annotations

import inspect

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import check_consistent_length, indexable

from ..utils.validation import check_fit_params
from ._assemble import _assemble
from ._checkpoint import open_checkpoint
from ._extend import extend_below
from ._grid import _check_lams, _cv_stride, _extends_below, _grid_args, lambda_grid
from ._parallel import n_workers, parallel_path
from ._points import fold_scores, run_path
from ._refine import coarse_indices, refine_folds, refine_targets
from ._scoring import default_scorer
from ._warnings import _report, _warn_extension_limit


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
    cv_stride=None,
    cv_rule=None,
    scoring=None,
    n_jobs=None,
    verbose=0,
    keep_estimators=False,
    checkpoint=None,
    fit_params=None,
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
    X, y : array-like
        Training data (``y`` None for an unsupervised estimator).
    lams : array-like of float, default=None
        The grid: finite values > 0, sorted ascending before fitting. ``None`` builds
        ``n_lams`` log-spaced values from ``lam_min_ratio * lam_max`` to ``lam_max``,
        where ``lam_max`` is the smallest lam with an all-zero group-lasso (D=2)
        solution; without ``cv`` the grid is extended upward until no feature is
        selected (a non-convex fit, D > 2, can keep live groups beyond ``lam_max``), by
        20 points at most (a warning says when that was not enough): with the grid's
        ratio, squared after each step that changed no selection (at most 10x a step).
    n_lams : int >= 1, default=None
        Grid size (see ``lam_min_ratio``).
    lam_min_ratio : float in (0, 1], default=None
        ``None``: the estimator's ``default_grid()`` (30 and 1e-3 for an estimator
        without one): networks, whose points each train a model, use a shorter grid
        that stops above the nearly unpenalized end.
    X_val, y_val : array-like, default=None
        Validation data, scored at every lam (``val_score``).
    cv : int, cross-validation generator or iterable, default=None
        Also run the path on every fold (common grid, in parallel) and record its
        validation scores: ``cv_scores``, ``cv_mean``, ``cv_se``, ``best_lam_`` and
        ``lam_1se_``. Integers mean (Stratified)KFold as in scikit-learn. When the
        folds choose a default grid's densest lam (the best mean score, or the one-SE
        lam with ``cv_rule="1se"``), the grid's end, not the data, stopped the search:
        the path goes on below it at the grid's log spacing, ``2 cv_stride + 1`` lams
        at a time on the full data and on every fold, until the choice leaves the
        dense end. Each such block is a path of its own (a cold fit at its densest
        lam, then warm starts upward, each fold from its own models: at D > 2 a warm
        start from the sparser model could not bring removed groups back). It stops at
        1e-4 of the grid's largest lam (the penalty is then negligible against the
        data term) or after as many lams as the grid has (the search costs at most
        about twice the grid's), with a warning; ``path.n_below`` counts the added
        lams, ``path.extension_limit`` names the limit that stopped it. A grid given
        in ``lams`` is not extended, nor the grid of an estimator whose
        ``default_grid()`` says ``"extend_below": False``.
    cv_stride : int >= 1, default=None
        The folds fit every ``cv_stride``-th lam of the grid first (both ends), choose
        on those, then fit the grid's lams next to the best and the one-SE lam, each
        warm-started from the fold's own model at the fitted lam below it; the
        full-data path fits every lam, and ``cv_scores`` are NaN at the lams the folds
        skipped (never chosen). ``None``: 1 for a grid given in ``lams``, else the
        estimator's ``default_grid()["cv_stride"]``: 2 for most networks, whose every
        fold point trains a model only to be scored (it halves the folds' points while
        the choice keeps the grid's resolution where it is made); 1 for linear models,
        the MLP and the NAM without pairs (whose two passes chose denser, or sparser,
        models than every lam does: a fold's score depends on its warm-start path).
    cv_rule : {"best", "1se"}, default=None
        With ``cv_stride`` > 1, the choice whose neighbourhood the folds' second pass
        fits: ``best_lam_``'s, ``lam_1se_``'s, or both (None). The other choice is then
        made on the lams the folds fitted (:class:`~sksparse_nn.SparsePathCV` passes
        its ``rule``).
    scoring : str or callable, default=None
        Scorer for validation and CV scores. ``None``: minus the log-loss for
        classifiers (smooth in lam, where accuracy's steps tie many lams and widen the
        standard errors), else ``estimator.score`` (R^2 for regressors).
    n_jobs : int, default=None
        Parallel jobs over the folds (joblib; ``-1`` all cores); the full-data path runs
        in the calling process meanwhile. Each of these processes uses
        ``cpu_count // (n_jobs + 1)`` torch threads.
    verbose : int, default=0
        Progress bars over lams (and folds).
    keep_estimators : bool, default=False
        Keep a fitted copy of the estimator at every lam in ``path.estimators``.
    checkpoint : str or path-like, default=None
        A directory where every finished point of the full-data path and of every fold
        is written as it finishes (created if needed; plain files, which a Dask
        cluster's workers can write to on shared storage). A rerun with the same
        checkpoint resumes each path after its last finished point, and gives the result
        of an uninterrupted run (with a fixed ``random_state``). It refuses (ValueError
        naming what differs) a directory holding another computation: other data, other
        estimator parameters (except ``lam``, ``warm_start`` and ``verbose``), another
        grid, other CV splits or scoring. A damaged file is ignored and recomputed, with
        a warning. ``None`` (the default) writes nothing: a path of seconds needs none.
        The files are pickles: point it only at a directory you trust; one computation
        at a time per directory.
    fit_params : dict, default=None
        Keyword arguments of every fit of the path, e.g. ``{"sample_weight": w}`` (the
        linear models take sample weights; a family whose ``fit`` does not take a
        keyword raises a TypeError naming it, before any work). A per-row value (one
        entry per row of ``X``) is indexed with the rows of each CV fold; the default
        grid's ``lambda_max`` uses ``sample_weight`` where the estimator's takes it.
        Validation scores are not weighted. ``None``: ``fit(X, y)``.

    Returns
    -------
    path : RegularizationPath
        A point whose training diverges is recorded as failed and ends the path, with a
        warning. An interrupted computation (Ctrl-C) returns the points and the CV folds
        finished so far with ``completed=False`` and a warning, and chooses no lam.

    Examples
    --------
    >>> from sksparse_nn import SparseLinearRegressor, regularization_path
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> path = regularization_path(SparseLinearRegressor(groups=5), data.X, data.y, n_lams=5)
    >>> int(path.n_selected[0]), int(path.n_selected[-1])  # dense end, empty end
    (200, 0)
    """
    base = clone(estimator)
    _check_path_protocol(base)
    if hasattr(base, "_validate_params"):  # scikit-learn's parameter errors, before work
        base._validate_params()
    n_lams, lam_min_ratio = _grid_args(base, n_lams, lam_min_ratio)
    stride = _cv_stride(base, cv_stride, lams is not None)
    if cv_rule not in (None, "best", "1se"):
        raise ValueError(f'cv_rule must be "best", "1se" or None, got {cv_rule!r}.')
    given = lams
    if lams is not None:
        lams = _check_lams(lams)
    if (X_val is None) != (y_val is None) and y is not None:
        raise ValueError("Give both X_val and y_val, or neither.")
    if cv is None and sp.issparse(X):  # no folds: sparse X as given (CSC: no copy)
        check_consistent_length(X, y)
        y = indexable(y)[0]
    else:
        X, y = indexable(X, y)  # row-indexable for the folds (sparse -> CSR)
    fit_params = check_fit_params(base, fit_params, X, "regularization_path")
    extend = lams is None and cv is None
    if lams is None:
        top = weighted_lambda_max(base, X, y, fit_params.get("sample_weight"))
        lams = _check_lams(lambda_grid(top, n_lams, lam_min_ratio))
    scorer = check_scoring(base, scoring) if scoring is not None else default_scorer(base)

    splits = []
    if cv is not None:
        splitter = check_cv(cv, y, classifier=is_classifier(base))
        splits = list(splitter.split(X, y))
    coarse = coarse_indices(len(lams), stride)
    refining = bool(splits) and len(coarse) < len(lams)
    stores = [None] * len(splits)
    if checkpoint is not None:  # refuses another computation's directory, before any fit
        args = (X_val, y_val, lams, extend, splits, scoring, fit_params, stride if splits else 1)
        opened = open_checkpoint(checkpoint, base, X, y, *args)
        lams = opened.lams
        stores = [opened.path(f"fold-{k}") for k in range(len(splits))]
    folds_at = {"fit_at": lams[coarse] if refining else None, "keep_models": refining}
    workers = n_workers(n_jobs, len(splits))
    full_kwargs = {
        "extend": extend,
        "X_val": X_val,
        "y_val": y_val,
        "scorer": scorer,
        "keep_estimators": keep_estimators,
        "fit_params": fit_params,
        "checkpoint": None if checkpoint is None else opened.path("full"),
    }
    paths = (base, X, y, splits, scorer, workers, verbose)
    full, folds = _run_paths(*paths, lams, full_kwargs, stores, folds_at)
    below = {"n_below": 0, "fitted_below": np.zeros(0, dtype=bool), "limit": None}
    if splits and given is None and _extends_below(base) and _finished(full, folds, splits):

        def run_block(block, j):  # the block's paths, stored beside the grid's
            names = [f"full-below-{j}"] + [f"fold-{k}-below-{j}" for k in range(len(splits))]
            block_stores = [None] * len(names)
            if checkpoint is not None:
                block_stores = [opened.path(name) for name in names]
            if verbose:
                print(f"[regularization_path] the folds chose the densest lam: lams "
                      f"{block[0]:.3g}..{block[-1]:.3g} below the grid")  # fmt: skip
            at = {"fit_at": block[coarse_indices(len(block), stride)], "keep_models": stride > 1}
            kwargs = {**full_kwargs, "checkpoint": block_stores[0]}
            return _run_paths(*paths, block, kwargs, block_stores[1:], at)

        full, folds, lams, below = extend_below(
            run_block, full, folds, lams, rule=cv_rule, stride=stride
        )
    fitted = np.zeros(len(lams) - below["n_below"], dtype=bool)
    fitted[coarse] = True
    fitted = np.concatenate([below["fitted_below"], fitted])  # the folds' first pass
    if splits and not fitted.all() and _finished(full, folds, splits):
        targets = refine_targets(full["points"], folds, fitted, cv_rule)
        second = None  # the second passes' checkpoint stores
        if checkpoint is not None:
            second = [opened.path(f"fold-{k}-second") for k in range(len(splits))]
        args = (targets, scorer, workers, verbose, second, fit_params)
        folds = refine_folds(folds, X, y, splits, lams, *args)
    for fold in folds:
        fold.pop("models", None)
    finished = [f for f in folds if f["completed"]]  # an interrupted fold is dropped
    completed = full["completed"] and len(finished) == len(splits)
    _report(full, finished, splits, completed, base)
    path = _assemble(full, finished, splits, base, completed)
    path.n_below, path.extension_limit = below["n_below"], below["limit"]
    if completed and below["limit"] is not None:
        _warn_extension_limit(path, below["limit"])
    return path


def _finished(full, folds, splits):
    """Whether the full-data path and every fold finished (no Ctrl-C)."""
    return full["completed"] and len(folds) == len(splits) and all(f["completed"] for f in folds)


def _run_paths(base, X, y, splits, scorer, workers, verbose, lams, full_kwargs, stores, folds_at):
    """The full-data path over ``lams`` and every fold's path (``folds_at``:
    :func:`fold_scores`'s ``fit_at`` and ``keep_models``; ``stores``: the folds'
    checkpoint stores), in this process or with the folds over ``workers`` joblib
    workers; returns ``(full, folds)`` (a fold's error is raised)."""
    fit_params = full_kwargs["fit_params"]
    if workers > 1 and splits:
        full, folds, error = parallel_path(
            base, X, y, lams, splits, scorer, workers, verbose, full_kwargs, stores, folds_at
        )
        if error is not None:
            raise error
        return full, folds
    full = run_path(base, X, y, lams, verbose=verbose, **full_kwargs)
    folds = []
    for k, (train, test) in enumerate(splits):
        if not full["completed"] or (folds and not folds[-1]["completed"]):
            break
        if verbose:
            print(f"[regularization_path] fold {k + 1}/{len(splits)}")
        try:
            args = (scorer, None, stores[k], fit_params)
            folds.append(fold_scores(base, X, y, train, test, lams, *args, **folds_at))
        except KeyboardInterrupt:  # outside a fit (e.g. while splitting the data)
            folds.append({"completed": False})
    return full, folds


def weighted_lambda_max(estimator, X, y, sample_weight=None):
    """``estimator.lambda_max(X, y)``, with ``sample_weight`` where its ``lambda_max``
    takes it (the families that take weights: the top of their weighted problem)."""
    if sample_weight is None:
        return estimator.lambda_max(X, y)
    try:
        takes = "sample_weight" in inspect.signature(estimator.lambda_max).parameters
    except (TypeError, ValueError):
        takes = False
    if takes:
        return estimator.lambda_max(X, y, sample_weight=sample_weight)
    return estimator.lambda_max(X, y)


def _check_path_protocol(estimator):
    """A clear error for an estimator without ``lam`` and ``warm_start`` (e.g. a
    composite around one)."""
    params = estimator.get_params(deep=False)
    if "lam" in params and "warm_start" in params:
        return
    name = type(estimator).__name__
    hint = (
        f" For {name}, put the search inside it: {name}(SparsePathCV(estimator)), or call "
        f"{name}.regularization_path."
        if hasattr(estimator, "regularization_path")
        else ""
    )
    raise TypeError(
        f"{name} has no lam and warm_start parameters: a regularization path (and "
        f"SparsePathCV) fits a sparse estimator of this package along a lam grid.{hint}"
    )
