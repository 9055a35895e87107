"""The optional dependencies of shipping, with an error naming the extra to install."""

from __future__ import annotations

import importlib

__all__ = ["require"]

_EXTRA = "export"


def require(name, purpose):
    """Import the optional module ``name`` or raise an ImportError naming the extra."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        package = name.split(".")[0]
        raise ImportError(
            f"{purpose} needs the optional dependency {package!r}: install it with "
            f"pip install 'sksparse-nn[{_EXTRA}]' (onnx, onnxruntime, skl2onnx, skops)."
        ) from exc
