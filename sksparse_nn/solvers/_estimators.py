"""The scikit-learn estimators of the reference solvers: GroupLassoRegressor and
GroupLassoClassifier."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.special
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..groups import check_groups, resolve_group_weights
from ..utils.convergence import warn_convergence
from ..utils.validation import check_range, check_warm_start_targets, value_limit
from ._datafits import LeastSquares, Logistic, Multinomial
from ._penalties import GroupNorm
from ._routes import solve

# Docstring entries of both estimators, written once: a line ``<indent>$name`` of a
# docstring stands for the entry ``name`` at that indentation (see _fill_doc).
_SHARED_DOCS = {
    "groups": """\
groups : None, int, list of list of int or array-like of int, default=None
    Group structure: None (every feature alone), a group size ``k`` (consecutive
    groups), a list of feature-index lists (unlisted features are unpenalized) or a
    label per feature (``-1``: unpenalized). See ``check_groups``.
group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
    Weights ``rho_j``: 1, ``sqrt(group size)`` or explicit non-negative values
    (``0`` leaves a group unpenalized).""",
    "fitted_groups": """\
kkt_ : float
    Final relative KKT violation.
group_labels_ : ndarray of int of shape (n_features,)
    Resolved group of every feature, ``-1`` for unpenalized ones.
group_weights_ : ndarray of shape (n_groups,)
    Resolved weights ``rho``.
selected_groups_ : ndarray of int
    Groups with a non-zero coefficient; groups of weight 0 always count as selected.
selected_features_ : ndarray of int
    Sorted features of the selected groups, plus all unpenalized features.
n_features_in_ : int
feature_names_in_ : ndarray of str
    Only when ``X`` has string column names.""",
}


def _fill_doc(cls):
    """``cls`` with the ``$name`` lines of its docstring replaced by ``_SHARED_DOCS``."""
    lines = []
    for line in cls.__doc__.split("\n"):
        name = line.strip()[1:] if line.strip().startswith("$") else None
        if name in _SHARED_DOCS:
            indent = line[: len(line) - len(line.lstrip())]
            lines.extend(indent + entry for entry in _SHARED_DOCS[name].split("\n"))
        else:
            lines.append(line)
    cls.__doc__ = "\n".join(lines)
    return cls


def _validate_fit_data(estimator, X, y, **options):
    """``(warm, X, y)``: whether the fit starts from the previous ``coef_``, and the
    validated data (a warm start keeps the features: checked here)."""
    warm = estimator.warm_start and getattr(estimator, "coef_", None) is not None
    X, y = validate_data(
        estimator,
        X,
        y,
        accept_sparse=["csr", "csc"],
        dtype=np.float64,
        reset=not warm,
        **options,
    )
    return warm, X, y


def _solve(estimator, datafit, labels, rho, w0):
    """The estimator's problem, ``datafit`` with the group norm of its parameters,
    solved by the pair's fast solver (:func:`._routes.solve`); a ConvergenceWarning if
    it did not converge."""
    penalty = GroupNorm(
        datafit.row_labels(labels), rho, float(estimator.lam),
        datafit.positive_rows(getattr(estimator, "positive", False)),
    )  # fmt: skip
    result = solve(datafit, penalty, w0, tol=estimator.tol, max_iter=estimator.max_iter)
    if not result.converged:
        warn_convergence(
            f"{type(estimator).__name__} did not converge: relative KKT violation "
            f"{result.kkt:.3g} > tol after {result.n_iter} iterations; increase max_iter "
            f"(currently {estimator.max_iter}) or loosen tol (currently {estimator.tol}).",
            stacklevel=3,  # the caller of fit
        )
    return result


def _set_selection(estimator, labels, rho, sq):
    """Set the group attributes from ``sq``, each feature's squared coefficients (summed
    over classes); returns the group norms."""
    grouped = labels >= 0
    norms = np.sqrt(np.bincount(labels[grouped], weights=sq[grouped], minlength=rho.shape[0]))
    selected = (norms > 0) | (rho == 0)
    estimator.group_labels_ = labels
    estimator.group_weights_ = rho
    estimator.selected_groups_ = np.flatnonzero(selected)
    in_selected = np.zeros(labels.shape[0], dtype=bool)
    in_selected[grouped] = selected[labels[grouped]]
    estimator.selected_features_ = np.flatnonzero(~grouped | in_selected)
    return norms


@_fill_doc
class GroupLassoRegressor(RegressorMixin, BaseEstimator):
    r"""Group lasso for least-squares regression (exact reference solver).

    Solves

    .. math::

        \min_{w, b}\; \frac{1}{2n}\,\|y - Xw - b\mathbf{1}\|_2^2
            + \mathrm{lam} \sum_{j=1}^{J} \rho_j \|w_{G_j}\|_2

    (optionally with ``w >= 0``) by working sets, FISTA with adaptive restart and Newton
    steps on the support until the relative KKT violation of every group is below
    ``tol`` (see :mod:`sksparse_nn.solvers`). Whole groups of coefficients are exactly
    zero.
    With singleton groups and unit weights this is :class:`sklearn.linear_model.Lasso`
    with ``alpha=lam``.

    Parameters
    ----------
    lam : float, default=1.0
        Penalty level, ``>= 0``.
    $groups
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation.
    max_iter : int, default=10000
        Maximum number of iterations.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (as ``Lasso(positive=True)``).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Iterations of the last fit.
    $fitted_groups

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.solvers import GroupLassoRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((100, 6))
    >>> y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.standard_normal(100)
    >>> model = GroupLassoRegressor(lam=0.1, groups=[[0, 1], [2, 3], [4, 5]]).fit(X, y)
    >>> model.selected_groups_
    array([0])
    >>> model.coef_[2:]
    array([0., 0., 0., 0.])
    """

    _parameter_constraints: dict = {
        "lam": [Interval(Real, 0, None, closed="left")],
        "groups": [None, Interval(Integral, 1, None, closed="left"), "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "fit_intercept": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "positive": ["boolean"],
    }

    def __init__(
        self,
        lam=1.0,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        tol=1e-8,
        max_iter=10000,
        warm_start=False,
        positive=False,
    ):
        self.lam = lam
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.positive = positive

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (CSR/CSC sparse input is used without densifying).
        y : array-like of shape (n_samples,)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights, rescaled to sum to ``n_samples`` (the objective
            of :class:`sklearn.linear_model.Lasso` with ``sample_weight``): the loss is
            ``sum_i s_i (y_i - x_i w - b)^2 / (2 n)`` and the intercept comes from
            weighted means. Integer weights are the same as repeating rows.

        Returns
        -------
        self : GroupLassoRegressor
        """
        warm, X, y = _validate_fit_data(self, X, y, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)  # strings: "could not convert ... to float"
        limit = value_limit(np.float64, X.shape[0])
        check_range(X, limit, "X", "float64")
        check_range(y, limit, "y", "float64")
        n_features = X.shape[1]
        labels = check_groups(self.groups, n_features)
        rho = resolve_group_weights(self.group_weights, labels)
        w0 = self.coef_ if warm else None
        datafit = LeastSquares(X, y, self.fit_intercept, sample_weight)
        result = _solve(self, datafit, labels, rho, w0)
        coef = result.coef
        self.coef_ = coef
        self.intercept_ = float(result.intercept)
        self.n_iter_ = int(result.n_iter)
        self.kkt_ = float(result.kkt)
        _set_selection(self, labels, rho, coef**2)
        return self

    def predict(self, X):
        """Predict with the fitted linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        return np.asarray(safe_sparse_dot(X, self.coef_)).reshape(-1) + self.intercept_


@_fill_doc
class GroupLassoClassifier(ClassifierMixin, BaseEstimator):
    r"""Group-lasso logistic regression (exact reference solver).

    Solves

    .. math::

        \min_{W, b}\; \frac{1}{n} \sum_{i=1}^n \ell_i(X_i W + b)
            + \mathrm{lam} \sum_{j=1}^{J} \rho_j \|W_{G_j}\|_F

    with the logistic loss (two classes, one column of coefficients) or the softmax
    cross-entropy (``K >= 3`` classes, one column per class) by proximal Newton steps on
    working sets (two classes, dense ``X``) or FISTA with adaptive restart until the
    relative KKT violation is below ``tol`` (see :mod:`sksparse_nn.solvers` and
    :func:`~sksparse_nn.solvers.solve_group_logistic`). A group holds its features'
    coefficients for every class, so whole features (or groups of features) are exactly
    zero for all classes.
    With two classes, singleton groups and unit weights this is
    :class:`sklearn.linear_model.LogisticRegression` with an L1 penalty and
    ``C = 1 / (n_samples * lam)`` (unpenalized intercept).

    Parameters
    ----------
    lam : float, default=1.0
        Penalty level, ``>= 0``. Everything penalized is zero from
        ``lambda_max(X, Y, labels, rho, loss="log_loss")`` on; with standardized features
        and singleton groups it is at most ``1/2`` for two classes and below ``1`` for
        more, so useful values of ``lam`` are well below the default (kept for symmetry
        with the other estimators of the package).
    $groups
    fit_intercept : bool, default=True
        Fit unpenalized intercepts.
    tol : float, default=1e-8
        Tolerance on the relative KKT violation.
    max_iter : int, default=10000
        Maximum number of iterations.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting (same features and classes).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        One row for two classes (the scores of ``classes_[1]``), one row per class
        otherwise, as in :class:`sklearn.linear_model.LogisticRegression`.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Multiclass intercepts sum to zero.
    group_norms_ : ndarray of shape (n_groups,)
        Norm of every group's coefficients over all classes (what is penalized).
    n_iter_ : int
        Iterations of the last fit.
    objective_ : float
        Penalized objective at the solution (mean log-loss plus penalty).
    $fitted_groups

    See Also
    --------
    GroupLassoRegressor : the same penalty with the squared loss.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.solvers import GroupLassoClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.standard_normal((200, 6))
    >>> y = (X[:, 0] - 2 * X[:, 1] + 0.5 * rng.standard_normal(200) > 0).astype(int)
    >>> model = GroupLassoClassifier(lam=0.05, groups=[[0, 1], [2, 3], [4, 5]]).fit(X, y)
    >>> model.selected_groups_
    array([0])
    >>> model.coef_.round(2)
    array([[ 1.24, -2.4 ,  0.  ,  0.  ,  0.  ,  0.  ]])
    >>> model.predict_proba(X[:2]).round(3)
    array([[0.21 , 0.79 ],
           [0.162, 0.838]])
    """

    _parameter_constraints: dict = {
        k: v for k, v in GroupLassoRegressor._parameter_constraints.items() if k != "positive"
    }

    def __init__(
        self,
        lam=1.0,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        tol=1e-8,
        max_iter=10000,
        warm_start=False,
    ):
        self.lam = lam
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (CSR/CSC sparse input is used without densifying).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights, rescaled to sum to ``n_samples``: the loss is
            the weighted mean of the log-losses (integer weights are the same as
            repeating rows).

        Returns
        -------
        self : GroupLassoClassifier
        """
        warm, X, y = _validate_fit_data(self, X, y)
        check_classification_targets(y)
        if warm:  # before anything changes: a refused fit keeps the fitted model
            check_warm_start_targets(self, y, classifier=True)
        check_range(X, value_limit(np.float64, X.shape[0]), "X", "float64")
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"The training data contain only one class ({classes[0]!r}); "
                f"{type(self).__name__} needs at least two classes."
            )
        n_features, n_classes = X.shape[1], classes.size
        labels = check_groups(self.groups, n_features)
        rho = resolve_group_weights(self.group_weights, labels)
        w0 = None
        if warm:
            w0 = self.coef_[0] if n_classes == 2 else self.coef_.T
        if n_classes == 2:
            datafit = Logistic(X, codes, self.fit_intercept, sample_weight)
        else:
            datafit = Multinomial(X, codes, n_classes, self.fit_intercept, sample_weight)
        result = _solve(self, datafit, labels, rho, w0)
        coef = result.coef.reshape(n_features, -1).T  # (1, p) or (K, p)
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(coef)
        self.intercept_ = np.atleast_1d(np.asarray(result.intercept, dtype=np.float64))
        self.n_iter_ = int(result.n_iter)
        self.objective_ = float(result.objective)
        self.kkt_ = float(result.kkt)
        self.group_norms_ = _set_selection(self, labels, rho, np.einsum("kj,kj->j", coef, coef))
        return self

    def decision_function(self, X):
        """Scores of the linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Two classes: the score of ``classes_[1]`` (positive: predicted). Otherwise one
            score per class.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        scores = np.asarray(safe_sparse_dot(X, self.coef_.T)) + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X):
        """Class probabilities (``expit`` / ``softmax`` of the scores, without overflow).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([scipy.special.expit(-scores), scipy.special.expit(scores)])
        return scipy.special.softmax(scores, axis=1)

    def predict_log_proba(self, X):
        """Logarithms of the class probabilities, computed directly (no ``log(0)``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            log_expit = scipy.special.log_expit
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return scipy.special.log_softmax(scores, axis=1)

    def predict(self, X):
        """Predict class labels (the class of largest score).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        index = (scores > 0).astype(np.intp) if scores.ndim == 1 else np.argmax(scores, axis=1)
        return self.classes_[index]
