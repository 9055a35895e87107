"""A sparse additive model with one pairwise interaction (a GA2M with known terms)."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._checks import _check_int, _check_nonneg

__all__ = ["make_interaction_regression"]

#: Main effects of features 0..3, each with mean 0 under U(-1, 1).
_MAINS = (
    lambda x: np.sin(np.pi * x),
    lambda x: 2.0 * x**2 - 2.0 / 3.0,
    lambda x: x,
    lambda x: np.exp(x) - np.sinh(1.0),
)


def _pair(a, b):
    """The interaction of features 0 and 1: pure (zero mean along each axis)."""
    return 2.0 * a * b


def make_interaction_regression(n_samples=1000, n_features=20, noise=0.5, random_state=None,
                                *, return_info=False):  # fmt: skip
    r"""Simulate a sparse additive regression with one interaction (GA2M).

    .. math::

        y = \sin(\pi x_1) + (2 x_2^2 - 2/3) + x_3 + (e^{x_4} - \sinh 1)
            + 2 x_1 x_2 + \varepsilon,

    with every feature drawn independently from :math:`U[-1, 1]` and
    :math:`\varepsilon \sim \mathcal{N}(0, \sigma^2)`; columns ``0..3`` are
    :math:`x_1..x_4`, the others have no effect. Each main effect has mean zero and the
    interaction has mean zero along each of its axes (it is pure: no part of it is a
    main effect), so the five terms are identifiable: a model that selects terms
    exactly should keep these five and no other.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=20
        At least 4: the four informative features, then noise features.
    noise : float, default=0.5
        Standard deviation :math:`\sigma` of the noise (the terms' standard deviations
        are 0.58 to 0.71).
    random_state : int, RandomState instance or None, default=None
    return_info : bool, default=False
        If True, return a :class:`~sklearn.utils.Bunch` with the ground truth.

    Returns
    -------
    X, y : ndarrays of shape (n_samples, n_features) and (n_samples,)
        Returned when ``return_info=False``.
    data : :class:`~sklearn.utils.Bunch`
        Returned when ``return_info=True``: ``X``, ``y``, ``y_true``, ``components``
        (the four mains and the interaction, shape ``(n_samples, 5)``, summing to
        ``y_true``), ``main_features`` (``[0, 1, 2, 3]``), ``pairs`` (``[(0, 1)]``) and
        ``noise``.

    Examples
    --------
    >>> from sksparse_nn.datasets import make_interaction_regression
    >>> X, y = make_interaction_regression(n_samples=100, random_state=0)
    >>> X.shape
    (100, 20)
    """
    n_samples = _check_int(n_samples, "n_samples", 1)
    n_features = _check_int(n_features, "n_features", 4)
    noise = _check_nonneg(noise, "noise")
    rng = check_random_state(random_state)
    X = rng.uniform(-1.0, 1.0, size=(n_samples, n_features))
    components = np.column_stack(
        [f(X[:, j]) for j, f in enumerate(_MAINS)] + [_pair(X[:, 0], X[:, 1])]
    )
    y_true = components.sum(axis=1)
    y = y_true + noise * rng.standard_normal(n_samples)
    if not return_info:
        return X, y
    return Bunch(X=X, y=y, y_true=y_true, components=components, main_features=np.arange(4),
                 pairs=[(0, 1)], noise=noise)  # fmt: skip
