"""Parameter checks shared by the simulations (integers and non-negative numbers)."""

from __future__ import annotations

import numbers

import numpy as np


def _check_int(value, name, min_value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {value}.")
    return int(value)


def _check_nonneg(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}.")
    return float(value)
