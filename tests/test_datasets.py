"""Tests of sksparse_nn.datasets: simulations and (offline) benchmark loaders."""

import io
import os
import socket

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from sksparse_nn import datasets
from sksparse_nn.datasets import (
    BENCHMARK_NAMES,
    _fetch,
    _loaders,
    load_benchmark,
    load_wine_quality,
    make_additive_regression,
    make_group_regression,
    make_latent_manifold,
    make_sparse_classification,
)

# The autouse fixture below removes SKSPARSE_NN_DATA during each test; the slow test of the
# real files reads the value it had when this module was imported.
_ORIGINAL_DATA_HOME = os.environ.get(datasets.DATA_HOME_ENV)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Fail loudly if any test reaches for the network; start without $SKSPARSE_NN_DATA."""
    calls = []

    def no_openml(*args, **kwargs):
        calls.append(("fetch_openml", args, kwargs))
        raise AssertionError("fetch_openml must not be called in the offline tests")

    def no_download(url, *args, **kwargs):
        calls.append(("download", url))
        raise AssertionError(f"no download allowed in the offline tests ({url})")

    def no_connect(self, *args, **kwargs):
        calls.append(("socket", args))
        raise AssertionError("no network connection allowed in the offline tests")

    monkeypatch.setattr(_fetch, "fetch_openml", no_openml)
    monkeypatch.setattr(_fetch, "_download", no_download)
    monkeypatch.setattr(socket.socket, "connect", no_connect)
    monkeypatch.delenv(datasets.DATA_HOME_ENV, raising=False)
    return calls


# ---------------------------------------------------------------------------------------
# the package: public names and the description files
# ---------------------------------------------------------------------------------------


def test_public_names():
    assert datasets.__all__ == [
        "BENCHMARK_NAMES",
        "DATA_HOME_ENV",
        "load_benchmark",
        "load_wine_quality",
        "make_additive_regression",
        "make_group_regression",
        "make_interaction_regression",
        "make_latent_manifold",
        "make_sparse_classification",
    ]
    for name in datasets.__all__:
        assert getattr(datasets, name) is not None
    assert datasets.DATA_HOME_ENV == "SKSPARSE_NN_DATA"


def test_every_benchmark_has_its_description_file():
    from importlib import resources

    files = resources.files("sksparse_nn.datasets").joinpath("descr")
    stems = sorted(f.name[: -len(".rst")] for f in files.iterdir() if f.name.endswith(".rst"))
    assert stems == sorted(BENCHMARK_NAMES)
    heads = {
        "isolet": "ISOLET",
        "coil20": "COIL-20 (",
        "coil20_20x20": "COIL-20 at 20x20",
        "madelon": "MADELON",
        "mnist_t10k": "MNIST",
        "wine_red": "Wine Quality, red",
        "wine_white": "Wine Quality, white",
    }
    for name in BENCHMARK_NAMES:
        text = _loaders._descr(name)
        assert text.startswith(heads[name]) and not text.endswith("\n")


def test_description_reaches_the_bunch(tmp_path):
    X, y = _fake_xy(6, 11)
    _write(tmp_path, "wine_white", X=X, y=y.astype(np.float32))
    d = load_wine_quality("white", data_home=tmp_path)
    assert d.DESCR == _loaders._descr("wine_white")
    assert "4898 white" in d.DESCR


# ---------------------------------------------------------------------------------------
# make_group_regression
# ---------------------------------------------------------------------------------------


def test_group_regression_defaults_shapes_and_structure():
    d = make_group_regression(random_state=0)
    assert d.X.shape == (200, 200) and d.X_test.shape == (2000, 200)
    assert d.y.shape == (200,) and d.y_test.shape == (2000,)
    for arr in (d.X, d.y, d.X_test, d.y_test, d.coef):
        assert arr.dtype == np.float64
    assert d.groups.dtype == np.int64
    np.testing.assert_array_equal(d.groups, np.arange(200) // 5)
    assert len(d.informative_groups) == 7
    assert np.all(np.diff(d.informative_groups) > 0)
    assert d.informative_groups.min() >= 0 and d.informative_groups.max() < 40
    # coefficients are non-zero exactly on the informative groups
    in_informative = np.isin(d.groups, d.informative_groups)
    assert np.all(d.coef[in_informative] != 0)
    assert np.all(d.coef[~in_informative] == 0)
    np.testing.assert_array_equal(d.informative_features, np.flatnonzero(in_informative))


def test_group_regression_informative_groups_are_random():
    chosen = {tuple(make_group_regression(random_state=s).informative_groups) for s in range(5)}
    assert len(chosen) > 1
    # not just the first groups
    assert chosen != {tuple(range(7))}


def test_group_regression_reproducible():
    a = make_group_regression(n_samples=30, n_test=10, random_state=42)
    b = make_group_regression(n_samples=30, n_test=10, random_state=np.random.RandomState(42))
    c = make_group_regression(n_samples=30, n_test=10, random_state=43)
    for key in ("X", "y", "X_test", "y_test", "coef", "informative_groups"):
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a.X, c.X)
    # the training set does not depend on n_test
    d = make_group_regression(n_samples=30, n_test=0, random_state=42)
    np.testing.assert_array_equal(a.X, d.X)
    np.testing.assert_array_equal(a.y, d.y)
    assert d.X_test.shape == (0, 200)


@pytest.mark.parametrize("noise", [1.0, 2.5])
def test_group_regression_targets_are_linear_plus_gaussian_noise(noise):
    d = make_group_regression(
        n_samples=20_000, n_test=20_000, n_groups=10, n_informative=3, noise=noise, random_state=0
    )
    # sampling tolerances (seeded), n = 20000: 4 standard errors for the mean, 6 for the
    # std (SE 1/sqrt(2n) = 0.5%), ~5 for correlations (SE 1/sqrt(n) = 0.7%)
    for X, y in ((d.X, d.y), (d.X_test, d.y_test)):
        residual = y - X @ d.coef
        assert abs(residual.mean()) < 4 * noise / np.sqrt(len(y))
        assert residual.std() == pytest.approx(noise, rel=0.03)
        # the residual is noise: uncorrelated with every feature
        corr = X.T @ (residual - residual.mean()) / (len(y) * residual.std())
        assert np.abs(corr).max() < 0.04
    # features and weights are standard normal (2e5 entries: SE 0.002 for the mean)
    assert d.X.mean() == pytest.approx(0, abs=0.01) and d.X.std() == pytest.approx(1, rel=0.01)


@pytest.mark.numerics
def test_group_regression_noiseless_is_exact():
    d = make_group_regression(n_samples=50, n_test=5, noise=0.0, random_state=1)
    # float64 products over 200 features, possibly summed in another order: ~p eps64 |y|
    np.testing.assert_allclose(d.y, d.X @ d.coef, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.y_test, d.X_test @ d.coef, rtol=0, atol=1e-12)


def test_group_regression_options_and_errors():
    d = make_group_regression(n_samples=10, n_test=3, n_groups=4, group_size=2, n_informative=4)
    assert d.X.shape == (10, 8) and np.all(d.coef != 0)
    d = make_group_regression(n_samples=10, n_informative=0, random_state=0)
    assert np.all(d.coef == 0) and d.informative_groups.size == 0
    with pytest.raises(ValueError, match="n_informative"):
        make_group_regression(n_groups=3, n_informative=4)
    with pytest.raises(ValueError, match="noise"):
        make_group_regression(noise=-1)
    with pytest.raises(TypeError, match="n_samples"):
        make_group_regression(n_samples=10.5)


# ---------------------------------------------------------------------------------------
# make_additive_regression
# ---------------------------------------------------------------------------------------


def _true_additive(X, center_means):
    """The documented DGP, written independently of the module."""
    f = np.sin(X[:, 0]) + np.cos(X[:, 1]) + X[:, 2] ** 2 - X[:, 3] - np.abs(X[:, 4])
    return f - sum(center_means)


def test_additive_shapes_dtypes_and_support():
    X, y = make_additive_regression(random_state=0)
    assert X.shape == (1000, 20) and y.shape == (1000,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.min() >= -2.5 and X.max() <= 2.5
    assert X.min() < -2.4 and X.max() > 2.4  # fills the interval
    X, y = make_additive_regression(n_samples=7, n_noise=0, random_state=0)
    assert X.shape == (7, 5)


def test_additive_reproducible_and_bunch_matches_tuple():
    X1, y1 = make_additive_regression(n_samples=100, random_state=3)
    X2, y2 = make_additive_regression(n_samples=100, random_state=3)
    d = make_additive_regression(n_samples=100, random_state=3, return_info=True)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(X1, d.X)
    np.testing.assert_array_equal(y1, d.y)
    np.testing.assert_array_equal(d.informative_features, np.arange(5))
    np.testing.assert_allclose(d.components.sum(axis=1), d.y_true)
    for k, f in enumerate(d.shape_functions):
        np.testing.assert_allclose(f(d.X[:, k]), d.components[:, k])
    X3, _ = make_additive_regression(n_samples=100, random_state=4)
    assert not np.array_equal(X1, X3)


@pytest.mark.parametrize(
    ("distribution", "means"),
    [
        ("uniform", (0.0, np.sin(2.5) / 2.5, 2.5**2 / 3, 0.0, -2.5 / 2)),
        ("normal", (0.0, np.exp(-0.5), 1.0, 0.0, -np.sqrt(2 / np.pi))),
    ],
)
@pytest.mark.parametrize("noise", [1.0, 0.5])
def test_additive_target_is_true_function_plus_noise(distribution, means, noise):
    n = 40_000
    d = make_additive_regression(
        n_samples=n,
        noise=noise,
        random_state=0,
        feature_distribution=distribution,
        return_info=True,
    )
    f = _true_additive(d.X, means)
    np.testing.assert_allclose(d.y_true, f, atol=1e-12)  # float64, same formula: ~eps64 |f|
    residual = d.y - f
    assert residual.std() == pytest.approx(noise, rel=0.03)
    assert abs(residual.mean()) < 4 * noise / np.sqrt(n)
    # centring: every component has (population) mean zero (sample SE <= 0.01 at n=40000)
    assert np.all(np.abs(d.components.mean(axis=0)) < 0.05)
    # noise features carry no signal
    corr = np.corrcoef(np.column_stack([d.X[:, 5:], d.y]).T)[-1, :-1]
    assert np.abs(corr).max() < 0.03
    if distribution == "normal":
        assert d.X.std() == pytest.approx(1.0, rel=0.01)


def test_additive_uncentered_and_errors():
    d = make_additive_regression(n_samples=50, random_state=0, center=False, return_info=True)
    np.testing.assert_allclose(d.y_true, _true_additive(d.X, (0.0,)), atol=1e-12)
    with pytest.raises(ValueError, match="feature_distribution"):
        make_additive_regression(feature_distribution="cauchy")
    with pytest.raises(ValueError, match="n_noise"):
        make_additive_regression(n_noise=-1)


# ---------------------------------------------------------------------------------------
# make_sparse_classification
# ---------------------------------------------------------------------------------------


def test_sparse_classification_shapes_and_reproducibility():
    X, y = make_sparse_classification(random_state=0)
    assert X.shape == (500, 30) and y.shape == (500,)
    assert X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), [250, 250])
    X2, y2 = make_sparse_classification(random_state=0)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    X3, y3 = make_sparse_classification(random_state=1)
    assert not np.array_equal(y, y3)
    d = make_sparse_classification(n_features=8, n_informative=3, random_state=0, return_info=True)
    np.testing.assert_array_equal(d.informative_features, [0, 1, 2])
    assert d.X.shape == (500, 8)


@pytest.mark.parametrize("n_classes", [3, 5])
def test_sparse_classification_multiclass(n_classes):
    X, y = make_sparse_classification(n_samples=1000, n_classes=n_classes, random_state=0)
    counts = np.bincount(y, minlength=n_classes)
    assert counts.size == n_classes
    assert counts.min() > 0.3 * 1000 / n_classes  # no class vanishes


@pytest.mark.parametrize("n_classes", [2, 4])
def test_sparse_classification_label_is_function_of_informative_features(n_classes):
    d = make_sparse_classification(
        n_samples=300, n_classes=n_classes, random_state=5, return_info=True
    )
    np.testing.assert_array_equal(d.label_function(d.X), d.y)
    # replacing the noise columns does not change any label
    X_other = d.X.copy()
    X_other[:, 5:] = np.random.default_rng(0).standard_normal((300, 25))
    np.testing.assert_array_equal(d.label_function(X_other), d.y)
    # label noise: about flip_y * (1 - 1/K) of the labels change
    f = make_sparse_classification(
        n_samples=4000, n_classes=n_classes, random_state=5, flip_y=0.4, return_info=True
    )
    changed = np.mean(f.label_function(f.X) != f.y)
    assert changed == pytest.approx(0.4 * (1 - 1 / n_classes), abs=0.04)


def test_sparse_classification_errors():
    with pytest.raises(ValueError, match="flip_y"):
        make_sparse_classification(flip_y=1.5)
    with pytest.raises(ValueError, match="n_informative"):
        make_sparse_classification(n_features=3, n_informative=5)
    with pytest.raises(ValueError, match="n_classes"):
        make_sparse_classification(n_classes=1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    ("n_classes", "model"),
    [
        (2, LogisticRegression(max_iter=1000)),
        (3, MLPClassifier((32,), max_iter=500, random_state=0)),
    ],
)
def test_sparse_classification_informative_features_are_predictive(n_classes, model):
    X, y = make_sparse_classification(n_samples=1500, n_classes=n_classes, random_state=0)
    k = 5
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.4, random_state=0, stratify=y)
    chance = np.bincount(y_te).max() / len(y_te)
    acc_informative = model.fit(X_tr[:, :k], y_tr).score(X_te[:, :k], y_te)
    acc_noise = model.fit(X_tr[:, k:], y_tr).score(X_te[:, k:], y_te)
    assert acc_informative > chance + 0.3
    assert acc_noise < chance + 0.08


# ---------------------------------------------------------------------------------------
# load_benchmark (offline: local .npz files written by the tests)
# ---------------------------------------------------------------------------------------


def _write(directory, name, **arrays):
    path = directory / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    return path


def _fake_xy(n, p, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, p), dtype=np.float32), rng.integers(n_classes, size=n)


def test_load_benchmark_with_fixed_split(tmp_path, offline):
    X, y = _fake_xy(20, 6)
    X_test, y_test = _fake_xy(8, 6, seed=1)
    _write(tmp_path, "madelon", X=X, y=y, X_test=X_test, y_test=y_test)
    d = load_benchmark("madelon", data_home=tmp_path)
    np.testing.assert_array_equal(d.X, X)
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.X_test, X_test)
    np.testing.assert_array_equal(d.y_test, y_test)
    assert d.X.dtype == np.float32 and d.y.dtype == y.dtype
    assert list(d.feature_names) == [f"V{j}" for j in range(1, 7)]
    assert d.task == "classification" and d.name == "madelon"
    assert d.source == str(tmp_path / "madelon.npz")
    assert isinstance(d.DESCR, str) and "MADELON" in d.DESCR
    assert offline == []


def test_load_benchmark_without_split_and_string_path(tmp_path, offline):
    X, y = _fake_xy(15, 12)
    _write(tmp_path, "coil20", X=X, y=y)
    d = load_benchmark("coil20", data_home=str(tmp_path))
    np.testing.assert_array_equal(d.X, X)
    assert d.X_test is None and d.y_test is None
    assert d.image_shape == (32, 32)
    assert len(d.feature_names) == 12
    assert offline == []


def test_load_benchmark_as_frame(tmp_path):
    X, y = _fake_xy(10, 4)
    X_test, y_test = _fake_xy(5, 4, seed=2)
    _write(tmp_path, "isolet", X=X, y=y, X_test=X_test, y_test=y_test)
    d = load_benchmark("isolet", tmp_path, as_frame=True)
    assert list(d.X.columns) == ["f1", "f2", "f3", "f4"]
    assert list(d.X_test.columns) == ["f1", "f2", "f3", "f4"]
    np.testing.assert_array_equal(d.X.to_numpy(), X)
    np.testing.assert_array_equal(d.y_test.to_numpy(), y_test)
    assert d.y.name == "class"


def test_load_wine_quality_wrapper_uses_stored_feature_names(tmp_path, offline):
    X = np.arange(33, dtype=np.float32).reshape(3, 11)
    y = np.array([5.0, 6.0, 7.0], dtype=np.float32)
    names = np.array([f"m{j}" for j in range(11)])
    _write(tmp_path, "wine_red", X=X, y=y, feature_names=names)
    d = load_wine_quality("red", data_home=tmp_path)
    assert d.task == "regression" and d.y.dtype == np.float32
    assert list(d.feature_names) == list(names)
    assert d.X_test is None and d.target_names is None
    frame = load_wine_quality("red", tmp_path, as_frame=True)
    assert frame.y.name == "quality" and list(frame.X.columns) == list(names)
    with pytest.raises(ValueError, match="color"):
        load_wine_quality("rose", data_home=tmp_path)
    assert offline == []


def test_unknown_name_lists_valid_names(tmp_path):
    with pytest.raises(ValueError, match="Unknown benchmark") as info:
        load_benchmark("iris", data_home=tmp_path)
    for name in BENCHMARK_NAMES:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="Unknown benchmark"):
        load_benchmark(None)


def test_env_var_is_honoured(tmp_path, monkeypatch, offline):
    X, y = _fake_xy(9, 3)
    _write(tmp_path, "mnist_t10k", X=X, y=y)
    monkeypatch.setenv(datasets.DATA_HOME_ENV, str(tmp_path))
    d = load_benchmark("mnist_t10k")
    np.testing.assert_array_equal(d.X, X)
    # an explicit data_home takes precedence over the environment variable
    other = tmp_path / "other"
    other.mkdir()
    X2, y2 = _fake_xy(4, 3, seed=3)
    _write(other, "mnist_t10k", X=X2, y=y2)
    np.testing.assert_array_equal(load_benchmark("mnist_t10k", data_home=other).X, X2)
    assert offline == []


def test_missing_file_without_download_raises(tmp_path, offline):
    with pytest.raises(FileNotFoundError, match="isolet.npz"):
        load_benchmark("isolet", data_home=tmp_path, download_if_missing=False)
    with pytest.raises(FileNotFoundError, match="SKSPARSE_NN_DATA"):
        load_benchmark("isolet", download_if_missing=False)
    assert offline == []


def test_failed_download_gives_clear_error(tmp_path, offline):
    with pytest.raises(OSError, match=r"downloading it failed.*isolet\.npz"):
        load_benchmark("isolet", data_home=tmp_path)
    with pytest.raises(OSError, match=r"coil20\.npz"):
        load_benchmark("coil20", data_home=tmp_path)
    with pytest.raises(OSError, match=r"wine_white\.npz"):
        load_wine_quality(data_home=tmp_path)
    # the failures came from the patched fetchers, never from a real connection
    assert [c[0] for c in offline] == ["fetch_openml", "download", "download"]


def test_malformed_files_raise(tmp_path):
    X, y = _fake_xy(5, 2)
    _write(tmp_path, "madelon", X=X, y=y, X_test=X)
    with pytest.raises(ValueError, match="both 'X_test' and 'y_test'"):
        load_benchmark("madelon", data_home=tmp_path)
    _write(tmp_path, "isolet", X=X)
    with pytest.raises(ValueError, match="'X' and 'y'"):
        load_benchmark("isolet", data_home=tmp_path)
    _write(tmp_path, "coil20", X=X, y=y[:3])
    with pytest.raises(ValueError, match="expected X"):
        load_benchmark("coil20", data_home=tmp_path)


# ---------------------------------------------------------------------------------------
# the download code paths, with fake sources (no network)
# ---------------------------------------------------------------------------------------


def _fake_openml(n_rows, n_features, labels):
    from sklearn.utils import Bunch

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(n_rows, n_features)).astype(np.float64)
    target = np.asarray(labels, dtype=object)[np.arange(n_rows) % len(labels)]
    return Bunch(data=data, target=target, feature_names=[f"c{j}" for j in range(n_features)])


@pytest.mark.parametrize(
    ("name", "openml_name", "n_rows", "n_features", "labels", "n_train", "n_test"),
    [
        ("isolet", "isolet", 7797, 6, [str(k) for k in range(1, 27)], 6238, 1559),
        ("madelon", "madelon", 2600, 4, ["1", "2"], 2000, 600),
        ("mnist_t10k", "mnist_784", 10_007, 5, [str(k) for k in range(10)], 10_000, None),
    ],
)
def test_openml_fallback_splits(
    tmp_path, monkeypatch, name, openml_name, n_rows, n_features, labels, n_train, n_test
):
    raw = _fake_openml(n_rows, n_features, labels)
    requested = []

    def fake_fetch_openml(dataset_name, **kwargs):
        requested.append((dataset_name, kwargs.get("version")))
        return raw

    monkeypatch.setattr(_fetch, "fetch_openml", fake_fetch_openml)
    d = load_benchmark(name, data_home=tmp_path)
    assert requested == [(openml_name, 1)]
    assert d.X.shape == (n_train, n_features)
    codes = (np.arange(n_rows) % len(labels)).astype(np.int64)  # labels listed in order
    if n_test is None:
        assert d.X_test is None
        assert d.X.dtype == np.uint8
        np.testing.assert_array_equal(d.X, raw.data[-n_train:])
        np.testing.assert_array_equal(d.y, codes[-n_train:])
    else:
        assert d.X.dtype == np.float32 and d.X_test.shape == (n_test, n_features)
        np.testing.assert_array_equal(d.X_test, raw.data[n_train:])
        np.testing.assert_array_equal(d.y, codes[:n_train])
        np.testing.assert_array_equal(d.y_test, codes[n_train:])
    assert d.y.dtype == np.int64 and d.y.min() == 0
    assert list(d.feature_names) == raw.feature_names
    assert d.source.startswith("OpenML")


def test_openml_fallback_unexpected_size_warns(tmp_path, monkeypatch):
    raw = _fake_openml(100, 3, ["1", "2"])
    monkeypatch.setattr(_fetch, "fetch_openml", lambda *a, **k: raw)
    with pytest.warns(UserWarning, match="without the fixed train/test split"):
        d = load_benchmark("madelon", data_home=tmp_path)
    assert d.X.shape == (100, 3) and d.X_test is None


def test_wine_download_parses_uci_csv(tmp_path, monkeypatch):
    header = ";".join(f'"{c}"' for c in _loaders._WINE_FEATURES + ("quality",))
    rows = [
        "7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5",
        "7.8;0.88;0;2.6;0.098;25;67;0.9968;3.2;0.68;9.8;6",
    ]
    csv = ("\n".join([header, *rows]) + "\n").encode()
    urls = []

    def fake_download(url, *args, **kwargs):
        urls.append(url)
        return csv

    monkeypatch.setattr(_fetch, "_download", fake_download)
    d = load_wine_quality("red", data_home=tmp_path)
    assert urls == [_fetch._WINE_URL.format(color="red")]
    assert d.X.shape == (2, 11) and d.X.dtype == np.float32
    np.testing.assert_array_equal(d.y, np.array([5, 6], dtype=np.float32))
    assert list(d.feature_names) == list(_loaders._WINE_FEATURES)
    assert d.X[1, 10] == np.float32(9.8)


@pytest.mark.parametrize("name", ["coil20", "coil20_20x20"])
def test_coil20_download_reads_mat_and_checks_blob(tmp_path, monkeypatch, name):
    import hashlib

    from scipy.io import savemat

    rng = np.random.default_rng(0)
    X = rng.random((4, 1024))
    Y = np.array([[1], [2], [3], [20]])
    buffer = io.BytesIO()
    savemat(buffer, {"X": X, "Y": Y})
    content = buffer.getvalue()
    monkeypatch.setattr(_fetch, "_download", lambda url, *a, **k: content)

    with pytest.raises(OSError, match="blob"):
        load_benchmark(name, data_home=tmp_path)

    blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    monkeypatch.setattr(_fetch, "_COIL20_BLOB", blob)
    d = load_benchmark(name, data_home=tmp_path)
    np.testing.assert_array_equal(d.y, [0, 1, 2, 19])
    if name == "coil20":
        np.testing.assert_array_equal(d.X, X.astype(np.float32))
    else:
        assert d.X.shape == (4, 400)
        # area averaging: a constant image stays constant, and the mean is preserved
        img = X[0].reshape(32, 32, order="F")
        small = d.X[0].reshape(20, 20, order="F")
        # d.X is stored in float32: each pixel rounded by eps32 / 2 = 6e-8 relative
        assert small.mean() == pytest.approx(img.mean(), rel=1e-5)
        const = _fetch._area_downsample(np.full((1, 1024), 0.25), 32, 20)
        np.testing.assert_allclose(const, 0.25, rtol=1e-6)  # float64 weights summing to 1
        # block structure: the first output pixel averages pixel 0 fully and 0.6 of pixel 1
        w = np.array([1.0, 0.6]) / 1.6
        expected = w @ img[:2, :2] @ w
        assert small[0, 0] == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------------------------------
# the real files (slow; needs SKSPARSE_NN_DATA pointing at a directory with the .npz files)
# ---------------------------------------------------------------------------------------

_REAL_SHAPES = {
    "isolet": ((6238, 617), (1559, 617), 26),
    "coil20": ((1440, 1024), None, 20),
    "coil20_20x20": ((1440, 400), None, 20),
    "madelon": ((2000, 500), (600, 500), 2),
    "mnist_t10k": ((10000, 784), None, 10),
    "wine_red": ((1599, 11), None, None),
    "wine_white": ((4898, 11), None, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_real_benchmark_files(name):
    directory = _ORIGINAL_DATA_HOME
    if not directory or not os.path.isfile(os.path.join(directory, f"{name}.npz")):
        pytest.skip(f"set SKSPARSE_NN_DATA to a directory holding {name}.npz")
    shape, test_shape, n_classes = _REAL_SHAPES[name]
    d = load_benchmark(name, data_home=directory, download_if_missing=False)
    assert d.X.shape == shape
    assert (d.X_test is None) == (test_shape is None)
    if test_shape is not None:
        assert d.X_test.shape == test_shape and d.y_test.shape == (test_shape[0],)
    if n_classes is None:
        assert d.task == "regression" and d.y.dtype == np.float32
        assert list(d.feature_names)[-1] == "alcohol"
    else:
        np.testing.assert_array_equal(np.unique(d.y), np.arange(n_classes))
        assert d.y.dtype == np.int64
    if name == "coil20_20x20":
        big = load_benchmark("coil20", data_home=directory, download_if_missing=False)
        np.testing.assert_allclose(_fetch._area_downsample(big.X, 32, 20), d.X, atol=1e-6)
        np.testing.assert_array_equal(big.y, d.y)


# ---------------------------------------------------------------------------------------
# make_latent_manifold
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mlp", "linear", "quadratic"])
def test_latent_manifold_is_the_map_of_its_latents(kind):
    d = make_latent_manifold(200, 3, 12, kind=kind, n_test=50, random_state=0)
    assert d.X.shape == (200, 12) and d.latent.shape == (200, 3) and d.n_latent == 3
    assert d.X_test.shape == (50, 12) and d.latent_test.shape == (50, 3)
    assert d.noise_std == 0.0
    np.testing.assert_array_equal(d.X, d.decoder(d.latent))
    np.testing.assert_array_equal(d.X_test, d.decoder(d.latent_test))
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        d.decoder(np.zeros((4, 2)))


@pytest.mark.parametrize("kind", ["mlp", "linear", "quadratic"])
def test_latent_manifold_has_the_intrinsic_dimension(kind):
    r, p = 3, 15
    d = make_latent_manifold(10, r, p, kind=kind, random_state=1)
    # the Jacobian of the map at a latent point (central differences, exact for the
    # linear and quadratic maps; ReLU kinks are met with probability 0): rank r, so the
    # data are locally r-dimensional and not fewer
    h = 1e-5
    for z in d.latent[:5]:
        cols = [
            (d.decoder((z + h * e)[None]) - d.decoder((z - h * e)[None]))[0] / (2 * h)
            for e in np.eye(r)
        ]
        sv = np.linalg.svd(np.array(cols), compute_uv=False)
        assert sv.size == r and sv[-1] > 1e-6 * sv[0]
    # the linear map: the whole data set has rank r exactly
    lin = make_latent_manifold(100, r, p, kind="linear", random_state=1)
    sv = np.linalg.svd(lin.X - lin.X.mean(0), compute_uv=False)
    assert sv[r - 1] > 1e-8 * sv[0] and sv[r] < 1e-10 * sv[0]  # float64 rounding


def test_latent_manifold_noise_is_relative_and_leaves_the_training_rows():
    clean = make_latent_manifold(300, 2, 8, random_state=3)
    noisy = make_latent_manifold(300, 2, 8, noise=0.1, random_state=3)
    np.testing.assert_array_equal(clean.latent, noisy.latent)
    resid = noisy.X - noisy.decoder(noisy.latent)
    assert noisy.noise_std > 0
    # the noise level is 0.1 of the features' typical standard deviation (a sampling
    # tolerance of 10%: 2400 draws give a relative SE of the std of about 1.5%)
    typical = np.sqrt(np.mean(clean.X.var(axis=0)))
    assert abs(resid.std() / typical - 0.1) < 0.01
    # the training rows do not depend on n_test; different seeds give different maps
    more = make_latent_manifold(300, 2, 8, noise=0.1, n_test=40, random_state=3)
    np.testing.assert_array_equal(more.X, noisy.X)
    other = make_latent_manifold(300, 2, 8, random_state=4)
    assert not np.allclose(other.decoder(clean.latent), clean.X)


def test_latent_manifold_rejects_bad_parameters():
    with pytest.raises(ValueError, match="must be smaller than n_features"):
        make_latent_manifold(10, 5, 5)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_latent_manifold(10, 2, 5, kind="cubic")
    with pytest.raises(ValueError, match="activation must be one of"):
        make_latent_manifold(10, 2, 5, activation="gelu")
    with pytest.raises(ValueError, match="noise"):
        make_latent_manifold(10, 2, 5, noise=-1.0)
    with pytest.raises(TypeError, match="n_latent"):
        make_latent_manifold(10, 2.5, 5)
