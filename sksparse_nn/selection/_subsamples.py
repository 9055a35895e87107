"""Complementary pairs of half-samples, stratified by class for classifiers, and the
half-sample paths run in parallel (joblib)."""

from __future__ import annotations

import os
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from ..path import regularization_path
from ..utils.threads import torch_threads
from ..utils.validation import fit_params_rows
from ._base import selection_matrix, takes_lam

__all__ = ["complementary_pairs", "half_paths"]


def complementary_pairs(n_samples, n_pairs, rng, classes=None):
    """``n_pairs`` pairs ``(A, B)`` of disjoint halves of ``range(n_samples)``.

    Each pair splits a random permutation in two: ``A`` takes its even positions, ``B``
    its odd ones, so ``|A| = ceil(n / 2)`` and ``|B| = floor(n / 2)`` and together they
    cover every row once. With ``classes`` (the class of every row), the permutation is
    made of each class's rows in turn (classes in random order), so every class is split
    evenly between the halves (within one row).
    """
    pairs = []
    for _ in range(n_pairs):
        if classes is None:
            order = rng.permutation(n_samples)
        else:
            labels = np.unique(classes)
            blocks = [rng.permutation(np.flatnonzero(classes == c)) for c in labels]
            order = np.concatenate([blocks[i] for i in rng.permutation(len(blocks))])
        pairs.append((np.sort(order[0::2]), np.sort(order[1::2])))
    return pairs


def _one_half(estimator, X, y, rows, lams, n_units, threads, fit_params):
    """The selection matrix (n_lams, n_units) of the path on ``rows`` (``fit_params``:
    per-row values taken on those rows), the path's
    selection unit, whether its top point still selected something, whether it stopped
    early (a diverged point) and the warnings it raised."""
    Xh = _safe_indexing(X, rows)
    yh = None if y is None else _safe_indexing(y, rows)
    kwargs = {"lams": lams}
    if fit_params:
        kwargs["fit_params"] = fit_params_rows(fit_params, rows, _num_samples(X))
    with warnings.catch_warnings(record=True) as caught, torch_threads(threads):
        warnings.simplefilter("always")
        if takes_lam(estimator):
            path = regularization_path(estimator, Xh, yh, **kwargs)
        else:
            path = estimator.regularization_path(Xh, yh, **kwargs)
    matrix = selection_matrix(path, n_units, lams)
    return {
        "selected": matrix,
        "unit": path.selection_unit,
        "short": len(path.lams) < len(lams) or bool(np.any(path.failed)),
        "messages": sorted({(str(w.message), w.category) for w in caught}, key=lambda m: m[0]),
    }


def half_paths(estimator, X, y, pairs, lams, n_units, n_jobs, verbose, fit_params=None):
    """The paths of every half of every pair, in the order ``A_1, B_1, A_2, ...``
    (joblib: ``joblib.parallel_config(backend="dask")`` spreads them over a cluster);
    ``fit_params`` (checked) go to every fit, per-row values on the half's rows."""
    halves = [rows for pair in pairs for rows in pair]
    workers = 1 if n_jobs is None else int(n_jobs)
    if workers < 0:
        workers = os.cpu_count() or 1
    threads = None if workers == 1 else max(1, (os.cpu_count() or 1) // workers)
    tasks = (
        delayed(_one_half)(estimator, X, y, rows, lams, n_units, threads, fit_params or {})
        for rows in halves
    )
    if workers == 1:
        return [task[0](*task[1], **task[2]) for task in tasks]
    return list(Parallel(n_jobs=workers, verbose=verbose)(tasks))
