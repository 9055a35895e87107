"""Whether a module's forward runs under a tracer (torch.onnx, torch.export, TorchScript),
and whether its tensors can go to compiled (numba) loops."""

from __future__ import annotations

import torch

__all__ = ["loops_take", "tracing"]


def tracing():
    """``True`` while torch records a graph of the forward pass: code that leaves torch
    (numpy, numba) must then take a torch path, or its results become constants."""
    return bool(
        torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_compiling()
    )


def loops_take(x, first, out):
    """Whether compiled loops can compute a layer from input ``x``, first-layer weights
    ``first`` and output weights ``out``: CPU tensors of one float dtype, inputs that
    need no gradient (the loops give none), rows and units present, no graph being
    traced (the loops are invisible to it)."""
    return (
        x.device.type == "cpu"
        and first.device.type == "cpu"
        and x.dtype == first.dtype == out.dtype
        and x.dtype in (torch.float32, torch.float64)
        and not x.requires_grad
        and x.shape[0] > 0
        and first.shape[0] > 0
        and not tracing()
    )
