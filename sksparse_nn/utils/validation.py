"""Input checks shared by every estimator of the package (numpy only, no torch)."""

from __future__ import annotations

import inspect
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils import _safe_indexing, assert_all_finite
from sklearn.utils.validation import _check_sample_weight, _num_samples

__all__ = [
    "abs_max",
    "check_fit_params",
    "check_range",
    "check_sample_weight",
    "check_warm_start_targets",
    "fit_params_rows",
    "value_limit",
]


def value_limit(dtype, n_samples):
    """Largest magnitude of X or y that training in ``dtype`` holds without overflow.

    float32 networks: float32's largest value. float64 models form Gram matrices or
    squared residuals (``X^T X``, ``||y||^2``): the square root of float64's largest value
    over ``n_samples``.
    """
    if np.dtype(dtype) == np.float32:
        return float(np.finfo(np.float32).max)
    return float(np.sqrt(np.finfo(np.float64).max / max(n_samples, 1)))


def abs_max(X):
    """Largest magnitude in ``X`` (dense or the stored values of sparse ``X``; 0 when
    empty), from its largest and smallest values: no ``|X|`` temporary, a whole copy of
    ``X``."""
    data = X.data if sp.issparse(X) else np.asarray(X)
    return float(max(data.max(), -data.min())) if data.size else 0.0


def check_range(X, limit, name, dtype_name, estimator_name=None):
    """Raise ValueError when ``X`` holds NaN or infinity (scikit-learn's message) or a
    value beyond ``limit`` in magnitude.

    Both checks come from the largest and smallest values (NaN propagates through
    them): two passes over ``X``, so a fit validates its data with
    ``ensure_all_finite=False`` and leaves finiteness to this check instead of paying a
    third pass (per fit: every point of a path).
    """
    data = X.data if sp.issparse(X) else np.asarray(X)
    if not data.size:
        return
    hi, lo = float(data.max()), float(data.min())
    if not (np.isfinite(hi) and np.isfinite(lo)):
        try:
            assert_all_finite(data, input_name=name, estimator_name=estimator_name)
        except ValueError as exc:
            if name != "X" or not np.isnan(hi + lo):
                raise
            raise ValueError(
                f"{exc}\nWith sksparse_nn, VariableModel(estimator) takes the raw table: "
                "it imputes missing values and adds a missing-indicator column to each "
                "variable's group (see sksparse_nn.compose.VariableModel)."
            ) from None
    largest = max(hi, -lo)
    if largest > limit:
        raise ValueError(
            f"{name} has values up to {largest:.3g} in magnitude, beyond what this "
            f"estimator's {dtype_name} arithmetic can hold (about {limit:.3g}). Rescale "
            f"{name} (e.g. with sklearn.preprocessing.StandardScaler)."
        )


def check_warm_start_targets(estimator, y, classifier):
    """A warm start must keep the classes (classifiers) or the number of outputs.

    Call before the targets are encoded, so that a refused fit leaves the fitted model
    untouched (as scikit-learn's MLP does). Features are checked by scikit-learn's
    ``validate_data(..., reset=False)``.
    """
    name = type(estimator).__name__
    if classifier:
        old = getattr(estimator, "classes_", None)
        new = np.unique(y)
        if old is not None and not np.array_equal(old, new):
            raise ValueError(
                f"warm_start can only be used where y has the same classes as in the "
                f"previous call to fit. Previously got {old}, y has {new}. Set "
                "warm_start=False to fit from scratch."
            )
        return
    old = getattr(estimator, "n_outputs_", None)
    new = 1 if np.ndim(y) == 1 else np.shape(y)[1]
    if old is not None and old != new:
        raise ValueError(
            f"warm_start: y has {new} output(s), but {name} was fitted with {old}. Set "
            "warm_start=False to fit from scratch."
        )


def check_sample_weight(sample_weight, X):
    """Validated sample weights rescaled to mean 1, i.e. to sum to ``n`` (so that ``lam``
    keeps its meaning, as scikit-learn's Lasso does), or None when not given.

    Weights must be finite, non-negative and not all zero; ``X`` (the data, or the number
    of samples ``n`` as an int) gives the length.
    """
    if sample_weight is None:
        return None
    if isinstance(X, Integral):
        X = np.empty((int(X), 0))  # the solvers pass n
    weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    total = float(weight.sum())
    if not total > 0:
        raise ValueError("sample_weight must have a positive sum: every weight is zero.")
    return weight * (weight.shape[0] / total)


def check_fit_params(estimator, fit_params, X, owner=None):
    """``fit_params`` (None or a dict of keyword arguments of ``estimator.fit``, e.g.
    ``sample_weight``) as a dict, or a TypeError naming a keyword the estimator's ``fit``
    does not take, and a ValueError for a per-row argument of the wrong length.

    A value is *per row* when it is array-like with as many entries as ``X`` has rows
    (then :func:`fit_params_rows` takes the rows of a subsample or fold from it, as
    scikit-learn's cross-validation does); ``sample_weight`` must be per row.
    """
    fit_params = {} if fit_params is None else dict(fit_params)
    if not fit_params:
        return fit_params
    signature = inspect.signature(estimator.fit)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    name = type(estimator).__name__
    for key in fit_params:
        if not takes_any and key not in signature.parameters:
            takes = [k for k in signature.parameters if k not in ("X", "y")]
            raise TypeError(
                f"{owner or 'fit'}: {name}.fit takes no {key!r} (its fit takes "
                f"{', '.join(takes) or 'only X and y'}); "
                + (
                    "use a family that takes sample weights (the linear models) or "
                    "resample the rows instead."
                    if key == "sample_weight"
                    else "pass only the keywords its fit takes."
                )
            )
    n_samples = _num_samples(X)
    weight = fit_params.get("sample_weight")
    if weight is not None and (np.ndim(weight) != 1 or len(weight) != n_samples):
        raise ValueError(
            f"{owner or 'fit'}: sample_weight must hold one weight per row of X "
            f"({n_samples}), got shape {np.shape(weight)}."
        )
    return fit_params


def _per_row(value, n_samples):
    if value is None or isinstance(value, (str, bytes, dict)) or np.isscalar(value):
        return False
    try:
        return _num_samples(value) == n_samples
    except TypeError:
        return False


def fit_params_rows(fit_params, rows, n_samples):
    """``fit_params`` for the subsample ``rows`` of ``n_samples`` rows: per-row values
    (array-like of length ``n_samples``) indexed, the others passed as they are."""
    return {
        key: _safe_indexing(value, rows) if _per_row(value, n_samples) else value
        for key, value in fit_params.items()
    }
