"""Shape-function panels of a fitted sparse neural additive model."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._matplotlib import pyplot

__all__ = ["plot_shape_functions"]


def _feature_name(names, j):
    return str(names[j]) if names is not None else f"x{j}"


def _feature_indices(est, features, names):
    """Column indices of ``features`` (indices or names); ``selected_features_`` if None."""
    if features is None:
        return np.asarray(est.selected_features_, dtype=int)
    features = np.atleast_1d(np.asarray(features))
    if features.dtype.kind in "OUS":
        if names is None:
            raise ValueError("Feature names need an estimator fitted on a DataFrame.")
        lookup = {str(n): i for i, n in enumerate(names)}
        missing = [str(f) for f in features if str(f) not in lookup]
        if missing:
            raise ValueError(f"Unknown features {missing}.")
        features = np.array([lookup[str(f)] for f in features], dtype=int)
    features = features.astype(int)
    if features.size and (features.min() < 0 or features.max() >= est.n_features_in_):
        raise ValueError(f"features must be indices below {est.n_features_in_}.")
    return features


def plot_shape_functions(est, X=None, features=None, *, n_cols=4, grid=None, axes=None):
    """One panel per selected feature: its learned shape function and a rug of the data.

    Parameters
    ----------
    est : DGatedNAMRegressor or DGatedNAMClassifier
        A fitted sparse NAM (anything with ``shape_functions`` and ``selected_features_``).
    X : array-like or DataFrame of shape (n_samples, n_features), default=None
        Data drawn as a rug under each curve (e.g. the training data).
    features : array-like of int or str, default=None
        Features to show, as indices or (with pandas input) names; defaults to
        ``selected_features_``. A removed feature is drawn as its exact-zero line.
    n_cols : int, default=4
        Panels per row when ``axes`` is not given.
    grid : None, int or array-like, default=None
        Passed to ``est.shape_functions``.
    axes : array-like of matplotlib Axes, default=None
        One axis per feature; created when not given.

    Returns
    -------
    axes : ndarray of matplotlib Axes
        One per shown feature, in order. Multiclass models draw one line per class.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sksparse_nn.datasets import make_additive_regression
    >>> from sksparse_nn.estimators.nam import DGatedNAMRegressor
    >>> from sksparse_nn.plotting import plot_shape_functions
    >>> X, y = make_additive_regression(n_samples=200, n_noise=2, random_state=0)
    >>> est = DGatedNAMRegressor(lam=0.05, max_epochs=20, random_state=0).fit(X, y)
    >>> axes = plot_shape_functions(est, X)
    """
    check_is_fitted(est, "module_")
    names = getattr(est, "feature_names_in_", None)
    features = _feature_indices(est, features, names)

    curves = est.shape_functions(grid=grid)
    data = None
    if X is not None:
        data = X.to_numpy() if hasattr(X, "to_numpy") else X
        data = data.toarray() if hasattr(data, "toarray") else np.asarray(data)
        if data.ndim != 2 or data.shape[1] != est.n_features_in_:
            raise ValueError(f"X must have {est.n_features_in_} columns, got shape {data.shape}.")

    n = max(len(features), 1)
    if axes is None:
        cols = min(n_cols, n)
        rows = -(-n // cols)
        fig, axes = pyplot().subplots(
            rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False, layout="constrained"
        )
        for ax in axes.ravel()[len(features) :]:
            ax.set_visible(False)
        fig.suptitle("Shape functions (centred contributions)")
    axes = np.asarray(axes, dtype=object).ravel()[: len(features)]
    if len(axes) < len(features):
        raise ValueError(f"Need {len(features)} axes, got {len(axes)}.")

    lo, hi = est.feature_ranges_[:, 0], est.feature_ranges_[:, 1]
    for ax, j in zip(axes, features, strict=True):
        if j in curves:
            x, f = curves[j]
        else:  # a removed feature contributes exactly 0 everywhere
            x, f = np.array([lo[j], hi[j]]), np.zeros(2)
        f = f.reshape(len(x), -1)
        classes = getattr(est, "classes_", None)
        for c in range(f.shape[1]):
            label = str(classes[c]) if classes is not None and f.shape[1] > 1 else None
            ax.plot(x, f[:, c], lw=1.6, label=label)
        if f.shape[1] > 1:
            ax.legend(fontsize="x-small", loc="best")
        ax.axhline(0.0, color="0.7", lw=0.6, zorder=0)
        if data is not None:
            col = data[:, j]
            ymin = ax.get_ylim()[0]
            ax.plot(col, np.full_like(col, ymin), "|", color="k", alpha=0.25, ms=8)
        importance = est.feature_importances_[j]
        ax.set_title(_feature_name(names, j), fontsize="small")
        ax.text(
            0.02,
            0.97,
            f"sd {importance:.2g}",
            transform=ax.transAxes,
            va="top",
            fontsize="x-small",
            color="0.35",
        )
    return axes
