"""Simulated manifolds: :func:`make_latent_manifold`, data of known intrinsic dimension
for dimensionality reduction."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._checks import _check_int, _check_nonneg

__all__ = ["make_latent_manifold"]


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
