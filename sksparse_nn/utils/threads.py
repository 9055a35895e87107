"""torch's intra-op threads set for a block of work (a path's fits, a worker's)."""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n):
    """Temporarily set torch's intra-op threads to ``n`` (no-op for ``None``)."""
    if n is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
