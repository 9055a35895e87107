"""The callbacks every fit gets."""

from __future__ import annotations

from skorch.callbacks import ProgressBar

from .early_stopping import StopWhenConverged


def make_callbacks(*, lr_plan, tol, verbose):
    """The callbacks of a fit: the learning-rate plan (a callback), the relative-decrease
    stop of ``tol`` and an optional progress bar."""
    callbacks = [("lr_schedule", lr_plan)]
    if tol is not None:
        callbacks.append(("converged", StopWhenConverged(tol)))
    if verbose:
        callbacks.append(("progress", ProgressBar()))
    return callbacks
