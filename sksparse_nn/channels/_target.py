"""A lam for a target size: bisection on lam for a share of FLOPs or parameters kept."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sklearn.base import clone

__all__ = ["TargetFit", "lam_for_target"]


@dataclass
class TargetFit:
    """What :func:`lam_for_target` found.

    Attributes
    ----------
    lam : float
        The lam of ``estimator``.
    share : float
        The share of FLOPs (or parameters) its compacted model keeps.
    estimator : estimator
        Fitted at ``lam``.
    trials : list of (float, float)
        Every ``(lam, share)`` fitted, in order.
    """

    lam: float
    share: float
    estimator: object
    trials: list = field(default_factory=list)


def _share(estimator, X, y, lam, what):
    est = clone(estimator).set_params(lam=lam, warm_start=False).fit(X, y)
    _, report = est.compact(return_report=True)
    if what == "flops":
        return report.flops_after / max(report.flops_before, 1), est
    return report.params_after / max(report.params_before, 1), est


def lam_for_target(estimator, X, y, *, flops=None, params=None, tol=0.03, max_fits=10):
    """Find a lam whose compacted model keeps a requested share of FLOPs or parameters.

    Cold fits of clones of ``estimator`` (``warm_start=False``), the first at its own
    ``lam``; lam is multiplied or divided by 4 until the target share is bracketed,
    then bisected geometrically. The share is
    ``compact(return_report=True)``'s FLOPs (every ``Conv1d`` / ``Conv2d`` / ``Linear``,
    from the traced shapes: :func:`~sksparse_nn.compaction.count_flops`) or parameters
    after over before. The size is not strictly monotone in lam (training is
    stochastic), so the result is the fit closest to the target among those that meet
    it (share at most the target), or the smallest model when none does.

    Parameters
    ----------
    estimator : estimator
        With ``lam``, ``warm_start`` and ``compact(return_report=True)`` (e.g.
        :class:`~sksparse_nn.DGatedNeuralNetClassifier` with ``gates="channels"``); not
        fitted or changed.
    X, y : array-like
        Training data.
    flops, params : float in (0, 1]
        The share to keep; give exactly one.
    tol : float, default=0.03
        Stop when a fit meets the target within ``tol`` (a share in ``[target - tol,
        target]``): closer than that, training noise decides.
    max_fits : int, default=10
        At most this many fits (each a full training: the cost of the search).

    Returns
    -------
    result : TargetFit
        ``lam``, ``share``, the fitted ``estimator`` and every trial.
    """
    if (flops is None) == (params is None):
        raise ValueError("Give exactly one of flops= and params= (the share to keep).")
    what, target = ("flops", flops) if flops is not None else ("params", params)
    if not 0 < target <= 1:
        raise ValueError(f"{what}={target!r} must be a share in (0, 1].")
    if not max_fits >= 1:
        raise ValueError(f"max_fits must be >= 1, got {max_fits!r}.")
    trials, fits = [], []

    def run(lam):
        share, est = _share(estimator, X, y, lam, what)
        trials.append((lam, share))
        fits.append((lam, share, est))
        return share

    lam = float(estimator.lam)
    share = run(lam)
    low = high = None  # lams with a share above / at most the target
    if share > target:
        low = lam
    else:
        high = lam
    while len(fits) < max_fits and not (target - tol <= share <= target):
        if low is None:
            lam = high / 4
        elif high is None:
            lam = low * 4
        else:
            lam = math.sqrt(low * high)
        share = run(lam)
        if share > target:
            low = lam
        else:
            high = lam
    meeting = [f for f in fits if f[1] <= target]
    lam, share, est = max(meeting, key=lambda f: f[1]) if meeting else min(fits, key=lambda f: f[1])
    return TargetFit(lam, share, est, trials)
