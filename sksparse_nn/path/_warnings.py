"""The path's warnings (diverged points, an unfinished extension, an interruption, fits
that did not converge), raised once in the calling process."""

from __future__ import annotations

import warnings

from sklearn.exceptions import ConvergenceWarning


def _report(full, folds, splits, completed, estimator):
    """The path's warnings, once, in the calling process (workers' warnings are lost)."""
    if full["diverged"] is not None:
        lam, message = full["diverged"]
        warnings.warn(
            f"Training diverged at lam={lam:.4g}; the path stops there (recorded as failed). "
            f"{message}",
            UserWarning,
            stacklevel=3,
        )
    for k, fold in enumerate(folds):
        if fold["diverged"] is not None:
            lam, message = fold["diverged"]
            warnings.warn(
                f"CV fold {k + 1}: training diverged at lam={lam:.4g}; its scores are NaN "
                f"from there on, and those lams cannot be chosen. {message}",
                UserWarning,
                stacklevel=3,
            )
        for lam, message in fold.get("diverged_below", []):
            warnings.warn(
                f"CV fold {k + 1}: training diverged at lam={lam:.4g}, below the grid; its "
                f"scores there are NaN, and those lams cannot be chosen. {message}",
                UserWarning,
                stacklevel=3,
            )
    if full.get("unfinished_extension"):
        lam = full["points"][-1]["lam"]
        warnings.warn(
            f"The default grid, extended upward beyond lam_max as far as it grows (up to "
            f"lam={lam:.4g}), ends at a model that still selects something: the path does "
            "not reach the empty model. Pass lams reaching higher to see the rest.",
            UserWarning,
            stacklevel=3,
        )
    if not completed:
        n = len(full["points"])
        text = f"Regularization path interrupted: returning the {n} points finished so far"
        if splits:
            text += (
                f" and the {len(folds)} of {len(splits)} CV folds that finished (their scores "
                "are kept); best_lam_ and lam_1se_ are not chosen from part of the work"
            )
        warnings.warn(text + " (completed=False).", UserWarning, stacklevel=3)
    _warn_not_converged(full, folds, estimator)


def _warn_not_converged(full, folds, estimator):
    """One ConvergenceWarning for all path points whose fit warned that it had not
    converged, quoting the first such fit's own message (what moved, and the advice)."""
    found = [(p["lam"], p["not_converged"]) for p in full["points"] if p["not_converged"]]
    for fold in folds:
        found.extend(fold["not_converged"])
    if not found:
        return
    lams = sorted({lam for lam, _ in found})
    n_fits = len(full["points"]) + sum(f.get("n_fits", len(f["scores"])) for f in folds)
    shown = ", ".join(f"{lam:.3g}" for lam in lams[:5]) + (", ..." if len(lams) > 5 else "")
    lam, first = found[0]
    warnings.warn(
        f"{type(estimator).__name__}: at {len(lams)} of the path's lams (of {n_fits} fits) "
        f"training ended before it converged (lam={shown}). The fit at lam={lam:.3g} "
        f"said: {first}",
        ConvergenceWarning,
        stacklevel=4,
    )


_LIMITS = {
    "floor": "the extension's floor",
    "points": "as many lams as the grid has",
    "diverged": "a block whose training diverged on all the data",
}


def _warn_extension_limit(path, limit):
    """The CV choice still sat at the densest lam when the downward extension stopped."""
    warnings.warn(
        f"The cross-validated choice is the densest lam, lam={path.lams[0]:.4g}, after "
        f"{path.n_below} lams below the default grid; the extension stopped at "
        f"{_LIMITS[limit]} (extension_limit={limit!r}). Pass lams reaching lower to see "
        "whether a smaller penalty scores better.",
        UserWarning,
        stacklevel=3,
    )
