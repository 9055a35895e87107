"""Simulated data sets: no data files, fully determined by ``random_state``."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

__all__ = [
    "make_additive_regression",
    "make_group_regression",
    "make_latent_manifold",
    "make_sparse_classification",
]


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


_LATENT_KINDS = ("mlp", "linear", "quadratic")
_LATENT_ACTIVATIONS = {"relu": lambda h: np.maximum(h, 0.0), "tanh": np.tanh}


def make_latent_manifold(
    n_samples=1000,
    n_latent=3,
    n_features=20,
    *,
    kind="mlp",
    n_hidden=64,
    activation="relu",
    noise=0.0,
    n_test=0,
    random_state=None,
):
    r"""Simulate data of known intrinsic dimension: a latent Gaussian through a random map.

    The dimensionality-reduction problems of the DAM paper (Sec. 4.1): latent factors
    :math:`\Omega \sim \mathcal{N}(0, I_r)` with ``r = n_latent`` independent dimensions
    are pushed into ``d = n_features`` dimensions by a random map :math:`\Psi`,
    :math:`X = \Psi(\Omega) + \varepsilon`. Without noise every row lies on an
    ``r``-dimensional manifold, so an autoencoder needs ``r`` bottleneck units, and no
    fewer, to reconstruct ``X`` (when :math:`\Psi` is injective, the generic case for
    ``n_hidden >= 2 r``). The maps (all weights drawn once, standard normal times the
    stated scale):

    * ``"mlp"`` (the paper's non-linear case (ii)): a network shaped like the decoder of
      :class:`~sksparse_nn.DGatedAutoencoder` with one hidden layer,
      :math:`\Psi(z) = \phi(z W_1 + b_1) W_2 + b_2` with ``n_hidden`` units, ``W1`` of
      scale :math:`\sqrt{2 / r}` (He's scale for ReLU), ``b1`` of scale 1/2, ``W2`` of
      scale :math:`1 / \sqrt{n_{hidden}}`, ``b2 = 0``;
    * ``"linear"`` (the paper's linear case): :math:`\Psi(z) = z A`, ``A`` of scale
      :math:`1 / \sqrt{r}`, so ``X`` has rank ``r`` exactly;
    * ``"quadratic"`` (the paper's case (i), a degree-2 polynomial map in the spirit of a
      QRes layer): :math:`\Psi(z) = z A + (z B) \odot (z C)`, all three of scale
      :math:`1 / \sqrt{r}`.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of training rows.
    n_latent : int, default=3
        Intrinsic dimension ``r`` (number of latent factors), at least 1.
    n_features : int, default=20
        Ambient dimension ``d``; must exceed ``n_latent``.
    kind : {"mlp", "linear", "quadratic"}, default="mlp"
        The map :math:`\Psi`.
    n_hidden : int, default=64
        Hidden width of the ``"mlp"`` map (ignored otherwise).
    activation : {"relu", "tanh"}, default="relu"
        Activation :math:`\phi` of the ``"mlp"`` map (ignored otherwise).
    noise : float, default=0.0
        Standard deviation of independent Gaussian noise added to every entry, relative
        to the average standard deviation of the noise-free features (so ``noise=0.1``
        puts about 1% of the total variance off the manifold, whatever the map's scale).
    n_test : int, default=0
        Number of test rows from the same distribution (drawn after the training rows).
    random_state : int, RandomState instance or None, default=None
        Seed or generator. The draws come in a fixed order (the map, training latents,
        training noise, test latents, test noise), so ``n_test`` does not change the
        training set.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With the fields

        X : ndarray of shape (n_samples, n_features), float64
            The training rows.
        latent : ndarray of shape (n_samples, n_latent), float64
            The factors :math:`\Omega` of the training rows.
        X_test, latent_test : ndarrays with ``n_test`` rows
            Held-out rows from the same model.
        decoder : callable
            ``decoder(Z)``: the noise-free map :math:`\Psi` applied to latents of shape
            (n, n_latent), so ``X = decoder(latent) + noise``.
        n_latent : int
            The intrinsic dimension ``r``, the answer a dimension-learning method should
            give.
        noise_std : float
            The absolute standard deviation of the added noise.

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.datasets import make_latent_manifold
    >>> data = make_latent_manifold(500, n_latent=2, n_features=10, kind="linear",
    ...                             random_state=0)
    >>> data.X.shape, int(np.linalg.matrix_rank(data.X))
    ((500, 10), 2)
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_latent = _check_int(n_latent, "n_latent", 1)
    n_features = _check_int(n_features, "n_features", 2)
    n_hidden = _check_int(n_hidden, "n_hidden", 1)
    n_test = _check_int(n_test, "n_test", 0)
    noise = _check_nonneg(noise, "noise")
    if n_latent >= n_features:
        raise ValueError(
            f"n_latent={n_latent} must be smaller than n_features={n_features}: the data "
            "would have no lower-dimensional structure to find."
        )
    if kind not in _LATENT_KINDS:
        raise ValueError(f"kind must be one of {_LATENT_KINDS}, got {kind!r}.")
    if activation not in _LATENT_ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {tuple(_LATENT_ACTIVATIONS)}, got {activation!r}."
        )
    rng = check_random_state(random_state)
    r, d = n_latent, n_features

    if kind == "mlp":
        phi = _LATENT_ACTIVATIONS[activation]
        W1 = rng.standard_normal((r, n_hidden)) * np.sqrt(2.0 / r)
        b1 = 0.5 * rng.standard_normal(n_hidden)
        W2 = rng.standard_normal((n_hidden, d)) / np.sqrt(n_hidden)

        def psi(Z):
            return phi(Z @ W1 + b1) @ W2

    elif kind == "linear":
        A = rng.standard_normal((r, d)) / np.sqrt(r)

        def psi(Z):
            return Z @ A

    else:
        A, B, C = (rng.standard_normal((r, d)) / np.sqrt(r) for _ in range(3))

        def psi(Z):
            return Z @ A + (Z @ B) * (Z @ C)

    def decoder(Z):
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != r:
            raise ValueError(f"decoder takes latents of shape (n, {r}), got {Z.shape}.")
        return psi(Z)

    latent = rng.standard_normal((n_samples, r))
    clean = decoder(latent)
    # the noise scale is fixed by the map alone (a large reference sample of it), so that
    # it does not depend on n_samples or on the training draw
    reference = psi(np.random.RandomState(0).standard_normal((4096, r)))
    noise_std = noise * float(np.sqrt(np.mean(reference.var(axis=0))))
    X = clean + noise_std * rng.standard_normal(clean.shape)
    latent_test = rng.standard_normal((n_test, r))
    X_test = decoder(latent_test) + noise_std * rng.standard_normal((n_test, d))
    return Bunch(
        X=X,
        latent=latent,
        X_test=X_test,
        latent_test=latent_test,
        decoder=decoder,
        n_latent=r,
        noise_std=noise_std,
    )
