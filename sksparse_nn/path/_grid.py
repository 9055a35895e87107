"""The lam grid: :func:`lambda_grid` and the checks of the grid arguments
(``lams``, ``n_lams``, ``lam_min_ratio``, ``cv_stride``; the estimator's defaults)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np


def lambda_grid(lam_max, n_lams=30, lam_min_ratio=1e-3):
    """Log-spaced grid from ``lam_max * lam_min_ratio`` up to ``lam_max`` (ascending)."""
    if not lam_max > 0:
        raise ValueError(f"Cannot build a lam grid: lam_max={lam_max} (is y constant?).")
    return np.geomspace(lam_max * lam_min_ratio, lam_max, int(n_lams))


def _grid_args(estimator, n_lams, lam_min_ratio):
    """``n_lams`` and ``lam_min_ratio``, ``None`` replaced by the estimator's defaults."""
    defaults = {"n_lams": 30, "lam_min_ratio": 1e-3}
    if hasattr(estimator, "default_grid"):
        defaults.update(estimator.default_grid())
    n_lams = defaults["n_lams"] if n_lams is None else n_lams
    lam_min_ratio = defaults["lam_min_ratio"] if lam_min_ratio is None else lam_min_ratio
    _check_path_args(n_lams, lam_min_ratio)
    return n_lams, lam_min_ratio


def _extends_below(estimator):
    """Whether a CV search on the estimator's default grid goes on below it when the
    folds choose its densest lam: ``default_grid()["extend_below"]``, True when absent
    (False where the score always improves towards lam = 0, as a reconstruction's)."""
    grid = estimator.default_grid() if hasattr(estimator, "default_grid") else {}
    return bool(grid.get("extend_below", True))


def _check_path_args(n_lams, lam_min_ratio):
    if isinstance(n_lams, bool) or not isinstance(n_lams, Integral) or n_lams < 1:
        raise ValueError(f"n_lams must be an integer >= 1, got {n_lams!r}.")
    if (
        isinstance(lam_min_ratio, bool)
        or not isinstance(lam_min_ratio, Real)
        or not 0 < lam_min_ratio <= 1
    ):
        raise ValueError(f"lam_min_ratio must be in (0, 1], got {lam_min_ratio!r}.")


def _check_lams(lams):
    """The grid as a sorted float array: non-empty, finite and positive."""
    try:
        lams = np.asarray(lams, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lams must be an array of positive numbers: {exc}") from None
    if lams.size == 0:
        raise ValueError("lams must hold at least one value, got an empty grid.")
    if not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        raise ValueError(
            f"lams must be finite and > 0 (a path is log-spaced), got {lams.tolist()}."
        )
    return np.sort(lams)


def _cv_stride(estimator, cv_stride, lams_given):
    """The folds' first-pass stride: ``cv_stride``, else 1 for a grid the user gave (it
    is computed whole), else the estimator's ``default_grid()["cv_stride"]`` (1 when it
    names none)."""
    if cv_stride is None:
        if lams_given or not hasattr(estimator, "default_grid"):
            return 1
        cv_stride = estimator.default_grid().get("cv_stride", 1)
    if isinstance(cv_stride, bool) or not isinstance(cv_stride, Integral) or cv_stride < 1:
        raise ValueError(f"cv_stride must be an integer >= 1, got {cv_stride!r}.")
    return int(cv_stride)
