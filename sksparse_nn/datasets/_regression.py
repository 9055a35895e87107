"""Simulated regression: group-sparse linear (:func:`make_group_regression`) and sparse
additive (:func:`make_additive_regression`) problems, with their ground truth."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._checks import _check_int, _check_nonneg

__all__ = ["make_additive_regression", "make_group_regression"]


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

        X, y : ndarrays of shape (n_samples, n_features) and (n_samples,), float64
            The training data.
        X_test, y_test : ndarrays of shape (n_test, n_features) and (n_test,), float64
            Held-out data from the same model.
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
