"""What a fit is for: a model to keep, or a score to read.

A regularization path's cross-validation folds fit one model per lam whose one use is
its validation score; the full-data path's models are kept (the chosen one is the
user's). The path marks its folds' fits with :func:`scored_fits`; the training engine
asks :func:`only_scored` when it plans how a fit stops (a scored fit need not wait for
groups still on their way to zero: see
:class:`~sksparse_nn.training.schedule.StopWhenSettled`). Thread-local, as the folds of
a thread-based joblib backend run beside the full-data path.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["only_scored", "scored_fits"]

_state = threading.local()


@contextmanager
def scored_fits():
    """Within the block, fits on this thread are only scored (their models are not kept)."""
    previous = getattr(_state, "scored", False)
    _state.scored = True
    try:
        yield
    finally:
        _state.scored = previous


def only_scored():
    """True inside :func:`scored_fits` on this thread."""
    return getattr(_state, "scored", False)
