"""Piecewise-linear encodings of numerical features (no scikit-learn, no gating)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

__all__ = ["PiecewiseLinearEncoding", "quantile_edges"]


def quantile_edges(X, n_bins):
    """Bin edges of each column at its empirical quantiles.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Finite values.
    n_bins : int
        Most bins per column: a column of at most ``n_bins + 1`` distinct values has
        them as edges (a binary column one bin), a constant column one bin of width 1.

    Returns
    -------
    edges : list of ndarray
        Per column, at least two strictly increasing edges.
    """
    levels = np.linspace(0.0, 1.0, int(n_bins) + 1)
    edges = []
    for j in range(X.shape[1]):
        column = X[:, j].toarray().ravel() if sp.issparse(X) else np.asarray(X[:, j])
        column = column.astype(np.float64)
        cuts = np.unique(column)
        if len(cuts) > len(levels):  # more distinct values than edges: their quantiles
            cuts = np.unique(np.quantile(column, levels))
        if len(cuts) < 2:  # a constant column: one bin, the identity around its value
            cuts = np.array([cuts[0], cuts[0] + 1.0])
        edges.append(cuts)
    return edges


class PiecewiseLinearEncoding(nn.Module):
    """Each feature as the vector of its position in each of its bins.

    Feature ``x`` with edges ``e_0 < ... < e_T`` becomes ``T`` values
    ``(x - e_t) / (e_(t+1) - e_t)``, each clipped to ``[0, 1]``, except that the first
    bin is not clipped below and the last not above: the encoding is continuous,
    piecewise linear in ``x``, and a linear layer after it represents every continuous
    piecewise-linear function with these knots, ``x`` itself included (the encoding of
    *On Embeddings for Numerical Features in Tabular Deep Learning*). A feature's
    columns are contiguous, in feature order. Each column is then centred by ``center``
    and divided by ``spread`` (:meth:`standardize_`; at first 0 and 1).

    Parameters
    ----------
    edges : list of array-like
        Per feature, at least two strictly increasing edges (:func:`quantile_edges`).

    Attributes
    ----------
    feature : torch.Tensor of int64
        The feature of each output column.
    """

    def __init__(self, edges):
        super().__init__()
        feature, lower, width, low, high = [], [], [], [], []
        for j, cuts in enumerate(edges):
            cuts = np.asarray(cuts, dtype=np.float64)
            n = len(cuts) - 1
            if n < 1 or np.any(np.diff(cuts) <= 0):
                raise ValueError(f"Feature {j}'s edges must be at least two increasing values.")
            feature += [j] * n
            lower += list(cuts[:-1])
            width += list(np.diff(cuts))
            low += [-np.inf] + [0.0] * (n - 1)
            high += [1.0] * (n - 1) + [np.inf]
        self.n_features = len(edges)
        self.register_buffer("feature", torch.as_tensor(feature, dtype=torch.int64))
        center, spread = [0.0] * len(feature), [1.0] * len(feature)
        for name, values in (
            ("lower", lower),
            ("width", width),
            ("low", low),
            ("high", high),
            ("center", center),
            ("spread", spread),
        ):
            self.register_buffer(name, torch.as_tensor(values, dtype=torch.float64))

    @property
    def n_columns(self):
        """Number of output columns (bins of all features)."""
        return len(self.feature)

    def forward(self, x):
        z = (x[:, self.feature] - self.lower) / self.width
        return (torch.minimum(torch.maximum(z, self.low), self.high) - self.center) / self.spread

    @torch.no_grad()
    def standardize_(self, x):
        """Centre each column on the rows ``x`` and scale each feature's columns by one
        number, so that their variances sum to 1: an encoded feature then moves a
        following layer as much as one standardized feature (SGD's stable step size
        does not shrink with the number of bins)."""
        self.center.zero_()
        self.spread.fill_(1.0)
        z = self(x).double()
        var = torch.zeros(self.n_features, dtype=torch.float64).index_add_(
            0, self.feature, z.var(dim=0, unbiased=False)
        )
        spread = var.sqrt()
        spread[spread <= 0] = 1.0  # a constant feature: nothing to scale
        self.center.copy_(z.mean(dim=0))
        self.spread.copy_(spread[self.feature])
        return self

    @torch.no_grad()
    def rescale_(self, shift, scale):
        """Map ``x`` to what ``(x - shift) / scale`` was mapped to (per feature, ``scale``
        positive): the edges move with the units, the encoding does not change."""
        shift = torch.as_tensor(shift, dtype=torch.float64)[self.feature]
        scale = torch.as_tensor(scale, dtype=torch.float64)[self.feature]
        self.lower.copy_(self.lower.double() * scale + shift)
        self.width.copy_(self.width.double() * scale)
        return self

    def select(self, keep):
        """A copy that encodes only the features ``keep`` (in that order)."""
        keep = [int(j) for j in keep]
        edges = []
        for j in keep:
            index = torch.nonzero(self.feature == j).flatten()
            lower, width = self.lower[index].double(), self.width[index].double()
            edges.append(torch.cat([lower, lower[-1:] + width[-1:]]).numpy())
        out = PiecewiseLinearEncoding(edges)
        columns = self.columns(keep)
        with torch.no_grad():  # the exact widths (the edges' differences round)
            for name in ("width", "center", "spread"):
                getattr(out, name).copy_(getattr(self, name)[columns])
        return out.to(self.lower.dtype)

    def columns(self, keep):
        """Indices of the output columns of the features ``keep`` (in that order)."""
        return torch.cat(
            [torch.nonzero(self.feature == int(j)).flatten() for j in keep]
            or [torch.zeros(0, dtype=torch.int64)]
        )
