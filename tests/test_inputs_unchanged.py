"""No public entry point modifies what the user passed.

Every estimator's ``fit`` (then ``predict``, ``predict_proba``, ``decision_function``,
``transform``, ``inverse_transform``, ``score``, ``lambda_max`` and the NAM's
explanations), ``regularization_path`` (the function and the estimators' method, with
and without a checkpoint, with CV), the selectors, the table encoders, the ONNX export
and compaction are run on every kind of input they accept: dense arrays (C, Fortran,
float32), CSR and CSC matrices (and a CSR array) with sorted and unsorted indices,
pandas DataFrames and Series (numeric, and raw tables with strings, categories and
NaN), sample weights, group labels, lam grids and CV folds. Every input is compared after
the call with a snapshot taken before (:func:`snapshot`, :func:`assert_unchanged`):
bytes, dtype, shape, strides and flags of arrays; the ``data``, ``indices`` and
``indptr`` arrays of sparse matrices, element by element (the order of unsorted indices
included: a checkpointed path once sorted the caller's CSR indices in place while
hashing them) and scipy's ``has_sorted_indices`` flag; pandas objects exactly, with
their dtypes, columns and index. Test ids name the entry point and the input kind.
"""

import copy
import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from _user_module import TwoLayer
from sklearn.base import clone, is_classifier
from sklearn.preprocessing import StandardScaler

from sksparse_nn import (
    DGatedAutoencoder,
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    DGatedNeuralNetClassifier,
    DGatedNeuralNetRegressor,
    GroupLassoClassifier,
    GroupLassoRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
    TableEncoder,
    VariableModel,
    regularization_path,
)
from sksparse_nn.selection import KnockoffFilter, SelectFromPath, StabilitySelection

N, P = 64, 6
GROUPS = np.array([0, 0, 1, 1, 2, 2])  # penalty groups of the P columns
GROUP_WEIGHTS = np.array([1.0, 0.5, 2.0])


# ------------------------------------------------------------------ snapshots
def _sorted_by_arrays(matrix):
    """Whether every row's (CSR) or column's (CSC) stored indices ascend, read from the
    arrays themselves (scipy caches ``has_sorted_indices``)."""
    ind, ptr = matrix.indices, matrix.indptr
    return all(np.all(np.diff(ind[a:b]) >= 0) for a, b in zip(ptr[:-1], ptr[1:], strict=True))


def _array_snapshot(a):
    flags = {f: bool(a.flags[f]) for f in ("C_CONTIGUOUS", "F_CONTIGUOUS", "WRITEABLE", "ALIGNED")}
    values = [repr(v) for v in a.ravel(order="K")] if a.dtype == object else a.tobytes(order="A")
    return {
        "kind": "array",
        "type": type(a),
        "dtype": a.dtype,
        "shape": a.shape,
        "strides": a.strides,
        "flags": flags,
        "values": values,
    }


def snapshot(obj):
    """What :func:`assert_unchanged` compares ``obj`` with later: a deep copy taken now."""
    if sp.issparse(obj):
        return {
            "kind": "sparse",
            "type": type(obj),
            "format": obj.format,
            "shape": obj.shape,
            "data": _array_snapshot(obj.data),
            "indices": _array_snapshot(obj.indices),
            "indptr": _array_snapshot(obj.indptr),
            "sorted": _sorted_by_arrays(obj),
        }
    if isinstance(obj, np.ndarray):
        return _array_snapshot(obj)
    if isinstance(obj, (pd.DataFrame, pd.Series)):
        return {"kind": "pandas", "copy": copy.deepcopy(obj), "attrs": copy.deepcopy(obj.attrs)}
    if isinstance(obj, dict):  # e.g. fit_params: every value checked
        return {
            "kind": "dict",
            "type": type(obj),
            "items": {k: snapshot(v) for k, v in obj.items()},
        }
    if isinstance(obj, (list, tuple)):
        return {"kind": "sequence", "type": type(obj), "items": [snapshot(v) for v in obj]}
    return {"kind": "other", "copy": copy.deepcopy(obj), "repr": repr(obj)}


def _assert_array_unchanged(a, snap, name):
    assert isinstance(a, np.ndarray) and type(a) is snap["type"], f"{name}: type changed"
    now = _array_snapshot(a)
    for key in ("dtype", "shape", "strides", "flags"):
        assert now[key] == snap[key], f"{name}: {key} {snap[key]} -> {now[key]}"
    assert now["values"] == snap["values"], f"{name}: values changed"


def _assert_pandas_unchanged(obj, snap, name):
    before = snap["copy"]
    assert type(obj) is type(before), f"{name}: type changed"
    exact = {"check_exact": True, "check_index_type": True, "check_flags": True}
    if isinstance(obj, pd.DataFrame):
        pd.testing.assert_frame_equal(obj, before, check_column_type=True, **exact)
        assert obj.dtypes.equals(before.dtypes), f"{name}: dtypes changed"
        assert obj.columns.equals(before.columns) and obj.columns.dtype == before.columns.dtype
        assert list(obj.columns) == list(before.columns), f"{name}: columns changed"
    else:
        pd.testing.assert_series_equal(obj, before, check_series_type=True, **exact)
        assert obj.dtype == before.dtype and obj.name == before.name, f"{name}: dtype/name"
    assert obj.index.equals(before.index) and obj.index.dtype == before.index.dtype
    assert list(obj.index) == list(before.index) and obj.index.name == before.index.name
    assert obj.attrs == snap["attrs"], f"{name}: attrs changed"


def assert_unchanged(obj, snap, name="input"):
    """Fail, naming ``name`` and what differs, when ``obj`` is not what it was at
    :func:`snapshot`."""
    if snap["kind"] == "sparse":
        assert sp.issparse(obj) and type(obj) is snap["type"], f"{name}: type changed"
        assert obj.format == snap["format"] and obj.shape == snap["shape"], f"{name}: format"
        for part in ("data", "indices", "indptr"):
            _assert_array_unchanged(getattr(obj, part), snap[part], f"{name}.{part}")
        # scipy's cached flag must still tell the truth about the (unchanged) arrays
        assert obj.has_sorted_indices == snap["sorted"], f"{name}: has_sorted_indices flag set"
    elif snap["kind"] == "array":
        _assert_array_unchanged(obj, snap, name)
    elif snap["kind"] == "pandas":
        _assert_pandas_unchanged(obj, snap, name)
    elif snap["kind"] == "dict":
        assert type(obj) is snap["type"] and obj.keys() == snap["items"].keys(), f"{name} keys"
        for key, value in obj.items():
            assert_unchanged(value, snap["items"][key], f"{name}[{key!r}]")
    elif snap["kind"] == "sequence":
        assert type(obj) is snap["type"] and len(obj) == len(snap["items"]), f"{name} length"
        for i, value in enumerate(obj):
            assert_unchanged(value, snap["items"][i], f"{name}[{i}]")
    else:
        assert repr(obj) == snap["repr"] and obj == snap["copy"], f"{name} changed"


def _run_and_check(inputs, call):
    """``call()``, then every value of ``inputs`` (what ``call`` passes to the entry
    point) compared with its snapshot from before."""
    snaps = {key: snapshot(value) for key, value in inputs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny budgets: convergence warnings expected
        out = call()
    for key, value in inputs.items():
        assert_unchanged(value, snaps[key], key)
    return out


# ------------------------------------------------------------------ inputs
def _reversed(matrix):
    """``matrix`` (CSR or CSC) with every row's (column's) entries stored in reverse order."""
    matrix = matrix.copy()
    matrix.sort_indices()
    data, indices, ptr = matrix.data.copy(), matrix.indices.copy(), matrix.indptr.copy()
    for a, b in zip(ptr[:-1], ptr[1:], strict=True):
        data[a:b], indices[a:b] = data[a:b][::-1].copy(), indices[a:b][::-1].copy()
    out = type(matrix)((data, indices, ptr), shape=matrix.shape)
    assert not _sorted_by_arrays(out) and not out.has_sorted_indices
    np.testing.assert_array_equal(out.toarray(), matrix.toarray())
    return out


DENSE_KINDS = ["C", "F", "float32", "frame"]
# scipy sparse matrices, and a sparse array (scipy's newer container)
SPARSE_KINDS = ["csr", "csr-unsorted", "csc", "csc-unsorted", "csr_array-unsorted"]
KINDS = DENSE_KINDS + SPARSE_KINDS
_SPARSE_TYPES = {
    "csr": sp.csr_matrix,
    "csc": sp.csc_matrix,
    "csr_array": sp.csr_array,
    "csc_array": sp.csc_array,
}


def _X(kind, dense):
    if kind == "C":
        return np.ascontiguousarray(dense)
    if kind == "F":
        return np.asfortranarray(dense)
    if kind == "float32":
        return dense.astype(np.float32)
    if kind == "frame":
        index = pd.RangeIndex(100, 100 + len(dense), name="row")  # not 0..n-1
        return pd.DataFrame(dense, columns=[f"x{j}" for j in range(dense.shape[1])], index=index)
    container, _, unsorted = kind.partition("-")
    matrix = _SPARSE_TYPES[container](dense)
    return _reversed(matrix) if unsorted else matrix


def _data(kind, task="regression", seed=0):
    """``(X, y, sample_weight)`` of the input ``kind``: y a Series for "frame" (string
    labels for a classifier), else an array (None for ``task="unsupervised"``)."""
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(N, P))
    dense[np.abs(dense) < 0.5] = 0.0  # stored zeros are skipped: a real sparse pattern
    signal = dense[:, 0] - dense[:, 2] + 0.3 * rng.normal(size=N)
    X = _X(kind, dense)
    weight = rng.uniform(0.5, 2.0, size=N)
    if task == "unsupervised":
        return X, None, weight
    y = (signal > np.median(signal)).astype(np.int64) if task == "classification" else signal
    if kind == "frame":
        if task == "classification":
            y = np.where(y == 1, "yes", "no").astype(object)
        y = pd.Series(y, index=X.index, name="target")
    return X, y, weight


def _task(estimator):
    if is_classifier(estimator):
        return "classification"
    return "unsupervised" if isinstance(estimator, DGatedAutoencoder) else "regression"


def _takes_sparse(estimator):
    return estimator.__sklearn_tags__().input_tags.sparse


_WEIGHTED = (
    SparseLinearRegressor,
    SparseLinearClassifier,
    GroupLassoRegressor,
    GroupLassoClassifier,
)


def _takes_sample_weight(estimator):
    """Whether ``fit`` takes ``sample_weight``: the linear families (and composites of one)."""
    if isinstance(estimator, (SparsePathCV, VariableModel)):
        estimator = estimator.estimator
    return isinstance(estimator, _WEIGHTED)


def _unsorted_csr():
    return _X("csr-unsorted", np.arange(1.0, 13.0).reshape(3, 4))


def _small_frame():
    return pd.DataFrame({"a": [1.0, np.nan], "b": ["x", None]}, index=pd.Index([7, 3]))


# (what changes, a fresh input, the change in place): what the checks must see
CHANGES = [
    ("sorted indices", _unsorted_csr, lambda X: X.sort_indices()),
    ("flag set", _unsorted_csr, lambda X: setattr(X, "has_sorted_indices", True)),
    ("scaled data", lambda: sp.csc_matrix(np.eye(3)), lambda X: np.multiply(X.data, 2, out=X.data)),
    ("negative zero", lambda: np.zeros((3, 2)), lambda a: a.__setitem__((0, 0), -0.0)),
    ("read-only", lambda: np.zeros((3, 2)), lambda a: a.setflags(write=False)),
    ("clipped", lambda: np.arange(4.0), lambda a: np.clip(a, 1, 2, out=a)),
    ("filled NaN", _small_frame, lambda f: f.fillna({"a": 0.0}, inplace=True)),
    ("new dtype", _small_frame, lambda f: f.__setitem__("a", f["a"].astype(np.float32))),
    ("new column", _small_frame, lambda f: f.__setitem__("c", 1.0)),
    ("new index", _small_frame, lambda f: setattr(f, "index", pd.Index([3, 7]))),
    ("renamed Series", lambda: pd.Series([1.0, 2.0]), lambda s: setattr(s, "name", "y")),
    ("sorted list", lambda: [3, 1, 2], lambda v: v.sort()),
    ("fit_params", lambda: {"w": np.ones(3)}, lambda d: d["w"].__setitem__(0, 2.0)),
]


@pytest.mark.parametrize("make, change", [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_the_checks_see_a_change_in_place(make, change):
    obj = make()
    snap = snapshot(obj)
    assert_unchanged(obj, snap)  # untouched: passes
    change(obj)
    with pytest.raises(AssertionError):
        assert_unchanged(obj, snap)


# ------------------------------------------------------------------ estimators


_NET = {"max_epochs": 2, "random_state": 0}
_MLP = {"lam": 1e-3, "hidden_layer_sizes": (8,), "batch_size": 32, **_NET}
_NODE = {"num_trees": 4, "depth": 2, "batch_size": 32, **_NET}
_USER = {"gates": {"hidden.weight": "in"}, "lam": 1e-3, "batch_size": 32, **_NET}
_LINEAR = {"lam": 0.01, "max_epochs": 5}


def _linear():
    return SparseLinearRegressor(**_LINEAR)


def _grouped():
    # group labels and weights are arrays the user passed too (checked like X)
    return {"groups": GROUPS.copy(), "group_weights": GROUP_WEIGHTS.copy()}


# (id, factory): a factory, so that every test gets fresh arrays in the parameters
ESTIMATORS = [
    ("GroupLassoRegressor", lambda: GroupLassoRegressor(lam=0.01, **_grouped())),
    ("GroupLassoClassifier", lambda: GroupLassoClassifier(lam=0.01, **_grouped())),
    ("SparseLinearRegressor", lambda: SparseLinearRegressor(**_LINEAR, **_grouped())),
    ("SparseLinearClassifier", lambda: SparseLinearClassifier(**_LINEAR, **_grouped())),
    ("DGatedMLPRegressor", lambda: DGatedMLPRegressor(**_MLP, **_grouped())),
    ("DGatedMLPClassifier", lambda: DGatedMLPClassifier(**_MLP)),
    ("DGatedNAMRegressor", lambda: DGatedNAMRegressor(**_MLP)),
    ("DGatedNAMClassifier", lambda: DGatedNAMClassifier(**_MLP, **_grouped())),
    ("NODERegressor", lambda: NODERegressor(**_NODE)),
    ("NODEClassifier", lambda: NODEClassifier(**_NODE)),
    ("DGatedNeuralNetRegressor", lambda: DGatedNeuralNetRegressor(TwoLayer, **_USER)),
    ("DGatedNeuralNetClassifier", lambda: DGatedNeuralNetClassifier(TwoLayer, **_USER)),
    (
        "DGatedAutoencoder",
        lambda: DGatedAutoencoder(
            lam=1e-3, n_components=2, hidden_layer_sizes=(8,), batch_size=32, **_NET
        ),
    ),
    (
        "SparsePathCV",
        lambda: SparsePathCV(SparseLinearClassifier(max_epochs=5), lams=[1e-3, 1e-2], cv=2),
    ),
    (
        "VariableModel",
        lambda: VariableModel(SparseLinearRegressor(**_LINEAR), encoder=StandardScaler()),
    ),
    ("TableEncoder", lambda: TableEncoder(min_frequency=2)),
]
_FACTORIES = dict(ESTIMATORS)


def _cases(names, kinds, slow=()):
    """(name, kind) pairs, sparse kinds only where the estimator takes sparse X; those
    of the ``slow`` kinds marked slow (run with ``-m slow``)."""
    return [
        pytest.param(
            name, kind, id=f"{name}-{kind}", marks=[pytest.mark.slow] if kind in slow else []
        )
        for name in names
        for kind in [*kinds, *slow]
        if kind not in SPARSE_KINDS or _takes_sparse(_FACTORIES[name]())
    ]


def _param_arrays(estimator):
    """The arrays and lists among the estimator's own parameters (groups, group weights,
    unpenalized variables): the user's objects too."""
    return {
        f"param {k}": v
        for k, v in estimator.get_params(deep=False).items()
        if isinstance(v, (np.ndarray, list))
    }


# their lambda_max (the default grid's top) takes dense X only (a TypeError), their fit
# takes CSR: their sparse paths get a grid
_DENSE_LAMBDA_MAX = (DGatedNeuralNetRegressor, DGatedNeuralNetClassifier)


def _invertible(Z):
    """Whether ``Z`` is what ``inverse_transform`` takes: numbers in at least one column
    (a selector's transform of a raw table keeps its strings; one that kept no column
    is refused by scikit-learn's checks)."""
    numbers = not hasattr(Z, "iloc") and np.issubdtype(Z.dtype, np.number)
    return numbers and Z.shape[1] > 0


def _methods(fitted, X, y, weight):
    """Every prediction-time entry point of ``fitted`` on ``X`` (and its outputs where
    they are inputs: ``inverse_transform`` of the transformed data)."""
    for name in ("predict", "predict_proba", "decision_function"):
        if hasattr(fitted, name):
            _run_and_check({"X": X}, lambda name=name: getattr(fitted, name)(X))
    if hasattr(fitted, "transform"):
        Z = _run_and_check({"X": X}, lambda: fitted.transform(X))
        if hasattr(fitted, "inverse_transform") and _invertible(Z):
            _run_and_check({"Z": Z}, lambda: fitted.inverse_transform(Z))
    if hasattr(fitted, "score"):
        if y is None:
            _run_and_check({"X": X}, lambda: fitted.score(X))
        elif "sample_weight" in inspect.signature(fitted.score).parameters:
            inputs = {"X": X, "y": y, "sample_weight": weight}
            _run_and_check(inputs, lambda: fitted.score(X, y, sample_weight=weight))
        else:
            _run_and_check({"X": X, "y": y}, lambda: fitted.score(X, y))
    for name in ("contributions", "explain"):  # the NAM's explanations
        if hasattr(fitted, name):
            _run_and_check({"X": X}, lambda name=name: getattr(fitted, name)(X))
    dense_only = sp.issparse(X) and isinstance(fitted, _DENSE_LAMBDA_MAX)
    if hasattr(fitted, "lambda_max") and not dense_only:  # the path protocol's, public
        inputs, kwargs = {"X": X, "y": y}, {}
        if (
            weight is not None
            and "sample_weight" in inspect.signature(fitted.lambda_max).parameters
        ):
            inputs["sample_weight"] = kwargs["sample_weight"] = weight
        _run_and_check(inputs, lambda: fitted.lambda_max(X, y, **kwargs))


@pytest.mark.parametrize("name, kind", _cases(_FACTORIES, KINDS))
def test_fit_predict_score(name, kind):
    estimator = _FACTORIES[name]()
    X, y, weight = _data(kind, _task(estimator))
    inputs = {"X": X, "y": y, **_param_arrays(estimator)}
    kwargs = {}
    if _takes_sample_weight(estimator):
        inputs["sample_weight"] = kwargs["sample_weight"] = weight
    fitted = _run_and_check(inputs, lambda: estimator.fit(X, y, **kwargs))
    _methods(fitted, X, y, weight)
    if hasattr(fitted, "fit_transform") and not isinstance(fitted, VariableModel):
        _run_and_check(inputs, lambda: clone(estimator).fit_transform(X, y))


# ------------------------------------------------------------------ regularization paths
# (estimator, the input kinds of its paths, more kinds in the slow run): the path
# engine's handling of X (folds, fingerprint, validation) is the same for every family,
# their lambda_max is called on every kind by test_fit_predict_score. So the default run
# has SparseLinearRegressor (where sparse input matters most: its solvers read CSC
# columns in place) on every kind but C and float32 (their fits are covered above; F is
# the layout pandas hands over) and every other family on one kind; the slow run adds
# a dense, a pandas and the other sparse kinds (the networks train on CSR: CSC is
# converted, on a copy)
PATHS = [
    ("SparseLinearRegressor", [k for k in KINDS if k not in ("C", "float32")], []),
    ("SparseLinearClassifier", ["frame", "csr-unsorted"], ["F", "csc-unsorted"]),
    ("DGatedMLPRegressor", ["csr-unsorted"], ["F", "frame"]),
    ("DGatedNAMClassifier", ["csr-unsorted"], ["F", "frame"]),
    ("NODERegressor", ["csr-unsorted"], ["F", "frame"]),
    ("DGatedNeuralNetClassifier", ["csr-unsorted"], ["F", "frame"]),
    ("DGatedAutoencoder", ["frame"], ["F"]),  # dense X only
    ("VariableModel", ["frame"], ["F"]),  # StandardScaler: dense X only
]


def _path_cases():
    return [case for name, kinds, slow in PATHS for case in _cases([name], kinds, slow)]


def _path_inputs(estimator, kind, validation=False):
    """(X, y, the path's keywords, every input to check)."""
    X, y, weight = _data(kind, _task(estimator))
    kwargs = {"n_lams": 3}
    if sp.issparse(X) and isinstance(estimator, _DENSE_LAMBDA_MAX):
        kwargs = {"lams": np.array([1e-3, 1e-2, 1e-1])}
    if _takes_sample_weight(estimator):
        kwargs["fit_params"] = {"sample_weight": weight}
    if validation and y is not None:
        kwargs["X_val"], kwargs["y_val"], _ = _data(kind, _task(estimator), seed=1)
    return X, y, kwargs, {"X": X, "y": y, **kwargs, **_param_arrays(estimator)}


def _unfitted(estimator, keys):
    assert set(vars(estimator)) == keys, "the path fitted the user's estimator"


@pytest.mark.parametrize("name, kind", _path_cases())
def test_regularization_path(name, kind):
    estimator = _FACTORIES[name]()
    keys = set(vars(estimator))
    composite = isinstance(estimator, VariableModel)  # its own path method
    X, y, kwargs, inputs = _path_inputs(estimator, kind, validation=not composite)
    if composite:
        _run_and_check(inputs, lambda: estimator.regularization_path(X, y, **kwargs))
    else:
        _run_and_check(inputs, lambda: regularization_path(estimator, X, y, **kwargs))
    _unfitted(estimator, keys)


@pytest.mark.parametrize("name, kind", _path_cases())
def test_checkpointed_regularization_path(name, kind, tmp_path):
    estimator = _FACTORIES[name]()
    X, y, kwargs, inputs = _path_inputs(estimator, kind)
    kwargs["checkpoint"] = tmp_path
    if isinstance(estimator, VariableModel):  # a composite: its own path method
        _run_and_check(inputs, lambda: estimator.regularization_path(X, y, **kwargs))
        return
    first = _run_and_check(inputs, lambda: regularization_path(estimator, X, y, **kwargs))
    # resumed from the files (the same data's key), and again nothing modified
    again = _run_and_check(inputs, lambda: regularization_path(estimator, X, y, **kwargs))
    np.testing.assert_array_equal(again.lams, first.lams)


@pytest.mark.parametrize("name, kind", _path_cases())
def test_cross_validated_regularization_path(name, kind, tmp_path):
    estimator = _FACTORIES[name]()
    keys = set(vars(estimator))
    X, y, kwargs, inputs = _path_inputs(estimator, kind)
    _run_and_check(inputs, lambda: estimator.regularization_path(X, y, cv=2, **kwargs))
    _unfitted(estimator, keys)


@pytest.mark.parametrize("kind", ["csr-unsorted", "csc-unsorted", "csr_array-unsorted"])
def test_checkpointed_path_keys_sorted_and_unsorted_data_alike(kind, tmp_path):
    # the digest of X is taken on sorted indices (without sorting the caller's): a
    # checkpoint written from a sorted matrix resumes from the same one stored unsorted
    # (another key would be refused: "the data (X: other values)")
    X, y, _ = _data(kind.replace("-unsorted", ""))
    unsorted = _reversed(X)
    estimator = SparseLinearRegressor(**_LINEAR)
    first = regularization_path(estimator, X, y, n_lams=3, checkpoint=tmp_path)
    again = _run_and_check(
        {"X": unsorted, "y": y},
        lambda: regularization_path(estimator, unsorted, y, n_lams=3, checkpoint=tmp_path),
    )
    np.testing.assert_array_equal(again.lams, first.lams)
    np.testing.assert_array_equal(again.coefs, first.coefs)


@pytest.mark.parametrize("kind", ["C", "frame", "csr-unsorted", "csc-unsorted"])
def test_sparse_path_cv_with_checkpoint(kind, tmp_path):
    X, y, weight = _data(kind)
    estimator = SparsePathCV(
        SparseLinearRegressor(max_epochs=5), n_lams=3, cv=2, checkpoint=tmp_path
    )
    inputs = {"X": X, "y": y, "sample_weight": weight}
    fitted = _run_and_check(inputs, lambda: estimator.fit(X, y, sample_weight=weight))
    _methods(fitted, X, y, weight)


# a grid and CV folds of the user's: unsorted lams (sorted on a copy) and folds whose
# rows are not in order
def _given_grid():
    return np.array([1e-1, 1e-3, 1e-2])


def _given_folds():
    rows = np.random.default_rng(0).permutation(N)
    return [(rows[: N // 2], rows[N // 2 :]), (rows[N // 2 :], rows[: N // 2])]


GRID_USERS = {
    "regularization_path": lambda lams, folds, X, y, w: regularization_path(
        _linear(), X, y, lams=lams, cv=folds, fit_params={"sample_weight": w}
    ),
    "SparsePathCV": lambda lams, folds, X, y, w: SparsePathCV(_linear(), lams=lams, cv=folds).fit(
        X, y, sample_weight=w
    ),
    "StabilitySelection": lambda lams, folds, X, y, w: StabilitySelection(
        _linear(), groups=None, lams=lams, n_pairs=2, random_state=0
    ).fit(X, y, sample_weight=w),
    "SelectFromPath": lambda lams, folds, X, y, w: SelectFromPath(
        _linear(), n_features_to_select=2, lams=lams, max_bisections=2
    ).fit(X, y, sample_weight=w),
}


@pytest.mark.parametrize("kind", ["F", "csr-unsorted"])
@pytest.mark.parametrize("entry", GRID_USERS)
def test_a_given_grid_and_given_folds(entry, kind):
    X, y, weight = _data(kind)
    lams, folds = _given_grid(), _given_folds()
    inputs = {"lams": lams, "folds": folds, "X": X, "y": y, "sample_weight": weight}
    _run_and_check(inputs, lambda: GRID_USERS[entry](lams, folds, X, y, weight))


# ------------------------------------------------------------------ selectors
SELECTORS = [
    (
        "StabilitySelection",
        lambda groups: StabilitySelection(
            _linear(), groups=groups, n_pairs=2, n_lams=3, random_state=0
        ),
    ),
    (
        "SelectFromPath",
        lambda groups: SelectFromPath(
            SparseLinearRegressor(**_LINEAR, groups=groups),
            n_features_to_select=2,
            n_lams=4,
            max_bisections=2,
            refit=True,
        ),
    ),
    (
        "KnockoffFilter",
        lambda groups: KnockoffFilter(
            _linear(), groups=groups, statistic="lam", n_lams=3, random_state=0
        ),
    ),
]
_SELECTORS = dict(SELECTORS)


# the selectors run the paths above on halves / knockoffs of X: C, pandas and the
# unsorted sparse kinds by default, the others in the slow run
_SELECTOR_SLOW_KINDS = ("F", "float32", "csr", "csc")


def _selector_cases():
    cases = []
    for name in _SELECTORS:
        takes_sparse = name != "KnockoffFilter"  # Gaussian knockoffs: dense X (an error)
        for kind in KINDS:
            if kind in SPARSE_KINDS and not takes_sparse:
                continue
            for groups in ("default", "array"):
                if kind in SPARSE_KINDS and groups == "default" and name == "StabilitySelection":
                    continue  # "clusters" reads correlations of dense X
                marks = [pytest.mark.slow] if kind in _SELECTOR_SLOW_KINDS else []
                case_id = f"{name}-{kind}-groups={groups}"
                cases.append(pytest.param(name, kind, groups, id=case_id, marks=marks))
    return cases


@pytest.mark.parametrize("name, kind, groups", _selector_cases())
def test_selectors(name, kind, groups):
    X, y, weight = _data(kind)
    labels = GROUPS.copy() if groups == "array" else None
    selector = _SELECTORS[name](labels if labels is not None else _default_groups(name))
    inputs = {"X": X, "y": y, "sample_weight": weight}
    if labels is not None:
        inputs["groups"] = labels
    fitted = _run_and_check(inputs, lambda: selector.fit(X, y, sample_weight=weight))
    Z = _run_and_check({"X": X}, lambda: fitted.transform(X))
    if _invertible(Z):
        _run_and_check({"Z": Z}, lambda: fitted.inverse_transform(Z))


def _default_groups(name):
    return None if name == "SelectFromPath" else "clusters"


# ------------------------------------------------------------------ raw tables
def _raw_table(n=N, seed=0):
    """A table as users have them: strings with missing values (pandas' string dtype),
    an object column mixing strings, numbers and None, a category with NaN, booleans,
    integers, floats with NaN; ``y`` a Series on the same (non-default) index."""
    rng = np.random.default_rng(seed)
    city = rng.choice(np.array(["Oslo", "Rome", "Lima"], dtype=object), n)
    city[::7] = None
    tag = rng.choice(np.array(["u", "v", 1.5, None], dtype=object), n)
    size = rng.normal(size=n)
    size[::5] = np.nan
    kind = pd.Categorical(rng.choice(["a", "b"], n), categories=["a", "b", "c"])
    kind[::9] = np.nan
    index = pd.Index(np.arange(n)[::-1] * 3, name="id")  # unsorted, not 0..n-1
    frame = pd.DataFrame(
        {
            "city": city,
            "tag": pd.Series(tag, dtype=object, index=index),
            "kind": kind,
            "flag": rng.random(n) > 0.5,
            "count": rng.integers(0, 5, n),
            "size": size,
        },
        index=index,
    )
    assert frame["tag"].dtype == object
    effect = frame["city"].map({"Oslo": 1.0, "Rome": -1.0, "Lima": 0.0}).fillna(0.5)
    y = effect + frame["size"].fillna(0.0) + 0.1 * rng.normal(size=n)
    return frame, y.rename("target")


def _raw_inputs(kind):
    frame, y = _raw_table()
    if kind == "object-array":  # an object array of the same table (no DataFrame)
        return frame.to_numpy(dtype=object), y.to_numpy()
    return frame, y


RAW_KINDS = ["frame", "object-array"]


@pytest.mark.parametrize("kind", RAW_KINDS)
def test_table_encoder(kind):
    X, _ = _raw_inputs(kind)
    encoder = TableEncoder(min_frequency=2)
    fitted = _run_and_check({"X": X}, lambda: encoder.fit(X))
    _run_and_check({"X": X}, lambda: fitted.transform(X))
    _run_and_check({"X": X}, lambda: clone(encoder).fit_transform(X))


RAW_MODELS = [
    (
        "SparseLinearRegressor",
        lambda: VariableModel(SparseLinearRegressor(**_LINEAR), unpenalized=[5]),
    ),
    ("DGatedMLPClassifier", lambda: VariableModel(DGatedMLPClassifier(**_MLP))),
]
_RAW_MODELS = dict(RAW_MODELS)


@pytest.mark.parametrize("kind", RAW_KINDS)
@pytest.mark.parametrize("name", _RAW_MODELS)
def test_variable_model_on_a_raw_table(name, kind):
    X, y = _raw_inputs(kind)
    model = _RAW_MODELS[name]()
    if is_classifier(model):
        y = (y > np.median(y)).map({True: "high", False: "low"}) if kind == "frame" else y > 0
    inputs = {"X": X, "y": y, **_param_arrays(model)}
    fitted = _run_and_check(inputs, lambda: model.fit(X, y))
    _methods(fitted, X, y, np.linspace(0.5, 2.0, len(y)))
    _run_and_check(inputs, lambda: model.regularization_path(X, y, n_lams=3, cv=2))


RAW_SELECTORS = {  # a VariableModel as estimator: the units are the table's variables
    "StabilitySelection": lambda model: StabilitySelection(
        model, n_pairs=2, n_lams=3, random_state=0
    ),
    "KnockoffFilter": lambda model: KnockoffFilter(
        model, statistic="lam", n_lams=3, random_state=0
    ),
}


@pytest.mark.parametrize("kind", RAW_KINDS)
@pytest.mark.parametrize("name", RAW_SELECTORS)
def test_selectors_on_a_raw_table(name, kind):
    X, y = _raw_inputs(kind)
    selector = RAW_SELECTORS[name](VariableModel(SparseLinearRegressor(**_LINEAR)))
    fitted = _run_and_check({"X": X, "y": y}, lambda: selector.fit(X, y))
    _run_and_check({"X": X}, lambda: fitted.transform(X))


# ------------------------------------------------------------------ export
EXPORTED = ["SparseLinearRegressor", "DGatedMLPClassifier", "NODERegressor", "DGatedAutoencoder"]


def _fitted_state(estimator):
    """The fitted estimator's arrays and its module's parameters and buffers (live)."""
    state = {k: v for k, v in vars(estimator).items() if isinstance(v, np.ndarray)}
    module = getattr(estimator, "module_", None)
    if module is not None:
        for k, v in module.state_dict().items():
            state[f"module_.{k}"] = v.detach().cpu().numpy()
    return state


@pytest.mark.parametrize("name", EXPORTED)
def test_export_and_compaction_leave_the_fitted_estimator_unchanged(name):
    pytest.importorskip("onnx")
    from sksparse_nn.export import to_onnx

    estimator = _FACTORIES[name]()
    X, y, _ = _data("C", _task(estimator))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = estimator.fit(X, y)
    out = fitted.transform if y is None else fitted.predict
    outputs = out(X)
    before = {k: snapshot(v) for k, v in _fitted_state(fitted).items()}
    _run_and_check({"X": X}, lambda: to_onnx(fitted, X))
    _run_and_check({"X": X}, lambda: to_onnx(fitted, X, drop_inputs=True))
    if hasattr(fitted, "compact"):
        fitted.compact()
    after = _fitted_state(fitted)
    assert after.keys() == before.keys()
    for key, snap in before.items():
        assert_unchanged(after[key], snap, f"the fitted {key}")
    np.testing.assert_array_equal(out(X), outputs)


def test_to_onnx_of_a_variable_model_on_a_raw_table():
    pytest.importorskip("onnx")
    pytest.importorskip("skl2onnx")
    from sksparse_nn.export import to_onnx

    X, y = _raw_inputs("frame")
    # what skl2onnx converts: strings without missing values, integers, floats with NaN
    X = X[["city", "count", "size"]].assign(city=X["city"].fillna("none"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = VariableModel(SparseLinearRegressor(**_LINEAR)).fit(X, y)
    predictions = fitted.predict(X)
    _run_and_check({"X": X}, lambda: to_onnx(fitted, X))
    np.testing.assert_array_equal(fitted.predict(X), predictions)
