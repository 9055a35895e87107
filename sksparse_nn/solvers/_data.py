"""Input conversion and argument checks shared by the solvers: float matrices, group
labels extended by the unpenalized features. (Sample weights:
:func:`sksparse_nn.utils.validation.check_sample_weight`; column statistics:
:mod:`sksparse_nn.utils.columns`.)"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from ..groups import count_groups


def extended_groups(labels, rho):
    """Give each unpenalized feature its own weight-0 group.

    Returns ``(ext, rho_ext)``: labels in ``0..K-1`` for every feature (groups ``0..J-1``
    keep their number, features in no group get ``J, J+1, ...``) and the weights of the
    ``K`` groups. The solver then needs no special case for unpenalized features.
    """
    labels = np.asarray(labels, dtype=np.intp)
    n_groups = count_groups(labels)
    rho = np.asarray(rho, dtype=np.float64).reshape(-1)
    if rho.shape != (n_groups,):
        raise ValueError(f"rho must have shape ({n_groups},), got {rho.shape}.")
    free = labels < 0
    if not free.any():  # every feature in a group: ``labels`` itself (read, never written)
        return labels, rho
    ext = labels.copy()
    ext[free] = n_groups + np.arange(int(free.sum()))
    rho_ext = np.concatenate([rho, np.zeros(int(free.sum()))])
    return ext, rho_ext


def as_float_matrix(X):
    """``X`` as a float64 ndarray or CSR/CSC matrix (no copy when it already is one)."""
    if sp.issparse(X):
        if X.format not in ("csr", "csc"):
            X = X.tocsr()
        if X.dtype != np.float64:
            X = X.astype(np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-d, got shape {X.shape}.")
    return X


def check_solver_args(lam, tol, max_iter):
    if not (isinstance(lam, Real) and np.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}.")
    if not (isinstance(tol, Real) and tol > 0):
        raise ValueError(f"tol must be > 0, got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}.")
