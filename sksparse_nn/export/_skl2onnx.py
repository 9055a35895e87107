"""skl2onnx converters of the package's estimators (filled in below)."""

from __future__ import annotations

__all__ = ["convert", "register_converters"]


def register_converters():
    raise NotImplementedError


def convert(estimator, **kwargs):
    raise NotImplementedError
