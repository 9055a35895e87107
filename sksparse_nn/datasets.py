"""Simulated data sets and loaders for real benchmark data.

Simulations (no data files, fully determined by ``random_state``):

* :func:`make_group_regression` -- sparse linear regression with grouped features, the
  group-lasso set-up of the D-Gating paper (40 groups of 5 features, 7 informative).
* :func:`make_additive_regression` -- a sparse non-linear additive model (5 shape functions
  plus noise features), the set-up used for sparse neural additive models.
* :func:`make_sparse_classification` -- a small non-linear classification problem in which
  only the first few features carry signal.

Real data:

* :func:`load_benchmark` -- ISOLET, COIL-20, MADELON, MNIST (test part), Wine Quality.
  Each set is read from ``<data_home>/<name>.npz`` when such a file exists (``data_home``
  defaults to the environment variable ``SKSPARSE_NN_DATA``) and downloaded from its public
  source otherwise.
* :func:`load_wine_quality` -- a thin wrapper for the two Wine Quality regression sets.

For a small data set that needs no download at all, use the ones bundled with
scikit-learn (:func:`sklearn.datasets.load_diabetes`, :func:`~sklearn.datasets.load_digits`,
:func:`~sklearn.datasets.load_breast_cancer`).
"""

from __future__ import annotations

import hashlib
import io
import numbers
import os
import urllib.request
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import fetch_openml
from sklearn.utils import Bunch, check_random_state

__all__ = [
    "BENCHMARK_NAMES",
    "DATA_HOME_ENV",
    "load_benchmark",
    "load_wine_quality",
    "make_additive_regression",
    "make_group_regression",
    "make_sparse_classification",
]

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


# ---------------------------------------------------------------------------------------
# parameter checks
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# simulations
# ---------------------------------------------------------------------------------------


def make_group_regression(
    n_samples=200,
    n_test=2000,
    n_groups=40,
    group_size=5,
    n_informative=7,
    noise=1.0,
    random_state=None,
):
    r"""Simulate a group-sparse linear regression problem.

    The design follows the group-lasso simulation of the D-Gating paper: ``n_groups``
    contiguous groups of ``group_size`` features each, of which ``n_informative`` groups
    (chosen at random) carry signal. All feature values and all informative weights are
    independent standard normal; the targets are

    .. math:: y = X w + \varepsilon, \qquad \varepsilon \sim \mathcal{N}(0, \sigma^2),

    with :math:`\sigma` = ``noise``. The weights of the other groups are exactly zero.

    Parameters
    ----------
    n_samples : int, default=200
        Number of training samples.
    n_test : int, default=2000
        Number of test samples drawn from the same distribution (may be 0).
    n_groups : int, default=40
        Number of feature groups.
    group_size : int, default=5
        Number of features per group. ``n_features = n_groups * group_size``.
    n_informative : int, default=7
        Number of groups with non-zero weights, between 0 and ``n_groups``.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise added to the targets.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for all random draws. The draws are made in a fixed order
        (informative groups, weights, training data, test data), so changing ``n_test``
        does not change the training set.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With the fields

        X : ndarray of shape (n_samples, n_features), float64
        y : ndarray of shape (n_samples,), float64
        X_test : ndarray of shape (n_test, n_features), float64
        y_test : ndarray of shape (n_test,), float64
        coef : ndarray of shape (n_features,)
            The true weights :math:`w`; zero outside the informative groups.
        groups : ndarray of shape (n_features,), int64
            Group label of each feature: feature ``j`` is in group ``j // group_size``.
        informative_groups : ndarray of int64
            Sorted indices of the informative groups.
        informative_features : ndarray of int64
            Sorted indices of the features in the informative groups.
        noise : float
            The noise standard deviation used.

    See Also
    --------
    make_additive_regression : A sparse non-linear additive regression problem.

    Examples
    --------
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> data.X.shape, data.X_test.shape
    ((200, 200), (2000, 200))
    >>> len(data.informative_groups)
    7
    >>> bool((data.coef[data.groups == data.informative_groups[0]] != 0).all())
    True
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_test = _check_int(n_test, "n_test", 0)
    n_groups = _check_int(n_groups, "n_groups", 1)
    group_size = _check_int(group_size, "group_size", 1)
    n_informative = _check_int(n_informative, "n_informative", 0)
    if n_informative > n_groups:
        raise ValueError(f"n_informative={n_informative} cannot exceed n_groups={n_groups}.")
    noise = _check_nonneg(noise, "noise")
    rng = check_random_state(random_state)

    n_features = n_groups * group_size
    groups = np.repeat(np.arange(n_groups, dtype=np.int64), group_size)
    informative_groups = np.sort(
        rng.choice(n_groups, size=n_informative, replace=False).astype(np.int64)
    )
    informative_features = np.flatnonzero(np.isin(groups, informative_groups)).astype(np.int64)
    coef = np.zeros(n_features)
    coef[informative_features] = rng.standard_normal(informative_features.size)

    X = rng.standard_normal((n_samples, n_features))
    y = X @ coef + noise * rng.standard_normal(n_samples)
    X_test = rng.standard_normal((n_test, n_features))
    y_test = X_test @ coef + noise * rng.standard_normal(n_test)

    return Bunch(
        X=X,
        y=y,
        X_test=X_test,
        y_test=y_test,
        coef=coef,
        groups=groups,
        informative_groups=informative_groups,
        informative_features=informative_features,
        noise=noise,
    )


# Shape functions of make_additive_regression and the population means of f(x) under the
# two feature distributions (used to centre them): U[-a, a] with a = _ADDITIVE_HALF_WIDTH,
# and N(0, 1).
_ADDITIVE_HALF_WIDTH = 2.5
_ADDITIVE_FUNCTIONS = (np.sin, np.cos, np.square, np.negative, lambda x: -np.abs(x))
_ADDITIVE_MEANS = {
    "uniform": (
        0.0,
        np.sin(_ADDITIVE_HALF_WIDTH) / _ADDITIVE_HALF_WIDTH,
        _ADDITIVE_HALF_WIDTH**2 / 3.0,
        0.0,
        -_ADDITIVE_HALF_WIDTH / 2.0,
    ),
    "normal": (0.0, np.exp(-0.5), 1.0, 0.0, -np.sqrt(2.0 / np.pi)),
}


def _shifted(func, shift):
    def shape_function(x):
        return func(np.asarray(x, dtype=float)) - shift

    return shape_function


def make_additive_regression(
    n_samples=1000,
    n_noise=15,
    noise=1.0,
    random_state=None,
    *,
    feature_distribution="uniform",
    center=True,
    return_info=False,
):
    r"""Simulate a sparse additive (GAM-type) regression problem.

    Five informative features enter through fixed non-linear shape functions, followed by
    ``n_noise`` features with no effect:

    .. math::

        y = \sin(x_1) + \cos(x_2) + x_3^2 - x_4 - |x_5|
            + \sum_{j=6}^{5 + n_{noise}} 0 \cdot x_j + \varepsilon,
        \qquad \varepsilon \sim \mathcal{N}(0, \sigma^2).

    Columns ``0..4`` of ``X`` are the informative features :math:`x_1..x_5`, in this order.

    By default every feature is drawn independently from the uniform distribution on
    :math:`[-2.5, 2.5]`. On this range ``sin`` and ``cos`` cover most of a period, so both
    are clearly non-monotone; ``x**2`` stays bounded (a normal design would put a few
    large outliers into the target); and all five shape functions are observed over the
    whole interval, so they can be recovered everywhere. The noise features have the same
    distribution, so their scale does not reveal that they are uninformative.
    ``feature_distribution="normal"`` draws all features from :math:`\mathcal{N}(0, 1)`
    instead, as in the sparse NAM experiment of the D-Gating paper.

    With ``center=True`` (default) each shape function is shifted by its *population*
    mean under the chosen feature distribution (a constant, not the sample mean), so each
    component has mean zero and the noise-free target has mean zero; this is the usual
    identifiability convention of additive models and only changes the intercept.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples.
    n_noise : int, default=15
        Number of uninformative features appended after the five informative ones.
    noise : float, default=1.0
        Standard deviation :math:`\sigma` of the Gaussian noise.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for the random draws.
    feature_distribution : {"uniform", "normal"}, default="uniform"
        ``"uniform"``: :math:`U[-2.5, 2.5]`; ``"normal"``: :math:`\mathcal{N}(0, 1)`.
    center : bool, default=True
        Whether to subtract the population mean of each shape function.
    return_info : bool, default=False
        If True, return a :class:`~sklearn.utils.Bunch` with the ground truth instead of
        the tuple ``(X, y)``.

    Returns
    -------
    X : ndarray of shape (n_samples, 5 + n_noise), float64
        Returned when ``return_info=False``.
    y : ndarray of shape (n_samples,), float64
        Returned when ``return_info=False``.
    data : :class:`~sklearn.utils.Bunch`
        Returned when ``return_info=True``, with the fields ``X``, ``y``,
        ``y_true`` (noise-free target, shape ``(n_samples,)``), ``components`` (value of
        each shape function, shape ``(n_samples, 5)``, summing to ``y_true``),
        ``informative_features`` (``array([0, 1, 2, 3, 4])``), ``shape_functions`` (tuple
        of the five callables, centred like the data) and ``noise``.

    See Also
    --------
    make_group_regression : A group-sparse linear regression problem.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.datasets import make_additive_regression
    >>> X, y = make_additive_regression(random_state=0)
    >>> X.shape, y.shape
    ((1000, 20), (1000,))
    >>> data = make_additive_regression(n_samples=50, random_state=0, return_info=True)
    >>> data.informative_features
    array([0, 1, 2, 3, 4])
    >>> bool(np.allclose(data.y_true, data.components.sum(axis=1)))
    True
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_noise = _check_int(n_noise, "n_noise", 0)
    noise = _check_nonneg(noise, "noise")
    if feature_distribution not in _ADDITIVE_MEANS:
        raise ValueError(
            f"feature_distribution must be 'uniform' or 'normal', got {feature_distribution!r}."
        )
    rng = check_random_state(random_state)

    n_informative = len(_ADDITIVE_FUNCTIONS)
    n_features = n_informative + n_noise
    if feature_distribution == "uniform":
        a = _ADDITIVE_HALF_WIDTH
        X = rng.uniform(-a, a, size=(n_samples, n_features))
    else:
        X = rng.standard_normal((n_samples, n_features))

    shifts = _ADDITIVE_MEANS[feature_distribution] if center else (0.0,) * n_informative
    shape_functions = tuple(
        _shifted(f, s) for f, s in zip(_ADDITIVE_FUNCTIONS, shifts, strict=True)
    )
    components = np.column_stack([f(X[:, k]) for k, f in enumerate(shape_functions)])
    y_true = components.sum(axis=1)
    y = y_true + noise * rng.standard_normal(n_samples)

    if not return_info:
        return X, y
    return Bunch(
        X=X,
        y=y,
        y_true=y_true,
        components=components,
        informative_features=np.arange(n_informative),
        shape_functions=shape_functions,
        noise=noise,
    )


def make_sparse_classification(
    n_samples=500,
    n_features=30,
    n_informative=5,
    n_classes=2,
    random_state=None,
    *,
    n_hidden=16,
    flip_y=0.0,
    return_info=False,
):
    r"""Simulate a non-linear classification problem with few informative features.

    All features are independent standard normal. The labels depend on the **first**
    ``n_informative`` columns only, through a random two-layer network with ``tanh``
    hidden units:

    * ``h = tanh(X[:, :n_informative] @ W1 + b1)`` with ``n_hidden`` units
      (``W1`` entries :math:`\mathcal{N}(0, 4 / n_{informative})`, ``b1`` entries
      :math:`\mathcal{N}(0, 1/4)`), and scores ``s = h @ W2``;
    * two classes: ``y = 1`` where the single score is above its sample median, so the
      classes are balanced;
    * more classes: ``y = argmax`` over the ``n_classes`` scores, each standardised over
      the sample first so that no class dominates.

    The label is a deterministic function of the informative features (so a perfect
    classifier exists), unless ``flip_y > 0``. The remaining ``n_features -
    n_informative`` columns are independent of ``y``.

    Parameters
    ----------
    n_samples : int, default=500
        Number of samples.
    n_features : int, default=30
        Total number of features.
    n_informative : int, default=5
        Number of informative features; they are columns ``0..n_informative-1``.
    n_classes : int, default=2
        Number of classes; labels are ``0..n_classes-1``.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for the network weights and the data.
    n_hidden : int, default=16
        Width of the random hidden layer.
    flip_y : float, default=0.0
        Fraction of samples whose label is replaced by a uniformly random class (label
        noise), between 0 and 1.
    return_info : bool, default=False
        If True, return a :class:`~sklearn.utils.Bunch` with the fields ``X``, ``y``,
        ``informative_features`` and ``label_function`` instead of the tuple ``(X, y)``.
        ``label_function(X_new)`` applies the noise-free labelling rule (the same network
        and the same centring constants) to new rows with ``n_features`` columns, which
        gives an optimal classifier and unlimited test data.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), int64
    data : :class:`~sklearn.utils.Bunch`
        Only when ``return_info=True`` (in place of ``X, y``).

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.datasets import make_sparse_classification
    >>> X, y = make_sparse_classification(random_state=0)
    >>> X.shape, np.bincount(y)
    ((500, 30), array([250, 250]))
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_features = _check_int(n_features, "n_features", 1)
    n_informative = _check_int(n_informative, "n_informative", 1)
    n_classes = _check_int(n_classes, "n_classes", 2)
    n_hidden = _check_int(n_hidden, "n_hidden", 1)
    flip_y = _check_nonneg(flip_y, "flip_y")
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} cannot exceed n_features={n_features}.")
    if flip_y > 1:
        raise ValueError(f"flip_y must be in [0, 1], got {flip_y}.")
    rng = check_random_state(random_state)

    n_out = 1 if n_classes == 2 else n_classes
    W1 = rng.standard_normal((n_informative, n_hidden)) * (2.0 / np.sqrt(n_informative))
    b1 = 0.5 * rng.standard_normal(n_hidden)
    W2 = rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden)
    X = rng.standard_normal((n_samples, n_features))

    def network(Z):
        return np.tanh(np.asarray(Z, dtype=float)[:, :n_informative] @ W1 + b1) @ W2

    scores = network(X)
    if n_classes == 2:
        shift, scale = np.median(scores, axis=0), np.ones(1)
    else:
        shift, scale = scores.mean(axis=0), scores.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)

    def label_function(Z):
        s = (network(Z) - shift) / scale
        if n_classes == 2:
            return (s[:, 0] > 0).astype(np.int64)
        return s.argmax(axis=1).astype(np.int64)

    y = label_function(X)
    flip = rng.uniform(size=n_samples) < flip_y
    y[flip] = rng.randint(n_classes, size=int(flip.sum()))

    if not return_info:
        return X, y
    return Bunch(
        X=X,
        y=y,
        informative_features=np.arange(n_informative),
        label_function=label_function,
    )


# ---------------------------------------------------------------------------------------
# real benchmark data
# ---------------------------------------------------------------------------------------

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

_DESCR = {
    "isolet": """\
ISOLET (UCI id 54): spoken letters. 150 speakers said each letter of the alphabet
twice; 617 real-valued acoustic features (spectral, contour and sonorant features),
scaled by the authors to [-1, 1]. 26 classes, letters A..Z as labels 0..25.
Fixed split: X/y are speaker groups 1-4 (6238 rows), X_test/y_test speaker group 5
(1559 rows). Reference: Fanty & Cole, "Spoken letter recognition", NIPS 1990. CC BY 4.0.""",
    "coil20": """\
COIL-20 (Columbia Object Image Library, processed set): 20 objects photographed on a
turntable at 72 poses (every 5 degrees), 1440 grey-scale images downsampled to 32x32,
values in [0, 1]. Labels 0..19 (objects 1..20). No fixed split.
Each row is an image flattened in column-major (Fortran) order: use
X[i].reshape(32, 32, order="F"). Reference: Nene, Nayar & Murase, Tech. Report
CUCS-005-96, 1996 (free for research use, please cite).""",
    "coil20_20x20": """\
COIL-20 at 20x20 pixels (400 features): each 32x32 COIL-20 image area-averaged to 20x20
(exact box-area weights), flattened in column-major order; use
X[i].reshape(20, 20, order="F"). Close to, but not pixel-identical with, the 20x20 images
resized from the 128x128 originals used in some feature-selection papers.
Labels 0..19, no fixed split. Reference: Nene, Nayar & Murase, CUCS-005-96, 1996.""",
    "madelon": """\
MADELON (NIPS 2003 feature selection challenge, UCI id 171): an artificial two-class
problem. Points in 32 clusters on the vertices of a 5-dimensional hypercube, 20 relevant
features (5 informative plus 15 linear combinations of them) hidden among 480 distractors;
500 integer features in 0..999. Labels 0/1 (originally -1/+1).
Fixed split: X/y are the challenge training set (2000 rows), X_test/y_test the validation
set (600 rows; the challenge test set has no public labels). Guyon et al., 2004. CC BY 4.0.""",
    "mnist_t10k": """\
MNIST, the official 10,000-image test set only: handwritten digits 0..9 as 28x28 grey
values in 0..255 (uint8), flattened row by row (X[i].reshape(28, 28)). Returned as X/y
with no split; the LassoNet feature-selection benchmark splits this set at random.
Reference: LeCun, Cortes & Burges, the MNIST database.""",
    "wine_red": """\
Wine Quality, red (UCI id 186): 1599 red "vinho verde" wines, 11 physico-chemical
measurements; target: sensory quality score (3..8), treated as a regression target
(float). No fixed split. Cortez et al., Decision Support Systems 47(4), 2009. CC BY 4.0.""",
    "wine_white": """\
Wine Quality, white (UCI id 186): 4898 white "vinho verde" wines, 11 physico-chemical
measurements; target: sensory quality score (3..9), treated as a regression target
(float). No fixed split. Cortez et al., Decision Support Systems 47(4), 2009. CC BY 4.0.""",
}

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


def _download_benchmark(name):
    if name in ("isolet", "madelon", "mnist_t10k"):
        return _fetch_from_openml(name), "OpenML (sklearn.datasets.fetch_openml)"
    if name.startswith("coil20"):
        return _fetch_coil20(name), _COIL20_URL
    return _fetch_wine(name), _WINE_URL.format(color=name.split("_", 1)[1])


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
        image_shape : tuple or None
            ``(height, width)`` for image sets; see ``DESCR`` for the pixel order.
        name : str
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
            data, source = _download_benchmark(name)
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
        DESCR=_DESCR[name],
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
