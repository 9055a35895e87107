"""A waterfall of one prediction of a sparse neural additive model: the intercept, then
every kept term's contribution, ending at the model's output."""

from __future__ import annotations

import numpy as np

from ._matplotlib import pyplot

__all__ = ["plot_explanation"]


def plot_explanation(est, x, *, output=None, max_terms=12, ax=None):
    """Waterfall of one prediction: from the intercept through each kept term to the output.

    Parameters
    ----------
    est : DGatedNAMRegressor or DGatedNAMClassifier
        A fitted sparse NAM (anything with ``explain``).
    x : array-like or DataFrame of shape (1, n_features) or (n_features,)
        The row explained.
    output : int, default=None
        Passed to ``est.explain``: the output of a model with several.
    max_terms : int, default=12
        Terms drawn, the largest contributions first; the rest are summed in one bar
        ("other terms"), so that the bars still end at the output.
    ax : matplotlib Axes, default=None
        Drawn into; a new figure when not given.

    Returns
    -------
    ax : matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sksparse_nn.datasets import make_additive_regression
    >>> from sksparse_nn.estimators.nam import DGatedNAMRegressor
    >>> from sksparse_nn.plotting import plot_explanation
    >>> X, y = make_additive_regression(n_samples=200, n_noise=2, random_state=0)
    >>> est = DGatedNAMRegressor(lam=0.05, max_epochs=5, random_state=0).fit(X, y)
    >>> ax = plot_explanation(est, X[:1])
    """
    if int(max_terms) < 1:
        raise ValueError(f"max_terms must be at least 1, got {max_terms!r}.")
    if hasattr(x, "iloc"):
        row = x.iloc[[0]] if x.ndim == 2 else x.to_frame().T
    else:
        row = np.asarray(x, dtype=np.float64)
        if row.ndim == 1:
            row = row.reshape(1, -1)
        if row.ndim != 2 or row.shape[0] != 1:
            raise ValueError(f"x must be one row, got shape {row.shape}.")
    frame = est.explain(row, output=output)
    intercept, total = float(frame["intercept"].iloc[0]), float(frame["output"].iloc[0])
    terms = frame.drop(columns=["intercept", "output"]).iloc[0]
    terms = terms.reindex(terms.abs().sort_values(ascending=False, kind="stable").index)
    names, values = list(terms.index[:max_terms]), list(terms.to_numpy()[:max_terms])
    if len(terms) > max_terms:
        names.append(f"{len(terms) - max_terms} other terms")
        values.append(float(terms.to_numpy()[max_terms:].sum()))
    if ax is None:
        _, ax = pyplot().subplots(
            figsize=(6.0, 0.35 * (len(names) + 2) + 1.0), layout="constrained"
        )
    start = intercept + np.concatenate([[0.0], np.cumsum(values)[:-1]])
    y = np.arange(len(names))[::-1] + 1
    colors = ["#c0392b" if v > 0 else "#2471a3" for v in values]
    ax.barh(y, values, left=start, color=colors, height=0.7)
    for yi, s, v in zip(y, start, values, strict=True):  # the label past the bar's end
        end, side = (s + v, "left") if v >= 0 else (s + v, "right")
        ax.text(end, yi, f" {v:+.3g} ", va="center", ha=side, fontsize="x-small")
    ax.use_sticky_edges = False  # room for the labels on both sides
    ax.margins(x=0.18)
    ax.axvline(intercept, color="0.6", lw=0.8, ls=":")
    ax.axvline(total, color="k", lw=1.0)
    ax.set_yticks(np.r_[y, 0], [*names, f"output = {total:.4g}"], fontsize="small")
    ax.set_xlabel(f"contribution (from the intercept {intercept:.4g})")
    ax.set_title("Local explanation", fontsize="small")
    return ax
