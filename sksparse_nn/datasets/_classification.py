"""Simulated classification: :func:`make_sparse_classification`, a small non-linear
problem in which only the first features carry signal."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._checks import _check_int, _check_nonneg

__all__ = ["make_sparse_classification"]


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
