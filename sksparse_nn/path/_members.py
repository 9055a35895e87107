"""The choice between a family's members searched on the same folds: the network's CV
path against its linear member's (the model whose non-linear part is zero)."""

from __future__ import annotations

import numpy as np

__all__ = ["chosen_scores", "prefer_linear"]


def chosen_scores(path, rule):
    """Per-fold CV scores at the lam ``rule`` chooses on ``path``, or None when it
    chooses none.

    Parameters
    ----------
    path : RegularizationPath
        A path with CV scores.
    rule : {"best", "1se"}

    Returns
    -------
    scores : ndarray of shape (n_folds,) or None
    """
    lam = path.lam_1se_ if rule == "1se" else path.best_lam_
    if lam is None:
        return None
    return np.asarray(path.cv_scores, dtype=np.float64)[:, path.index_of(lam)]


def prefer_linear(network, linear, rule="best"):
    """Whether the linear member's search wins over the network's.

    Both paths ran on the same folds; each is read at the lam ``rule`` chooses on it,
    and the two are compared fold by fold (the folds share their rows, so the paired
    differences cancel what makes one fold harder than another). ``"best"``: the linear
    member wins unless the network's mean CV score is higher. ``"1se"``: it wins unless
    the network is better by more than one standard error of the paired differences
    (the simpler model within one standard error, as the one-SE rule chooses lam).

    Parameters
    ----------
    network, linear : RegularizationPath
        The CV paths of the network and of its linear member (``best_lam_`` and
        ``lam_1se_`` set, or None where no lam could be chosen).
    rule : {"best", "1se"}, default="best"

    Returns
    -------
    bool
        True when the linear member is to be kept.
    """
    net, lin = chosen_scores(network, rule), chosen_scores(linear, rule)
    if net is None or lin is None:
        return net is None and lin is not None
    both = np.isfinite(net) & np.isfinite(lin)
    if not both.any():
        return False
    gain = net[both] - lin[both]  # the network's, fold by fold
    if rule != "1se":
        return not gain.mean() > 0
    se = gain.std(ddof=1) / np.sqrt(gain.size) if gain.size > 1 else 0.0
    return not gain.mean() > se
