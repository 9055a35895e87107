"""Loaders of the real benchmark data: a local ``<name>.npz`` file, else a download.

The descriptions (``DESCR``) are the files ``descr/<name>.rst`` of this package.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._fetch import download_benchmark

__all__ = ["BENCHMARK_NAMES", "DATA_HOME_ENV", "load_benchmark", "load_wine_quality"]

#: Environment variable naming the default directory searched by :func:`load_benchmark`.
DATA_HOME_ENV = "SKSPARSE_NN_DATA"

#: Names accepted by :func:`load_benchmark`.
BENCHMARK_NAMES = (
    "coil20",
    "coil20_20x20",
    "isolet",
    "madelon",
    "mnist_t10k",
    "wine_red",
    "wine_white",
)

_WINE_FEATURES = (
    "fixed acidity",
    "volatile acidity",
    "citric acid",
    "residual sugar",
    "chlorides",
    "free sulfur dioxide",
    "total sulfur dioxide",
    "density",
    "pH",
    "sulphates",
    "alcohol",
)

_TASK = {
    "isolet": "classification",
    "coil20": "classification",
    "coil20_20x20": "classification",
    "madelon": "classification",
    "mnist_t10k": "classification",
    "wine_red": "regression",
    "wine_white": "regression",
}

_IMAGE_SHAPE = {"coil20": (32, 32), "coil20_20x20": (20, 20), "mnist_t10k": (28, 28)}


def _default_feature_names(name, n_features):
    """Feature names for sets whose files carry none (the names OpenML uses)."""
    if name.startswith("wine") and n_features == len(_WINE_FEATURES):
        return list(_WINE_FEATURES)
    prefix = {"isolet": "f", "madelon": "V"}.get(name, "pixel")
    return [f"{prefix}{j + 1}" for j in range(n_features)]


def _target_names(name, y):
    if _TASK[name] == "regression":
        return None
    if name == "isolet":
        return np.array([chr(ord("A") + k) for k in range(26)], dtype=object)
    if name == "madelon":
        return np.array(["-1", "+1"], dtype=object)
    if name == "mnist_t10k":
        return np.array([str(k) for k in range(10)], dtype=object)
    if name.startswith("coil20"):
        return np.array([f"obj{k + 1}" for k in range(20)], dtype=object)
    return np.unique(y)


def _resolve_data_home(data_home):
    """The directory to look in: ``data_home``, else ``$SKSPARSE_NN_DATA``, else None."""
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV) or None
    if data_home is None:
        return None
    return Path(os.path.expandvars(os.fspath(data_home))).expanduser()


def _load_npz(path):
    """Read a benchmark archive with keys X, y and optionally X_test, y_test."""
    with np.load(path, allow_pickle=False) as archive:
        keys = set(archive.files)
        missing = {"X", "y"} - keys
        if missing:
            raise ValueError(
                f"{path} must contain the arrays 'X' and 'y'; missing {sorted(missing)}."
            )
        if ("X_test" in keys) != ("y_test" in keys):
            raise ValueError(f"{path} must contain both 'X_test' and 'y_test', or neither.")
        arrays = {key: archive[key] for key in ("X", "y", "X_test", "y_test") if key in keys}
        feature_names = archive["feature_names"] if "feature_names" in keys else None

    X, y = arrays["X"], arrays["y"]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(
            f"{path}: expected X of shape (n, p) and y of shape (n,), got {X.shape} and {y.shape}."
        )
    X_test, y_test = arrays.get("X_test"), arrays.get("y_test")
    if X_test is not None and (
        X_test.ndim != 2
        or y_test.ndim != 1
        or X_test.shape[0] != y_test.shape[0]
        or X_test.shape[1] != X.shape[1]
    ):
        raise ValueError(
            f"{path}: X_test/y_test have shapes {X_test.shape}/{y_test.shape}, "
            f"which do not match X of shape {X.shape}."
        )
    if feature_names is not None:
        feature_names = [str(f) for f in feature_names]
        if len(feature_names) != X.shape[1]:
            raise ValueError(
                f"{path}: {len(feature_names)} feature_names for {X.shape[1]} features."
            )
    return Bunch(X=X, y=y, X_test=X_test, y_test=y_test, feature_names=feature_names)


def _descr(name):
    """The description of a benchmark, read from ``descr/<name>.rst``."""
    text = resources.files(__package__).joinpath("descr", f"{name}.rst").read_text("utf-8")
    return text.rstrip("\n")


def load_benchmark(name, data_home=None, *, as_frame=False, download_if_missing=True):
    """Load a real benchmark data set, from a local directory or from its public source.

    The loader first looks for the file ``<name>.npz`` in ``data_home``. When
    ``data_home`` is None the environment variable ``SKSPARSE_NN_DATA`` names the
    directory instead. Such a file is a :func:`numpy.savez` archive with the arrays ``X``
    and ``y``, optionally ``X_test`` and ``y_test`` (a fixed split) and
    ``feature_names``; its values are returned as stored (no scaling).

    If there is no such file, the data are downloaded (needs an internet connection):

    * ``"isolet"``, ``"madelon"``: :func:`sklearn.datasets.fetch_openml` (data sets
      ``"isolet"`` and ``"madelon"``, version 1), which caches them in scikit-learn's
      data home. OpenML stores each fixed split as one table with the training rows
      first; the first 6238 (ISOLET) or 2000 (MADELON) rows become ``X``/``y``, the
      rest ``X_test``/``y_test``.
    * ``"mnist_t10k"``: ``fetch_openml("mnist_784")``; the last 10,000 of its 70,000
      rows are the official MNIST test images and are returned as ``X``/``y``.
    * ``"coil20"``, ``"coil20_20x20"``: COIL-20 is not on OpenML; the 32x32 ``COIL20.mat``
      is read from the scikit-feature GitHub repository at a fixed commit (checked
      against its git blob id) and, for ``"coil20_20x20"``, area-averaged to 20x20.
    * ``"wine_red"``, ``"wine_white"``: the csv files of the UCI repository.

    Downloads other than OpenML's are not cached; to avoid repeating them, save the
    returned arrays with ``numpy.savez_compressed(<dir>/<name>.npz, X=..., y=...)`` and
    pass ``data_home=<dir>``.

    Parameters
    ----------
    name : {"isolet", "coil20", "coil20_20x20", "madelon", "mnist_t10k", "wine_red", \
"wine_white"}
        The data set.
    data_home : str or path-like, default=None
        Directory holding ``<name>.npz`` files. Defaults to ``$SKSPARSE_NN_DATA``.
    as_frame : bool, default=False
        If True, ``X`` and ``X_test`` are :class:`pandas.DataFrame` with the feature
        names as columns and ``y``, ``y_test`` are :class:`pandas.Series`.
    download_if_missing : bool, default=True
        If False, raise :class:`FileNotFoundError` instead of downloading when no local
        file is found.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With the fields

        X : ndarray of shape (n_samples, n_features)
            float32 (uint8 pixels for ``"mnist_t10k"``), unscaled.
        y : ndarray of shape (n_samples,)
            int64 class labels ``0..K-1``, or float32 quality scores for wine.
        X_test, y_test : ndarray or None
            The fixed test split (ISOLET, MADELON); None for the other sets.
        feature_names : ndarray of str
            Column names (the UCI names for wine, ``f1..``/``V1..``/``pixel1..``
            otherwise, as on OpenML).
        target_names : ndarray or None
            Class names (None for regression).
        task : {"classification", "regression"}
            What ``y`` holds.
        image_shape : tuple or None
            ``(height, width)`` for image sets; see ``DESCR`` for the pixel order.
        name : str
            The data set's name.
        source : str
            The file or the address the data came from.
        DESCR : str
            A description of the data set.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or a local file is malformed.
    FileNotFoundError
        If no local file exists and ``download_if_missing=False``.
    OSError
        If the download fails (for example, no internet connection).

    Examples
    --------
    >>> from sksparse_nn.datasets import load_benchmark
    >>> data = load_benchmark("madelon", data_home="path/to/data")  # doctest: +SKIP
    >>> data.X.shape, data.X_test.shape  # doctest: +SKIP
    ((2000, 500), (600, 500))
    """
    if not isinstance(name, str) or name.lower() not in BENCHMARK_NAMES:
        raise ValueError(
            f"Unknown benchmark {name!r}. Valid names are: {', '.join(BENCHMARK_NAMES)}."
        )
    name = name.lower()
    directory = _resolve_data_home(data_home)
    path = None if directory is None else directory / f"{name}.npz"

    if path is not None and path.is_file():
        data, source = _load_npz(path), str(path)
    else:
        where = (
            f"{path} does not exist"
            if path is not None
            else f"no data_home was given and ${DATA_HOME_ENV} is not set"
        )
        how_to = (
            f"Put {name}.npz (arrays X, y and optionally X_test, y_test) into a directory "
            f"and pass it as data_home or set ${DATA_HOME_ENV} to it."
        )
        if not download_if_missing:
            raise FileNotFoundError(f"Benchmark {name!r} not found locally ({where}). {how_to}")
        try:
            data, source = download_benchmark(name)
        except Exception as exc:
            raise OSError(
                f"Benchmark {name!r} was not found locally ({where}) and downloading it "
                f"failed: {type(exc).__name__}: {exc}. {how_to}"
            ) from exc

    n_features = data.X.shape[1]
    feature_names = data.feature_names or _default_feature_names(name, n_features)
    X, y, X_test, y_test = data.X, data.y, data.X_test, data.y_test
    if as_frame:
        import pandas as pd

        target = "quality" if _TASK[name] == "regression" else "class"
        X = pd.DataFrame(X, columns=feature_names)
        y = pd.Series(y, name=target)
        if X_test is not None:
            X_test = pd.DataFrame(X_test, columns=feature_names)
            y_test = pd.Series(y_test, name=target)

    return Bunch(
        X=X,
        y=y,
        X_test=X_test,
        y_test=y_test,
        feature_names=np.array(feature_names, dtype=object),
        target_names=_target_names(name, data.y),
        task=_TASK[name],
        image_shape=_IMAGE_SHAPE.get(name),
        name=name,
        source=source,
        DESCR=_descr(name),
    )


def load_wine_quality(color="white", data_home=None, *, as_frame=False, download_if_missing=True):
    """Load the red or white Wine Quality data (a regression task).

    A thin wrapper around :func:`load_benchmark` with ``name="wine_" + color``; see there
    for where the data are read from.

    Parameters
    ----------
    color : {"white", "red"}, default="white"
        Which of the two data sets (4898 white or 1599 red wines).
    data_home : str or path-like, default=None
        Directory holding ``wine_white.npz`` / ``wine_red.npz``. Defaults to
        ``$SKSPARSE_NN_DATA``.
    as_frame : bool, default=False
        Return pandas objects instead of numpy arrays.
    download_if_missing : bool, default=True
        Download the UCI csv file when no local file is found.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``X`` (n_samples, 11) float32, ``y`` quality scores as float32, ``X_test`` and
        ``y_test`` None, ``feature_names`` (the 11 UCI column names), and the other fields
        described in :func:`load_benchmark`.

    Examples
    --------
    >>> from sksparse_nn.datasets import load_wine_quality
    >>> data = load_wine_quality("red", data_home="path/to/data")  # doctest: +SKIP
    >>> data.X.shape  # doctest: +SKIP
    (1599, 11)
    """
    if color not in ("white", "red"):
        raise ValueError(f"color must be 'white' or 'red', got {color!r}.")
    return load_benchmark(
        f"wine_{color}",
        data_home,
        as_frame=as_frame,
        download_if_missing=download_if_missing,
    )
