"""Largest eigenvalues (Lipschitz constants of the gradients): of a whole problem, and
of a working set's Gram block along a path."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator, eigsh

# Largest dimension for which the Lipschitz constant is computed by a dense eigensolver.
_DENSE_EIG_MAX = 64
# Power iterations that estimate the Lipschitz constant of a working set's Gram block.
_POWER_STEPS = 30


def top_eigenvalue(matvec, dim):
    """Largest eigenvalue of a symmetric PSD operator, rounded up to be an upper bound.

    Small operators are formed explicitly and solved by LAPACK; larger ones use a few
    Lanczos (ARPACK) iterations with a fixed starting vector (deterministic).
    """
    if dim == 0:
        return 0.0
    if dim <= _DENSE_EIG_MAX:
        M = np.column_stack([matvec(e) for e in np.eye(dim)])
        return float(scipy.linalg.eigvalsh(0.5 * (M + M.T))[-1])
    op = LinearOperator((dim, dim), matvec=matvec, dtype=np.float64)
    v0 = np.random.RandomState(0).standard_normal(dim)
    tol = 1e-8
    val = eigsh(op, k=1, which="LA", tol=tol, v0=v0, return_eigenvectors=False)[0]
    # ARPACK guarantees an eigenvalue within tol * |val| of val: round up.
    return float(val) * (1.0 + 10 * tol)


def restricted_lipschitz(G, v0, cap):
    """Largest eigenvalue of the PSD block ``G``, and its eigenvector estimate.

    Exact (LAPACK) for small blocks. Larger blocks use power iterations from ``v0`` (the
    previous block's eigenvector, so few are needed along a path) and a 5% margin; the
    value is a lower bound in theory, so the iterations that use it check it (the
    curvature of each step must not exceed it, see :func:`ws_fista`). Capped by
    ``cap``, an upper bound (the whole problem's constant, or the trace of ``G``).
    """
    k = G.shape[0]
    if k <= _DENSE_EIG_MAX:
        vals, vecs = scipy.linalg.eigh(G, check_finite=False)
        return min(float(vals[-1]) * (1.0 + 1e-12) + 1e-300, cap), vecs[:, -1]
    v = v0 if v0 is not None and v0.shape == (k,) and np.any(v0) else np.ones(k)
    v = v / np.linalg.norm(v)
    theta = 0.0
    for _ in range(_POWER_STEPS):
        z = G @ v
        theta_new = float(v @ z)
        nz = np.linalg.norm(z)
        if not nz > 0:
            break
        v = z / nz
        done = theta_new - theta <= 1e-3 * theta_new
        theta = theta_new
        if done:
            break
    return min(1.05 * theta + 1e-300, cap), v


class BlockLipschitz:
    """Lipschitz constants of a sequence of PSD blocks: working sets' Gram blocks along a
    path, or the Hessians of successive Newton models.

    ``lipschitz(G, idx, cap)`` is :func:`restricted_lipschitz` of ``G``, the block of the
    features ``idx`` (sorted) of ``n_features``, started from the previous block's
    eigenvector on the features the two share (few power iterations when the set moves a
    little); the same set again reuses its value (a Gram block is the same matrix).
    Without ``idx`` the blocks are taken to change (Hessians): the value is recomputed,
    from the last eigenvector when the size matches. :meth:`update` records a value the
    iterations had to raise (see :func:`~sksparse_nn.solvers._working_set.ws_fista`).
    """

    def __init__(self, n_features=None):
        self.n_features = n_features
        self._key, self._L, self._vec = None, None, None
        self._set = None  # (idx, v): the last block's eigenvector on its features only

    def _last(self, size):
        """The last eigenvector as a vector of ``size`` entries, or None (the last
        block's, on all ``n_features`` features: zero off its set)."""
        if self._set is not None and size == self.n_features:
            idx, v = self._set
            out = np.zeros(size)
            out[idx] = v
            return out
        return self._vec if self._vec is not None and self._vec.shape == (size,) else None

    def _start(self, idx):
        """The last eigenvector at the features ``idx`` (zero where the last block did
        not have them), or None."""
        if self._set is None:
            last = self._last(self.n_features) if self.n_features is not None else None
            return None if last is None else last[idx]
        prev, v = self._set
        if prev.size == 0:
            return np.zeros(idx.size)
        at = np.minimum(np.searchsorted(prev, idx), prev.size - 1)
        return np.where(prev[at] == idx, v[at], 0.0)

    def __call__(self, G, idx=None, cap=np.inf):
        if idx is None:
            v0 = self._last(G.shape[0])
            self._L, self._vec = restricted_lipschitz(G, v0, cap)
            self._key, self._set = None, None
            return self._L
        key = idx.tobytes()
        if key == self._key:
            return self._L
        L, v = restricted_lipschitz(G, self._start(idx), cap)
        # the eigenvector kept on the set's features only (not a vector of all of them)
        self._set, self._vec = (np.array(idx), v), None
        self._key, self._L = key, L
        return L

    def update(self, L):
        """The value the iterations settled on for the current block."""
        self._L = L
