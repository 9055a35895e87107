"""The NAM family's interaction terms (GA2M): which pairs of main terms get one, their
penalty groups and units, and their names (:class:`InteractionTerms`, a mixin of the
NAM family). The pairs' networks are :class:`sksparse_nn.nn.nam.NAM`'s ``interactions``."""

from __future__ import annotations

from numbers import Integral

import numpy as np
import torch

from ..groups import AxisGroups
from ..training import ArrayDataset
from ._pair_screening import screen_pairs

__all__ = ["InteractionTerms"]

#: Rows per batch when the pairs' factor means are taken over the training data.
_BATCH = 8192

#: Family-wise level of the screening's test of interaction that ``interactions="auto"``
#: keeps a pair at (Bonferroni over the candidates): a table without interactions gets
#: no pair with probability about 0.95, so that the GA2M is then the plain NAM.
AUTO_LEVEL = 0.05


def _as_float_targets(targets):
    """Targets as a float ``(n, k)`` array: class indicators (one column for two
    classes) for encoded classes, the values for regression."""
    t = targets.detach().cpu().numpy()
    if np.issubdtype(t.dtype, np.floating):
        return t.reshape(len(t), -1).astype(np.float64)
    n_classes = max(2, int(t.max()) + 1 if t.size else 2)
    onehot = np.eye(n_classes)[t]
    return onehot[:, 1:] if n_classes == 2 else onehot


class InteractionTerms:
    """Interaction terms of a fitted or fitting NAM estimator (``interactions``
    parameter; ``_terms`` of the family)."""

    def default_grid(self):
        """The plain NAM's grid without pairs, its CV folds fitting every lam (a fold's
        score depends on its warm-start path, and two passes kept fewer variables; the
        fused step pays for every lam). With pairs, 21 lams a factor 1.3 apart down to
        ``0.005 lam_max`` (finer and deeper than the plain grid), the folds fitting
        every second lam first: on the real-tables panel the GA2M's searches chose the
        plain grid's densest lam on the regression tables, so its end, not the data,
        set how many terms the search could keep. (A CV search also goes on below any
        default grid whose densest lam it chooses; for the GA2M, blocks of cold fits
        below the plain grid cost more than starting 5 lams deeper.)"""
        grid = super().default_grid()
        spec = self.interactions
        if spec is None or (not isinstance(spec, str) and not spec):  # None, 0, []
            return grid
        return {**grid, "n_lams": 21, "lam_min_ratio": 0.005, "cv_stride": 2}

    def _plan_module(self, X, targets):
        """The pairs of main terms the fresh module gets (``self._pairs``)."""
        terms, _ = self._terms(X.shape[1])
        self._pairs = self._choose_pairs(X, targets, terms)

    def _choose_pairs(self, X, targets, terms):
        spec, self._screening = self.interactions, None
        if spec is None:
            return []
        if isinstance(spec, str) or isinstance(spec, Integral):
            n_candidates = len(terms) * (len(terms) - 1) // 2
            if n_candidates == 0 or spec == 0:
                return []
            continuous = targets.is_floating_point()  # a regressor's targets
            y = _as_float_targets(targets)
            screening = screen_pairs(X, y, terms, robust=continuous)
            self._screening = screening
            if isinstance(spec, str):  # "auto": the significant ones, at most one per term
                return screening.significant(AUTO_LEVEL)[: len(terms)]
            return screening.pairs[: int(spec)]
        return self._explicit_pairs(spec, terms)

    def _explicit_pairs(self, spec, terms):
        """Term pairs from the user's pairs of features (indices or column names)."""
        names = getattr(self, "feature_names_in_", None)
        lookup = {} if names is None else {str(n): j for j, n in enumerate(names)}
        owner = {c: t for t, cols in enumerate(terms) for c in cols}
        p = self.n_features_in_
        pairs = []
        for pair in spec:
            items = [pair] if isinstance(pair, str | Integral) else list(pair)
            if len(items) != 2:
                raise ValueError(f"interactions: each pair needs two features, got {pair!r}.")
            index = []
            for f in items:
                if isinstance(f, str):
                    if f not in lookup:
                        known = "" if names is None else " (no such column)"
                        raise ValueError(
                            f"interactions names feature {f!r}{known}; names need X as a "
                            "DataFrame with that column."
                        )
                    f = lookup[f]
                if not isinstance(f, Integral) or not 0 <= int(f) < p:
                    raise ValueError(f"interactions: feature {f!r} is not an index below {p}.")
                if int(f) not in owner:
                    raise ValueError(f"interactions: feature {f!r} is in no term.")
                index.append(owner[int(f)])
            a, b = sorted(index)
            if a == b:
                raise ValueError(
                    f"interactions: {pair!r} names one term twice (features of one group "
                    "share one term)."
                )
            if (a, b) in pairs:
                raise ValueError(f"interactions: the pair {pair!r} is given twice.")
            pairs.append((a, b))
        return pairs

    def _pair_columns(self, terms):
        """The columns of both sides of each chosen pair, for the module."""
        return [[terms[a], terms[b]] for a, b in getattr(self, "_pairs", [])] or None

    def _gate_pairs(self, module, init):
        """One penalty group per pair: both factor networks' first layers. Weight 1, or
        with ``group_weights="sqrt"`` the square root of the pair's columns."""
        pairs = module.interactions
        if pairs is None:
            return
        labels = np.repeat(np.arange(pairs.n_pairs), 2)
        rho = np.ones(pairs.n_pairs)
        if isinstance(self.group_weights, str):
            rho = np.sqrt([len(a) + len(b) for a, b in pairs.pairs])
        self._sparsify(pairs, "first", AxisGroups(0, labels), init, "input features", rho)

    def _pair_live(self, module):
        """Boolean per pair: its group (first layers) is not exactly zero."""
        if module.interactions is None:
            return np.zeros(0, dtype=bool)
        first = module.interactions.first.detach().reshape(module.n_pairs, -1)
        return (first != 0).any(dim=1).numpy()

    def _pair_feature_norms(self, module):
        """Per input feature, the squared norms of the pairs' groups it enters."""
        out = torch.zeros(module.n_features, dtype=torch.float64)
        if module.interactions is None:
            return out
        first = module.interactions.first.detach().double().reshape(module.n_pairs, -1)
        sq = (first**2).sum(dim=1)
        for t, (a, b) in enumerate(module.interactions.pairs):
            out[a + b] += sq[t]
        return out

    @torch.no_grad()
    def _center_pairs(self, X):
        """The pairs' factor means over the training rows: each pair then averages to 0
        along each of its axes over the training data."""
        pairs = self.module_.interactions
        if pairs is None:
            return
        dataset = ArrayDataset(X, None, dtype=pairs.first.dtype)
        total = torch.zeros_like(pairs.means, dtype=torch.float64)
        for i in range(0, len(dataset), _BATCH):
            total += pairs.factors(dataset.rows(slice(i, i + _BATCH))).double().sum(dim=1)
        pairs.means.copy_(total / max(1, len(dataset)))

    def _term_names(self, terms, pairs):
        """Names of the main terms, then of the pairs ("a x b"), in the user's columns."""
        names = getattr(self, "feature_names_in_", None)
        col = [str(names[j]) if names is not None else f"x{j}" for j in range(self.n_features_in_)]
        main = [
            col[c[0]] if len(c) == 1 else "[" + ", ".join(col[j] for j in c) + "]" for c in terms
        ]
        return np.array(main + [f"{main[a]} x {main[b]}" for a, b in pairs], dtype=object)
