"""The inspection methods of the neural additive models: each term's contribution to
the output, its shape function on a grid (a surface for an interaction) and the local
explanation of predictions (:class:`AdditiveInspection`, a mixin of the NAM family)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted, validate_data

from ..training import ArrayDataset, as_numpy

__all__ = ["AdditiveInspection"]

#: Rows per batch of the contributions' forward passes.
_BATCH = 8192

#: Distinct rows of a multi-column term shown by ``shape_functions`` (the most frequent).
_MAX_LEVELS = 64


def _levels(X, cols):
    """The distinct rows of ``X[:, cols]`` (a categorical's levels) in descending
    lexicographic order (one-hot rows: in the order of their columns, an all-zero row
    last); only the ``_MAX_LEVELS`` most frequent when there are more."""
    block = X[:, cols]
    block = (block.toarray() if hasattr(block, "toarray") else np.asarray(block)).astype(np.float64)
    # np.unique(block, axis=0)'s rows and counts, by a lexicographic sort of the columns
    # (a sort of whole rows as records costs ~20x more, once per term and fit)
    rows = block[np.lexsort(block.T[::-1])]
    start = np.ones(len(rows), dtype=bool)
    start[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first = np.flatnonzero(start)
    levels = rows[first][::-1]
    counts = np.diff(np.append(first, len(rows)))[::-1]
    if len(levels) > _MAX_LEVELS:
        levels = levels[np.sort(np.argsort(-counts, kind="stable")[:_MAX_LEVELS])]
    return levels


class AdditiveInspection:
    """``contributions`` and ``shape_functions`` of a fitted NAM estimator (``module_``,
    ``terms_``, ``selected_terms_``, ``feature_ranges_`` and ``term_levels_`` set)."""

    def _contributions_array(self, X):
        """(n, T, k) contributions on already validated X, as float64 numpy."""
        dataset = ArrayDataset(X, None, dtype=self.module_.first.dtype)  # float64 if kept so
        with torch.no_grad():
            parts = [
                self.module_.contributions(dataset.rows(slice(i, i + _BATCH)))
                for i in range(0, len(dataset), _BATCH)
            ]
        if not parts:
            return np.zeros((0, self.module_.n_terms, self.module_.n_outputs))
        return as_numpy(torch.cat(parts))

    def _squeeze(self, contrib):
        return contrib[..., 0] if contrib.shape[-1] == 1 else contrib

    def contributions(self, X):
        """Contribution of every term (feature, or group of features) to the raw output.

        ``contributions(X).sum(axis=1) + intercept_`` is the model's raw output
        (``predict`` for regression, ``decision_function`` for classification), up to
        float32 rounding. Removed terms contribute exactly 0.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        contributions : ndarray of shape (n_samples, n_terms) or \
                (n_samples, n_terms, n_outputs)
            One column per term of ``terms_`` (per feature without ``groups``; the
            interactions after the main terms). The last
            axis is present when the model has several outputs (multiclass logits,
            multi-output regression).
        """
        check_is_fitted(self, "module_")
        X = validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        return self._squeeze(self._contributions_array(X))

    def shape_functions(self, grid=None):
        """Every selected term's learned shape function on a grid of its values.

        Parameters
        ----------
        grid : None, int or array-like of shape (n_points,), default=None
            For terms of one feature: ``None``, 100 evenly spaced points over the
            feature's observed training range; an int, that many points; an array, the
            same points for every feature. Terms of several features (``groups``) are
            evaluated at the distinct rows of their columns seen in training (a
            categorical's levels), whatever ``grid``.

        Returns
        -------
        curves : dict of int to tuple (x, f) or (xa, xb, f)
            Keyed by term index (the feature index without ``groups``), in
            ``selected_terms_`` order. For a term of one feature ``x`` has shape
            ``(n_points,)``; for a term of several features ``x`` has shape
            ``(n_levels, n_columns)`` (the rows of its columns, in ``terms_`` order). ``f``
            has shape ``(len(x),)`` (or ``(len(x), n_outputs)`` for several outputs),
            centred like :meth:`contributions`. An interaction gives its surface: ``xa``
            and ``xb`` the grids (or levels) of its two sides and ``f`` of shape
            ``(len(xa), len(xb))`` (or ``(..., n_outputs)``), the other terms at 0.
        """
        check_is_fitted(self, "module_")
        if grid is None or (isinstance(grid, Integral) and not isinstance(grid, bool)):
            n_points = 100 if grid is None else int(grid)
            if n_points < 2:
                raise ValueError(f"grid needs at least 2 points, got {grid}.")
            lo, hi = self.feature_ranges_[:, 0], self.feature_ranges_[:, 1]
            values = lo + np.linspace(0.0, 1.0, n_points)[:, None] * (hi - lo)
        else:
            points = np.asarray(grid, dtype=np.float64)
            if points.ndim != 1 or points.size == 0 or not np.all(np.isfinite(points)):
                raise ValueError("grid must be None, an int or a finite 1-D array of points.")
            values = np.repeat(points[:, None], self.n_features_in_, axis=1)
        # The model is additive: one forward pass on a matrix whose column j is feature
        # j's grid evaluates every single-feature shape function at once.
        contrib = self._squeeze(self._contributions_array(values))
        n_main = len(self.terms_) - len(getattr(self, "interaction_pairs_", ()))
        curves = {}
        for t in self.selected_terms_:
            cols = self.terms_[t]
            if t >= n_main:
                curves[int(t)] = self._pair_surface(int(t), n_main, values)
                continue
            if cols.size == 1:
                curves[int(t)] = (values[:, cols[0]].copy(), contrib[:, t])
                continue
            levels = self.term_levels_[t]
            rows = np.zeros((len(levels), self.n_features_in_))
            rows[:, cols] = levels
            curves[int(t)] = (levels.copy(), self._squeeze(self._contributions_array(rows))[:, t])
        return curves

    def _pair_surface(self, t, n_main, values):
        """``(xa, xb, f)`` of interaction term ``t``: each side's grid (a scalar side's
        column of ``values``; a multi-column side's levels) and ``f`` of shape
        ``(len(xa), len(xb)[, n_outputs])``."""
        sides = []
        for main in self.interaction_pairs_[t - n_main]:
            cols = self.terms_[main]
            grid = values[:, cols[0]] if cols.size == 1 else self.term_levels_[main]
            sides.append((cols, np.asarray(grid, dtype=np.float64)))
        (ca, xa), (cb, xb) = sides
        rows = np.zeros((len(xa) * len(xb), self.n_features_in_))
        rows[:, ca] = np.repeat(xa.reshape(len(xa), -1), len(xb), axis=0)
        rows[:, cb] = np.tile(xb.reshape(len(xb), -1), (len(xa), 1))
        f = self._squeeze(self._contributions_array(rows))[:, t]
        return xa.copy(), xb.copy(), f.reshape(len(xa), len(xb), *f.shape[1:])

    def explain(self, X, output=None):
        """Local explanations: every kept term's contribution to each prediction.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        output : int, default=None
            The output explained when the model has several (a class's logit for a
            multiclass model); ``None`` for one output.

        Returns
        -------
        explanation : pandas.DataFrame of shape (n_samples, n_kept + 2)
            Columns ``"intercept"``, one per kept term (``term_names_[selected_terms_]``:
            main effects and interactions "a x b", in the user's column names) and
            ``"output"``, their sum: the raw output (``predict`` for regression,
            ``decision_function`` for classification) up to float32 rounding. The index
            is X's when X is a DataFrame.
        """
        import pandas as pd

        check_is_fitted(self, "module_")
        index = X.index if hasattr(X, "index") and hasattr(X, "columns") else None
        Xv = validate_data(
            self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False
        )
        contrib = self._contributions_array(Xv)  # (n, T, k)
        intercept = np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64))
        k = contrib.shape[2]
        if output is None and k > 1:
            raise ValueError(f"The model has {k} outputs; name the one to explain (output=).")
        c = 0 if output is None else int(output)
        if not 0 <= c < k:
            raise ValueError(f"output must be an index below {k}, got {output!r}.")
        kept = np.asarray(self.selected_terms_, dtype=int)
        names = [str(n) for n in np.asarray(self.term_names_)[kept]]
        frame = pd.DataFrame(contrib[:, kept, c], columns=names, index=index)
        frame.insert(0, "intercept", intercept[c])
        frame["output"] = frame.sum(axis=1)
        return frame
