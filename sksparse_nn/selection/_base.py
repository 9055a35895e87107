"""What the selectors share: the scikit-learn selector plumbing, how a family's path is
run and its units counted, and the path's selections as a boolean matrix.

A *unit* is what a path's ``selected`` lists: an input feature for the families (NODE
included: the features its surviving trees read), a variable (a column of the user's
table) for a :class:`~sksparse_nn.compose.VariableModel`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from ..path import regularization_path, weighted_lambda_max
from ..utils.validation import check_fit_params

__all__ = [
    "PathSelectorMixin",
    "check_family",
    "check_family_fit_params",
    "check_units",
    "dense_labels",
    "n_units_of",
    "numeric_columns",
    "lam_param",
    "run_family_path",
    "selection_matrix",
    "takes_lam",
    "top_lam",
]


def takes_lam(estimator):
    """Whether ``estimator`` is a family itself (``lam`` and ``warm_start`` parameters),
    which :func:`~sksparse_nn.regularization_path` fits directly."""
    params = estimator.get_params(deep=False)
    return "lam" in params and "warm_start" in params


def lam_param(estimator):
    """The name under which ``estimator`` takes ``lam`` (directly or one level down, as a
    VariableModel's estimator does), or None."""
    params = estimator.get_params(deep=True)
    for name in ("lam", "estimator__lam"):
        if name in params:
            return name
    return None


def check_family(estimator, owner):
    """A clear error for an estimator without a path (neither a family nor an estimator
    with ``regularization_path``)."""
    if takes_lam(estimator) or hasattr(estimator, "regularization_path"):
        return
    raise TypeError(
        f"{owner}: estimator must be a sparse estimator of this package (with lam and "
        "warm_start, e.g. DGatedMLPClassifier) or a VariableModel of one; got "
        f"{type(estimator).__name__}."
    )


def check_family_fit_params(estimator, fit_params, X, owner):
    """``fit_params`` checked against the family that is fitted (a VariableModel's
    estimator: its own ``fit`` passes keywords on), before any work: a TypeError names a
    keyword the family's ``fit`` does not take (e.g. ``sample_weight`` for a network)."""
    family = estimator
    if not takes_lam(estimator) and "estimator" in estimator.get_params(deep=False):
        family = estimator.get_params(deep=False)["estimator"]
    return check_fit_params(family, fit_params, X, owner)


def check_units(path, owner):
    """A path that selects components (the autoencoder) has nothing to select from X."""
    if path.selection_unit == "components":
        raise TypeError(
            f"{owner}: the estimator selects components of a representation, not input "
            "features or variables: there is nothing to select from X."
        )


def run_family_path(estimator, X, y, **kwargs):
    """The regularization path of ``estimator`` on (X, y): the family's own through
    :func:`~sksparse_nn.regularization_path`, or ``estimator.regularization_path`` for a
    composite (VariableModel, which counts variables)."""
    if takes_lam(estimator):
        return regularization_path(estimator, X, y, **kwargs)
    return estimator.regularization_path(X, y, **kwargs)


def top_lam(estimator, X, y, sample_weight=None):
    """``lambda_max`` of ``estimator`` on (X, y) (with ``sample_weight`` where its
    ``lambda_max`` takes it): the top of a default grid."""
    if not hasattr(estimator, "lambda_max"):
        raise TypeError(
            f"{type(estimator).__name__} has no lambda_max(X, y) to place a default lam "
            "grid: pass lams."
        )
    return float(weighted_lambda_max(estimator, X, y, sample_weight))


def selection_matrix(path, n_units, lams=None):
    """The path's selections as a boolean matrix of shape (len(lams), n_units): row ``i``
    marks the units selected at ``lams[i]`` (default: the path's own lams). A lam the
    path did not reach (it stopped at a diverged point, or was interrupted) selects
    nothing."""
    lams = np.asarray(path.lams if lams is None else lams, dtype=float)
    out = np.zeros((len(lams), n_units), dtype=bool)
    where = {float(lam): i for i, lam in enumerate(lams)}
    for lam, chosen in zip(path.lams, path.selected, strict=True):
        row = where.get(float(lam))
        if row is None:
            continue
        chosen = np.asarray(chosen, dtype=np.intp)
        if chosen.size and (chosen.max() >= n_units or chosen.min() < 0):
            raise ValueError(
                f"The path selects unit {int(chosen.max())}, beyond the {n_units} units of X."
            )
        out[row, chosen] = True
    return out


def n_units_of(X):
    """How many units X has: its columns (a VariableModel's variables are its table's
    columns)."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        X = np.asarray(X, dtype=object)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}.")
        shape = X.shape
    return int(shape[1])


def numeric_columns(X, message):
    """``X`` as a 2-D float64 array of finite values; a non-numeric ``X`` raises a
    ValueError with ``message`` (who needs numbers and how to get there)."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be 2-D with at least 2 rows and 1 column, got {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values; impute or drop them first.")
    return X


def dense_labels(groups, n_units):
    """Labels ``0..G-1`` (in sorted label order) of ``groups``, one label per unit."""
    groups = np.asarray(groups)
    if groups.shape != (n_units,):
        raise ValueError(
            f"groups must hold one label per unit of X ({n_units}), got shape {groups.shape}."
        )
    return np.unique(groups, return_inverse=True)[1].astype(np.intp)


class PathSelectorMixin(SelectorMixin, MetaEstimatorMixin, BaseEstimator):
    """scikit-learn selector plumbing of the selection room: ``support_`` is the mask
    over X's columns; ``transform`` keeps them (a DataFrame stays a DataFrame, so raw
    tables of a VariableModel pass), ``get_feature_names_out`` and ``set_output`` come
    from :class:`~sklearn.feature_selection.SelectorMixin`."""

    def _record_input(self, X):
        """``n_features_in_`` and, for a DataFrame, ``feature_names_in_``."""
        self.n_features_in_ = n_units_of(X)
        columns = getattr(X, "columns", None)
        if columns is not None and all(isinstance(c, str) for c in columns):
            self.feature_names_in_ = np.asarray(columns, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def transform(self, X):
        """The selected columns of ``X`` (a DataFrame keeps its columns' types).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        X_selected : array-like of shape (n_samples, n_selected)
        """
        check_is_fitted(self, "support_")
        if hasattr(X, "iloc"):
            if X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {X.shape[1]} columns; {type(self).__name__} was fitted with "
                    f"{self.n_features_in_}."
                )
            return _safe_indexing(X, np.flatnonzero(self.support_), axis=1)
        return super().transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # the estimator judges the data
        tags.input_tags.string = True  # VariableModel reads raw tables
        tags.input_tags.categorical = True
        return tags
