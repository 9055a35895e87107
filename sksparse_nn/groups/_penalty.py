"""The group penalty ``sum_j rho_j ||w_j||^(2/D)`` on labelled rows (numpy only).

One place for its arithmetic: the norms of labelled groups of rows
(:func:`norms_by_label`) and the penalty's value (:func:`penalty_value`). Rows are
features (a coefficient matrix has one row per feature and one column per output or
class); ``labels[i]`` is row ``i``'s group, ``-1`` for rows outside every group.

(``group_norms`` and ``penalty`` of a sparsified torch module are
:func:`sksparse_nn.sparsifiers.group_norms` and :func:`sksparse_nn.sparsifiers.penalty`.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["norms_by_label", "penalty_value"]


def norms_by_label(W, labels, n_groups):
    """Euclidean norm of every group's rows of ``W``.

    Parameters
    ----------
    W : ndarray of shape (n_rows,) or (n_rows, n_columns)
    labels : ndarray of int of shape (n_rows,)
        Group of each row, ``-1`` for none.
    n_groups : int

    Returns
    -------
    norms : ndarray of shape (n_groups,)
        Frobenius norm of each group's block (0 for a group without rows).

    Examples
    --------
    >>> import numpy as np
    >>> norms_by_label(np.array([3.0, 4.0, 1.0]), np.array([0, 0, -1]), 2)
    array([5., 0.])
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 1 or W.shape[1] == 1:  # one column: its squares, no (n_rows, 1) copy
        sq = np.square(W.reshape(-1))
    else:
        sq = (W * W).sum(axis=1)
    grouped = labels >= 0
    if grouped.all():  # every row in a group: no copies of the labels and squares
        norms = np.bincount(labels, weights=sq, minlength=n_groups)
    else:
        norms = np.bincount(labels[grouped], weights=sq[grouped], minlength=n_groups)
    norms = norms.astype(np.float64, copy=False)  # no rows in a group: integer zeros
    return np.sqrt(norms, out=norms)


def penalty_value(norms, rho, D):
    """``sum_j rho_j ||w_j||^(2/D)`` from the group norms.

    Examples
    --------
    >>> import numpy as np
    >>> float(penalty_value(np.array([4.0, 0.0]), np.array([1.0, 2.0]), D=4))
    2.0
    """
    return float(np.asarray(rho) @ np.asarray(norms, dtype=np.float64) ** (2.0 / D))
