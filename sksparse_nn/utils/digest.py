"""Keys of array values: equal for arrays of equal bytes, never holding the array."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["array_key"]


def array_key(arr):
    """``(dtype, shape, digest of the bytes)`` of ``arr``, or None for an object array.

    A key instead of a copy tells whether an array still holds the values it had (an
    array changed in place gets another key) for 16 bytes, not the array's size; a
    128-bit digest makes two different values with the same key a practical
    impossibility. Bytes, not values: ``-0.0`` and ``0.0`` give different keys, two
    arrays of the same NaNs the same one.
    """
    arr = np.asarray(arr)
    if arr.dtype == object:
        return None
    data = np.ascontiguousarray(arr).data
    return arr.dtype.str, arr.shape, hashlib.blake2b(data, digest_size=16).digest()
