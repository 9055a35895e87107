"""Thread control: the solvers' iterations run with one BLAS thread when their work per
iteration is small."""

from __future__ import annotations

from threadpoolctl import ThreadpoolController

# Per-iteration flop count below which the iterations run with single-threaded BLAS.
SMALL_WORK = 2**20


_CONTROLLER = []


def single_blas_thread():
    """Context limiting BLAS to one thread, with a controller built once per process
    (``threadpool_limits`` rescans the loaded libraries on every call, which costs
    milliseconds in a process with many of them, e.g. with torch imported)."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
