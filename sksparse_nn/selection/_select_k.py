"""Exactly ``k`` units from a regularization path: :class:`SelectFromPath`."""

from __future__ import annotations

import copy
from numbers import Integral, Real

import numpy as np
from sklearn import config_context
from sklearn.base import clone
from sklearn.utils import _safe_indexing, indexable
from sklearn.utils._param_validation import Interval

from ._base import (
    PathSelectorMixin,
    check_family,
    check_family_fit_params,
    check_units,
    lam_param,
    n_units_of,
    run_family_path,
    selection_matrix,
    takes_lam,
)

__all__ = ["SelectFromPath"]


class SelectFromPath(PathSelectorMixin):
    """Select exactly ``n_features_to_select`` units from the estimator's path.

    The estimator's warm-started regularization path is fitted on all of ``X``; the
    sparsest point that keeps exactly ``k`` units is taken. Where no point of the grid
    keeps exactly ``k`` (a path can step from ``k + 2`` to ``k - 1``), lam is bisected
    (on a log scale) between the two points that bracket ``k``: each new fit starts from
    the denser bracket's model (warm start, as along the path), at most
    ``max_bisections`` times. If still no fit keeps exactly ``k`` (units that leave the
    model together, e.g. the features of one group), the ``k`` units of the denser
    bracket with the largest importances (``feature_importances_``: the norms of their
    weights) are kept, and ``tie_broken_`` says so.

    Units are what the path selects: input features for the families (NODE: the
    features of its surviving trees), variables for a
    :class:`~sksparse_nn.compose.VariableModel` (whose bisection fits run as two-point
    paths from the denser bracket's lam, as its encoding is refitted each time).

    Parameters
    ----------
    estimator : estimator
        A sparse estimator of this package (``lam`` and ``warm_start``) or a
        :class:`~sksparse_nn.compose.VariableModel` of one; cloned.
    n_features_to_select : int >= 1, default=5
        ``k``, the number of units to keep; at most the number of units of ``X``.
        5: a short list a reader can inspect; there is no data-free right answer.
    refit : bool, default=False
        Also fit ``estimator`` on the ``k`` selected columns at ``lam = 0`` (no penalty:
        the selection is made, and a penalty would only shrink the kept weights, the
        bias a refit removes) and keep it as ``estimator_``. False, since a selector in
        a Pipeline passes the columns on to the next step anyway. A linear model with
        ``groups`` labels gets the kept columns' labels.
    lams, n_lams, lam_min_ratio : default=None
        The path's grid, as in :func:`~sksparse_nn.regularization_path` (``None``: the
        estimator's default grid, which extends to the empty model).
    max_bisections : int >= 0, default=8
        Most fits of the bisection. Eight halvings shrink the bracket's log-width 256
        times: between two neighbouring points of a default grid, a lam step of about
        3 percent, finer than where a fit's selection settles.

    Attributes
    ----------
    support_ : ndarray of bool of shape (n_features,)
        Exactly ``n_features_to_select`` True values.
    selected_features_ : ndarray of int
        Their indices.
    lam_ : float
        The lam of the fit the selection comes from (the denser bracket when ties were
        broken).
    tie_broken_ : bool
        Whether no fit kept exactly ``k`` and the importances at ``lam_`` chose them.
    bisections_ : list of tuple
        ``(lam, number selected)`` of every bisection fit, in order.
    path_ : RegularizationPath
        The path on all of ``X``.
    estimator_ : estimator
        With ``refit=True``: the estimator fitted on the selected columns.
    n_features_in_ : int
        Number of columns of ``X`` (units: features, or a VariableModel's variables).
    feature_names_in_ : ndarray of str
        Only when ``X`` is a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.selection import SelectFromPath
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(100, 8)
    >>> y = X @ np.array([3.0, -2.0, 1.0, 0, 0, 0, 0, 0]) + 0.1 * rng.randn(100)
    >>> sel = SelectFromPath(SparseLinearRegressor(), n_features_to_select=2).fit(X, y)
    >>> sel.selected_features_.tolist()
    [0, 1]
    """

    _parameter_constraints: dict = {
        "estimator": [object],
        "n_features_to_select": [Interval(Integral, 1, None, closed="left")],
        "refit": ["boolean"],
        "lams": ["array-like", None],
        "n_lams": [Interval(Integral, 1, None, closed="left"), None],
        "lam_min_ratio": [Interval(Real, 0, 1, closed="right"), None],
        "max_bisections": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        estimator,
        *,
        n_features_to_select=5,
        refit=False,
        lams=None,
        n_lams=None,
        lam_min_ratio=None,
        max_bisections=8,
    ):
        self.estimator = estimator
        self.n_features_to_select = n_features_to_select
        self.refit = refit
        self.lams = lams
        self.n_lams = n_lams
        self.lam_min_ratio = lam_min_ratio
        self.max_bisections = max_bisections

    def fit(self, X, y=None, **fit_params):
        """Fit the path, bisect where needed, keep exactly ``n_features_to_select``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        **fit_params : dict
            Passed to every fit of the estimator (the path's, the bisection's and the
            refit), e.g. ``sample_weight`` (the linear models take it; a family whose
            ``fit`` does not take a keyword raises a TypeError naming it, before any
            work).

        Returns
        -------
        self : SelectFromPath
        """
        self._validate_params()
        owner = type(self).__name__
        check_family(self.estimator, owner)
        X, y = indexable(X, y)
        fit_params = check_family_fit_params(self.estimator, fit_params, X, owner)
        self._record_input(X)
        n_units, k = n_units_of(X), self.n_features_to_select
        if k > n_units:
            raise ValueError(
                f"{owner}: n_features_to_select={k} is more than the {n_units} units of X."
            )
        estimator = clone(self.estimator)
        warm = takes_lam(estimator)
        path = run_family_path(
            estimator, X, y, lams=self.lams, n_lams=self.n_lams,
            lam_min_ratio=self.lam_min_ratio, keep_estimators=warm, fit_params=fit_params,
        )  # fmt: skip
        check_units(path, owner)
        self.path_ = path
        self.bisections_ = []
        chosen, self.lam_, self.tie_broken_ = self._choose(
            estimator, path, X, y, n_units, k, fit_params
        )
        self.support_ = np.zeros(n_units, dtype=bool)
        self.support_[chosen] = True
        self.selected_features_ = np.flatnonzero(self.support_)
        if self.refit:
            self.estimator_ = _refit(estimator, X, y, self.selected_features_, fit_params)
        return self

    # ------------------------------------------------------------------ the choice
    def _choose(self, estimator, path, X, y, n_units, k, fit_params):
        """(selected units, lam, tie broken)."""
        counts = np.array([np.asarray(s).size for s in path.selected])
        exact = np.flatnonzero(counts == k)
        if exact.size:  # the sparsest point with exactly k
            i = int(exact[-1])
            return np.asarray(path.selected[i], dtype=np.intp), float(path.lams[i]), False
        denser = np.flatnonzero(counts > k)
        if not denser.size:
            raise ValueError(
                f"{type(self).__name__}: the densest point of the path (lam="
                f"{path.lams[0]:.3g}) keeps {counts[0]} units, fewer than "
                f"n_features_to_select={k}: pass a lower lam_min_ratio (or lams)."
            )
        lo = int(denser[-1])  # the sparsest point with more than k
        lo_lam, lo_sel = float(path.lams[lo]), np.asarray(path.selected[lo], dtype=np.intp)
        lo_importance = _importances(path, lo, n_units)
        # the kept model of each point (a path cut short by a diverged point keeps fewer)
        kept = len(path.estimators) == len(path.lams)
        lo_model = path.estimators[lo] if kept else None
        if lo + 1 < len(path.lams):  # the next point keeps fewer than k: bisect
            hi_lam = float(path.lams[lo + 1])
            for _ in range(self.max_bisections):
                mid = float(np.sqrt(lo_lam * hi_lam))
                sel, importance, model = _fit_at(
                    estimator, lo_model, lo_lam, mid, X, y, n_units, fit_params
                )
                self.bisections_.append((mid, int(sel.size)))
                if sel.size == k:
                    return sel, mid, False
                if sel.size > k:
                    lo_lam, lo_sel, lo_importance, lo_model = mid, sel, importance, model
                else:
                    hi_lam = mid
        # ties: the k units of the denser bracket with the largest importances
        ranked = lo_sel[np.argsort(-lo_importance[lo_sel], kind="stable")]
        return np.sort(ranked[:k]), lo_lam, True


def _importances(path, i, n_units):
    """Per-unit importances of point ``i`` (zeros when the path has none)."""
    if path.importances is None or np.ndim(path.importances) != 2:
        return np.zeros(n_units)
    row = np.nan_to_num(np.asarray(path.importances[i], dtype=float))
    return row if row.size == n_units else np.zeros(n_units)


def _fit_at(estimator, lo_model, lo_lam, lam, X, y, n_units, fit_params):
    """(selected units, importances, fitted model or None) at ``lam``: a warm start from
    the denser bracket's model, or (a composite such as VariableModel) a two-point path
    from the denser bracket's lam."""
    if lo_model is not None:
        model = copy.deepcopy(lo_model).set_params(lam=lam, warm_start=True)
        with config_context(skip_parameter_validation=True):
            model.fit(X, y, **fit_params)
        importance = np.asarray(getattr(model, "feature_importances_", np.zeros(n_units)))
        return np.asarray(model.selected_features_, dtype=np.intp), importance, model
    path = run_family_path(estimator, X, y, lams=[lo_lam, lam], fit_params=fit_params)
    selected = selection_matrix(path, n_units)[-1]
    return np.flatnonzero(selected), _importances(path, len(path.lams) - 1, n_units), None


def _refit(estimator, X, y, columns, fit_params):
    """``estimator`` fitted at lam = 0 on the selected ``columns`` of X."""
    model = clone(estimator)
    name = lam_param(model)
    if name is None:
        raise TypeError(f"refit=True: {type(model).__name__} has no lam to set to 0.")
    params = {name: 0.0}
    groups = model.get_params(deep=False).get("groups")
    if groups is not None and not isinstance(groups, Integral):
        params["groups"] = np.asarray(groups)[columns]
    elif isinstance(groups, Integral) and groups != 1:
        raise ValueError(
            f"refit=True cannot carry groups={groups} (consecutive blocks) over to the "
            f"{len(columns)} kept columns: pass groups as one label per column."
        )
    return model.set_params(**params).fit(_safe_indexing(X, columns, axis=1), y, **fit_params)
