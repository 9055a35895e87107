"""Figures of a regularization path: group norms, scores, CV curve, sparsity-accuracy trade-off."""

from __future__ import annotations

import numpy as np

from ._matplotlib import axes_or_new

__all__ = ["plot_cv_path", "plot_path", "plot_tradeoff"]


def _d_suffix(path):
    """`` (D=3)`` for a title, or nothing when the path does not know its D."""
    return f" (D={path.D})" if path.D is not None else ""


def _selected_on_twin(ax, lams, n_selected, unit="features"):
    """The number of selected features (variables, components) as a grey step line on a
    second y-axis."""
    twin = ax.twinx()
    twin.step(lams, n_selected, where="mid", color="0.4", lw=1)
    twin.set_ylabel(f"selected {unit}")
    return twin


def plot_path(path, ax=None, *, kind="norms"):
    """Plot a :class:`~sksparse_nn.RegularizationPath`.

    Parameters
    ----------
    path : RegularizationPath
    ax : matplotlib Axes, default=None
        Created when not given.
    kind : {"norms", "score"}, default="norms"
        ``"norms"``: every group norm against lam on log-log axes; a group that is
        exactly zero is drawn at the bottom edge, so dropped groups visibly hit zero;
        points whose training failed (NaN norms) are left out.
        ``"score"``: training (and validation) score against lam, with the number of
        selected features on a second y-axis.

    Returns
    -------
    ax : matplotlib Axes
    """
    if kind not in ("norms", "score"):
        raise ValueError(f"kind must be 'norms' or 'score', got {kind!r}.")
    ax = axes_or_new(ax)
    lams = np.asarray(path.lams)
    D = _d_suffix(path)
    if kind == "norms":
        norms = np.asarray(path.group_norms, dtype=float)
        live = norms[norms > 0]
        floor = live.min() / 10 if live.size else 1e-3
        # exact zeros on the floor; a failed point (NaN norms) is a gap, not a zero
        ax.plot(lams, np.where(norms == 0, floor, norms), lw=1.2)
        ax.axhline(floor, color="0.6", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_ylabel("group norm (bottom line: exactly 0)")
        ax.set_title(f"Regularization path{D}")
    else:
        ax.plot(lams, path.train_score, marker="o", ms=3, label="train")
        if path.val_score is not None:
            ax.plot(lams, path.val_score, marker="o", ms=3, label="validation")
        ax.set_ylabel("score")
        ax.legend(loc="lower left")
        _selected_on_twin(ax, lams, path.n_selected, path.selection_unit)
        ax.set_title(f"Score and sparsity along the path{D}")
    ax.set_xscale("log")
    ax.set_xlabel("lam")
    return ax


def plot_cv_path(path, ax=None):
    """Mean CV score with its standard-error band against lam.

    The number of selected features (full-data path) is drawn on a second axis, with
    vertical lines at ``best_lam_`` and ``lam_1se_``; hollow markers show lams whose
    full-data fit did not converge (``path.converged``), which the choice passes over
    when a converged lam within one standard error of the best exists.

    Parameters
    ----------
    path : RegularizationPath
        Computed with ``cv``.
    ax : matplotlib Axes, default=None

    Returns
    -------
    ax : matplotlib Axes
    """
    if path.cv_mean is None:
        if not getattr(path, "completed", True):
            raise ValueError(
                "This path has no CV scores: its computation was interrupted before a "
                "fold finished (completed=False); run it again to plot them."
            )
        raise ValueError("This path has no CV scores: compute it with cv=...")
    ax = axes_or_new(ax)
    lams = np.asarray(path.lams)[: len(path.cv_mean)]
    # the curve joins the scored lams (the folds' coarse first pass skips some: NaN)
    mean, se = np.asarray(path.cv_mean), np.asarray(path.cv_se)
    scored = np.isfinite(mean)
    ax.plot(lams[scored], mean[scored], color="C0", marker="o", ms=3, label="mean CV score")
    ax.fill_between(
        lams[scored],
        (mean - se)[scored],
        (mean + se)[scored],
        color="C0",
        alpha=0.25,
        label="+- 1 standard error",
    )
    ax.axvline(path.best_lam_, color="C2", ls="--", label=f"best lam = {path.best_lam_:.3g}")
    ax.axvline(path.lam_1se_, color="C3", ls=":", label=f"1-SE lam = {path.lam_1se_:.3g}")
    converged = getattr(path, "converged", None)
    if converged is not None:
        # the choice passes over these where a converged lam is as good (path.converged)
        bad = ~np.asarray(converged[: len(lams)], dtype=bool)
        failed = getattr(path, "failed", None)
        if failed is not None:  # a diverged point is failed, not "not converged"
            bad &= ~np.asarray(failed[: len(lams)], dtype=bool)
        if bad.any():
            ax.plot(
                lams[bad],
                np.asarray(path.cv_mean)[bad],
                ls="none",
                marker="o",
                mfc="white",
                color="C1",
                label="full-data fit not converged",
            )
    ax.set_xscale("log")
    ax.set_xlabel("lam")
    ax.set_ylabel("CV score")
    ax.legend(loc="lower left", fontsize="small")
    _selected_on_twin(ax, lams, path.n_selected[: len(lams)], path.selection_unit)
    ax.set_title(f"Cross-validated path{_d_suffix(path)}")
    return ax


def plot_tradeoff(paths, ax=None, *, score="auto"):
    """Score against the number of selected features, one curve per path (e.g. per D).

    Parameters
    ----------
    paths : dict of label -> RegularizationPath, or list of RegularizationPath
        Labelled by ``D`` when a list is given.
    ax : matplotlib Axes, default=None
    score : {"auto", "cv", "val", "train"}, default="auto"
        Which score to draw: CV mean, validation, or training score; ``"auto"`` takes
        the first available in that order.

    Returns
    -------
    ax : matplotlib Axes
    """
    if not isinstance(paths, dict):
        paths = {f"D={p.D}": p for p in paths}
    ax = axes_or_new(ax)
    for label, path in paths.items():
        values = _score_of(path, score)
        n = len(values)
        order = np.argsort(path.n_selected[:n], kind="stable")
        ax.plot(path.n_selected[:n][order], values[order], marker="o", ms=3, label=label)
    units = {p.selection_unit for p in paths.values()}
    ax.set_xlabel(f"selected {units.pop() if len(units) == 1 else 'groups'}")
    ax.set_ylabel("score")
    ax.set_title("Sparsity-accuracy trade-off")
    ax.legend()
    return ax


def _score_of(path, score):
    table = {"cv": path.cv_mean, "val": path.val_score, "train": path.train_score}
    if score == "auto":
        return next(v for v in (table["cv"], table["val"], table["train"]) if v is not None)
    if score not in table or table[score] is None:
        raise ValueError(f"score={score!r} is not available for this path.")
    return table[score]
