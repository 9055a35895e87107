"""Whether a module's forward runs under a tracer (torch.onnx, torch.export, TorchScript)."""

from __future__ import annotations

import torch

__all__ = ["tracing"]


def tracing():
    """``True`` while torch records a graph of the forward pass: code that leaves torch
    (numpy, numba) must then take a torch path, or its results become constants."""
    return bool(
        torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_compiling()
    )
