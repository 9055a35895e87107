"""Choose lam by cross-validated regularization paths: :class:`SparsePathCV`."""

from __future__ import annotations

import os
from numbers import Integral, Real

from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import check_cv
from sklearn.utils import indexable
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y

from .exceptions import TrainingDivergedError
from .path import prefer_linear, regularization_path

__all__ = ["SparsePathCV"]


def _fitted_has(name):
    def check(self):
        if hasattr(self, "estimator_"):
            return hasattr(self.estimator_, name)
        return hasattr(self.estimator, name)

    return check


def _first_divergence(path):
    """(smallest lam, where) at which training diverged on the path or a fold, or None."""
    found = []
    if path.failed is not None and path.failed.any():
        found.append((float(path.lams[path.failed][0]), "on all the data"))
    if path.cv_failed is not None:
        for k, fold in enumerate(path.cv_failed):
            if fold.any():
                found.append((float(path.lams[fold][0]), f"in CV fold {k + 1}"))
    return min(found, key=lambda item: item[0]) if found else None


class SparsePathCV(MetaEstimatorMixin, BaseEstimator):
    """The best sparse model along a cross-validated regularization path.

    Fits the warm-started path of ``estimator`` on every CV fold (in parallel) and on all
    the data, picks lam by ``rule`` and then behaves as the full-data fit at that lam
    (itself warm-started along the path, so no extra refit is needed).

    A network whose family contains the sparse linear model (the MLP, the NAM: see
    ``linear_member``) is searched together with that member, on the same folds: the
    search keeps the linear model where the network's CV score does not beat it, so
    selecting features with a network never costs what a lasso would have found.

    Parameters
    ----------
    estimator : estimator of this package
        A D-gated estimator (``lam`` is chosen here; its other parameters are kept).
    lams : array-like of float, default=None
        Grid; ``None`` uses ``n_lams`` values down from the data's ``lam_max``.
    n_lams : int, default=None
        Grid size; ``None``: the estimator's ``default_grid()``.
    lam_min_ratio : float, default=None
        Smallest lam of the grid as a fraction of ``lam_max``; ``None``: the estimator's
        ``default_grid()`` (see :func:`~sksparse_nn.regularization_path`).
    cv : int, CV splitter or iterable, default=5
        Integers mean (Stratified)KFold, as in scikit-learn.
    cv_stride : int, default=None
        The folds fit every ``cv_stride``-th lam first and then the lams next to the
        chosen ones (the full-data fit takes every lam); ``None``: 1 for ``lams`` given,
        else the estimator's ``default_grid()`` (2 for most networks, 1 for the MLP, the
        NAM without pairs and the linear models; see
        :func:`~sksparse_nn.regularization_path`). The second pass fits next to the lam
        ``rule`` chooses.
    rule : {"best", "1se"}, default="best"
        ``"best"``: the best mean CV score, accurate first (as scikit-learn's
        ``LassoCV``); ``"1se"``: the sparsest lam whose mean CV score is within one
        standard error of the best, sparser at some cost in accuracy (on real tables it
        kept too little: see the real-tables panel of the benchmarks). Within one
        standard error of the best, both prefer lams whose full-data fit converged (a
        clean sparsity gap; ``cv_path_.converged``): the chosen model is that fit.
    scoring : str or callable, default=None
        ``None``: minus the log-loss for classifiers (smooth in lam, where accuracy's
        steps tie many lams), the estimator's ``score`` otherwise (R^2 for regressors).
    n_jobs : int, default=None
        Parallel jobs over folds (joblib; works with the dask or ray backends); the
        full-data path runs in the calling process meanwhile. Each worker process
        imports torch first (a few seconds), so it pays off when a fold's path takes
        well over that.
    verbose : int, default=0
        Progress bars over lams and folds.
    checkpoint : str or path-like, default=None
        A directory where every finished point of the full-data path and of the folds
        is written; refitting with the same directory resumes after the last finished
        point of each path and refuses a directory of another computation (see
        :func:`~sksparse_nn.regularization_path`). ``None`` (the default) writes nothing.
    linear_member : bool, default=True
        Also search the estimator's linear member (``estimator.linear_member()``: the
        sparse linear model with the same ``D`` and groups, the network with its
        non-linear part at zero; families without one ignore this) on the same folds,
        on its own default grid, and keep it unless the network's CV score at its
        chosen lam is higher (with ``rule="1se"``: higher by more than one standard
        error of the fold-by-fold differences; see
        :func:`~sksparse_nn.path.prefer_linear`). Where the signal is nearly linear, the
        lam that keeps a network's hidden part from overfitting also removes weak
        linear effects; the member keeps them, for the cost of an exact linear path
        (seconds). ``False`` searches the network alone.

    Attributes
    ----------
    estimator_ : estimator
        The full-data fit at ``lam_`` (of the linear member where ``member_`` is
        ``"linear"``).
    member_ : {"estimator", "linear"}
        Which search was kept: the estimator's own (also for estimators without a
        linear member, and for ``linear_member=False``) or its linear member's.
    lam_ : float
        The chosen lam.
    best_lam_ : float
        lam with the best mean CV score (or the best among the lams within one standard
        error of it whose full-data fit converged, if it did not; ``cv_path_.converged``).
    lam_1se_ : float
        The largest lam within one standard error of the best (the largest converged
        one, if any in that band converged).
    cv_path_ : RegularizationPath
        The kept search's path with per-fold scores (``cv_scores``, ``cv_mean``,
        ``cv_se``).
    member_paths_ : dict
        ``{"estimator": path, "linear": path}`` (the linear entry only where the member
        was searched): both CV paths, the kept one's without its fitted estimators.
    selected_features_, feature_importances_, classes_, coef_, intercept_
        Those of ``estimator_`` (where it has them).
    n_features_in_, feature_names_in_

    Examples
    --------
    >>> from sksparse_nn import SparseLinearRegressor, SparsePathCV
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> search = SparsePathCV(SparseLinearRegressor(D=3, groups=5), n_lams=10, cv=3)
    >>> search.fit(data.X, data.y).selected_features_  # doctest: +SKIP
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "regularization_path"])],
        "lams": ["array-like", None],
        "n_lams": [Interval(Integral, 2, None, closed="left"), None],
        "lam_min_ratio": [Interval(Real, 0, 1, closed="right"), None],
        "cv": ["cv_object"],
        "cv_stride": [Interval(Integral, 1, None, closed="left"), None],
        "rule": [StrOptions({"best", "1se"})],
        "scoring": [str, callable, None],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "checkpoint": [str, os.PathLike, None],
        "linear_member": ["boolean"],
    }

    def __init__(
        self,
        estimator,
        *,
        lams=None,
        n_lams=None,
        lam_min_ratio=None,
        cv=5,
        cv_stride=None,
        rule="best",
        scoring=None,
        n_jobs=None,
        verbose=0,
        checkpoint=None,
        linear_member=True,
    ):
        self.estimator = estimator
        self.lams = lams
        self.n_lams = n_lams
        self.lam_min_ratio = lam_min_ratio
        self.cv = cv
        self.cv_stride = cv_stride
        self.rule = rule
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.checkpoint = checkpoint
        self.linear_member = linear_member

    def fit(self, X, y=None, **fit_params):
        """Run the CV path, choose lam and keep the full-data fit there.

        ``y`` may be None only for an unsupervised estimator (the autoencoder, scored by
        its reconstruction). ``fit_params`` (e.g. ``sample_weight``, which the linear
        models take) go to every fit, per-row values on each fold's rows (see
        ``fit_params`` of :func:`~sksparse_nn.regularization_path`); the CV scores are
        not weighted.

        A lam at which training diverged (on all the data or in any fold) is never
        chosen.

        Returns
        -------
        self : object

        Raises
        ------
        TrainingDivergedError
            When divergence leaves no lam to choose ("training diverged at lam=...").
        KeyboardInterrupt
            On Ctrl-C (after the path has stopped); no lam is chosen from part of the
            work.
        """
        self._validate_params()
        # fail early with scikit-learn's messages (empty data, wrong shapes); the inner
        # estimator validates again and keeps pandas feature names
        if y is None:
            if self.estimator.__sklearn_tags__().target_tags.required:
                raise ValueError(
                    f"{type(self.estimator).__name__} requires y to be passed, but the "
                    "target y is None."
                )
            check_array(X, accept_sparse=True, dtype=None, ensure_all_finite=False)
        else:
            check_X_y(
                X, y, accept_sparse=True, dtype=None, ensure_all_finite=False, multi_output=True
            )
        estimator = clone(self.estimator)
        member = estimator.linear_member() if self._searches_member(estimator) else None
        cv = self.cv
        if member is not None:  # one set of folds for both searches
            X, y = indexable(X, y)
            cv = list(check_cv(cv, y, classifier=is_classifier(estimator)).split(X, y))
        paths = {"estimator": self._search(estimator, X, y, cv, fit_params, self.lams, "")}
        if member is not None:
            paths["linear"] = self._search(member, X, y, cv, fit_params, None, "linear-member")
        kept = "estimator"
        if member is not None and prefer_linear(paths["estimator"], paths["linear"], self.rule):
            kept = "linear"
        path = paths[kept]
        self.best_lam_, self.lam_1se_ = path.best_lam_, path.lam_1se_
        self.lam_ = self.lam_1se_ if self.rule == "1se" else self.best_lam_
        self.estimator_ = path.estimators[path.index_of(self.lam_)]
        for searched in paths.values():
            searched.estimators = []  # keep only the chosen fit
        self.member_ = kept
        self.cv_path_ = path
        self.member_paths_ = paths
        self.n_features_in_ = self.estimator_.n_features_in_
        if hasattr(self.estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.estimator_.feature_names_in_
        return self

    def _searches_member(self, estimator):
        return self.linear_member and callable(getattr(estimator, "linear_member", None))

    def _search(self, estimator, X, y, cv, fit_params, lams, name):
        """One CV path, lam chosen (or the error that says why none can be)."""
        checkpoint = self.checkpoint
        if checkpoint is not None and name:  # the member's paths beside the network's
            checkpoint = os.path.join(checkpoint, name)
        path = regularization_path(
            estimator,
            X,
            y,
            lams=lams,
            n_lams=self.n_lams if lams is None and not name else None,
            lam_min_ratio=self.lam_min_ratio if not name else None,
            cv=cv,
            cv_stride=self.cv_stride if not name else None,
            cv_rule=self.rule,
            scoring=self.scoring,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
            keep_estimators=True,
            checkpoint=checkpoint,
            fit_params=fit_params,
        )
        if not path.completed:
            raise KeyboardInterrupt(
                "SparsePathCV interrupted (Ctrl-C) before the cross-validated path finished; "
                "no lam was chosen."
            )
        if path.best_lam_ is None:
            diverged = _first_divergence(path)
            if diverged is not None:
                lam, where = diverged
                raise TrainingDivergedError(
                    f"SparsePathCV: training diverged at lam={lam:.4g} ({where}) and no lam "
                    "has both a full-data fit and a finite mean CV score: cannot choose lam. "
                    "See the warnings for the cause (lower lr, standardize X).",
                    lam=lam,
                )
            raise ValueError("Every mean CV score is NaN: cannot choose lam.")
        return path

    # ---- delegation to the chosen fit
    def _fitted(self):
        check_is_fitted(self, "estimator_")
        return self.estimator_

    @available_if(_fitted_has("predict"))
    def predict(self, X):
        """Predict with the model at the chosen lam."""
        return self._fitted().predict(X)

    @available_if(_fitted_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the model at the chosen lam."""
        return self._fitted().predict_proba(X)

    @available_if(_fitted_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log class probabilities of the model at the chosen lam."""
        return self._fitted().predict_log_proba(X)

    @available_if(_fitted_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the model at the chosen lam."""
        return self._fitted().decision_function(X)

    @available_if(_fitted_has("transform"))
    def transform(self, X):
        """Transform with the model at the chosen lam (transformers, e.g. the autoencoder)."""
        return self._fitted().transform(X)

    @available_if(_fitted_has("inverse_transform"))
    def inverse_transform(self, X):
        """Inverse transform with the model at the chosen lam."""
        return self._fitted().inverse_transform(X)

    def score(self, X, y=None, sample_weight=None):
        """The chosen model's ``score`` (R^2, accuracy, or the reconstruction's R^2)."""
        if sample_weight is None:
            return self._fitted().score(X, y)
        return self._fitted().score(X, y, sample_weight=sample_weight)

    @property
    def classes_(self):
        return self._fitted().classes_

    @property
    def selected_features_(self):
        return self._fitted().selected_features_

    @property
    def feature_importances_(self):
        return self._fitted().feature_importances_

    @property
    def n_components_(self):
        return self._fitted().n_components_

    @property
    def coef_(self):
        return self._fitted().coef_

    @property
    def intercept_(self):
        return self._fitted().intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags
