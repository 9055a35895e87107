r"""Datafits: the smooth data terms of the linear problems, as objects a solver composes
with a penalty (:mod:`._penalties`) and never looks inside.

A datafit is built on the data once and then answers, for coefficients ``W`` of shape
``(n_coef, n_outputs)`` (one row per feature, plus an intercept row where the datafit
carries the intercept as an unpenalized coefficient):

``value(W)``
    the data term;
``gradient(W)``
    its gradient, same shape as ``W``;
``lipschitz()``
    a Lipschitz constant of the gradient (an upper bound: a gradient step of ``1 / L``
    never increases the value);
``row_labels(labels)``
    the penalty groups of the rows (features' ``labels``, ``-1`` for an intercept row);
``coef_intercept(W)``
    the coefficients and intercept in the user's units.

Sample weights (``s``, rescaled to mean 1: ``sum_i s_i loss_i / n``) and the intercept
are the datafit's business; non-negativity is the penalty's.

* :class:`LeastSquares`: ``1/(2n) sum_i s_i ||y_i - x_i W - b||^2``, the intercept
  profiled out by weighted centering (exact: ``b`` is never a coefficient);
* :class:`Logistic`: the mean binary log-loss (``y`` in {0, 1}, one column);
* :class:`Multinomial`: the mean softmax cross-entropy over ``K`` classes (one column per
  class; a feature's row is its group's, so the penalty picks zero-sum rows).

The two log-losses carry the intercept as a last, unpenalized row of ``W``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp

from ..utils.validation import check_sample_weight
from ._data import as_float_matrix
from ._lipschitz import top_eigenvalue

__all__ = ["LeastSquares", "Logistic", "Multinomial"]


class _Linear:
    """The design part every datafit shares: ``X`` (dense or sparse, never densified),
    the sample weights and the products with the (centred, or intercept-augmented)
    design."""

    def __init__(self, X, sample_weight, center, augment):
        self.X = as_float_matrix(X)
        self.n, self.p = self.X.shape
        self.s = check_sample_weight(sample_weight, self.n)
        weights = np.ones(self.n) if self.s is None else self.s
        self.weights = weights
        # weighted column means, subtracted implicitly (sparse X stays sparse)
        self.x_mean = np.asarray(self.X.T @ weights).ravel() / self.n if center else None
        self.augment = augment
        self.n_coef = self.p + int(augment)

    def dot(self, W):
        """``A W``: the centred design, or ``[X, 1]`` with the intercept row."""
        Z = np.asarray(self.X @ W[: self.p])
        if self.x_mean is not None:
            Z = Z - self.x_mean @ W[: self.p]
        if self.augment:
            Z = Z + W[self.p]
        return Z

    def tdot(self, R):
        """``A^T R``."""
        G = np.asarray(self.X.T @ R)
        if self.x_mean is not None:
            G = G - np.outer(self.x_mean, R.sum(axis=0))
        if self.augment:
            G = np.vstack([G, R.sum(axis=0)[None, :]])
        return G

    def gram_norm(self):
        """Largest eigenvalue of ``A^T S A / n``."""

        def matvec(v):
            return self.tdot(self.weights[:, None] * self.dot(v[:, None]))[:, 0] / self.n

        return top_eigenvalue(matvec, self.n_coef)

    def row_labels(self, labels):
        labels = np.asarray(labels, dtype=np.intp)
        if labels.shape != (self.p,):
            raise ValueError(f"labels must have shape ({self.p},), got {labels.shape}.")
        return np.append(labels, -1) if self.augment else labels


class LeastSquares(_Linear):
    """``1/(2n) sum_i s_i ||y_i - x_i W - b||^2``, at the best intercept ``b`` when
    ``fit_intercept`` (weighted centering), ``W`` of shape ``(n_features, n_outputs)``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
    fit_intercept : bool, default=True
        Whether the intercept is fitted (profiled out, so it is no coefficient).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights, rescaled to mean 1.
    """

    def __init__(self, X, y, fit_intercept=True, sample_weight=None):
        super().__init__(X, sample_weight, center=fit_intercept, augment=False)
        Y = np.asarray(y, dtype=np.float64)
        Y = Y.reshape(self.n, -1)
        self.y_mean = self.weights @ Y / self.n if fit_intercept else np.zeros(Y.shape[1])
        self.Y = Y - self.y_mean
        self._L = None

    def value(self, W):
        R = self.Y - self.dot(W)
        return 0.5 * float(self.weights @ (R * R).sum(axis=1)) / self.n

    def gradient(self, W):
        return -self.tdot(self.weights[:, None] * (self.Y - self.dot(W))) / self.n

    def lipschitz(self):
        if self._L is None:
            self._L = self.gram_norm()
        return self._L

    def coef_intercept(self, W):
        x_mean = np.zeros(self.p) if self.x_mean is None else self.x_mean
        return W, self.y_mean - x_mean @ W


class _LogLoss(_Linear):
    """The intercept as a last, unpenalized row (``fit_intercept``); ``Y`` one-hot (or
    the 0/1 column of a binary problem)."""

    def __init__(self, X, Y, fit_intercept, sample_weight, curvature):
        super().__init__(X, sample_weight, center=False, augment=fit_intercept)
        self.Y = Y
        self._curvature = curvature  # Böhning's bound: 1/4 binary, 1/2 multinomial
        self._L = None

    def lipschitz(self):
        if self._L is None:
            self._L = self._curvature * self.gram_norm()
        return self._L

    def value(self, W):
        return float(self.weights @ self._per_sample(self.dot(W))) / self.n

    def gradient(self, W):
        R = self._probabilities(self.dot(W)) - self.Y
        return self.tdot(self.weights[:, None] * R) / self.n

    def coef_intercept(self, W):
        if not self.augment:
            return W, np.zeros(W.shape[1])
        return W[: self.p], W[self.p]


class Logistic(_LogLoss):
    """The mean binary log-loss ``mean_i s_i (log(1 + e^{z_i}) - y_i z_i)``, ``z = X w + b``,
    ``W`` of shape ``(n_features + fit_intercept, 1)``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}.
    fit_intercept : bool, default=True
        Whether ``W`` carries an intercept row (unpenalized).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights, rescaled to mean 1.
    """

    def __init__(self, X, y, fit_intercept=True, sample_weight=None):
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if not np.all((y == 0) | (y == 1)):
            raise ValueError("Logistic needs labels in {0, 1}.")
        super().__init__(X, y[:, None], fit_intercept, sample_weight, 0.25)

    def _per_sample(self, Z):
        return np.logaddexp(0.0, Z[:, 0]) - self.Y[:, 0] * Z[:, 0]

    @staticmethod
    def _probabilities(Z):
        return expit(Z)


class Multinomial(_LogLoss):
    """The mean softmax cross-entropy ``mean_i s_i (logsumexp(z_i) - z_{i, y_i})``,
    ``z_i = x_i W + b``, ``W`` of shape ``(n_features + fit_intercept, n_classes)``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of int of shape (n_samples,)
        Class codes ``0 .. n_classes - 1``.
    n_classes : int
        Number of classes (at least 2).
    fit_intercept : bool, default=True
        Whether ``W`` carries an intercept row (unpenalized).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights, rescaled to mean 1.
    """

    def __init__(self, X, y, n_classes, fit_intercept=True, sample_weight=None):
        codes = np.asarray(y).reshape(-1)
        if n_classes < 2 or codes.min(initial=0) < 0 or codes.max(initial=0) >= n_classes:
            raise ValueError(f"Multinomial needs class codes in 0..{n_classes - 1}.")
        super().__init__(X, np.eye(n_classes)[codes], fit_intercept, sample_weight, 0.5)

    def _per_sample(self, Z):
        return logsumexp(Z, axis=1) - (self.Y * Z).sum(axis=1)

    @staticmethod
    def _probabilities(Z):
        return np.exp(Z - logsumexp(Z, axis=1)[:, None])
