"""Ctrl-C across threads and processes: a flag file that training checks.

A parallel path's workers (processes or threads) do not receive the SIGINT of the
process that started them, so the path forwards it by creating a file; fits running
under :func:`interrupt_on` check it after every batch. Used by the path engine and by
the skorch plumbing of the estimators; it knows neither.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

__all__ = ["InterruptRequested", "interrupt_on", "interrupt_requested"]


class InterruptRequested(KeyboardInterrupt):
    """A Ctrl-C forwarded to this thread through :func:`interrupt_on` (a ``KeyboardInterrupt``).

    A parallel path's workers do not receive the SIGINT of the process that started them;
    the path forwards it through a flag file instead. Telling the two apart lets the path
    know whether the interrupt reached this process itself.
    """


_interrupt_flag = threading.local()


@contextmanager
def interrupt_on(flag):
    """Within the block, training in this thread stops as on Ctrl-C once the file ``flag``
    exists (checked after every batch and by paths before every lam).

    How a parallel path forwards a Ctrl-C to fits running in worker processes or threads,
    which Python's SIGINT does not reach: no signal handlers, any thread, any process on
    the machine. ``flag=None`` disables it.
    """
    previous = getattr(_interrupt_flag, "path", None)
    _interrupt_flag.path = flag
    try:
        yield
    finally:
        _interrupt_flag.path = previous


def interrupt_requested():
    """True when an :func:`interrupt_on` flag of this thread has been raised."""
    flag = getattr(_interrupt_flag, "path", None)
    return flag is not None and os.path.exists(flag)
