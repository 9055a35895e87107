"""Second-order (Gaussian) model-X knockoffs: the covariance estimate, the S matrix
(maximum entropy, minimum variance-based reconstructability, equicorrelated; diagonal or
block-diagonal over groups), the clusters of correlated features, and the draws.

The construction, in standardized units (each column centred and scaled, ``Sigma`` its
correlation matrix): for a symmetric ``S`` with ``S >= 0`` and ``2 Sigma - S >= 0``, the
joint covariance of ``[Z, Z~]``

    G = [[Sigma, Sigma - S], [Sigma - S, Sigma]]

is positive semi-definite and unchanged when any set of columns is swapped with its
knockoffs (a swap of a group whose block of ``S`` is its own keeps G, because ``S`` is
block-diagonal over the groups). ``Z~`` is drawn from the Gaussian conditional on ``Z``:
mean ``Z - Z Sigma^-1 S`` and covariance ``V = 2 S - S Sigma^-1 S``.

With ``U = [[I, I], [I, -I]] / sqrt(2)`` (orthogonal), ``U G U' = diag(2 Sigma - S, S)``,
so ``det G = det(2 Sigma - S) det S`` and ``tr G^-1 = tr (2 Sigma - S)^-1 + tr S^-1``.
Maximum entropy maximizes the first, MVR minimizes the second; both are convex in ``S``
and keep every ``s_j`` away from 0 where an SDP criterion (maximize ``sum s_j``) sends some
to 0 on strongly correlated features. Both are solved by (block) coordinate descent on
``A = 2 Sigma - S`` with its inverse kept up to date by Woodbury updates:

* maximum entropy, block ``g``: with ``M_g`` the Schur complement of the other blocks in
  ``2 Sigma - S`` with ``S_g`` removed, the objective in ``S_g`` is
  ``log det (M_g - S_g) + log det S_g``, maximal at ``S_g = M_g / 2`` (closed form, any
  block size);
* MVR, one feature ``j``: with ``c = (B^-1)_jj`` and ``d = (B^-2)_jj`` for ``B`` the matrix
  with ``s_j`` removed, the objective in ``s_j`` is ``s d / (1 - s c) + 1 / s``, minimal at
  ``s_j = 1 / (c + sqrt d)`` (closed form; blocks of several features have none, so MVR
  takes singleton groups only).
"""

from __future__ import annotations

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.covariance import LedoitWolf

__all__ = [
    "GaussianKnockoffs",
    "correlation_clusters",
    "estimate_correlation",
    "knockoff_s_matrix",
]

METHODS = ("maxent", "mvr", "equicorrelated")


def estimate_correlation(X):
    """Mean, scale and Ledoit-Wolf shrunk correlation matrix of the columns of ``X``.

    Shrinkage keeps the estimate invertible when ``n < p`` or columns are collinear
    (the knockoff construction inverts it).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    mean, scale : ndarray of shape (n_features,)
        Column means and standard deviations (1 for a constant column).
    corr : ndarray of shape (n_features, n_features)
    """
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X - mean) / scale
    cov = LedoitWolf(assume_centered=True).fit(Z).covariance_
    d = np.sqrt(np.diag(cov))
    corr = cov / np.outer(d, d)
    np.fill_diagonal(corr, 1.0)
    return mean, scale, corr


def correlation_clusters(corr, threshold):
    """Clusters of features whose absolute correlations are at least ``threshold``.

    Average-linkage hierarchical clustering on the distance ``1 - |corr|``, cut at
    ``1 - threshold``: two clusters merge when the mean absolute correlation between
    their members reaches ``threshold``.

    Parameters
    ----------
    corr : ndarray of shape (n_features, n_features)
    threshold : float in [0, 1]
        1 keeps every feature alone (only exact duplicates merge).

    Returns
    -------
    labels : ndarray of int of shape (n_features,)
        Cluster of each feature, numbered 0, 1, ... in order of first appearance.
    """
    corr = np.asarray(corr, dtype=np.float64)
    p = corr.shape[0]
    if p == 1:
        return np.zeros(1, dtype=np.intp)
    distance = np.clip(1.0 - np.abs(corr), 0.0, None)
    np.fill_diagonal(distance, 0.0)
    distance = (distance + distance.T) / 2
    tree = linkage(squareform(distance, checks=False), method="average")
    raw = fcluster(tree, t=1.0 - threshold, criterion="distance")
    return _first_appearance(raw)


def _first_appearance(labels):
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.intp)


def _blocks(groups, p):
    """Index arrays of the groups (labels of length p; None: singletons)."""
    if groups is None:
        return [np.array([j]) for j in range(p)]
    groups = np.asarray(groups)
    return [np.flatnonzero(groups == g) for g in np.unique(groups)]


def _block_diagonal(Sigma, blocks):
    D = np.zeros_like(Sigma)
    for b in blocks:
        D[np.ix_(b, b)] = Sigma[np.ix_(b, b)]
    return D


def _sym_power(M, power):
    values, vectors = np.linalg.eigh((M + M.T) / 2)
    values = np.clip(values, 0.0, None)
    with np.errstate(divide="ignore"):
        scaled = np.where(values > 0, values**power, 0.0)
    return (vectors * scaled) @ vectors.T


def _equicorrelated(Sigma, blocks):
    """``S = gamma * blockdiag(Sigma)``, gamma the largest value <= 1 keeping
    ``2 Sigma - S`` positive semi-definite."""
    D = _block_diagonal(Sigma, blocks)
    root = _sym_power(D, -0.5)
    lam_min = np.linalg.eigvalsh(root @ Sigma @ root)[0]
    gamma = min(1.0, 2.0 * max(lam_min, 0.0))
    return gamma * D


def _maxent(Sigma, blocks, tol, max_sweeps):
    S = np.zeros_like(Sigma)
    for _ in range(max_sweeps):
        A_inv = np.linalg.inv(2.0 * Sigma - S)  # fresh each sweep: no drift of the updates
        change = 0.0
        for b in blocks:
            old = S[np.ix_(b, b)]
            M = np.linalg.inv(A_inv[np.ix_(b, b)]) + old
            new = (M + M.T) / 4
            delta = new - old
            change = max(change, np.abs(delta).max())
            S[np.ix_(b, b)] = new
            # (A - E delta E')^-1 = A^-1 + A^-1 E delta (I - E' A^-1 E delta)^-1 E' A^-1
            cols = A_inv[:, b]
            inner = np.eye(len(b)) - A_inv[np.ix_(b, b)] @ delta
            A_inv = A_inv + cols @ delta @ np.linalg.solve(inner, cols.T)
        if change < tol:
            break
    return S


def _mvr(Sigma, blocks, tol, max_sweeps):
    if any(len(b) > 1 for b in blocks):
        raise ValueError(
            "method='mvr' takes singleton groups only (its block step has no closed "
            "form); use method='maxent' with groups."
        )
    p = Sigma.shape[0]
    s = np.zeros(p)
    for _ in range(max_sweeps):
        A_inv = np.linalg.inv(2.0 * Sigma - np.diag(s))
        change = 0.0
        for j in range(p):
            u = A_inv[:, j]
            c = u[j]
            shrink = 1.0 + s[j] * c  # from A^-1 to B^-1 = (A + s_j e e')^-1
            c0 = c / shrink
            d0 = (u @ u) / shrink**2
            new = 1.0 / (c0 + np.sqrt(d0))
            delta = new - s[j]
            change = max(change, abs(delta))
            s[j] = new
            A_inv = A_inv + (delta / (1.0 - delta * c)) * np.outer(u, u)
        if change < tol:
            break
    return np.diag(s)


def knockoff_s_matrix(Sigma, *, groups=None, method="maxent", tol=1e-6, max_sweeps=100):
    """The matrix ``S`` of Gaussian (group) knockoffs for the correlation matrix ``Sigma``.

    Parameters
    ----------
    Sigma : ndarray of shape (n_features, n_features)
        Positive definite correlation matrix (unit diagonal).
    groups : array-like of int of shape (n_features,), default=None
        Group label of each feature: ``S`` is block-diagonal over the groups, and the
        knockoffs of a group are exchangeable with the group as a whole. ``None``: every
        feature alone (diagonal ``S``).
    method : {"maxent", "mvr", "equicorrelated"}, default="maxent"
        ``"maxent"``: maximum entropy of ``[X, X~]`` (any groups); ``"mvr"``: minimum
        variance-based reconstructability (singletons only); ``"equicorrelated"``:
        ``S = gamma * blockdiag(Sigma)`` with the largest feasible ``gamma <= 1``, fast
        but weak on strongly correlated features (the smallest eigenvalue rules all).
    tol : float, default=1e-6
        Coordinate descent stops when no entry of ``S`` moved more than this in a sweep
        (``S`` is on the correlation scale, so 1e-6 is far below what sampling noise
        resolves).
    max_sweeps : int, default=100
        Sweeps at most (the iterations converge in tens on correlations near 0.99).

    Returns
    -------
    S : ndarray of shape (n_features, n_features)
        Symmetric, block-diagonal over the groups, with ``S >= 0`` and
        ``2 Sigma - S >= 0``.
    """
    Sigma = np.asarray(Sigma, dtype=np.float64)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    blocks = _blocks(groups, Sigma.shape[0])
    if method == "equicorrelated":
        S = _equicorrelated(Sigma, blocks)
    elif method == "maxent":
        S = _maxent(Sigma, blocks, tol, max_sweeps)
    else:
        S = _mvr(Sigma, blocks, tol, max_sweeps)
    return (S + S.T) / 2


class GaussianKnockoffs:
    """Gaussian model-X knockoffs of the rows of ``X`` (fit the law, then draw).

    Parameters
    ----------
    method : {"maxent", "mvr", "equicorrelated"}, default="maxent"
        How ``S`` is chosen (see :func:`knockoff_s_matrix`).
    groups : array-like of int of shape (n_features,), default=None
        Group knockoffs: ``S`` block-diagonal over these groups.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (n_features,)
    corr_ : ndarray of shape (n_features, n_features)
        Ledoit-Wolf shrunk correlation matrix.
    S_ : ndarray of shape (n_features, n_features)
        On the correlation scale.
    """

    def __init__(self, *, method="maxent", groups=None):
        self.method = method
        self.groups = groups

    def fit(self, X):
        """Estimate the Gaussian law of ``X`` and the knockoffs' ``S``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)

        Returns
        -------
        self : GaussianKnockoffs
        """
        self.mean_, self.scale_, self.corr_ = estimate_correlation(X)
        self.S_ = knockoff_s_matrix(self.corr_, groups=self.groups, method=self.method)
        solved = np.linalg.solve(self.corr_, self.S_)  # Sigma^-1 S
        self.mean_map_ = np.eye(len(self.S_)) - solved
        self.noise_root_ = _sym_power(2.0 * self.S_ - self.S_ @ solved, 0.5)
        return self

    def sample(self, X, random_state):
        """One knockoff copy of ``X`` (same shape and units).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The rows the law was fitted on (or rows of the same law).
        random_state : numpy Generator

        Returns
        -------
        X_tilde : ndarray of shape (n_samples, n_features)
        """
        Z = (np.asarray(X, dtype=np.float64) - self.mean_) / self.scale_
        noise = random_state.standard_normal(Z.shape) @ self.noise_root_
        return (Z @ self.mean_map_ + noise) * self.scale_ + self.mean_
