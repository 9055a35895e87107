"""A behaviour fingerprint of every public estimator: fit, record, compare.

A one-time proof for a restructuring that must not change behaviour: each case fits one
public estimator (defaults first, then the variants that take other code paths: other
sparsifiers, ``D``, warm starts, sample weights, early stopping, paths, CV) with a fixed
seed on two small data sets (scikit-learn's diabetes and breast cancer, 200 rows each;
diabetes' target binned into three classes for the multiclass cases) and records what a
user reads: predictions on held-out rows, coefficients, group norms, selected features,
epochs. ``--out`` writes them to an ``.npz``; ``--compare`` reads an earlier file and
reports, per case and array, whether the two agree bit for bit (else the largest
absolute difference).

Usage (one thread, as the fits are recorded)::

    OMP_NUM_THREADS=1 python benchmarks/fingerprint.py --out /tmp/before.npz
    OMP_NUM_THREADS=1 python benchmarks/fingerprint.py --compare /tmp/before.npz
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import sksparse_nn as sk


class _TwoLayer(torch.nn.Module):
    """A user module for the general estimators."""

    def __init__(self, n_features, n_outputs, hidden=16):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, hidden)
        self.out = torch.nn.Linear(hidden, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def _data():
    Xr, yr = load_diabetes(return_X_y=True)
    Xc, yc = load_breast_cancer(return_X_y=True)
    rng = np.random.RandomState(0)
    r, c = rng.permutation(len(yr))[:260], rng.permutation(len(yc))[:260]
    Xr, yr, Xc, yc = Xr[r], yr[r], Xc[c][:, :12], yc[c]
    Xr = (Xr - Xr.mean(0)) / Xr.std(0)
    Xc = (Xc - Xc.mean(0)) / Xc.std(0)
    ym = np.digitize(yr, np.quantile(yr, [1 / 3, 2 / 3]))
    return {
        "reg": (Xr[:200], yr[:200], Xr[200:]),
        "bin": (Xc[:200], yc[:200], Xc[200:]),
        "multi": (Xr[:200], ym[:200], Xr[200:]),
    }


def _cases():
    """(name, data key, factory of (estimator, how to fit))."""
    nam = {"hidden_layer_sizes": (8,), "random_state": 0}
    user = {"gates": {"hidden.weight": "in"}, "lam": 1e-2, "random_state": 0}
    return [
        ("linear_reg", "reg", lambda: sk.SparseLinearRegressor(lam=0.5)),
        ("linear_reg_D2", "reg", lambda: sk.SparseLinearRegressor(lam=0.5, D=2)),
        ("linear_reg_pos", "reg", lambda: sk.SparseLinearRegressor(lam=0.5, positive=True)),
        (
            "linear_reg_sgd",
            "reg",
            lambda: sk.SparseLinearRegressor(
                lam=0.5, optimizer="sgd", lr=0.01, max_epochs=30, random_state=0
            ),
        ),
        ("linear_reg_sw", "reg", lambda: (sk.SparseLinearRegressor(lam=0.5), "sw")),
        ("linear_bin", "bin", lambda: sk.SparseLinearClassifier(lam=0.02)),
        ("linear_bin_D2", "bin", lambda: sk.SparseLinearClassifier(lam=0.02, D=2)),
        ("linear_multi", "multi", lambda: sk.SparseLinearClassifier(lam=0.02)),
        ("grouplasso_reg", "reg", lambda: sk.GroupLassoRegressor(lam=0.5, groups=2)),
        ("grouplasso_bin", "bin", lambda: sk.GroupLassoClassifier(lam=0.02)),
        ("mlp_reg", "reg", lambda: sk.DGatedMLPRegressor(random_state=0)),
        ("mlp_bin", "bin", lambda: sk.DGatedMLPClassifier(random_state=0)),
        (
            "mlp_multi_adam",
            "multi",
            lambda: sk.DGatedMLPClassifier(
                optimizer="adam", lr=1e-2, max_epochs=40, random_state=0
            ),
        ),
        (
            "mlp_reg_es",
            "reg",
            lambda: sk.DGatedMLPRegressor(early_stopping=True, max_epochs=60, random_state=0),
        ),
        (
            "mlp_reg_warm",
            "reg",
            lambda: (sk.DGatedMLPRegressor(warm_start=True, max_epochs=40, random_state=0), "warm"),
        ),
        (
            "mlp_reg_dam",
            "reg",
            lambda: sk.DGatedMLPRegressor(
                sparsifier="dam", gate_inputs=False, gate_hidden=True, max_epochs=40, random_state=0
            ),
        ),
        (
            "mlp_reg_ds",
            "reg",
            lambda: sk.DGatedMLPRegressor(sparsifier="ds", max_epochs=40, random_state=0),
        ),
        (
            "mlp_reg_l21",
            "reg",
            lambda: sk.DGatedMLPRegressor(sparsifier="l21", max_epochs=40, random_state=0),
        ),
        ("nam_reg", "reg", lambda: sk.DGatedNAMRegressor(max_epochs=60, **nam)),
        ("nam_bin", "bin", lambda: sk.DGatedNAMClassifier(max_epochs=60, **nam)),
        ("nam_reg_auto", "reg", lambda: sk.DGatedNAMRegressor(lam=0.05, **nam)),
        ("node_reg", "reg", lambda: sk.NODERegressor(num_trees=16, depth=3, random_state=0)),
        (
            "node_reg_dense",
            "reg",
            lambda: sk.NODERegressor(lam=0.0, num_trees=16, depth=3, random_state=0),
        ),
        (
            "node_bin_fixed",
            "bin",
            lambda: sk.NODEClassifier(num_trees=16, depth=3, max_epochs=15, random_state=0),
        ),
        (
            "node_multi",
            "multi",
            lambda: sk.NODEClassifier(
                num_trees=16, depth=3, max_epochs=15, response_lr=None, random_state=0
            ),
        ),
        ("user_reg", "reg", lambda: sk.DGatedNeuralNetRegressor(_TwoLayer, **user)),
        ("user_bin", "bin", lambda: sk.DGatedNeuralNetClassifier(_TwoLayer, **user)),
        (
            "autoencoder",
            "reg",
            lambda: (sk.DGatedAutoencoder(n_components=5, max_epochs=60, random_state=0), "unsup"),
        ),
        ("path_mlp", "reg", lambda: (sk.DGatedMLPRegressor(random_state=0), "path")),
        ("path_linear", "bin", lambda: (sk.SparseLinearClassifier(), "path")),
        ("cv_linear", "reg", lambda: sk.SparsePathCV(sk.SparseLinearRegressor(), cv=3)),
        (
            "cv_mlp",
            "bin",
            lambda: sk.SparsePathCV(
                sk.DGatedMLPClassifier(max_epochs=30, random_state=0), n_lams=4, cv=3
            ),
        ),
        ("variables", "table", lambda: "table"),
    ]


def _record(est, X_test):
    out = {}
    for method in ("predict", "predict_proba", "transform"):
        if hasattr(est, method):
            try:
                out[method] = np.asarray(getattr(est, method)(X_test), dtype=np.float64)
            except (AttributeError, NotImplementedError, ValueError, TypeError):
                pass
    for attr in (
        "coef_",
        "intercept_",
        "group_norms_",
        "selected_features_",
        "feature_importances_",
        "sparsity_gap_",
        "n_iter_",
        "lam_",
        "best_lam_",
        "n_components_",
        "objective_",
    ):
        value = getattr(est, attr, None)
        if value is not None and not callable(value):
            try:
                out[attr] = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                pass
    return out


def _table_case():
    rng = np.random.RandomState(0)
    n = 200
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "color": rng.choice(["red", "green", "blue"], size=n),
            "noise": rng.normal(size=n),
        }
    )
    y = frame["a"] + (frame["color"] == "red") + 0.1 * rng.normal(size=n)
    encoder = ColumnTransformer(
        [
            ("num", StandardScaler(), ["a", "b", "noise"]),
            ("cat", OneHotEncoder(sparse_output=False), ["color"]),
        ]
    )
    model = sk.VariableModel(sk.SparseLinearRegressor(lam=0.05), encoder=encoder).fit(frame, y)
    out = _record(model, frame)
    out["selected"] = np.asarray([v in model.selected_variables_ for v in frame.columns], float)
    return out


def _run_case(spec, data):
    """Fit one case; its record."""
    if spec == "table":
        return _table_case()
    est, how = spec if isinstance(spec, tuple) else (spec, "fit")
    X, y, X_test = data
    if how == "path":
        path = est.regularization_path(X, y, n_lams=4)
        rec = {
            "lams": path.lams,
            "n_selected": np.asarray(path.n_selected, float),
            "group_norms": np.asarray(path.group_norms, float),
            "train_score": np.asarray(path.train_score, float),
        }
        if path.coefs is not None:
            rec["coefs"] = np.asarray(path.coefs, float)
        return rec
    if how == "sw":
        est.fit(X, y, sample_weight=np.linspace(0.5, 2.0, len(y)))
    elif how == "warm":
        est.fit(X, y).set_params(lam=est.lam * 3).fit(X, y)
    elif how == "unsup":
        est.fit(X)
    else:
        est.fit(X, y)
    return _record(est, X_test)


def run():
    data = _data()
    results, times = {}, {}
    for name, key, factory in _cases():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[name] = _run_case(factory(), data.get(key))
        times[name] = time.perf_counter() - start
        print(f"{name:18s} {times[name]:6.2f} s", flush=True)
    return results, times


def _flat(results):
    return {f"{case}/{key}": value for case, rec in results.items() for key, value in rec.items()}


def compare(results, path):
    before = dict(np.load(path))
    now = _flat(results)
    same = different = 0
    for key in sorted(set(before) | set(now)):
        if key not in before or key not in now:
            print(f"{key:40s} only {'before' if key in before else 'now'}")
            different += 1
            continue
        a, b = before[key], now[key]
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
            same += 1
            continue
        different += 1
        diff = np.max(np.abs(a - b)) if a.shape == b.shape else "shape"
        print(f"{key:40s} differs: max |diff| {diff}")
    print(f"{same} arrays bit-identical, {different} differ")
    return different


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the fingerprint to this .npz")
    parser.add_argument("--compare", help="compare with an earlier .npz")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results, times = run()
    print(f"total {sum(times.values()):.1f} s")
    if args.out:
        np.savez(args.out, **_flat(results))
    if args.compare:
        raise SystemExit(1 if compare(results, args.compare) else 0)


if __name__ == "__main__":
    main()
