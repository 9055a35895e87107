"""Stability selection with complementary pairs of half-samples:
:class:`StabilitySelection`."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import clone, is_classifier
from sklearn.utils import check_random_state, indexable
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..compose import VariableModel
from ..path import lambda_grid
from ._base import (
    PathSelectorMixin,
    check_family,
    check_family_fit_params,
    check_units,
    dense_labels,
    n_units_of,
    numeric_columns,
    top_lam,
)
from ._bound import choose_region, region_sizes
from ._knockoff_sampling import correlation_clusters, estimate_correlation
from ._subsamples import complementary_pairs, half_paths

__all__ = ["StabilitySelection"]

#: How far above the full data's lambda_max the default grid goes: a non-convex fit
#: (D > 2) can keep groups beyond lambda_max, and points past a half's empty model cost
#: nothing (the path carries the empty model without a fit).
GRID_HEADROOM = 4.0
#: ``groups="clusters"`` clusters at most this many columns (a dense ``p x p``
#: correlation matrix and an average-linkage tree of it); wider X keeps its columns.
MAX_CLUSTER_COLUMNS = 5000


class StabilitySelection(PathSelectorMixin):
    """Select the units a family keeps on most half-samples, with a bound on the expected
    number of false selections.

    Complementary-pairs stability selection: for each of ``n_pairs`` pairs the rows are
    split into two disjoint halves (stratified by class for classifiers), and the
    estimator's warm-started regularization path (no CV) runs on each half over one
    common lam grid. The *selection probability* of a unit at a lam is the fraction of
    the ``2 n_pairs`` half-sample paths that keep it there (``stability_scores_``). A
    unit is selected when its probability reaches ``threshold_`` at some lam of a region
    ``[lam_region_[0], lam_region_[1]]`` at the sparse end of the grid.

    Units are groups of what the estimator's path selects (input features for the
    families; for NODE, the features its surviving trees read): by default clusters of
    correlated columns, as the knockoff filter's, or the user's ``groups``; a group
    counts as selected on a half when any of its members is. For a
    :class:`~sksparse_nn.compose.VariableModel` the units are its variables (the
    table's columns).

    **The bound.** Let ``q`` be the mean number of units a half-sample path selects at
    some lam of the region, ``p`` the number of units and ``pi`` the threshold. The
    complementary-pairs bound of Shah and Samworth (2013, their Theorem 1 with
    ``theta = q / p``) holds without assumptions on the data or the selection procedure:
    the expected number of selected units whose selection probability on a half-sample
    is at most ``q / p`` (units selected no more often than an average unit: the noise)
    is at most ``q**2 / ((2 pi - 1) p)`` for any ``pi`` in ``(1/2, 1]``. This is the
    bound of Meinshausen and Buhlmann (2010) on the number of false selections, there
    under exchangeability of the noise units and a selection no worse than random
    guessing; without those assumptions it bounds the low-probability units.
    ``expected_false_selections_`` is its value at the chosen region and threshold. The
    guarantee is on the expected number of false selections, not on the false discovery
    rate. The region and threshold are chosen from ``q``, which depends on the data (as
    in both papers' practice): the bound holds exactly for a region and threshold fixed
    in advance.

    Parameters
    ----------
    estimator : estimator
        A sparse estimator of this package (``lam`` and ``warm_start``: the linear
        models, the MLP, the NAM, NODE, the general network) or a
        :class:`~sksparse_nn.compose.VariableModel` of one. Cloned; its own settings
        (``D``, ``max_epochs``, ...) are those of every half-sample fit.
    groups : array-like of shape (n_features,), "clusters" or None, default="clusters"
        One label per column of ``X`` (per variable for a VariableModel): the columns
        of a label form one unit, selected on a half-sample when any of them is, and
        the bound counts units. ``"clusters"`` (the default, the knockoff filter's
        units): clusters of correlated columns (see ``cluster_threshold``); columns
        correlated with no other stay units of their own, so on uncorrelated data the
        units are the columns. Where columns are nearly collinear (breast cancer's
        radius, perimeter and area), a non-convex fit (``D > 2``) keeps one member per
        fit and the halves pick different ones, so no member alone reaches the
        threshold while the block does: on breast cancer with 30 noise columns the
        default linear model keeps 12-15 real columns and no noise column with
        clusters, 2 without. For a VariableModel the units are its variables (as for
        the knockoff filter); for sparse ``X`` or more than ``MAX_CLUSTER_COLUMNS``
        (5000) columns, the columns (the clusters need the dense ``p x p``
        correlation matrix). ``None``: every column is a unit (the estimator's own
        selection).
    cluster_threshold : float in (0, 1], default=0.7
        With ``groups="clusters"``: columns whose average absolute correlation reaches
        this value form one unit (average-linkage clustering on ``1 - |corr|`` of the
        Ledoit-Wolf correlation, the knockoff filter's default: at 0.7 a column
        explains about half the variance of its partners). 1 keeps every column alone.
    n_pairs : int >= 1, default=20
        Pairs of complementary half-samples (``2 n_pairs`` paths). The selection
        probabilities are multiples of ``1 / (2 n_pairs)``. 20 keeps the default's cost
        of the MLP at about six times a default 5-fold ``SparsePathCV`` of the same data
        (a half-sample path of a network costs about a full one: its training budget
        counts steps, not rows); Shah and Samworth use 50, which gives smoother
        probabilities at 2.5 times the cost.
    threshold : float in (0.5, 1], default=None
        Selection probability a unit must reach. ``None``: chosen from
        ``max_false_selections``. Given: the region is the widest whose bound at this
        threshold stays at most one false selection. Not together with
        ``max_false_selections``.
    max_false_selections : float > 0, default=None
        The bound on the expected number of false selections to keep (``None`` means
        1, one false unit in expectation, unless ``threshold`` is given). The region is
        the widest (from the sparse end of the grid down) whose ``q`` keeps the bound
        within it at threshold 0.9, and ``threshold_`` the smallest that keeps it there
        (at least 0.6: the bound allows any value above 1/2, but near 1/2 a unit is a
        coin flip between the halves of a pair).
    lams : array-like of float, default=None
        The common grid (positive; sorted). ``None``: ``n_lams`` log-spaced values from
        ``lam_min_ratio * lam_max`` to ``lam_max`` (the estimator's ``lambda_max`` on all
        of ``X``), extended with the same ratio up to ``4 lam_max``, as a non-convex fit
        (D > 2) can keep groups beyond ``lam_max`` (a warning says when a half's path
        still selects something at the top of the grid).
    n_lams : int >= 2, default=10
        Points from ``lam_min_ratio * lam_max`` to ``lam_max``. Stability selection reads
        the sparse end of the path, where a half-sample path keeps a handful of units, so
        a short grid over one decade suffices and keeps the cost of ``2 n_pairs`` paths
        down.
    lam_min_ratio : float in (0, 1), default=0.1
        The grid's dense end relative to ``lam_max`` (see ``n_lams``); lower it when
        ``lam_region_`` starts at the grid's first point (the region could be wider).
    n_jobs : int, default=None
        Half-sample paths run in parallel (joblib; ``-1`` all cores), so
        ``joblib.parallel_config(backend="dask")`` spreads them over a Dask cluster.
        Each of the ``n_jobs`` processes uses ``cpu_count // n_jobs`` torch threads.
    random_state : int, RandomState or None, default=None
        Draws the pairs of half-samples (the estimator's own ``random_state`` seeds
        its fits).
    verbose : int, default=0
        joblib's progress messages.

    Attributes
    ----------
    support_ : ndarray of bool of shape (n_features,)
        The selected columns (all columns of the selected units).
    selected_features_ : ndarray of int
        Their indices.
    groups_ : ndarray of int of shape (n_features,)
        The unit of every column (``0 .. n_units_ - 1``; the column itself with
        ``groups=None``).
    n_units_ : int
        Number of units.
    selected_units_ : ndarray of int
        The selected units.
    stability_scores_ : ndarray of shape (n_units, n_lams)
        Selection probability of every unit at every lam of ``lams_`` (``n_units``:
        ``n_units_``).
    lams_ : ndarray of shape (n_lams,)
        The common grid (ascending).
    threshold_ : float
        The selection probability used.
    expected_false_selections_ : float
        The bound ``q**2 / ((2 threshold_ - 1) n_units_)`` at the chosen region.
    max_false_selections_ : float
        The bound the region was chosen to keep (1 when ``threshold`` was given).
    lam_region_ : tuple of float or None
        The region's smallest and largest lam; None when even the sparsest lam of the
        grid exceeds the bound (then nothing is selected, with a warning).
    n_selected_per_half_ : float
        ``q``: the mean number of units a half-sample path selects over the region.
    region_sizes_ : ndarray of shape (n_lams,)
        ``q`` of every candidate region ``lams_[j:]`` (non-increasing in ``j``).
    pairs_ : list of tuple of ndarray
        The row indices ``(A, B)`` of every pair of halves (disjoint; together all rows).
    n_features_in_ : int
        Number of columns of ``X`` (units: features, or a VariableModel's variables).
    feature_names_in_ : ndarray of str
        Only when ``X`` is a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.selection import StabilitySelection
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 10)
    >>> y = X[:, 0] - 2 * X[:, 1] + 0.5 * rng.randn(200)
    >>> sel = StabilitySelection(SparseLinearRegressor(), n_pairs=5, random_state=0)
    >>> sel.fit(X, y).selected_features_.tolist()
    [0, 1]
    """

    _parameter_constraints: dict = {
        "estimator": [object],
        "groups": ["array-like", StrOptions({"clusters"}), None],
        "cluster_threshold": [Interval(Real, 0, 1, closed="right")],
        "n_pairs": [Interval(Integral, 1, None, closed="left")],
        "threshold": [Interval(Real, 0.5, 1, closed="right"), None],
        "max_false_selections": [Interval(Real, 0, None, closed="neither"), None],
        "lams": ["array-like", None],
        "n_lams": [Interval(Integral, 2, None, closed="left")],
        "lam_min_ratio": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator,
        *,
        groups="clusters",
        cluster_threshold=0.7,
        n_pairs=20,
        threshold=None,
        max_false_selections=None,
        lams=None,
        n_lams=10,
        lam_min_ratio=0.1,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.groups = groups
        self.cluster_threshold = cluster_threshold
        self.n_pairs = n_pairs
        self.threshold = threshold
        self.max_false_selections = max_false_selections
        self.lams = lams
        self.n_lams = n_lams
        self.lam_min_ratio = lam_min_ratio
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _check_params(self):
        self._validate_params()
        if self.threshold is not None and self.max_false_selections is not None:
            raise ValueError(
                "Give threshold or max_false_selections, not both: each one fixes the "
                f"other (got threshold={self.threshold}, max_false_selections="
                f"{self.max_false_selections})."
            )
        check_family(self.estimator, type(self).__name__)

    def _grid(self, estimator, X, y, sample_weight=None):
        if self.lams is not None:
            lams = np.sort(np.asarray(self.lams, dtype=float).ravel())
            if lams.size < 1 or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
                raise ValueError(f"lams must be finite and > 0, got {self.lams!r}.")
            return lams
        lam_max = top_lam(estimator, X, y, sample_weight)
        grid = lambda_grid(lam_max, self.n_lams, self.lam_min_ratio)
        ratio = grid[-1] / grid[-2]
        above = lam_max * ratio ** np.arange(1, 1 + np.ceil(np.log(GRID_HEADROOM) / np.log(ratio)))
        return np.concatenate([grid, above])

    def fit(self, X, y=None, **fit_params):
        """Run the half-sample paths and select the stable units.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        **fit_params : dict
            Passed to every fit of the estimator, e.g. ``sample_weight`` (the linear
            models take it; a family whose ``fit`` does not take a keyword raises a
            TypeError naming it, before any work). A per-row value (one entry per row
            of ``X``) is taken on each half's rows; the halves themselves are drawn
            from the rows, not from the weights, and the default grid's ``lam_max``
            is that of the weighted problem.

        Returns
        -------
        self : StabilitySelection
        """
        self._check_params()
        estimator = clone(self.estimator)
        X, y = indexable(X, y)
        fit_params = check_family_fit_params(estimator, fit_params, X, type(self).__name__)
        self._record_input(X)
        n_samples, n_units = len(X) if not hasattr(X, "shape") else X.shape[0], n_units_of(X)
        if n_samples < 4:
            raise ValueError(f"StabilitySelection needs at least 4 rows, got {n_samples}.")
        units = self._units(X, n_units)  # before any fit: a bad groups fails at once
        lams = self._grid(estimator, X, y, fit_params.get("sample_weight"))
        rng = check_random_state(self.random_state)
        classes = None
        if is_classifier(estimator) and y is not None and np.ndim(y) == 1:
            classes = np.asarray(y)
        self.pairs_ = complementary_pairs(n_samples, self.n_pairs, rng, classes)
        results = half_paths(
            estimator, X, y, self.pairs_, lams, n_units, self.n_jobs, self.verbose, fit_params
        )
        self._report(results)
        halves = np.stack([r["selected"] for r in results])  # (2B, n_lams, n_columns)
        halves = _by_unit(halves, units)  # (2B, n_lams, n_units)
        n_units = halves.shape[2]
        self.groups_, self.n_units_ = units, n_units
        self.lams_ = lams
        self.stability_scores_ = halves.mean(axis=0).T
        q = region_sizes(halves)
        self.region_sizes_ = q
        start, self.threshold_, bound, self.max_false_selections_ = choose_region(
            q, n_units, self.threshold, self.max_false_selections
        )
        self.expected_false_selections_ = bound
        if start is None:
            warnings.warn(
                f"StabilitySelection: even at the largest lam ({lams[-1]:.3g}) the "
                f"half-sample paths select {q[-1]:.3g} units on average, too many for the "
                f"bound of {self.max_false_selections_:g} false selections: nothing is "
                "selected. Pass a grid reaching larger lams.",
                stacklevel=2,
            )
            self.lam_region_ = None
            self.n_selected_per_half_ = float(q[-1])
            chosen = np.zeros(n_units, dtype=bool)
        else:
            self.lam_region_ = (float(lams[start]), float(lams[-1]))
            self.n_selected_per_half_ = float(q[start])
            best = self.stability_scores_[:, start:].max(axis=1)
            chosen = best >= self.threshold_ - 1e-12
        self.selected_units_ = np.flatnonzero(chosen)
        self.support_ = np.isin(units, self.selected_units_)
        self.selected_features_ = np.flatnonzero(self.support_)
        return self

    def _units(self, X, n_columns):
        """The unit of every column: dense labels of ``groups``, correlation clusters,
        or the columns themselves."""
        if self.groups is None:
            return np.arange(n_columns)
        if isinstance(self.groups, str):  # "clusters"
            if isinstance(self.estimator, VariableModel):  # its variables are the units
                return np.arange(n_columns)
            if sparse.issparse(X) or n_columns > MAX_CLUSTER_COLUMNS:
                return np.arange(n_columns)
            Xn = numeric_columns(
                X,
                'groups="clusters" needs numeric X (correlations of its columns); pass '
                "groups= one label per column, groups=None (every column a unit), or a "
                "VariableModel for a table.",
            )
            return correlation_clusters(estimate_correlation(Xn)[2], self.cluster_threshold)
        return dense_labels(self.groups, n_columns)

    def _report(self, results):
        """One warning for what the half-sample paths said (not one per path)."""
        check_units(_Unit(results[0]["unit"]), type(self).__name__)
        n = len(results)
        top = sum(bool(r["selected"][-1].any()) for r in results)
        if top:
            warnings.warn(
                f"StabilitySelection: {top} of {n} half-sample paths still select units "
                "at the largest lam of the grid; the probabilities there are not 0. Pass "
                "lams reaching further if the region starts there.",
                stacklevel=3,
            )
        short = sum(r["short"] for r in results)
        if short:
            warnings.warn(
                f"StabilitySelection: {short} of {n} half-sample paths stopped early (a "
                "diverged point); they select nothing beyond it.",
                stacklevel=3,
            )
        said = sorted({m for r in results for m in r["messages"]})
        if said:
            count = sum(bool(r["messages"]) for r in results)
            warnings.warn(
                f"StabilitySelection: {count} of {n} half-sample paths warned, e.g.: {said[0]}",
                stacklevel=3,
            )

    def plot_stability_path(self, ax=None):
        """Plot the selection probability of every unit against lam, the threshold and
        the region, with the selected units highlighted (needs matplotlib).

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Created when not given.

        Returns
        -------
        ax : matplotlib Axes
        """
        from ..plotting import plot_stability_path

        check_is_fitted(self, "support_")
        return plot_stability_path(self, ax=ax)


def _by_unit(halves, units):
    """Selections per unit: a unit is selected where any of its columns is."""
    n_units = int(units.max()) + 1 if units.size else 0
    if n_units == units.size and np.array_equal(units, np.arange(units.size)):
        return halves
    out = np.zeros(halves.shape[:2] + (n_units,), dtype=bool)
    for u in range(n_units):
        out[..., u] = halves[..., units == u].any(axis=-1)
    return out


class _Unit:
    """The selection unit of a half-sample path, as :func:`check_units` reads it."""

    def __init__(self, unit):
        self.selection_unit = unit
