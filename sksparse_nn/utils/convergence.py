"""How a fit says that it did not converge, and how a path collects what its fits say.

A fit calls :func:`warn_convergence`: a ``ConvergenceWarning`` for the caller, unless the
fit runs inside :func:`collecting_convergence` on the same thread, where the message is
recorded instead (a regularization path reports all its points' messages in one
warning). Thread-local, with no process-wide warnings state: the CV folds of a
thread-based joblib backend run their paths beside the full-data path, and
``warnings.catch_warnings`` (process-wide in Python < 3.14) would take one thread's
warnings for another's.
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

from ..exceptions import ConvergenceWarning

__all__ = ["collecting_convergence", "warn_convergence"]

_state = threading.local()


def warn_convergence(message, stacklevel=1):
    """``warnings.warn(message, ConvergenceWarning)`` (``stacklevel`` as there, counted
    from the caller), or inside :func:`collecting_convergence` on this thread, record
    ``message`` there."""
    messages = getattr(_state, "messages", None)
    if messages is not None:
        messages.append(str(message))
        return
    warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel + 1)


@contextmanager
def collecting_convergence():
    """Collect the messages of :func:`warn_convergence` on this thread (a list, in the
    order they came); nested uses collect separately."""
    previous = getattr(_state, "messages", None)
    _state.messages = messages = []
    try:
        yield messages
    finally:
        _state.messages = previous
