"""The one place that imports matplotlib (the optional extra ``plot``)."""

from __future__ import annotations

INSTALL_HINT = "pip install 'sksparse-nn[plot]'"


def pyplot():
    """Return :mod:`matplotlib.pyplot`, or raise an ImportError naming the extra to install."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"Plotting needs matplotlib, which is not installed: {INSTALL_HINT}."
        ) from exc
    return plt


def axes_or_new(ax, figsize=(6.4, 4.0)):
    """``ax`` itself, or the axes of a new figure (matplotlib is imported only then)."""
    if ax is not None:
        return ax
    return pyplot().figure(figsize=figsize).gca()
