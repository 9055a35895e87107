"""Feature selection benchmark (issue 4): test accuracy against number of selected features.

Protocol of *Structured Sparsity via D-Gating*, Sec. 5.2.1 and Appendix C.2, scaled to a
2-core CPU budget:

* data: ISOLET, COIL-20 (20x20), MADELON, MNIST (the official 10k test images) from
  ``<data-home>/<name>.npz`` (``--data-home`` or ``$SKSPARSE_NN_DATA``), plus scikit-learn's
  digits. Fixed splits are used where they exist (ISOLET, MADELON); otherwise a stratified
  random 20% test split. Features are standardized with a scaler fitted on the training part.
* D-Gating: ``DGatedMLPClassifier(hidden_layer_sizes=(100,), D=D)`` for D in {2, 3, 4}, one
  ``regularization_path`` per D with warm starts from dense to sparse over an explicit grid
  ``lam_max * geomspace(0.02, LAM_HI[D], n)`` (see ``SETTINGS``), a fixed number of epochs
  per path point; every point is scored on the test set as trained (no refit).
* LassoNet: ``LassoNetClassifier(hidden_dims=(100,))`` with its own ``path()`` and default
  settings (dense Adam start, SGD path, multiplier 1.02, early stopping on 10% of the
  training data); every path point is scored as trained (no refit). By default not on
  MNIST (its path alone takes 9 minutes on idle cores, 28 on busy ones): add it with a
  second run that redoes MNIST with every method in one process, ``--resume --redo
  --datasets mnist_t10k --lassonet-datasets mnist_t10k``.
* Filter baseline: ``SelectKBest(f_classif, k)`` for k in {10, 25, 50}, then an MLP of the
  same size trained on the k features (``DGatedMLPClassifier(lam=0)``; this *is* a refit).

Accuracy at k features is the best test accuracy over the path points with 1..k selected
features (the same rule for every method; LassoNet's path has many more points, which
favours it). Wall times are those of whole paths, measured in this process with the same
number of torch threads (1 by default), next to the machine's load average.

Warm starts need zero groups to restart with every factor zero (``gating._balance``);
with gates of 1 on them, as in earlier versions, dropped features came back, the MADELON
paths collapsed (train accuracy 0.5) and the MNIST paths diverged (NaN).

Run ``python benchmarks/feature_selection.py --data-home DIR`` (14 minutes on two idle
cores, about 25 when they are shared with other jobs), then the MNIST run above (10
minutes idle). ``--resume`` keeps the entries already in the JSON file, so an interrupted
run continues where it stopped. Writes ``benchmarks/results/feature_selection.json`` and
``feature_selection.png`` and prints the table and the issue's targets.
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
    add_data_home_argument,
    add_out_argument,
    load_dataset,
    machine,
    pyplot,
    single_thread,
    write_json,
)
from sklearn.feature_selection import SelectKBest, f_classif
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sksparse_nn import DGatedMLPClassifier

DATASETS = ("digits", "isolet", "coil20_20x20", "madelon", "mnist_t10k")
REAL = ("isolet", "coil20_20x20", "madelon", "mnist_t10k")
LASSONET_DEFAULT = ("digits", "isolet", "coil20_20x20", "madelon")
KS = (10, 25, 50)
HIDDEN = (100,)

#: Path settings per data set: epochs per path point (the first, dense point included;
#: about 1000-1250 optimizer steps on ISOLET/MNIST, 360-640 on the small sets), number of
#: lams for D=3, 4 (D=2, the convex baseline, gets D2_N_LAMS) and learning rate (0.05 on
#: MNIST: its standardized rare pixels reach 89 standard deviations and warm-started
#: points diverged at 0.1 for D=2). The grid is ``lam_max * geomspace(LAM_LO, LAM_HI[D], n)``
#: with ``lam_max`` the package's group-lasso bound (the smallest lam with an all-zero
#: linear D=2 model): with dead groups kept dead, sparsity starts near 0.03-0.15 lam_max,
#: about 10 features are left near 1-3 lam_max for D=3, 4, but only near 10-20 lam_max for
#: D=2.
SETTINGS = {
    "digits": {"epochs": 20, "n_lams": 16, "lr": 0.1},
    "isolet": {"epochs": 10, "n_lams": 16, "lr": 0.1},
    "coil20_20x20": {"epochs": 20, "n_lams": 16, "lr": 0.1},
    "madelon": {"epochs": 20, "n_lams": 16, "lr": 0.1},
    "mnist_t10k": {"epochs": 10, "n_lams": 16, "lr": 0.05},
}
D2_N_LAMS = 14
LAM_LO = 0.02
LAM_HI = {2: 20.0, 3: 3.0, 4: 2.5}
FILTER_EPOCHS = 30


# ---------------------------------------------------------------------------- data
def load(name, data_home, seed):
    """Standardized float32 train/test arrays of one data set."""
    data = load_dataset(name, data_home)
    X, y, X_test, y_test = data.X, data.y, data.X_test, data.y_test
    X = np.asarray(X, dtype=np.float64)
    if X_test is None:
        X, X_test, y, y_test = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(X)
    X = scaler.transform(X).astype(np.float32)
    X_test = scaler.transform(np.asarray(X_test, dtype=np.float64)).astype(np.float32)
    return X, np.asarray(y), X_test, np.asarray(y_test)


def lam_ratios(D, n_lams):
    """The grid relative to lam_max: ascending, dense to sparse."""
    return np.geomspace(LAM_LO, LAM_HI.get(D, min(LAM_HI.values())), n_lams)


# ------------------------------------------------------------------------- methods
def run_dgating(X, y, X_test, y_test, D, cfg, seed):
    """One warm-started D-Gating path; every point scored on the test set as trained."""
    est = DGatedMLPClassifier(
        D=D,
        hidden_layer_sizes=HIDDEN,
        lr=cfg["lr"],
        max_epochs=cfg["epochs"],
        batch_size=64,
        random_state=seed,
    )
    start = time.perf_counter()
    lam_max = est.lambda_max(X, y)  # the path protocol's top of the default grid
    lams = lam_max * lam_ratios(D, cfg["n_lams"] if D > 2 else min(cfg["n_lams"], D2_N_LAMS))
    path = est.regularization_path(X, y, lams=lams, X_val=X_test, y_val=y_test)
    wall = time.perf_counter() - start
    points = [
        {"lam": float(lam), "n_selected": int(k), "test_acc": float(te), "train_acc": float(tr)}
        for lam, k, te, tr in zip(
            path.lams, path.n_selected, path.val_score, path.train_score, strict=True
        )
    ]
    settings = dict(
        cfg, D=D, lam_max=lam_max, lam_over_lam_max=[lams[0] / lam_max, lams[-1] / lam_max]
    )
    return {"wall_time_s": wall, "points": points, "settings": settings}


def run_lassonet(X, y, X_test, y_test, seed, timeout=None):
    """LassoNet's own path (default settings, hidden (100,)); points scored without refit."""
    from lassonet import LassoNetClassifier

    model = LassoNetClassifier(hidden_dims=HIDDEN, verbose=0, random_state=seed, torch_seed=seed)
    seen = []
    start = time.perf_counter()

    def stop_after_timeout(_, hist):
        seen[:] = hist
        if timeout is not None and time.perf_counter() - start > timeout:
            raise TimeoutError

    truncated = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            hist = model.path(X, y, return_state_dicts=True, callback=stop_after_timeout)
        except TimeoutError:
            hist, truncated = list(seen), True
    wall = time.perf_counter() - start
    points = []
    for item in hist:
        model.model.load_state_dict(item.state_dict)
        points.append(
            {
                "lam": float(item.lambda_),
                "n_selected": int(item.selected.sum()),
                "test_acc": float(np.mean(model.predict(X_test) == y_test)),
                "train_acc": float(np.mean(model.predict(X) == y)),
            }
        )
    settings = {"hidden_dims": list(HIDDEN), "defaults": True, "truncated_after_s": timeout}
    return {"wall_time_s": wall, "points": points, "truncated": truncated, "settings": settings}


def run_filter(X, y, X_test, y_test, seed, epochs=FILTER_EPOCHS):
    """SelectKBest(f_classif) then an MLP of the same size on the k kept features."""
    points, wall = [], 0.0
    for k in KS:
        k_eff = min(k, X.shape[1])
        start = time.perf_counter()
        clf = DGatedMLPClassifier(
            lam=0.0, hidden_layer_sizes=HIDDEN, max_epochs=epochs, random_state=seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant features (digits, MNIST border pixels)
            selector = SelectKBest(f_classif, k=k_eff).fit(X, y)
            clf.fit(selector.transform(X), y)
        wall += time.perf_counter() - start
        points.append(
            {
                "lam": 0.0,
                "n_selected": int(k_eff),
                "test_acc": float(clf.score(selector.transform(X_test), y_test)),
                "train_acc": float(clf.score(selector.transform(X), y)),
            }
        )
    return {"wall_time_s": wall, "points": points, "settings": {"epochs": epochs}}


# ------------------------------------------------------------------------ summaries
def at_k(points, k):
    """Best test accuracy over the points with 1..k selected features (and its n)."""
    ok = [p for p in points if 0 < p["n_selected"] <= k]
    if not ok:
        return None, None
    best = max(ok, key=lambda p: (p["test_acc"], -p["n_selected"]))
    return best["test_acc"], best["n_selected"]


def summarize(entry, is_path=True):
    """Add accuracy at k features and, for paths, the densest (first) point's accuracy."""
    pts = entry["points"]
    # the first point of a path is its densest (smallest lam; LassoNet: lambda = 0)
    entry["dense_acc"] = pts[0]["test_acc"] if is_path and pts else None
    entry["dense_n_selected"] = pts[0]["n_selected"] if is_path and pts else None
    entry["at_k"] = {}
    for k in KS:
        acc, n = at_k(pts, k)
        entry["at_k"][str(k)] = {"acc": acc, "n_selected": n}
    return entry


def method_names(args):
    names = [f"D={D}" for D in args.D]
    if not args.no_lassonet:
        names.append("LassoNet")
    if not args.no_filter:
        names.append("filter")
    return names


def fmt_acc(cell):
    if cell["acc"] is None:
        return "    -     "
    return f"{cell['acc']:.3f} ({cell['n_selected']:>2})"


def print_table(results):
    print()
    print(
        f"{'data set':<13} {'method':<9} {'time s':>7} {'load':>5} {'pts':>4} {'dense':>6}  "
        + "  ".join(f"{'acc@' + str(k) + ' (n)':>11}" for k in KS)
        + "  LassoNet time / time"
    )
    for name, entry in results["datasets"].items():
        methods = entry["methods"]
        lassonet_time = methods.get("LassoNet", {}).get("wall_time_s")
        for method, m in methods.items():
            dense = "" if m.get("dense_acc") is None else f"{m['dense_acc']:.3f}"
            ratio = ""
            if lassonet_time and method.startswith("D="):
                ratio = f"{lassonet_time / m['wall_time_s']:.2f}x"
            flag = " (truncated)" if m.get("truncated") else ""
            print(
                f"{name:<13} {method:<9} {m['wall_time_s']:7.1f} {m['load_before']:5.1f} "
                f"{len(m['points']):4d} {dense:>6}  "
                + "  ".join(f"{fmt_acc(m['at_k'][str(k)]):>11}" for k in KS)
                + f"  {ratio}{flag}"
            )
    print()


def check_targets(results):
    """The issue's targets, evaluated on what was run."""
    data = results["datasets"]
    out = {"gating_vs_lassonet": {}, "isolet_50": None, "speed": {}}
    for k in KS:
        wins, compared = [], []
        for name in REAL:
            methods = data.get(name, {}).get("methods", {})
            ln = methods.get("LassoNet")
            ours = [methods[m]["at_k"][str(k)]["acc"] for m in ("D=3", "D=4") if m in methods]
            if ln is None or ln.get("truncated") or not ours:
                continue  # not run, or LassoNet's path cut short by the time limit
            ours = [a for a in ours if a is not None]
            theirs = ln["at_k"][str(k)]["acc"]
            compared.append(name)
            if ours and (theirs is None or max(ours) >= theirs):
                wins.append(name)
        out["gating_vs_lassonet"][str(k)] = {
            "wins": wins,
            "compared": compared,
            "met": len(wins) >= 3,
        }
    iso = data.get("isolet", {}).get("methods", {})
    accs = [iso[m]["at_k"]["50"]["acc"] for m in ("D=3", "D=4") if m in iso]
    accs = [a for a in accs if a is not None]
    if accs:
        out["isolet_50"] = {"best_D3_D4": max(accs), "met": max(accs) >= 0.85}
    for name, entry in data.items():
        methods = entry["methods"]
        if "LassoNet" not in methods:
            continue
        t_ln = methods["LassoNet"]["wall_time_s"]
        out["speed"][name] = {
            m: {"ratio": t_ln / v["wall_time_s"], "met": t_ln / v["wall_time_s"] >= 2.0}
            for m, v in methods.items()
            if m.startswith("D=")
        }
    return out


def print_targets(targets):
    for k, t in targets["gating_vs_lassonet"].items():
        print(
            f"k={k:>2}: D=3/4 >= LassoNet on {len(t['wins'])}/{len(t['compared'])} real sets "
            f"({', '.join(t['wins']) or '-'}) -> {'met' if t['met'] else 'NOT met'}"
        )
    if targets["isolet_50"]:
        t = targets["isolet_50"]
        print(
            f"ISOLET acc@50 (best of D=3/4) = {t['best_D3_D4']:.3f} -> "
            f"{'met' if t['met'] else 'NOT met'} (target 0.85)"
        )
    for name, per in targets["speed"].items():
        parts = [f"{m}: {v['ratio']:.2f}x" for m, v in per.items()]
        print(f"speed {name}: LassoNet time / ours = " + ", ".join(parts) + " (target >= 2x)")


# ---------------------------------------------------------------------------- plot
def plot(results, path):
    plt = pyplot()
    names = list(results["datasets"])
    ncols = 3
    nrows = -(-(len(names) + 1) // ncols)  # one panel per data set, one for wall times
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.2 * nrows), squeeze=False)
    axes = axes.ravel()
    styles = {
        "D=2": {"color": "tab:blue", "marker": "o"},
        "D=3": {"color": "tab:orange", "marker": "o"},
        "D=4": {"color": "tab:red", "marker": "o"},
        "LassoNet": {"color": "tab:green", "marker": "."},
        "filter": {"color": "black", "marker": "s", "linestyle": "none"},
    }
    for ax, name in zip(axes, names, strict=False):
        entry = results["datasets"][name]
        for method, m in entry["methods"].items():
            pts = sorted(
                (p for p in m["points"] if p["n_selected"] > 0), key=lambda p: p["n_selected"]
            )
            if not pts:
                continue
            style = dict(styles.get(method, {}))
            style.setdefault("linestyle", "-")
            label = f"{method} ({m['wall_time_s']:.0f} s)"
            ax.plot(
                [p["n_selected"] for p in pts],
                [p["test_acc"] for p in pts],
                label=label,
                markersize=4,
                linewidth=1.2,
                **style,
            )
        for k in KS:
            ax.axvline(k, color="0.85", linewidth=0.8, zorder=0)
        ax.set_xscale("log")
        ax.set_title(f"{name} ({entry['n_features']} features)")
        ax.set_xlabel("number of selected features")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_ylabel("test accuracy (no refit)")
    ax = axes[len(names)]
    methods = [m for m in styles if any(m in e["methods"] for e in results["datasets"].values())]
    width = 0.8 / max(len(methods), 1)
    for i, method in enumerate(methods):
        times = [
            results["datasets"][n]["methods"].get(method, {}).get("wall_time_s", np.nan)
            for n in names
        ]
        ax.bar(
            np.arange(len(names)) + (i - (len(methods) - 1) / 2) * width,
            times,
            width,
            label=method,
            color=styles[method]["color"],
        )
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(names)), names, rotation=20, fontsize=8)
    ax.set_ylabel("wall time of the whole path (s)")
    ax.set_title("wall time (filter: 3 fits)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    for ax in axes[len(names) + 1 :]:
        ax.set_visible(False)
    fig.suptitle(
        "Test accuracy vs. number of selected features, MLP hidden (100,), path points "
        "without refit (filter baseline: SelectKBest + refit on k)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_home_argument(parser)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--D", nargs="*", type=int, default=[2, 3, 4])
    parser.add_argument("--no-lassonet", action="store_true")
    parser.add_argument(
        "--lassonet-datasets",
        nargs="+",
        default=list(LASSONET_DEFAULT),
        choices=DATASETS,
        help="data sets to run LassoNet on (default: all but MNIST, whose LassoNet path "
        "alone takes about 30 minutes here; add it with --resume --redo in a second run)",
    )
    parser.add_argument(
        "--lassonet-timeout", type=float, default=None, help="stop LassoNet's path after s"
    )
    parser.add_argument("--no-filter", action="store_true")
    parser.add_argument("--epochs", type=int, default=None, help="override epochs per point")
    parser.add_argument("--n-lams", type=int, default=None, help="override n_lams")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (all methods)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="keep entries already in --out")
    parser.add_argument(
        "--redo",
        action="store_true",
        help="with --resume: recompute the --datasets given (all their methods, in this run)",
    )
    add_out_argument(parser, "feature_selection.json")
    args = parser.parse_args(argv)
    if args.data_home is None and any(d != "digits" for d in args.datasets):
        parser.error("give --data-home or set SKSPARSE_NN_DATA")
    args.argv = sys.argv[1:] if argv is None else list(argv)
    report(run(args), Path(args.out))


def run(args):
    """Every (data set, method) not yet in ``--out``; saves the JSON and plot as it goes."""
    single_thread(args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")

    results = {"datasets": {}}
    if args.resume and out.exists():
        results = json.loads(out.read_text())
        if args.redo:
            for name in args.datasets:
                results["datasets"].pop(name, None)
    results["environment"] = machine(peers=("lassonet",))

    def save():
        results["targets"] = check_targets(results)
        write_json(results, out)

    t_all = time.perf_counter()
    for name in args.datasets:
        X, y, X_test, y_test = load(name, args.data_home, args.seed)
        entry = results["datasets"].setdefault(name, {"methods": {}})
        entry.update(
            n_train=int(X.shape[0]),
            n_test=int(X_test.shape[0]),
            n_features=int(X.shape[1]),
            n_classes=int(len(np.unique(y))),
        )
        cfg = dict(SETTINGS[name])
        for key, value in (("epochs", args.epochs), ("n_lams", args.n_lams)):
            if value is not None:
                cfg[key] = value
        run_ln = not args.no_lassonet and name in args.lassonet_datasets
        data = (X, y, X_test, y_test)
        jobs = [(f"D={D}", run_dgating, (*data, D, cfg, args.seed)) for D in args.D]
        if run_ln:
            jobs.append(("LassoNet", run_lassonet, (*data, args.seed, args.lassonet_timeout)))
        if not args.no_filter:
            jobs.append(("filter", run_filter, (*data, args.seed)))
        for method, func, func_args in jobs:
            if method in entry["methods"]:
                continue
            load_before = os.getloadavg()[0]
            print(f"[{time.perf_counter() - t_all:7.0f} s] {name} {method} ...", flush=True)
            res = func(*func_args)
            res["load_before"] = load_before
            res["load_after"] = os.getloadavg()[0]
            entry["methods"][method] = summarize(res, is_path=method != "filter")
            cells = "  ".join(fmt_acc(res["at_k"][str(k)]) for k in KS)
            print(
                f"    {res['wall_time_s']:.1f} s, {len(res['points'])} points, "
                f"dense {res['dense_acc']}, acc@{KS}: {cells}",
                flush=True,
            )
            save()
        plot(results, png)
    results.setdefault("runs", []).append(
        {
            "argv": args.argv,
            "wall_time_s": time.perf_counter() - t_all,
            "environment": dict(results["environment"]),
        }
    )
    return results


def report(results, out):
    """Save the JSON and the plot, print the table and the targets."""
    results["targets"] = check_targets(results)
    write_json(results, out)
    plot(results, out.with_suffix(".png"))
    print_table(results)
    print_targets(results["targets"])
    seconds = results["runs"][-1]["wall_time_s"]
    print(f"\nwrote {out} and {out.with_suffix('.png')} ({seconds:.0f} s this run)")


if __name__ == "__main__":
    main()
