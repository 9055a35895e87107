"""The model-X knockoff filter: :class:`KnockoffFilter`, a scikit-learn feature selector
with a false discovery rate guarantee, over any family's regularization path.

Per draw: Gaussian knockoffs ``X~`` of ``X`` (:mod:`._knockoff_sampling`), the family's
path on ``[X, X~]`` (cross-validated, or one warm path without CV), the statistic ``W``
of each unit (feature, cluster or variable) against its knockoff (importances at the
CV-chosen lam, or the lams at which they leave the model), the knockoff+ threshold and
the draw's e-values; the e-values are averaged over draws and e-BH selects at the
target FDR. The arithmetic of statistics, thresholds and e-values is in plain functions
of :mod:`._knockoff_statistics`; the filter composes them.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..compose import TableEncoder, VariableModel, variable_groups
from ..groups import check_groups
from ..path import regularization_path
from ..utils.validation import check_fit_params
from ._base import dense_labels, numeric_columns
from ._knockoff_sampling import (
    METHODS,
    GaussianKnockoffs,
    correlation_clusters,
    estimate_correlation,
)
from ._knockoff_statistics import (
    e_bh,
    importance_statistics,
    knockoff_e_values,
    path_statistics,
)

__all__ = ["KnockoffFilter"]


# ------------------------------------------------------------------ the selector
def _check_numeric(X):
    """X as a float64 array, or a ValueError saying how to get there."""
    return numeric_columns(
        X,
        "KnockoffFilter needs numeric X (Gaussian knockoffs of numbers): encode first (e.g. "
        "sksparse_nn.compose.TableEncoder) and pass the encoded columns with groups= one "
        "label per variable, or pass a VariableModel as estimator.",
    )


def _penalty_labels(estimator, p):
    """The estimator's own ``groups`` as one label per feature (-1 unpenalized), or None
    (:func:`~sksparse_nn.groups.check_groups`: its errors name a bad specification)."""
    groups = estimator.get_params().get("groups")
    return None if groups is None else check_groups(groups, p)


def _doubled(labels):
    """Penalty labels of ``[X, X~]``: the knockoffs' groups mirror the originals'."""
    shift = labels.max() + 1
    return np.concatenate([labels, np.where(labels >= 0, labels + shift, -1)])


class KnockoffFilter(SelectorMixin, MetaEstimatorMixin, BaseEstimator):
    """Select features at a target false discovery rate with model-X knockoffs.

    Each draw makes Gaussian knockoffs ``X~`` of ``X`` (mean and Ledoit-Wolf shrunk
    covariance estimated from ``X``; ``S`` by maximum entropy, block-diagonal over groups
    of features), fits a cross-validated regularization path of ``estimator`` on
    ``[X, X~]`` and scores each unit (a feature, a cluster of correlated features, a
    user's group or a variable) by its importance at the CV-chosen lam minus its
    knockoff's (``statistic="importance"``), or by the lam at which it leaves the model
    against the lam at which its knockoff does (``statistic="lam"``). The knockoff+
    threshold of each draw turns the statistics into e-values; their mean over draws
    goes through e-BH at ``fdr``. The expected share of null units among the selected
    is then at most ``fdr`` (as far as the Gaussian law fits the rows of X: the
    guarantee is model-X), for any family whose path is used.

    Parameters
    ----------
    estimator : estimator of this package, or a VariableModel of one
        Any family with a path (SparseLinear*, DGatedMLP*, DGatedNAM*, ...); cloned.
        A :class:`~sksparse_nn.compose.VariableModel`: its encoder encodes the table, the
        units are the variables (a categorical's one-hot columns are one group of
        knockoffs and one penalty group), and the support is over the user's columns;
        its ``unpenalized`` is not used (every variable is tested).
    fdr : float in (0, 1), default=0.1
        Target false discovery rate of the selection. Knockoffs select nothing or at
        least ``1 / fdr`` units: at 0.1, ten.
    method : {"maxent", "mvr", "equicorrelated"}, default="maxent"
        How the knockoffs' ``S`` is chosen. Maximum entropy keeps knockoffs of strongly
        correlated features (corr 0.99) informative where an SDP or the equicorrelated
        choice makes them copies, and solves group blocks in closed form, hence the
        default; ``"mvr"`` (minimum variance-based reconstructability) is as good on
        singletons and takes no groups; ``"equicorrelated"`` is the fast fallback.
    groups : array-like of shape (n_features,), "clusters" or None, default="clusters"
        One label per column: the columns of a label are one unit (group knockoffs, one
        statistic, kept or dropped together), e.g. a categorical's one-hot columns. An
        estimator with a ``groups`` parameter left at None is given these groups (and
        their knockoffs' copies) as penalty groups. ``"clusters"`` (the default, also
        :class:`StabilitySelection`'s): clusters of correlated columns (see
        ``cluster_threshold``); columns correlated with no other stay units of their
        own. ``None``: every column is a unit. Ignored with a VariableModel, whose
        variables are the units.
    cluster_threshold : float in (0, 1], default=0.7
        With ``groups="clusters"``: columns whose average absolute correlation reaches
        this value form one unit (average-linkage clustering on ``1 - |corr|``). At 0.7
        a feature explains half the variance of its partners (0.7^2 ~ 0.5): above that,
        a knockoff of one feature given the others is close to a copy and the pair
        loses the power a unit of both keeps. 1 keeps every column alone.
    n_draws : int >= 1, default=1
        Knockoff draws, averaged as e-values (each costs one (cross-validated) path on
        ``2 p`` columns). One draw is knockoff+ itself. More draws make the selection
        depend less on one draw's noise, but e-BH keeps ``k`` units only if their mean
        e-value reaches ``n_units / (fdr k)`` while a draw's is at most ``n_units``: at
        ``k`` near ``1 / fdr`` every draw must select the same units with no negative
        statistic above its threshold, and one draw that selects nothing empties the
        selection. On the benchmark's linear truth (ten true features at fdr 0.1) one
        draw found all ten in 20 of 20 repetitions, three draws averaged in 16 of 17;
        hence one by default.
    draw_fdr : float in (0, 1), default=None
        The knockoff+ level of each draw (``alpha_kn`` of the e-values). ``None``:
        ``fdr``, so that one draw selects what knockoff+ selects; a lower level (e.g.
        ``fdr / 2``) needs ``1 / draw_fdr`` selections per draw, out of reach where
        fewer units matter.
    offset : {0, 1}, default=1
        1: knockoff+ (FDR control); 0: the knockoff threshold (a modified FDR only).
    statistic : {"importance", "lam"}, default="importance"
        How a unit is scored against its knockoff on each draw's path on ``[X, X~]``.
        ``"importance"``: the path is cross-validated (``cv`` folds) and ``W`` is the
        unit's importance (root sum of squares of ``feature_importances_`` over its
        columns: ``|coef|`` for the linear models, input-group norms for the networks)
        minus its knockoff's, at the CV-chosen lam. ``"lam"``: one path without CV and
        ``W`` the lam at which the unit leaves the model against its knockoff's
        (signed max), about ``cv + 1`` times cheaper. Importances at the chosen lam are
        the default: on the benchmark's linear truth single draws of them made 3
        false selections in 10 repetitions against 10 for the exit lams, both finding
        all ten true features, and at fdr 0.2 on wine with noise columns they kept
        6-8 real columns on three samples where the exit lams kept 6-7 on two
        (``benchmarks/selection_error.py``).
    cv : int >= 2, cross-validation generator or iterable, default=5
        The folds of the cross-validated path of ``statistic="importance"``; passed to
        :func:`~sksparse_nn.regularization_path`. Unused with ``statistic="lam"``.
    n_lams : int, default=None
        Grid size of each path (``None``: the family's default grid; without CV,
        extended up to the empty model).
    random_state : int, RandomState or None, default=None
        Seeds the knockoff draws.

    Attributes
    ----------
    estimator_ : estimator
        The estimator the paths were run with (its ``groups`` set on ``[X, X~]``).
    groups_ : ndarray of int of shape (n_columns,)
        Unit of each column of X (of the encoded columns, for a VariableModel).
    n_units_ : int
    statistics_ : ndarray of shape (n_draws, n_units)
        ``W`` of every unit in every draw (positive: the unit outlasts its knockoff).
    draw_thresholds_ : ndarray of shape (n_draws,)
        Knockoff+ threshold of each draw on ``W`` (``inf``: the draw selects nothing).
    e_values_ : ndarray of shape (n_units,)
        Mean e-value of each unit over the draws.
    threshold_ : float
        The e-BH cut-off on ``e_values_`` (``inf`` when nothing is selected).
    draw_fdr_ : float
        The draws' knockoff+ level used.
    selected_units_ : ndarray of int
    selected_features_ : ndarray of int
        Selected columns of X (of the user's columns, for a VariableModel).
    n_selected_ : int
        Their number.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.selection import KnockoffFilter
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(150, 20)
    >>> y = X[:, :12] @ np.full(12, 1.0) + 0.5 * rng.randn(150)
    >>> kf = KnockoffFilter(SparseLinearRegressor(), n_draws=1, n_lams=15, random_state=0)
    >>> kf = kf.fit(X, y)
    >>> bool(set(kf.selected_features_) >= set(range(12)))
    True
    """

    _parameter_constraints = {
        "estimator": [object],
        "fdr": [Interval(Real, 0, 1, closed="neither")],
        "method": [StrOptions(set(METHODS))],
        "groups": ["array-like", StrOptions({"clusters"}), None],
        "cluster_threshold": [Interval(Real, 0, 1, closed="right")],
        "n_draws": [Interval(Integral, 1, None, closed="left")],
        "draw_fdr": [Interval(Real, 0, 1, closed="neither"), None],
        "offset": [Interval(Integral, 0, 1, closed="both")],
        "statistic": [StrOptions({"importance", "lam"})],
        "cv": ["cv_object"],
        "n_lams": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator,
        *,
        fdr=0.1,
        method="maxent",
        groups="clusters",
        cluster_threshold=0.7,
        n_draws=1,
        draw_fdr=None,
        offset=1,
        statistic="importance",
        cv=5,
        n_lams=None,
        random_state=None,
    ):
        self.estimator = estimator
        self.fdr = fdr
        self.method = method
        self.groups = groups
        self.cluster_threshold = cluster_threshold
        self.n_draws = n_draws
        self.draw_fdr = draw_fdr
        self.offset = offset
        self.statistic = statistic
        self.cv = cv
        self.n_lams = n_lams
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def _design(self, X, y):
        """(numeric X, estimator, unit of each column, user-column map or None)."""
        if isinstance(self.estimator, VariableModel):
            model = self.estimator
            if isinstance(model.encoder, str) and model.encoder == "auto":
                encoder = TableEncoder()
            else:
                encoder = clone(model.encoder)
            encoded = _check_numeric(encoder.fit_transform(X, y))
            sources, names = variable_groups(encoder)
            self.variable_names_ = np.asarray(names, dtype=object)
            if hasattr(encoder, "feature_names_in_"):
                self.feature_names_in_ = encoder.feature_names_in_
            self.n_features_in_ = len(names)
            return encoded, clone(model.estimator), np.asarray(sources, dtype=np.intp), True
        X_num = _check_numeric(X)
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        self.n_features_in_ = X_num.shape[1]
        estimator = clone(self.estimator)
        if self.groups is None or isinstance(self.groups, str):  # None, "clusters"
            units = None
        else:
            units = dense_labels(self.groups, X_num.shape[1])
        return X_num, estimator, units, False

    def fit(self, X, y, **fit_params):
        """Draw knockoffs, run the paths on ``[X, X~]`` and select at ``fdr``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric (a DataFrame's columns are named in ``get_feature_names_out``); a
            table with categoricals goes through a VariableModel estimator.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        **fit_params : dict
            Passed to every fit of the paths on ``[X, X~]``, e.g. ``sample_weight``
            (the linear models take it; a family whose ``fit`` does not take a keyword
            raises a TypeError naming it, before any work). The knockoffs are drawn
            from the law of the rows of ``X`` unweighted.

        Returns
        -------
        self : KnockoffFilter
        """
        self._validate_params()
        Xn, estimator, units, by_variable = self._design(X, y)
        fit_params = check_fit_params(estimator, fit_params, Xn, type(self).__name__)
        p = Xn.shape[1]
        user_units = units is not None
        if units is None and self.groups is None:
            units = np.arange(p)
        elif units is None:  # "clusters"
            units = correlation_clusters(estimate_correlation(Xn)[2], self.cluster_threshold)
        n_units = int(units.max()) + 1
        groups = None if n_units == p else units
        sampler = GaussianKnockoffs(method=self.method, groups=groups).fit(Xn)
        estimator = self._penalty_groups(estimator, units if user_units else None, p)
        column_units = np.concatenate([units, units + n_units])
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31))
        level = self.fdr if self.draw_fdr is None else self.draw_fdr
        W = np.zeros((self.n_draws, n_units))
        e = np.zeros((self.n_draws, n_units))
        T = np.zeros(self.n_draws)
        # the path runs in X's standard units (the same shift and scale for a column and
        # its knockoff): a penalty on raw units would favour large-scale columns
        Z = (Xn - sampler.mean_) / sampler.scale_
        for d in range(self.n_draws):
            Z_tilde = (sampler.sample(Xn, rng) - sampler.mean_) / sampler.scale_
            X_aug = np.hstack([Z, Z_tilde])
            W[d] = self._statistics(estimator, X_aug, y, fit_params, column_units, n_units)
            e[d], T[d] = knockoff_e_values(W[d], level, self.offset)
        self.estimator_ = estimator
        self.groups_ = units
        self.n_units_ = n_units
        self.statistics_, self.draw_thresholds_, self.draw_fdr_ = W, T, level
        self.e_values_ = e.mean(axis=0)
        chosen, self.threshold_ = e_bh(self.e_values_, self.fdr)
        self.selected_units_ = np.flatnonzero(chosen)
        columns = np.isin(units, self.selected_units_)
        if by_variable:  # units are the variables: the user's columns
            self._support = chosen
        else:
            self._support = columns
        self.selected_features_ = np.flatnonzero(self._support)
        self.n_selected_ = int(self._support.sum())
        return self

    def _statistics(self, estimator, X_aug, y, fit_params, column_units, n_units):
        """One draw's ``W`` from the family's path on ``[X, X~]``."""
        if self.statistic == "lam":
            path = regularization_path(
                estimator, X_aug, y, n_lams=self.n_lams, fit_params=fit_params
            )
            return path_statistics(path, column_units, n_units)
        path = regularization_path(
            estimator, X_aug, y, n_lams=self.n_lams, cv=self.cv, fit_params=fit_params
        )
        return importance_statistics(path, column_units, n_units)

    def _penalty_groups(self, estimator, units, p):
        """The estimator with penalty groups on ``[X, X~]``: its own groups (or the
        user's units, where it has a ``groups`` parameter left at None) and their
        mirror images on the knockoffs."""
        if "groups" not in estimator.get_params():
            return estimator
        labels = _penalty_labels(estimator, p)
        if labels is None and units is not None:
            labels = units
        if labels is None:
            return estimator
        return estimator.set_params(groups=_doubled(labels))

    # ------------------------------------------------------------------ selector
    def _get_support_mask(self):
        check_is_fitted(self, "_support")
        return self._support

    def transform(self, X):
        """The selected columns of ``X`` (a DataFrame stays a DataFrame).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_selected : array-like of shape (n_samples, n_selected)
        """
        check_is_fitted(self, "_support")
        if hasattr(X, "iloc"):
            return _safe_indexing(X, self.selected_features_, axis=1)
        return super().transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        if isinstance(self.estimator, VariableModel):
            tags.input_tags.string = True
            tags.input_tags.categorical = True
            tags.input_tags.allow_nan = True
        return tags
