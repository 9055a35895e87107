"""Group specifications of the linear models: one label per feature (numpy only).

``groups`` as users give them (None, a group size, lists of feature indices, or one
integer label per feature with ``-1`` for unpenalized features) become a label array;
``group_weights`` (None, "sqrt" or explicit) become one weight per group;
:func:`group_labels_from_sizes` turns contiguous group sizes into labels. Shared by the
proximal solvers and the D-gated linear estimators.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..utils.digest import array_key

__all__ = [
    "check_groups",
    "count_groups",
    "group_labels_from_sizes",
    "held_penalty_groups",
    "resolve_group_weights",
    "same_group_pairs",
    "spec_key",
]


def group_labels_from_sizes(sizes):
    """One group label per feature from contiguous group sizes (skglm's and celer's form).

    The estimators' ``groups`` reads a list of integers as one label per feature, so
    sizes such as ``[1, 3, 2]`` must be converted first.

    Parameters
    ----------
    sizes : array-like of int
        Number of consecutive features in each group, all >= 1.

    Returns
    -------
    labels : ndarray of int of shape (sum(sizes),)

    Examples
    --------
    >>> group_labels_from_sizes([1, 3, 2])
    array([0, 1, 1, 1, 2, 2])
    """
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer):
        raise ValueError(f"sizes must be a non-empty 1-d array of integers, got {sizes!r}.")
    if np.any(sizes < 1):
        raise ValueError(f"Every group size must be >= 1, got {sizes.tolist()}.")
    return np.repeat(np.arange(sizes.size), sizes)


def _is_sequence(obj):
    """Whether ``obj`` is a list-like of indices (not a string or a scalar)."""
    if isinstance(obj, (str, bytes)):
        return False
    if isinstance(obj, np.ndarray):
        return obj.ndim >= 1
    return isinstance(obj, (list, tuple, range)) or (
        hasattr(obj, "__len__") and hasattr(obj, "__getitem__")
    )


def _as_integers(values, what):
    """Integer array from ``values``; integral floats are accepted, bools are not."""
    arr = np.asarray(values)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        if arr.dtype == object:
            # e.g. a list mixing ints and floats that numpy could not unify; try harder.
            try:
                return _as_integers(arr.astype(np.float64), what)
            except (TypeError, ValueError):
                pass
        raise ValueError(f"{what} must be integers, got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            bad = arr[~np.isfinite(arr) | (arr != np.round(arr))][0]
            raise ValueError(f"{what} must be integers; got the non-integer value {bad!r}.")
    return arr.astype(np.intp)


def _labels_from_index_lists(groups, n_features):
    labels = np.full(n_features, -1, dtype=np.intp)
    for j, group in enumerate(groups):
        idx = _as_integers(group, f"The indices of group {j}")
        if idx.ndim != 1:
            raise ValueError(
                f"Group {j} must be a 1-d list of feature indices, got shape {idx.shape}."
            )
        if idx.size == 0:
            raise ValueError(f"Group {j} is empty; every group needs at least one feature.")
        bad = (idx < 0) | (idx >= n_features)
        if bad.any():
            raise ValueError(
                f"Group {j} contains the feature index {idx[bad][0]}, out of range for "
                f"{n_features} features (valid indices are 0..{n_features - 1})."
            )
        uniq, counts = np.unique(idx, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"Feature {uniq[counts > 1][0]} appears twice in group {j}.")
        owners = labels[idx]
        taken = owners >= 0
        if taken.any():
            first = np.flatnonzero(taken)[0]
            raise ValueError(
                f"Groups must not overlap: feature {idx[first]} appears in groups "
                f"{owners[first]} and {j}."
            )
        labels[idx] = j
    return labels


def _labels_from_label_array(arr, n_features):
    if arr.ndim != 1 or arr.shape[0] != n_features:
        raise ValueError(
            f"A group label array must have shape ({n_features},) (one label per feature), "
            f"got shape {arr.shape}."
        )
    arr = _as_integers(arr, "Group labels")
    if arr.size and arr.min() < -1:
        raise ValueError(f"Group labels must be >= 0, or -1 for 'in no group'; got {arr.min()}.")
    labels = np.full(n_features, -1, dtype=np.intp)
    grouped = arr >= 0
    labels[grouped] = np.unique(arr[grouped], return_inverse=True)[1]  # sorted label order
    return labels


def check_groups(groups, n_features):
    """Resolve a group specification into one integer label per feature.

    Parameters
    ----------
    groups : None, int, list of list of int, or array-like of int of shape (n_features,)
        * ``None``: every feature is its own group (the lasso).
        * ``int k >= 1``: consecutive groups of ``k`` features; the last one may be
          smaller.
        * a list of index lists (or a 2-d integer array, one group per row): the features
          of each group. Groups are numbered in list order; features that are listed in
          no group are unpenalized. Indices must be in ``0..n_features-1`` and groups must
          not overlap.
        * a label array of length ``n_features``: integer group label of each feature,
          ``-1`` for "in no group". Groups are numbered in sorted label order.
    n_features : int
        Number of features.

    Returns
    -------
    labels : ndarray of int of shape (n_features,)
        Values in ``-1..J-1``: group of each feature, ``-1`` for unpenalized features.

    Raises
    ------
    ValueError
        If the specification is malformed, names out-of-range features, has overlapping
        or empty groups, non-integer labels or the wrong length.
    """
    n_features = int(n_features)
    if groups is None:
        return np.arange(n_features, dtype=np.intp)
    if isinstance(groups, (bool, np.bool_)):
        raise ValueError(f"groups must not be a boolean, got {groups!r}.")
    if isinstance(groups, numbers.Integral):
        size = int(groups)
        if size < 1:
            raise ValueError(
                f"An integer groups gives the group size and must be >= 1, got {size}."
            )
        return (np.arange(n_features) // size).astype(np.intp)
    if isinstance(groups, (str, bytes, dict, set, frozenset)) or not (
        _is_sequence(groups) or hasattr(groups, "__array__")
    ):
        raise ValueError(
            "groups must be None, a positive int (group size), a list of feature-index lists "
            f"or an integer label array of length n_features; got {type(groups).__name__}."
        )
    if hasattr(groups, "__array__") and not isinstance(groups, np.ndarray):
        groups = np.asarray(groups)  # pandas Series, torch tensors, ...
    if isinstance(groups, np.ndarray):
        if groups.ndim == 2:
            return _labels_from_index_lists(list(groups), n_features)
        if groups.ndim != 1:
            raise ValueError(
                f"groups as an array must be 1-d (labels) or 2-d (one group per row), "
                f"got {groups.ndim} dimensions."
            )
        if groups.dtype != object:
            return _labels_from_label_array(groups, n_features)
    items = list(groups)
    if len(items) == 0:
        raise ValueError(
            "groups is empty: give a label per feature, or a list of non-empty index lists."
        )
    nested = [_is_sequence(item) for item in items]
    if all(nested):
        return _labels_from_index_lists(items, n_features)
    if any(nested):
        raise ValueError(
            "groups mixes index lists and scalars: give either a list of feature-index lists "
            "or a flat label array."
        )
    return _labels_from_label_array(np.asarray(items), n_features)


def count_groups(labels):
    return int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0


def resolve_group_weights(group_weights, labels):
    """Group weights ``rho`` of shape ``(J,)`` from a specification.

    Parameters
    ----------
    group_weights : None, "sqrt" or array-like of shape (J,)
        ``None`` gives ``rho_j = 1``; ``"sqrt"`` gives ``sqrt(|G_j|)``; an array gives
        explicit finite non-negative weights (``0`` leaves a group unpenalized).
    labels : ndarray of int of shape (n_features,)
        Output of :func:`check_groups`.

    Returns
    -------
    rho : ndarray of float64 of shape (J,)
    """
    n_groups = count_groups(labels)
    if group_weights is None:
        return np.ones(n_groups)
    if isinstance(group_weights, str):
        if group_weights == "sqrt":
            return np.sqrt(np.bincount(labels[labels >= 0], minlength=n_groups).astype(float))
        raise ValueError(
            f'group_weights must be None, "sqrt" or an array of {n_groups} non-negative '
            f"weights, got {group_weights!r}."
        )
    try:
        rho = np.array(group_weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"group_weights must be numeric, got {group_weights!r}.") from exc
    if rho.shape != (n_groups,):
        raise ValueError(
            f"group_weights must have shape ({n_groups},) (one weight per group), "
            f"got shape {rho.shape}."
        )
    if not np.all(np.isfinite(rho)):
        raise ValueError("group_weights must be finite.")
    if np.any(rho < 0):
        raise ValueError(f"group_weights must be >= 0, got {rho.min()}.")
    return rho


def same_group_pairs(labels):
    """Index pairs ``(i, k)`` with ``labels[i] == labels[k]``: the block diagonal of a
    matrix whose rows and columns are grouped by ``labels`` (``sum_j size_j^2`` pairs,
    never a dense mask)."""
    order = np.argsort(labels, kind="stable")
    _, start, size = np.unique(labels[order], return_index=True, return_counts=True)
    first = np.repeat(start, size * size)  # each pair's group's first position in order
    offset = np.arange(first.size) - np.repeat(np.cumsum(size * size) - size * size, size * size)
    width = np.repeat(size, size * size)
    return order[first + offset // width], order[first + offset % width]


def spec_key(spec):
    """A hashable key that is equal for equal ``groups`` / ``group_weights`` values
    (None, a number, a string, or numbers in an array or a flat list: their
    :func:`~sksparse_nn.utils.digest.array_key`, so that an array changed in place gets
    a new key); None for a value that has none (ragged index lists)."""
    if spec is None or isinstance(spec, (str, bytes, numbers.Number)):
        return (type(spec).__name__, spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(spec)
    except (TypeError, ValueError):
        return None
    return array_key(arr)


def held_penalty_groups(groups, group_weights, n_features, held=None):
    """``(key, (labels, rho))``: :func:`check_groups` and :func:`resolve_group_weights` of
    a specification as read-only arrays, or ``held`` (this function's earlier answer)
    while ``groups``, ``group_weights`` and ``n_features`` keep their values.

    An estimator's hooks, a warm refit and a path's next lam then share one copy (on
    wide data a vector of length ``n_features`` weighs as much as a sparse ``X`` of a
    few entries per column); the key (:func:`spec_key`) notices a user's array changed
    in place.
    """
    key = (int(n_features), spec_key(groups), spec_key(group_weights))
    if held is not None and None not in key and held[0] == key:
        return held
    labels = check_groups(groups, n_features)
    rho = resolve_group_weights(group_weights, labels)
    labels.flags.writeable = rho.flags.writeable = False
    return key, (labels, rho)
