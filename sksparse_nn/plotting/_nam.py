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


def _unwrap(est, X):
    """(fitted NAM, X in its columns or None, title of each term, level names of each
    term's columns): a :class:`~sksparse_nn.compose.VariableModel` speaks in variables."""
    inner = getattr(est, "estimator_", None)
    if inner is None or not hasattr(est, "variable_names_"):
        names = getattr(est, "feature_names_in_", None)
        titles = {
            t: ", ".join(_feature_name(names, j) for j in cols)
            for t, cols in enumerate(_terms(est))
        }
        titles.update(_pair_titles(est, titles))
        columns = [_feature_name(names, j) for j in range(est.n_features_in_)]
        return est, X, titles, columns
    check_is_fitted(inner, "module_")
    encoded = None if X is None else est.encoder_.transform(X)
    variables = np.asarray(est.variable_names_, dtype=object)
    sources = _sources_of(est)
    titles = {t: str(variables[sources[cols[0]]]) for t, cols in enumerate(_terms(inner))}
    titles.update(_pair_titles(inner, titles))
    out_names = [str(n) for n in est.encoder_.get_feature_names_out()]
    columns = [_level_name(n, str(variables[sources[k]])) for k, n in enumerate(out_names)]
    return inner, encoded, titles, columns


def _pair_titles(est, titles):
    """``{term: "a x b"}`` for the interactions, from the titles of their main terms."""
    pairs = getattr(est, "interaction_pairs_", np.zeros((0, 2), dtype=int))
    n_main = len(_terms(est)) - len(pairs)
    return {n_main + q: f"{titles[int(a)]} x {titles[int(b)]}" for q, (a, b) in enumerate(pairs)}


def _draw_pair(ax, surface, sides, columns, data):
    """A heat map of an interaction's surface ``(xa, xb, f)`` (first output); a side of
    several columns (a categorical) shows one row or column per level."""
    xa, xb, f = surface
    f = f.reshape(len(xa), len(xb), -1)[:, :, 0]
    coords, labels = [], []
    for x, cols in zip((xa, xb), sides, strict=True):
        if x.ndim == 1:
            coords.append(x)
            labels.append(None)
        else:
            coords.append(np.arange(len(x), dtype=float))
            labels.append([_row_label(row, [columns[c] for c in cols]) for row in x])
    vmax = float(np.abs(f).max()) or 1.0
    mesh = ax.pcolormesh(
        coords[0], coords[1], f.T, cmap="RdBu_r", vmin=-vmax, vmax=vmax, shading="nearest"
    )
    ax.figure.colorbar(mesh, ax=ax, shrink=0.85)
    for axis, lab, cols in (("x", labels[0], sides[0]), ("y", labels[1], sides[1])):
        if lab is not None:
            getattr(ax, f"set_{axis}ticks")(np.arange(len(lab)), lab, fontsize="x-small")
        else:
            getattr(ax, f"set_{axis}label")(columns[cols[0]], fontsize="x-small")
    if data is not None and labels[0] is None and labels[1] is None:
        ax.plot(data[:, sides[0][0]], data[:, sides[1][0]], ".", color="k", alpha=0.15, ms=2)


def _sources_of(model):
    from ..variables import variable_groups

    return variable_groups(model.encoder_)[0]


def _level_name(column, variable):
    """ "onehotencoder__color_red" -> "red" for the variable "color"."""
    name = column.split("__", 1)[-1]
    return name[len(variable) + 1 :] if name.startswith(f"{variable}_") else name


def _terms(est):
    terms = getattr(est, "terms_", None)
    return terms if terms is not None else [np.array([j]) for j in range(est.n_features_in_)]


def _row_label(row, names):
    """A level's label: the column that is hot in a one-hot row, else the values."""
    hot = np.flatnonzero(row)
    if hot.size == 0:
        return "(none)"
    if hot.size == 1 and row[hot[0]] == 1:
        return names[hot[0]]
    return ", ".join(f"{names[i]}={row[i]:.3g}" for i in hot)


def plot_shape_functions(est, X=None, features=None, *, n_cols=4, grid=None, axes=None):
    """One panel per selected term: its learned shape function and a rug of the data.

    A term of one feature is a curve; a term of several columns (a categorical's one-hot
    columns, with ``groups``) is a bar chart of the contribution of each of its levels;
    an interaction (``interactions``) is a heat map of its surface over its two sides'
    ranges (a categorical side: one band per level), the data as dots when ``X`` is
    given (the first output's surface for a model with several).

    Parameters
    ----------
    est : DGatedNAMRegressor, DGatedNAMClassifier or VariableModel of one
        A fitted sparse NAM (anything with ``shape_functions`` and ``selected_terms_``),
        or a :class:`~sksparse_nn.compose.VariableModel` around one, whose panels are
        titled with the user's variables and levels.
    X : array-like or DataFrame of shape (n_samples, n_features), default=None
        Data drawn as a rug under each curve (e.g. the training data; the user's table
        for a VariableModel).
    features : array-like of int or str, default=None
        Features to show, as indices or (with pandas input) names; defaults to the
        selected terms. A removed feature is drawn as its exact-zero line. Models
        fitted with ``groups`` show their selected terms only.
    n_cols : int, default=4
        Panels per row when ``axes`` is not given.
    grid : None, int or array-like, default=None
        Passed to ``est.shape_functions``.
    axes : array-like of matplotlib Axes, default=None
        One axis per panel; created when not given.

    Returns
    -------
    axes : ndarray of matplotlib Axes
        One per panel, in order. Multiclass models draw one line (bar group) per class.

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
    check_is_fitted(est)
    est, X, titles, columns = _unwrap(est, X)
    check_is_fitted(est, "module_")
    names = getattr(est, "feature_names_in_", None)
    terms = _terms(est)
    if features is None:
        shown = np.asarray(getattr(est, "selected_terms_", est.selected_features_), dtype=int)
    elif any(len(t) > 1 for t in terms):
        raise ValueError("features= selects single features; with groups, all selected terms show.")
    else:
        shown = _feature_indices(est, features, names)

    curves = est.shape_functions(grid=grid)
    data = None
    if X is not None:
        data = X.to_numpy() if hasattr(X, "to_numpy") else X
        data = data.toarray() if hasattr(data, "toarray") else np.asarray(data)
        if data.ndim != 2 or data.shape[1] != est.n_features_in_:
            raise ValueError(f"X must have {est.n_features_in_} columns, got shape {data.shape}.")

    n = max(len(shown), 1)
    if axes is None:
        cols = min(n_cols, n)
        rows = -(-n // cols)
        fig, axes = pyplot().subplots(
            rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False, layout="constrained"
        )
        for ax in axes.ravel()[len(shown) :]:
            ax.set_visible(False)
        fig.suptitle("Shape functions (centred contributions)")
    axes = np.asarray(axes, dtype=object).ravel()[: len(shown)]
    if len(axes) < len(shown):
        raise ValueError(f"Need {len(shown)} axes, got {len(axes)}.")

    lo, hi = est.feature_ranges_[:, 0], est.feature_ranges_[:, 1]
    classes = getattr(est, "classes_", None)
    pairs = getattr(est, "interaction_pairs_", np.zeros((0, 2), dtype=int))
    n_main = len(terms) - len(pairs)
    for ax, t in zip(axes, shown, strict=True):
        cols = np.asarray(terms[t])
        if t >= n_main:  # an interaction: its surface as a heat map
            sides = [np.asarray(terms[m]) for m in pairs[t - n_main]]
            _draw_pair(ax, curves[t], sides, columns, data)
            ax.set_title(titles[int(t)], fontsize="small")
            continue
        if t in curves:
            x, f = curves[t]
        else:  # a removed feature contributes exactly 0 everywhere
            x, f = np.array([lo[t], hi[t]]), np.zeros(2)
        f = f.reshape(len(x), -1)
        if cols.size > 1:  # a categorical: one bar per level (group of bars per class)
            labels = [_row_label(row, [columns[c] for c in cols]) for row in x]
            width = 0.8 / f.shape[1]
            for c in range(f.shape[1]):
                label = str(classes[c]) if classes is not None and f.shape[1] > 1 else None
                ax.bar(np.arange(len(x)) + c * width, f[:, c], width=width, label=label)
            ax.set_xticks(
                np.arange(len(x)) + 0.4 - width / 2,
                labels,
                rotation=45,
                ha="right",
                fontsize="x-small",
            )
        else:
            for c in range(f.shape[1]):
                label = str(classes[c]) if classes is not None and f.shape[1] > 1 else None
                ax.plot(x, f[:, c], lw=1.6, label=label)
            ax.axhline(0.0, color="0.7", lw=0.6, zorder=0)
            if data is not None:
                col = data[:, cols[0]]
                ymin = ax.get_ylim()[0]
                ax.plot(col, np.full_like(col, ymin), "|", color="k", alpha=0.25, ms=8)
        if cols.size > 1:
            ax.axhline(0.0, color="0.7", lw=0.6, zorder=0)
        if f.shape[1] > 1:
            ax.legend(fontsize="x-small", loc="best")
        importance = est.feature_importances_[cols[0]]
        ax.set_title(titles[int(t)], fontsize="small")
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
