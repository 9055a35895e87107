"""The stability path of a fitted stability selection: selection probability against lam."""

from __future__ import annotations

import numpy as np

from ._matplotlib import axes_or_new

__all__ = ["plot_stability_path"]


def plot_stability_path(selection, ax=None, *, max_labels=10):
    """Plot the selection probability of every unit against lam.

    Parameters
    ----------
    selection : fitted StabilitySelection
        Read through its attributes ``lams_``, ``stability_scores_`` (one row per
        unit), ``selected_units_``, ``groups_``, ``support_``, ``threshold_``,
        ``lam_region_`` and ``expected_false_selections_``. A unit of several columns
        is named by its first column and the number of the others.
    ax : matplotlib Axes, default=None
        Created when not given.
    max_labels : int, default=10
        Selected units named in the legend (the most probable first); a long legend
        hides the curves.

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = axes_or_new(ax)
    lams = np.asarray(selection.lams_)
    scores = np.asarray(selection.stability_scores_)
    units = np.asarray(getattr(selection, "groups_", np.arange(scores.shape[0])))
    support = np.isin(np.arange(scores.shape[0]), getattr(selection, "selected_units_", []))
    if not hasattr(selection, "selected_units_"):
        support = np.asarray(selection.support_, dtype=bool)
    columns = getattr(selection, "feature_names_in_", None)
    if columns is None:
        columns = np.array([f"x{i}" for i in range(units.size)], dtype=object)
    names = []
    for u in range(scores.shape[0]):
        members = np.flatnonzero(units == u)
        extra = f" +{members.size - 1}" if members.size > 1 else ""
        names.append(f"{columns[members[0]]}{extra}" if members.size else f"unit {u}")
    for j in np.flatnonzero(~support):  # the others in grey, below
        ax.plot(lams, scores[j], color="0.7", lw=0.8, zorder=1)
    order = np.flatnonzero(support)[np.argsort(-scores[support].max(axis=1), kind="stable")]
    for rank, j in enumerate(order):
        label = str(names[j]) if rank < max_labels else None
        ax.plot(lams, scores[j], lw=1.8, zorder=2, label=label)
    ax.axhline(selection.threshold_, color="k", ls="--", lw=1, label="threshold")
    if selection.lam_region_ is not None:
        ax.axvspan(*selection.lam_region_, color="0.9", zorder=0, label="region")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("lam")
    ax.set_ylabel("selection probability")
    ax.set_title(
        f"Stability path: {int(support.sum())} selected, "
        f"E[false selections] <= {selection.expected_false_selections_:.2g}"
    )
    ax.legend(fontsize="small", loc="upper right")
    return ax
