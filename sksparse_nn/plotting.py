"""matplotlib figures (optional extra ``plot``): regularization paths and their scores."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_path"]


def _axes(ax):
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Plotting needs matplotlib: pip install 'sksparse-nn[plot]'.") from exc
    return plt.figure(figsize=(6.4, 4.0)).gca()


def plot_path(path, ax=None, *, kind="norms"):
    """Plot a :class:`~sksparse_nn.path.RegularizationPath`.

    Parameters
    ----------
    path : RegularizationPath
    ax : matplotlib Axes, default=None
        Created when not given.
    kind : {"norms", "score"}, default="norms"
        ``"norms"``: every group norm against lam on log-log axes; a group that is
        exactly zero is drawn at the bottom edge, so dropped groups visibly hit zero.
        ``"score"``: training (and validation) score against lam, with the number of
        selected features on a second y-axis.

    Returns
    -------
    ax : matplotlib Axes
    """
    if kind not in ("norms", "score"):
        raise ValueError(f"kind must be 'norms' or 'score', got {kind!r}.")
    ax = _axes(ax)
    lams = np.asarray(path.lams)
    D = f" (D={path.D})" if path.D is not None else ""
    if kind == "norms":
        norms = np.asarray(path.group_norms, dtype=float)
        live = norms[norms > 0]
        floor = live.min() / 10 if live.size else 1e-3
        ax.plot(lams, np.where(norms > 0, norms, floor), lw=1.2)
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
        twin = ax.twinx()
        twin.step(lams, path.n_selected, where="mid", color="0.4", lw=1)
        twin.set_ylabel("selected features")
        ax.set_title(f"Score and sparsity along the path{D}")
    ax.set_xscale("log")
    ax.set_xlabel("lam")
    return ax
