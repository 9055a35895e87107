"""Downloads of the real benchmark data from their public sources (OpenML, GitHub, UCI).

Each ``_fetch_*`` function returns a :class:`~sklearn.utils.Bunch` with ``X``, ``y``,
``X_test``, ``y_test`` (None without a fixed split) and ``feature_names`` (None when the
source has none); :mod:`._loaders` turns it into the public data set.
"""

from __future__ import annotations

import hashlib
import io
import urllib.request
import warnings

import numpy as np
from sklearn.datasets import fetch_openml
from sklearn.utils import Bunch

_WINE_URL = (
    "https://archive.ics.uci.edu/ml/machine-learning-databases/wine-quality/winequality-{color}.csv"
)
# COIL-20 (processed, 32x32) is not on OpenML. The same file as the one behind the
# documented coil20.npz is read from scikit-feature's repository at a fixed commit and
# checked against its git blob id.
_COIL20_URL = (
    "https://raw.githubusercontent.com/jundongl/scikit-feature/"
    "48cffad4e88ff4b9d2f1c7baffb314d1b3303792/skfeature/data/COIL20.mat"
)
_COIL20_BLOB = "8f374909e08bf45766a0ec763923d955543006fd"


def _encode_labels(y):
    """Map class labels (often strings such as '1'..'26') to 0..K-1 in numeric order."""
    classes, inverse = np.unique(np.asarray(y), return_inverse=True)
    try:
        order = np.argsort(classes.astype(float), kind="stable")
    except (TypeError, ValueError):  # not numbers: keep the sorted order of np.unique
        order = np.arange(classes.size)
    rank = np.empty(classes.size, dtype=np.int64)
    rank[order] = np.arange(classes.size)
    return rank[inverse.ravel()]


def _download(url, timeout=60):
    """Return the bytes at ``url`` (kept in one place so that tests can replace it)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def _fetch_from_openml(name):
    """Download a benchmark from OpenML with :func:`sklearn.datasets.fetch_openml`."""
    openml_name = {"isolet": "isolet", "madelon": "madelon", "mnist_t10k": "mnist_784"}[name]
    raw = fetch_openml(openml_name, version=1, as_frame=False, parser="auto")
    X = np.asarray(raw.data)
    y = _encode_labels(raw.target)
    feature_names = [str(f) for f in raw.feature_names]
    X_test = y_test = None
    if name == "mnist_t10k":
        # mnist_784 lists the 60,000 training images first and the 10,000 test images last.
        X, y = X[-10_000:].astype(np.uint8), y[-10_000:]
    else:
        # OpenML stores the fixed split as one table, training rows first.
        n_train, n_total = {"isolet": (6238, 7797), "madelon": (2000, 2600)}[name]
        X = X.astype(np.float32)
        if X.shape[0] == n_total:
            X, X_test = X[:n_train], X[n_train:]
            y, y_test = y[:n_train], y[n_train:]
        else:
            warnings.warn(
                f"OpenML's {openml_name!r} has {X.shape[0]} rows, not the expected "
                f"{n_total}; returning all rows as X/y without the fixed train/test split.",
                stacklevel=3,
            )
    return Bunch(X=X, y=y, X_test=X_test, y_test=y_test, feature_names=feature_names)


def _fetch_coil20(name):
    """Download COIL-20 (32x32) and derive the 20x20 version if asked for."""
    content = _download(_COIL20_URL)
    blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    if blob != _COIL20_BLOB:
        raise OSError(
            f"The file downloaded from {_COIL20_URL} does not have the expected git blob "
            f"id {_COIL20_BLOB} (got {blob})."
        )
    from scipy.io import loadmat

    mat = loadmat(io.BytesIO(content))
    X = np.asarray(mat["X"], dtype=np.float32)
    y = np.asarray(mat["Y"]).ravel().astype(np.int64) - 1
    if name == "coil20_20x20":
        X = _area_downsample(X, 32, 20)
    return Bunch(X=X, y=y, X_test=None, y_test=None, feature_names=None)


def _area_matrix(n_in, n_out):
    """Weights of a 1-D area (box) resampling from ``n_in`` to ``n_out`` pixels."""
    edges_in = np.arange(n_in + 1, dtype=float)
    edges_out = np.linspace(0.0, n_in, n_out + 1)
    low = np.maximum(edges_out[:-1, None], edges_in[None, :-1])
    high = np.minimum(edges_out[1:, None], edges_in[None, 1:])
    weights = np.clip(high - low, 0.0, None)
    return weights / weights.sum(axis=1, keepdims=True)


def _area_downsample(X, side_in, side_out):
    """Area-average flattened square images (column-major) to a smaller square."""
    A = _area_matrix(side_in, side_out)
    images = X.astype(np.float64).reshape(-1, side_in, side_in, order="F")
    small = np.einsum("ik,nkl,jl->nij", A, images, A)
    return small.reshape(len(X), -1, order="F").astype(np.float32)


def _fetch_wine(name):
    """Download a Wine Quality csv file from the UCI repository."""
    import pandas as pd

    color = name.split("_", 1)[1]
    frame = pd.read_csv(io.BytesIO(_download(_WINE_URL.format(color=color))), sep=";")
    feature_names = [str(c) for c in frame.columns[:-1]]
    X = frame.iloc[:, :-1].to_numpy(dtype=np.float32)
    y = frame["quality"].to_numpy(dtype=np.float32)
    return Bunch(X=X, y=y, X_test=None, y_test=None, feature_names=feature_names)


def download_benchmark(name):
    if name in ("isolet", "madelon", "mnist_t10k"):
        return _fetch_from_openml(name), "OpenML (sklearn.datasets.fetch_openml)"
    if name.startswith("coil20"):
        return _fetch_coil20(name), _COIL20_URL
    return _fetch_wine(name), _WINE_URL.format(color=name.split("_", 1)[1])
