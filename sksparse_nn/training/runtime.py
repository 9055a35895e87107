"""Where a fit runs: the device check, threads, the random stream, subnormal floats."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from threadpoolctl import ThreadpoolController


def check_device(device, estimator_name):
    """``device`` as a ``torch.device`` this torch build can use; a ValueError naming the
    parameter otherwise (torch raises an AssertionError for an absent backend)."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"{estimator_name}: device={device!r} is not a torch device: {exc}"
        ) from None
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    if device.type != "cpu" and (available is None or not available()):
        raise ValueError(
            f"{estimator_name}: device={str(device)!r} is not available in this torch build "
            f"(torch {torch.__version__}); use device='cpu'."
        )
    return device


_BLAS = []  # one ThreadpoolController, created on first use (it scans the libraries)


#: ``rows per step * n_features`` up to which a fit runs on one thread: such tensor
#: operations are overhead-bound and extra threads only add synchronization.
SMALL_STEP_WORK = 2**20


@contextmanager
def thread_policy(n_threads, step_work):
    """Run the block with the fit's torch intra-op threads; the caller's setting is restored.

    ``n_threads=None``: one thread (torch and BLAS) when ``step_work`` (rows per optimizer
    step times features) is at most ``SMALL_STEP_WORK``, torch's setting otherwise;
    an integer: that many torch threads.
    """
    if n_threads is None and step_work > SMALL_STEP_WORK:
        yield
        return
    wanted = 1 if n_threads is None else int(n_threads)
    previous = torch.get_num_threads()
    torch.set_num_threads(wanted)
    try:
        if n_threads is None:
            if not _BLAS:
                _BLAS.append(ThreadpoolController())
            with _BLAS[0].limit(limits=1, user_api="blas"):
                yield
        else:
            yield
    finally:
        torch.set_num_threads(previous)


def _flushing_denormals():
    """Whether this thread's CPU arithmetic flushes subnormal float32 numbers to zero."""
    return float(torch.tensor([1e-39], dtype=torch.float32).mul_(1.5)) == 0.0


@contextmanager
def flush_denormals():
    """Subnormal floats flushed to zero on this thread inside the block (where the CPU
    supports it), the caller's setting restored after it.

    An unused D-gated group shrinks geometrically until the fit's end removes it, so its
    factors' product falls below float32's smallest normal number (1.2e-38), where CPU
    arithmetic is far slower. Such values lie some 30 orders of magnitude below
    ``zero_tol``, so flushing them changes no result. ``torch.set_flush_denormal`` sets
    the calling thread only: other threads of torch's pool keep their setting.
    """
    if _flushing_denormals():
        yield
        return
    flushing = torch.set_flush_denormal(True)  # False: not supported here
    try:
        yield
    finally:
        if flushing:
            torch.set_flush_denormal(False)


@contextmanager
def seeded(seed, device="cpu"):
    """Torch's random stream seeded with ``seed`` inside the block, the caller's restored
    after it.

    Only the generators of ``device`` are touched: ``torch.manual_seed`` seeds every
    backend, which is slow when paid at every path point, and the backends outside
    ``fork_rng``'s devices would keep the new state after the block."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cpu":
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            yield
    else:
        with torch.random.fork_rng(devices=[device], device_type=device.type):
            torch.manual_seed(seed)
            yield
