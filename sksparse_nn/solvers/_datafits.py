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

import functools

import numpy as np
from scipy.special import expit, logsumexp

from ..utils.validation import check_sample_weight
from ._data import as_float_matrix
from ._lipschitz import top_eigenvalue

__all__ = ["LeastSquares", "Logistic", "Multinomial"]


class _Linear:
    """The design part every datafit shares: ``X`` (dense or sparse, never densified),
    the sample weights and the products with the (centred, or intercept-augmented)
    design.

    Built lazily: the constructor keeps what it is given (``given``: ``X``, the sample
    weights as passed, ``fit_intercept``), so that a fast solver taking the pair reads
    them as they are (the same bits as its own entry point); the float design, the
    weights rescaled to mean 1 and the column means are made on first use by the
    generic methods."""

    def __init__(self, X, sample_weight, fit_intercept, center, augment):
        if getattr(X, "ndim", 2) != 2:
            X = as_float_matrix(X)  # its error: X must be 2-d
        self.X_given, self.sample_weight = X, sample_weight
        self.fit_intercept = bool(fit_intercept)
        self.n, self.p = X.shape
        self._center = center
        self.augment = augment
        self.n_coef = self.p + int(augment)

    @functools.cached_property
    def X(self):
        """The design as a float64 ndarray or CSR / CSC matrix."""
        return as_float_matrix(self.X_given)

    @functools.cached_property
    def s(self):
        """The sample weights rescaled to mean 1 (None without)."""
        return check_sample_weight(self.sample_weight, self.n)

    @functools.cached_property
    def weights(self):
        return np.ones(self.n) if self.s is None else self.s

    @functools.cached_property
    def x_mean(self):
        """Weighted column means, subtracted implicitly (sparse X stays sparse); None
        without centring."""
        if not self._center:
            return None
        return np.asarray(self.X.T @ self.weights).ravel() / self.n

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

    def positive_rows(self, positive):
        """A penalty's ``positive`` holding the features ``>= 0`` when ``positive``
        (a bool) and an intercept row free: a mask with an intercept row, else the
        bool."""
        if not positive or not self.augment:
            return bool(positive)
        mask = np.ones(self.n_coef, dtype=bool)
        mask[self.p] = False
        return mask

    def row_labels(self, labels):
        """The penalty groups of the rows: the features' ``labels``, then ``-1`` for an
        intercept row."""
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
        super().__init__(X, sample_weight, fit_intercept, center=fit_intercept, augment=False)
        y = np.asarray(y, dtype=np.float64)
        if y.shape[:1] != (self.n,) or y.ndim > 2:
            raise ValueError(f"y must have shape ({self.n},) or ({self.n}, k), got {y.shape}.")
        self.y = y
        self._L = None

    @functools.cached_property
    def _moments(self):
        Y = self.y.reshape(self.n, -1)
        y_mean = self.weights @ Y / self.n if self.fit_intercept else np.zeros(Y.shape[1])
        return Y - y_mean, y_mean

    @property
    def Y(self):
        """The targets, ``(n_samples, n_outputs)``, centred when ``fit_intercept``."""
        return self._moments[0]

    @property
    def y_mean(self):
        return self._moments[1]

    @property
    def n_outputs(self):
        return 1 if self.y.ndim == 1 else self.y.shape[1]

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
    """The intercept as a last, unpenalized row (``fit_intercept``); ``codes`` the class
    codes as given, ``Y`` their one-hot rows (the 0/1 column of a binary problem)."""

    def __init__(self, X, codes, fit_intercept, sample_weight, curvature):
        super().__init__(X, sample_weight, fit_intercept, center=False, augment=fit_intercept)
        self.codes = codes
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

    n_outputs = 1

    def __init__(self, X, y, fit_intercept=True, sample_weight=None):
        codes = np.asarray(y).reshape(-1)
        if not np.all((codes == 0) | (codes == 1)):
            raise ValueError("Logistic needs labels in {0, 1}.")
        super().__init__(X, codes, fit_intercept, sample_weight, 0.25)

    @functools.cached_property
    def Y(self):
        """The labels as one float column."""
        return np.asarray(self.codes, dtype=np.float64)[:, None]

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
        super().__init__(X, codes, fit_intercept, sample_weight, 0.5)
        self.n_outputs = self.n_classes = int(n_classes)

    @functools.cached_property
    def Y(self):
        """The one-hot rows of the codes."""
        return np.eye(self.n_classes)[self.codes]

    def _per_sample(self, Z):
        return logsumexp(Z, axis=1) - (self.Y * Z).sum(axis=1)

    @staticmethod
    def _probabilities(Z):
        return np.exp(Z - logsumexp(Z, axis=1)[:, None])
