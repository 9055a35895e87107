"""Are the defaults fast and right on small tabular data? (issue 13)

A panel of small real data sets, each with as many pure-noise columns appended as it has
real ones, on which every estimator of the package runs with its DEFAULT parameters (only
``random_state`` is set, to the seed), next to the usual peers:

* data: scikit-learn's bundled ``breast_cancer`` (binary), ``wine`` (3 classes), ``iris``
  (3 classes) and ``diabetes`` (regression), and the UCI Wine Quality sets ``wine_red`` and
  ``wine_white`` (regression on the quality score; ``wine_white`` subsampled to
  ``MAX_ROWS`` rows) from ``<data-home>/<name>.npz`` (``--data-home`` or
  ``$SKSPARSE_NN_DATA``; read by ``sksparse_nn.datasets.load_benchmark``, no download).
* noise: for every real column one *permuted copy* of it (its values shuffled over the
  rows by an independent permutation per column and seed) is appended after the real
  columns; the copies have exactly the marginal distribution of the real features but no
  relation to the target, which makes them harder to tell apart than standard-normal
  noise. Column ``j >= p_real`` is noise.
* per seed: a fresh noise draw and a 75/25 train/test split (stratified for
  classification); X standardized with the training part's mean and sd, and so is y for
  regression (every score below is in units of the training sd of y: test RMSE of a
  constant predictor is about 1).
* ours, defaults: one ``est.fit(X_train, y_train)`` at the default lam,
  ``est.regularization_path(X_train, y_train)`` (the default grid) and
  ``SparsePathCV(est).fit(X_train, y_train)`` (5-fold CV path, lam by the 1-SE rule) for
  ``DGatedMLP*``, ``DGatedNAM*``, ``SparseLinear*`` and, on regression sets,
  ``NODERegressor``. Recorded: wall time, the number of selected features and of noise
  columns among them at every path point (and their maximum over the points with 1..10
  selected features), the selection and test accuracy / RMSE of the default fit and of
  the CV-chosen model.
* peers: LassoNet's own path (``LassoNet*(hidden_dims=(100,))``, otherwise defaults; the
  same noise statistics; its test score at the path point with the lowest loss on its own
  internal validation split), ``LassoCV`` / ``LogisticRegressionCV`` with an L1 penalty
  (liblinear for two classes, saga for more), interpret's ``ExplainableBoosting*``
  (defaults, one job) and ``HistGradientBoosting*`` (test score and time only).

Every call runs in a single-threaded worker subprocess (one torch thread, threadpoolctl
limit 1; the package imported and torch's one-time lazy imports done before the first
call) with a time limit (``--timeout``); a call that exceeds it is killed and recorded
as ``timeout``. ``SparsePathCV`` runs six paths of the same grid (five folds and the full
data), so when the plain path of the same estimator, data and seed already took more than
``timeout / CV_COST`` seconds the CV call is recorded as ``skipped`` (predicted timeout)
instead of burning the limit (``--no-skip`` runs it anyway). Warnings (e.g. the package's
``ConvergenceWarning``) and tracebacks of every call are kept in the JSON.

Usage::

    python benchmarks/defaults.py --quick          # smoke run: one small set, one seed
    nice -n 10 python benchmarks/defaults.py --datasets breast_cancer diabetes --seeds 0 1
    python benchmarks/defaults.py --resume --methods hgb l1 linear   # add calls to the JSON
    python benchmarks/defaults.py --report-only    # table and plot from the saved JSON

The JSON lists every invocation (arguments, time limit, ``uptime`` before and after) and
every call with its own time limit and load averages.

Prints a table; writes ``benchmarks/results/defaults.json`` and ``defaults.png``
(``defaults_quick.*`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    RESULTS,
    Worker,
    add_data_home_argument,
    code_version,
    load_dataset,
    machine,
    pyplot,
    uptime,
    versions,
    write_json,
)

MAX_ROWS = 2000
TEST_SIZE = 0.25
N_FOLDS = 5  # SparsePathCV's default cv
#: SparsePathCV fits one path per fold and one on all the data; the default number of
#: optimizer steps does not shrink with the fold size, so CV costs about this many paths.
CV_COST = N_FOLDS + 1
DEFAULT_TIMEOUT = 600.0
SMALL = 10  # "few features": path points with 1..SMALL selected features

#: name: (loader, task); task "clf" or "reg"
DATASETS = {
    "iris": "clf",
    "wine": "clf",
    "breast_cancer": "clf",
    "diabetes": "reg",
    "wine_red": "reg",
    "wine_white": "reg",
}
#: our estimators (class name per task) and the peers
OURS = {
    "mlp": {"clf": "DGatedMLPClassifier", "reg": "DGatedMLPRegressor"},
    "nam": {"clf": "DGatedNAMClassifier", "reg": "DGatedNAMRegressor"},
    "node": {"reg": "NODERegressor"},
    "linear": {"clf": "SparseLinearClassifier", "reg": "SparseLinearRegressor"},
}
PEERS = ("lassonet", "l1", "ebm", "hgb")
METHODS = (*OURS, *PEERS)
#: the order of the calls within one data set and seed: cheap ones first
RUN_ORDER = ("hgb", "l1", "linear", "ebm", "mlp", "nam", "node", "lassonet")
MODES = {"fit": 0, "path": 1, "cv": 2}  # display order of the calls of one estimator
LABELS = {
    "mlp": "DGatedMLP",
    "nam": "DGatedNAM",
    "node": "NODE",
    "linear": "SparseLinear",
    "lassonet": "LassoNet",
    "l1": "L1 linear CV",
    "ebm": "EBM",
    "hgb": "HistGB",
}


# ------------------------------------------------------------------------------ data
def load_raw(name, data_home):
    """(X, y) of one data set, float64 X; integer classes or float targets."""
    data = load_dataset(name, data_home)
    X = np.asarray(data.X, dtype=np.float64)
    y = np.asarray(data.y, dtype=np.int64 if DATASETS[name] == "clf" else np.float64)
    if X.shape[0] > MAX_ROWS:  # a fixed subsample, the same for every seed
        keep = np.sort(np.random.default_rng(12345).choice(X.shape[0], MAX_ROWS, replace=False))
        X, y = X[keep], y[keep]
    return X, y


def make_split(name, seed, data_home):
    """Standardized train/test arrays with permuted-copy noise columns appended."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_raw(name, data_home)
    rng = np.random.default_rng(seed)
    noise = np.column_stack([column[rng.permutation(X.shape[0])] for column in X.T])
    X = np.hstack([X, noise])
    classification = DATASETS[name] == "clf"
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=TEST_SIZE, random_state=seed, stratify=y if classification else None
    )
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    if not classification:
        mean, sd = y_tr.mean(), y_tr.std()
        y_tr, y_te = (y_tr - mean) / sd, (y_te - mean) / sd
    return {
        "X_train": X_tr,
        "X_test": X_te,
        "y_train": y_tr,
        "y_test": y_te,
        "p_real": X.shape[1] // 2,
        "task": DATASETS[name],
    }


# ------------------------------------------------------------------ statistics
def selection_stats(selected, p_real):
    """Noise statistics of one selection (sorted feature indices)."""
    selected = np.asarray(selected, dtype=int)
    return {
        "n_selected": int(selected.size),
        "n_noise": int(np.sum(selected >= p_real)),
        "selected": selected.tolist(),
    }


def path_stats(selections, p_real, test_scores=None):
    """Per-point (selected, noise) counts and summaries of a path's selections; with
    ``test_scores`` (one dict of :func:`score` per point) also the points' test scores
    and the best of them among the sparse points."""
    points = [selection_stats(s, p_real) for s in selections]
    small = [p["n_noise"] for p in points if 0 < p["n_selected"] <= SMALL]
    clean = [p["n_selected"] for p in points if p["n_noise"] == 0]
    extra = {}
    if test_scores:
        key = "accuracy" if "accuracy" in test_scores[0] else "rmse"
        values = [t[key] for t in test_scores]
        sparse = [v for v, p in zip(values, points, strict=True) if 0 < p["n_selected"] <= SMALL]
        best = max if key == "accuracy" else min
        extra = {
            "test_path": values,
            # the best test score among the points with 1..SMALL features
            f"best_{key}_le_small": best(sparse) if sparse else None,
        }
    return {
        **extra,
        "n_points": len(points),
        "n_selected_path": [p["n_selected"] for p in points],
        "n_noise_path": [p["n_noise"] for p in points],
        "max_selected": max((p["n_selected"] for p in points), default=0),
        "min_selected": min((p["n_selected"] for p in points), default=0),
        # the worst point among the sparse ones: noise columns kept with <= SMALL features
        "max_noise_le_small": max(small) if small else None,
        "n_points_le_small": len(small),
        # the largest selection free of noise along the path
        "max_clean_selected": max(clean) if clean else 0,
    }


def score(task, y_true, y_pred):
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if task == "clf":
        return {"accuracy": float(np.mean(y_true == y_pred))}
    y_pred = y_pred.reshape(y_true.shape)
    rmse = float(np.sqrt(np.mean((y_true - y_pred) ** 2)))
    r2 = 1.0 - float(np.sum((y_true - y_pred) ** 2) / np.sum((y_true - y_true.mean()) ** 2))
    return {"rmse": rmse, "r2": r2}


# ---------------------------------------------------------------------- the jobs
def _our_estimator(method, task, seed):
    import sksparse_nn

    return getattr(sksparse_nn, OURS[method][task])(random_state=seed)


def job_fit(method, d, seed):
    """One fit at the default lam: its time, selection and test score."""
    est = _our_estimator(method, d["task"], seed)
    start = time.perf_counter()
    est.fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - start
    pred = est.predict(d["X_test"])
    out = {
        "estimator": type(est).__name__,
        "seconds": seconds,
        "lam": float(est.lam),
        "n_iter": int(getattr(est, "n_iter_", -1)),
        "chosen": selection_stats(est.selected_features_, d["p_real"]),
        **score(d["task"], d["y_test"], pred),
    }
    if not np.all(np.isfinite(pred)):
        out["nonfinite_predictions"] = True
    return out


def job_path(method, d, seed):
    est = _our_estimator(method, d["task"], seed)
    start = time.perf_counter()
    # every point is scored on the test rows (a prediction per point: milliseconds)
    path = est.regularization_path(d["X_train"], d["y_train"], X_val=d["X_test"], y_val=d["y_test"])
    seconds = time.perf_counter() - start
    failed = path.failed if path.failed is not None else np.zeros(len(path), dtype=bool)
    out = {
        "estimator": type(est).__name__,
        "seconds": seconds,
        "lams": [float(v) for v in path.lams],
        "failed_points": int(failed.sum()),
        "completed": bool(path.completed),
        **path_stats(path.selected, d["p_real"], _scores_from(d, path.val_score)),
    }
    if np.any(~np.isfinite(path.train_score[~failed])):
        out["nonfinite_train_score"] = True
    return out


def _scores_from(d, val_score):
    """:func:`score` dicts from estimator scores on the test rows (accuracy, or R^2,
    whose RMSE follows from the test targets' spread)."""
    if d["task"] == "clf":
        return [{"accuracy": float(v)} for v in val_score]
    y = np.asarray(d["y_test"], dtype=float)
    spread = float(np.mean((y - y.mean()) ** 2))
    return [{"rmse": float(np.sqrt(max(1.0 - v, 0.0) * spread))} for v in val_score]


def job_cv(method, d, seed):
    from sksparse_nn import SparsePathCV

    est = _our_estimator(method, d["task"], seed)
    search = SparsePathCV(est)
    start = time.perf_counter()
    search.fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - start
    path = search.cv_path_
    pred = search.predict(d["X_test"])
    out = {
        "estimator": f"SparsePathCV({type(est).__name__})",
        "seconds": seconds,
        "lam": float(search.lam_),
        "best_lam": float(search.best_lam_),
        "lam_1se": float(search.lam_1se_),
        "chosen": selection_stats(search.selected_features_, d["p_real"]),
        **score(d["task"], d["y_test"], pred),
        **path_stats(path.selected, d["p_real"]),
    }
    if not np.all(np.isfinite(pred)):
        out["nonfinite_predictions"] = True
    return out


def job_lassonet(d, seed):
    import torch
    from lassonet import LassoNetClassifier, LassoNetRegressor

    cls = LassoNetClassifier if d["task"] == "clf" else LassoNetRegressor
    model = cls(hidden_dims=(100,), verbose=0, random_state=seed, torch_seed=seed)
    start = time.perf_counter()
    hist = model.path(d["X_train"], d["y_train"], return_state_dicts=True)
    seconds = time.perf_counter() - start
    selections = [np.flatnonzero(item.selected.cpu().numpy()) for item in hist]
    val = np.array([item.val_loss for item in hist], dtype=float)
    best = int(np.nanargmin(val)) if np.isfinite(val).any() else len(hist) - 1
    test_scores = []  # every point's test score (after the timing)
    with torch.no_grad():
        for item in hist:
            model.model.load_state_dict(item.state_dict)
            test_scores.append(score(d["task"], d["y_test"], model.predict(d["X_test"]).ravel()))
        model.model.load_state_dict(hist[best].state_dict)
        pred = np.asarray(model.predict(d["X_test"]))
    return {
        "estimator": f"{cls.__name__}(hidden_dims=(100,)).path",
        "seconds": seconds,
        "lambdas": [float(item.lambda_) for item in hist],
        "chosen": {
            "rule": "lowest internal val_loss",
            **selection_stats(selections[best], d["p_real"]),
        },
        **score(d["task"], d["y_test"], pred.ravel()),
        **path_stats(selections, d["p_real"], test_scores),
    }


def job_l1(d, seed):
    from sklearn.linear_model import LassoCV, LogisticRegressionCV, lasso_path

    X, y = d["X_train"], d["y_train"]
    start = time.perf_counter()
    if d["task"] == "clf":
        solver = "liblinear" if len(np.unique(y)) == 2 else "saga"  # liblinear: binary only
        model = LogisticRegressionCV(
            l1_ratios=(1.0,),
            solver=solver,
            scoring="accuracy",
            max_iter=100 if solver == "liblinear" else 5000,
            use_legacy_attributes=False,
            random_state=seed,
        ).fit(X, y)
        name = f"LogisticRegressionCV(l1, {solver})"
    else:
        model = LassoCV(random_state=seed).fit(X, y)
        name = "LassoCV"
    seconds = time.perf_counter() - start
    coef = np.atleast_2d(model.coef_)
    out = {
        "estimator": name,
        "seconds": seconds,
        "chosen": selection_stats(np.flatnonzero(np.any(coef != 0, axis=0)), d["p_real"]),
        **score(d["task"], d["y_test"], model.predict(d["X_test"])),
    }
    if d["task"] == "reg":  # the lasso path on the CV's own grid (not timed)
        _, coefs, _ = lasso_path(X, y, alphas=model.alphas_)
        out.update(path_stats([np.flatnonzero(c) for c in coefs.T], d["p_real"]))
    return out


def job_ebm(d, seed):
    from interpret.glassbox import ExplainableBoostingClassifier, ExplainableBoostingRegressor

    cls = ExplainableBoostingClassifier if d["task"] == "clf" else ExplainableBoostingRegressor
    start = time.perf_counter()
    model = cls(random_state=seed, n_jobs=1).fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - start
    importances = np.asarray(model.term_importances())
    used = sorted(
        {f for t, imp in zip(model.term_features_, importances, strict=True) if imp > 0 for f in t}
    )
    return {
        "estimator": cls.__name__,
        "seconds": seconds,
        "n_terms": len(model.term_features_),
        "chosen": selection_stats(used, d["p_real"]),
        **score(d["task"], d["y_test"], model.predict(d["X_test"])),
    }


def job_hgb(d, seed):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingClassifier if d["task"] == "clf" else HistGradientBoostingRegressor
    start = time.perf_counter()
    model = cls(random_state=seed).fit(d["X_train"], d["y_train"])
    seconds = time.perf_counter() - start
    return {
        "estimator": cls.__name__,
        "seconds": seconds,
        **score(d["task"], d["y_test"], model.predict(d["X_test"])),
    }


def job_info():
    """Versions and thread pools as the worker sees them."""
    import torch
    from threadpoolctl import threadpool_info

    return {
        **versions(peers=("lassonet", "interpret-core")),
        "torch_threads": torch.get_num_threads(),
        "threadpools": [
            {k: p[k] for k in ("internal_api", "num_threads") if k in p} for p in threadpool_info()
        ],
    }


def run_job(method, mode, name, seed, data_home):
    """One call, in the worker: data (cached per set and seed), the job, its warnings."""
    key = (name, seed)
    if _CACHE.get("key") != key:
        _CACHE["key"], _CACHE["data"] = key, make_split(name, seed, data_home)
    d = _CACHE["data"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method in OURS:
            out = {"fit": job_fit, "path": job_path, "cv": job_cv}[mode](method, d, seed)
        else:
            out = globals()[f"job_{method}"](d, seed)
    seen = {}
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        seen[text] = seen.get(text, 0) + 1
    out["warnings"] = [{"message": text, "count": n} for text, n in seen.items()]
    return out


# -------------------------------------------------------------------- the worker
_CACHE = {}


def _worker_init():
    # one-time costs kept out of the timed calls: the package's imports, and torch's lazy
    # import of torch._dynamo on the first optimizer a process constructs (seconds)
    import torch

    import sksparse_nn  # noqa: F401

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def _call(worker, fn, *args, timeout):
    """One call in the single-threaded worker: ``{"status": ..., **its results}``."""
    res = worker.call(fn, *args, timeout=timeout)
    return {"status": "ok", **res["value"]} if res["status"] == "ok" else res


# --------------------------------------------------------------------------- run
def calls_for(name, methods, modes):
    """(method, mode) pairs that apply to a data set's task, cheap ones first."""
    task = DATASETS[name]
    calls = []
    for method in sorted(methods, key=RUN_ORDER.index):
        if method in OURS:
            if task in OURS[method]:
                calls += [(method, mode) for mode in modes]
        else:
            calls.append((method, "fit"))
    return calls


def run(args):
    """Every (data set, seed, method, mode) call; returns the results dict (saved as it goes)."""
    out_path = Path(args.out)
    results = {"runs": {}}
    if args.resume and out_path.exists():
        results = json.loads(out_path.read_text())
    results.update(
        settings={k: v for k, v in vars(args).items() if k not in ("out",)},
        protocol={
            "noise": "permuted copies of the real columns",
            "test_size": TEST_SIZE,
            "max_rows": MAX_ROWS,
            "small": SMALL,
            "cv_cost": CV_COST,
            "y_regression": "standardized by the training mean and sd",
        },
        machine=machine(peers=("lassonet", "interpret-core")),
        code=code_version(),
        uptime_before=uptime(),
    )
    invocation = {
        "argv": args.argv,
        "timeout": args.timeout,
        "code": results["code"],
        "uptime_before": uptime(),
    }
    results.setdefault("invocations", []).append(invocation)
    worker = Worker(init=_worker_init)
    t0 = time.perf_counter()

    def save():
        write_json(results, out_path)

    try:
        results["versions"] = _call(worker, job_info, timeout=300)
        for name in args.datasets:
            for seed in args.seeds:
                for method, mode in calls_for(name, args.methods, args.modes):
                    key = f"{name}|{seed}|{method}|{mode}"
                    if key in results["runs"] and results["runs"][key]["status"] == "ok":
                        continue
                    entry = {
                        "dataset": name,
                        "seed": seed,
                        "method": method,
                        "mode": mode,
                        "timeout": args.timeout,
                    }
                    path_entry = results["runs"].get(f"{name}|{seed}|{method}|path", {})
                    limit = args.timeout
                    if (
                        mode == "cv"
                        and not args.no_skip
                        and path_entry.get("status") in ("ok", "timeout", "skipped")
                    ):
                        path_s = path_entry.get("seconds", path_entry.get("limit_seconds"))
                        if path_s is None or path_s * CV_COST > limit:
                            entry.update(
                                status="skipped",
                                reason=(
                                    f"path took {path_s or float('nan'):.0f} s "
                                    f"({path_entry['status']}); CV runs {CV_COST} such paths, "
                                    f"predicted > {limit:.0f} s"
                                ),
                            )
                            results["runs"][key] = entry
                            print(f"[{time.perf_counter() - t0:6.0f} s] {key}: skipped", flush=True)
                            save()
                            continue
                    entry["load_before"] = os.getloadavg()
                    print(f"[{time.perf_counter() - t0:6.0f} s] {key} ...", flush=True)
                    res = _call(
                        worker, run_job, method, mode, name, seed, args.data_home, timeout=limit
                    )
                    entry.update(res)
                    entry["load_after"] = os.getloadavg()
                    results["runs"][key] = entry
                    print("    " + _one_line(entry), flush=True)
                    save()
    finally:
        worker.close()
        results["uptime_after"] = invocation["uptime_after"] = uptime()
        results["wall_seconds"] = invocation["wall_seconds"] = time.perf_counter() - t0
        save()
    return results


def _one_line(e):
    if e["status"] != "ok":
        return f"{e['status']}: {e.get('error', e.get('reason', e.get('limit_seconds')))}"
    parts = [f"{e['seconds']:.1f} s"]
    if "n_points" in e:
        parts.append(
            f"{e['n_points']} pts, sel {e['min_selected']}..{e['max_selected']}, "
            f"noise@<={SMALL}: {e['max_noise_le_small']}"
        )
    if "chosen" in e:
        parts.append(f"chosen {e['chosen']['n_selected']} ({e['chosen']['n_noise']} noise)")
    for k in ("accuracy", "rmse"):
        if k in e:
            parts.append(f"{k} {e[k]:.3f}")
    if e.get("warnings"):
        parts.append(f"{sum(w['count'] for w in e['warnings'])} warnings")
    return ", ".join(parts)


# ------------------------------------------------------------------------ report
def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(results):
    """Per (data set, method, mode): means over the seeds that finished, and statuses."""
    groups = {}
    for e in results["runs"].values():
        groups.setdefault((e["dataset"], e["method"], e["mode"]), []).append(e)
    table = []
    for (name, method, mode), entries in groups.items():
        ok = [e for e in entries if e["status"] == "ok"]
        statuses = {}
        for e in entries:
            statuses[e["status"]] = statuses.get(e["status"], 0) + 1
        row = {
            "dataset": name,
            "method": method,
            "mode": mode,
            "n_seeds": len(entries),
            "statuses": statuses,
        }
        if ok:
            row.update(
                seconds=_mean([e["seconds"] for e in ok]),
                n_points=_mean([e.get("n_points") for e in ok]),
                max_noise_le_small=(
                    max(v)
                    if (
                        v := [
                            e["max_noise_le_small"]
                            for e in ok
                            if e.get("max_noise_le_small") is not None
                        ]
                    )
                    else None
                ),
                max_clean_selected=_mean([e.get("max_clean_selected") for e in ok]),
                best_le_small=_mean(
                    [e.get("best_accuracy_le_small", e.get("best_rmse_le_small")) for e in ok]
                ),
                chosen_selected=_mean([e["chosen"]["n_selected"] for e in ok if "chosen" in e]),
                chosen_noise=_mean([e["chosen"]["n_noise"] for e in ok if "chosen" in e]),
                accuracy=_mean([e.get("accuracy") for e in ok]),
                rmse=_mean([e.get("rmse") for e in ok]),
                n_warnings=sum(w["count"] for e in ok for w in e.get("warnings", [])),
            )
        table.append(row)
    order = {m: i for i, m in enumerate(METHODS)}
    table.sort(
        key=lambda r: (list(DATASETS).index(r["dataset"]), order[r["method"]], MODES[r["mode"]])
    )
    return table


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def report(results, out):
    """Print the table (means over seeds), write the JSON and the plot; the summary rows."""
    table = summarize(results)
    results["summary"] = table
    print(
        "\nMeans over the seeds that finished; noise = permuted copies (as many as real "
        "columns); score: test accuracy (classification) or RMSE in sd(y) units."
    )
    head = (
        f"{'data set':<14}{'method':<14}{'mode':<5}{'status':>12}{'time s':>9}{'pts':>5}"
        f"{'noise@<=10':>11}{'best@<=10':>10}{'clean':>6}{'chosen':>7}{'noise':>6}{'score':>7}"
        f"{'warn':>5}"
    )
    print(head)
    print("-" * len(head))
    for r in table:
        status = ",".join(f"{k}{'' if n == 1 else f'x{n}'}" for k, n in r["statuses"].items())
        score_value = r.get("accuracy") if r.get("accuracy") is not None else r.get("rmse")
        print(
            f"{r['dataset']:<14}{LABELS[r['method']]:<14}{r['mode']:<5}{status:>12}"
            f"{_fmt(r.get('seconds'), '.1f'):>9}{_fmt(r.get('n_points'), '.0f'):>5}"
            f"{_fmt(r.get('max_noise_le_small'), 'd'):>11}"
            f"{_fmt(r.get('best_le_small'), '.3f'):>10}"
            f"{_fmt(r.get('max_clean_selected'), '.1f'):>6}"
            f"{_fmt(r.get('chosen_selected'), '.1f'):>7}{_fmt(r.get('chosen_noise'), '.1f'):>6}"
            f"{_fmt(score_value, '.3f'):>7}{_fmt(r.get('n_warnings'), 'd'):>5}"
        )
    print(
        "\nnoise@<=10: most noise columns kept at any path point with 1..10 selected features "
        "(max over seeds); best@<=10: best test score among those points (mean over seeds); "
        "clean: largest noise-free selection along the path; chosen/noise: "
        "features (noise columns) of the model at the default lam (fit) or "
        "of the CV-chosen model (LassoNet: its lowest internal "
        "validation loss; EBM: features in terms of nonzero importance)."
    )
    for e in results["runs"].values():
        if e["status"] in ("error", "crashed"):
            print(f"\n{e['dataset']} seed {e['seed']} {e['method']} {e['mode']}: {e['status']}")
            print(e.get("traceback", ""))
    warned = {}
    for e in results["runs"].values():
        for w in e.get("warnings", []):
            warned.setdefault(w["message"][:160], []).append(
                f"{e['dataset']}/{e['seed']}/{e['method']}/{e['mode']}"
            )
    if warned:
        print("\nwarnings (first 160 characters; where):")
        for text, where in warned.items():
            print(f"  {text}\n      {', '.join(where)}")
    write_json(results, out)
    plot(results, out.with_suffix(".png"))
    print(f"\nwrote {out} and {out.with_suffix('.png')} ({results['wall_seconds']:.0f} s)")
    return table


def plot(results, path):
    plt = pyplot()
    runs = list(results["runs"].values())
    names = [n for n in DATASETS if any(e["dataset"] == n for e in runs)]
    if not names:
        return
    limit = results["settings"]["timeout"]
    keys = []
    for e in runs:
        k = (e["method"], e["mode"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: (METHODS.index(k[0]), MODES.get(k[1], 0)))
    colors = {k: f"C{METHODS.index(k[0])}" for k in keys}
    markers = {"fit": "s", "path": "o", "cv": "D"}
    ncol = max(len(names), 2)
    fig = plt.figure(figsize=(3.2 * ncol, 7.5))
    grid = fig.add_gridspec(2, ncol)
    ax = fig.add_subplot(grid[0, :])
    width = 0.8 / max(len(keys), 1)
    for i, k in enumerate(keys):
        xs, ys, marks = [], [], []
        for j, name in enumerate(names):
            for e in runs:
                if e["dataset"] != name or (e["method"], e["mode"]) != k:
                    continue
                x = j + (i - len(keys) / 2) * width
                if e["status"] == "ok":
                    xs.append(x)
                    ys.append(e["seconds"])
                else:
                    marks.append((x, e["status"]))
        label = f"{LABELS[k[0]]} {k[1]}" if k[1] != "fit" else LABELS[k[0]]
        ax.scatter(
            xs,
            ys,
            color=colors[k],
            marker="*" if k[0] in PEERS else markers[k[1]],
            s=20,
            label=label,
        )
        for x, status in marks:
            ax.scatter(
                [x], [limit], color=colors[k], marker="x" if status != "skipped" else "^", s=30
            )
    ax.axhline(limit, color="grey", ls=":", lw=1)
    ax.text(
        len(names) - 0.5,
        limit,
        " time limit (x: timeout/error, ^: skipped)",
        fontsize=7,
        va="bottom",
        ha="right",
    )
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("wall time per call (s, one thread)")
    ax.set_ylim(top=limit * 3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    ax.set_title("Defaults on small tabular data\nwith as many permuted-noise columns as real ones")
    for j, name in enumerate(names):
        ax2 = fig.add_subplot(grid[1, j])
        for e in runs:
            if e["dataset"] != name or e["status"] != "ok" or "n_noise_path" not in e:
                continue
            if e["mode"] == "cv":
                continue  # the CV's full-data path repeats the plain path
            k = (e["method"], e["mode"])
            ax2.plot(
                e["n_selected_path"],
                e["n_noise_path"],
                ".-",
                color=colors[k],
                lw=0.8,
                ms=3,
                alpha=0.7,
            )
        for e in runs:
            if e["dataset"] == name and e["status"] == "ok" and "chosen" in e:
                k = (e["method"], e["mode"])
                c = e["chosen"]
                ax2.scatter(
                    [c["n_selected"]],
                    [c["n_noise"]],
                    color=colors[k],
                    marker="*" if k[0] in PEERS else {"fit": "s", "cv": "D"}[k[1]],
                    s=70 if k[0] in PEERS else 40,
                    edgecolor="k",
                    lw=0.5,
                    zorder=3,
                )
        ax2.set_title(name, fontsize=9)
        ax2.set_xlabel("features kept")
        if j == 0:
            ax2.set_ylabel("noise columns kept")
            ax2.text(
                0.02, 0.98,
                "lines: paths\nsquare: default lam\ndiamond: SparsePathCV\nstar: peer's choice",
                transform=ax2.transAxes, fontsize=7, va="top",
            )  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: iris, seed 0, 30 s per call, no CV skipping",
    )
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=None)
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds per call (default {DEFAULT_TIMEOUT:.0f}; --quick 30)",
    )
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=("fit", "path", "cv"),
        default=["fit", "path", "cv"],
        help="calls of our estimators: fit (default lam), regularization_path, SparsePathCV",
    )
    parser.add_argument(
        "--no-skip",
        action="store_true",
        help="run SparsePathCV even when its plain path predicts a timeout",
    )
    add_data_home_argument(parser)
    parser.add_argument(
        "--resume", action="store_true", help="keep the finished calls already in --out"
    )
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--report-only", action="store_true", help="print the table and plot from --out"
    )
    args = parser.parse_args(argv)
    if args.datasets is None:
        args.datasets = ["iris"] if args.quick else list(DATASETS)
    if args.data_home is None and any(d.startswith("wine_") for d in args.datasets):
        parser.error("give --data-home or set SKSPARSE_NN_DATA (for wine_red, wine_white)")
    if args.seeds is None:
        args.seeds = [0] if args.quick else [0, 1, 2]
    if args.timeout is None:
        args.timeout = 30.0 if args.quick else DEFAULT_TIMEOUT
    args.no_skip = args.no_skip or args.quick
    if args.out is None:
        args.out = str(RESULTS / ("defaults_quick.json" if args.quick else "defaults.json"))
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.report_only:
        results = json.loads(Path(args.out).read_text())
        results.setdefault("wall_seconds", float("nan"))
    else:
        results = run(args)
    report(results, Path(args.out))


if __name__ == "__main__":
    main()
