"""What the stopping rules read from a fit's history: falling losses, plateaus, groups
in transit to zero, each beyond mini-batch noise.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "ending_width",
    "in_transit",
    "on_plateau",
    "plateau_tolerance",
    "still_falling",
    "still_shrinking",
]


#: The objective is "still falling" when the last window lowered its mean by more than
#: this fraction of the fit's whole decrease so far (scale-free; SGD noise around a
#: plateau stays far below it) ...
STILL_FALLING = 1e-2


#: ... and by more than this fraction of its value (a warm start that begins at its
#: plateau has almost no "whole decrease").
FLAT = 1e-4


#: A group above ``zero_tol`` is "in transit" to zero when over a window its norm fell
#: below ``IN_TRANSIT`` times its value, or fell at all (by ``1 - SHRINKING``) while being
#: below ``TINY`` times the largest group of its tensor (a slow tail: no clean sparsity
#: gap).
IN_TRANSIT = 0.5


#: Relative size (to the largest group of its tensor) below which a group is tiny.
TINY = 1e-3


#: Ratio over a window below which a group's norm counts as falling.
SHRINKING = 0.9


#: A fit has settled only when no selected group's mean norm over the last window is more
#: than ``1 - STEADY`` below its mean over the window before (a group that keeps
#: shrinking at this rate is on its way to zero, however slowly) ...
STEADY = 0.95


#: ... by more than ``NOISE`` standard errors of that difference: on small data,
#: mini-batch noise moves a group at its equilibrium by more than ``1 - STEADY`` from
#: epoch to epoch, which a comparison of two single epochs reads as shrinking. The same
#: allowance applies to the objective's plateau.
NOISE = 2.0


#: Largest lag-1 autocorrelation of epoch-to-epoch noise that :func:`_noise` allows for
#: (its variance of a window mean at most (1 + 0.9) / (1 - 0.9) = 19 times that of
#: independent epochs).
MAX_AUTOCORRELATION = 0.9


def _window_means(losses, width):
    losses = np.asarray(losses, dtype=np.float64)
    return float(losses[-2 * width : -width].mean()), float(losses[-width:].mean())


def _tolerated_change(losses, recent):
    """How much two window means may differ on a plateau: ``STILL_FALLING`` of the fit's
    whole decrease so far, or ``FLAT`` of the loss, whichever is larger."""
    return max(STILL_FALLING * abs(float(losses[0]) - recent), FLAT * abs(recent))


def plateau_tolerance(losses):
    """How far the loss of a fit that ended on a plateau may move without training
    noticing: what :func:`still_falling` tolerates between its last two windows
    (``STILL_FALLING`` of the whole decrease, or ``FLAT`` of the loss)."""
    return _tolerated_change(losses, _window_means(losses, ending_width(len(losses)))[1])


def still_falling(losses, width):
    """Whether the mean of the last ``width`` losses is clearly below the ``width`` before.

    Parameters
    ----------
    losses : array-like of float
        Training objective per epoch.
    width : int
        Epochs per window.

    Returns
    -------
    falling : bool
    before, recent : float
        Means of the two windows.
    """
    before, recent = _window_means(losses, width)
    return before - recent > _tolerated_change(losses, recent), before, recent


def ending_width(n_epochs):
    """Epochs per window when a fit's end is judged (by the ConvergenceMonitor and the
    drop at the end of a fixed budget): a tenth of them, at least one."""
    return max(1, n_epochs // 10)


def _noise(values, width):
    """``NOISE`` standard errors of the difference of the means of the last two windows
    of ``values`` (along axis 0; 0 for windows of one value).

    Mini-batch noise is not independent from epoch to epoch: with momentum, and as a
    group wanders about its equilibrium, consecutive epochs are alike, and the mean of
    ``width`` epochs whose lag-1 autocorrelation is ``rho`` varies about ``(1 + rho) /
    (1 - rho)`` times as much as that of ``width`` independent ones (an AR(1) process);
    read as independent, such noise makes live groups look "shrinking". The spread and
    ``rho`` are measured on what is left of both windows after one straight line, so
    that a steady trend (a group on its way to zero: its log-norm falls linearly)
    counts as a change, not as noise; ``rho`` is pooled over the columns, corrected for
    its estimate's bias (``(1 + 3 rho) / n`` on ``n`` values) and kept in
    [0, ``MAX_AUTOCORRELATION``].
    Windows of fewer than four values (too few to measure a correlation) use their
    plain variances.
    """
    values = np.asarray(values, dtype=np.float64)
    if width < 2:
        return np.zeros(values.shape[1:])
    if width < 4:
        a, b = values[-2 * width : -width], values[-width:]
        return NOISE * np.sqrt((a.var(axis=0, ddof=1) + b.var(axis=0, ddof=1)) / width)
    n = 2 * width
    recent = values[-n:]
    t = (np.arange(n) - (n - 1) / 2).reshape((n,) + (1,) * (values.ndim - 1))
    centred = recent - recent.mean(axis=0)
    residuals = centred - t * (t * centred).sum(axis=0) / (t * t).sum()
    squares = residuals * residuals
    total = float(squares.sum())
    rho = float((residuals[1:] * residuals[:-1]).sum()) / total if total > 0 else 0.0
    rho = min(max(rho + (1 + 3 * rho) / n, 0.0), MAX_AUTOCORRELATION)
    variance = squares.sum(axis=0) / (n - 2)
    return NOISE * np.sqrt(2 * variance * (1 + rho) / (1 - rho) / width)


def on_plateau(losses, width, noise=False):
    """Whether the last two windows of ``losses`` have the same mean, up to what
    :func:`still_falling` tolerates: neither falling nor rising (a rising loss at a
    constant rate is instability, not convergence). With ``noise=True`` a difference
    within ``NOISE`` standard errors of the two means (mini-batch noise) is tolerated too."""
    before, recent = _window_means(losses, width)
    tolerated = _tolerated_change(losses, recent)
    if noise:
        tolerated = max(tolerated, float(_noise(losses, width)))
    return abs(before - recent) <= tolerated


def still_shrinking(norms, width, zero_tol):
    """Mask of the groups whose log-norm fell, from the window of ``width`` epochs before
    the last to the last, by more than ``-log(STEADY)`` and by more than ``NOISE``
    standard errors.

    Parameters
    ----------
    norms : ndarray of shape (2 * width, n_groups)
        Group norms at the end of each epoch (norms below ``zero_tol`` count as
        ``zero_tol``).
    width : int
    zero_tol : float

    Returns
    -------
    mask : ndarray of bool of shape (n_groups,)
    """
    logs = np.log(np.maximum(np.asarray(norms, dtype=np.float64), zero_tol))
    drop = logs[:width].mean(axis=0) - logs[width:].mean(axis=0)
    return (drop > -math.log(STEADY)) & (drop > _noise(logs, width))


def in_transit(norms, before, zero_tol):
    """Mask of selected groups (norm >= ``zero_tol``) that are on their way to zero.

    Parameters
    ----------
    norms, before : ndarray of shape (n_groups,)
        Group norms of one tensor now and one window earlier.
    zero_tol : float

    Returns
    -------
    mask : ndarray of bool of shape (n_groups,)
    """
    norms, before = np.asarray(norms, np.float64), np.asarray(before, np.float64)
    tiny = norms < TINY * norms.max(initial=0.0)
    shrinking = (norms < SHRINKING * before) & (tiny | (norms < IN_TRANSIT * before))
    return (norms >= zero_tol) & shrinking
