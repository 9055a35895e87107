"""NODERegressor with default settings against HistGradientBoostingRegressor (defaults).

For each data set and random 80/20 split, in one process on one torch thread:
HistGradientBoostingRegressor(), a dense NODE (``NODERegressor(lam=0)``, every other
parameter at its default), the default ``NODERegressor()`` (lam=3e-3),
``NODERegressor(lam=1e-3)`` and ``lam=1e-2``. Reports test RMSE, the gap of dense NODE to
HGB, the best sparse NODE with at most 10 trees (lowest mean test RMSE among the lams) and
its gap to dense, and fit times; writes ``benchmarks/results/node_defaults.json`` and ``.png``.

Data: white and red wine quality (``load_wine_quality``, local files in
``--data-home`` or ``$SKSPARSE_NN_DATA``), scikit-learn's diabetes and Friedman #1
(``make_friedman1``, 1000 rows, noise 1). Inputs are passed as they are (NODE's
data-aware initialization places thresholds and temperatures from the data).

Usage::

    python benchmarks/node_defaults.py --data-home DIR [--splits 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import (
    add_data_home_argument,
    add_out_argument,
    machine,
    pyplot,
    single_thread,
    timed,
    uptime,
    write_json,
)
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import train_test_split

from sksparse_nn.datasets import load_wine_quality
from sksparse_nn.estimators.node import NODERegressor

#: The NODE fits of every split: label -> lam (everything else at its default).
MODELS = {"dense": 0.0, "default": None, "lam=1e-3": 1e-3, "lam=1e-2": 1e-2}
MAX_TREES = 10


def load(name, data_home):
    if name in ("white", "red"):
        data = load_wine_quality(name, data_home=data_home)
        return np.asarray(data.X, np.float64), np.asarray(data.y, np.float64)
    if name == "diabetes":
        return load_diabetes(return_X_y=True)
    return make_friedman1(1000, 10, noise=1.0, random_state=0)


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def fit_one(make, X_tr, y_tr, X_te, y_te):
    fitted = timed(make().fit, X_tr, y_tr)
    est = fitted.value
    row = {"rmse": rmse(est.predict(X_te), y_te), "fit_s": fitted.wall}
    if isinstance(est, NODERegressor):
        row.update(
            trees=est.n_active_trees_,
            epochs=est.n_iter_,
            gap_dead=est.sparsity_gap_[0],
            gap_live=est.sparsity_gap_[1],
        )
    return row


def run_split(name, split, X, y):
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=split)
    rows = [{"model": "HGB", **fit_one(lambda: HistGradientBoostingRegressor(random_state=split),
                                        X_tr, y_tr, X_te, y_te)}]  # fmt: skip
    for label, lam in MODELS.items():
        params = {"random_state": split} | ({} if lam is None else {"lam": lam})
        row = fit_one(lambda p=params: NODERegressor(**p), X_tr, y_tr, X_te, y_te)
        rows.append({"model": label, "lam": NODERegressor(**params).lam, **row})
    for row in rows:
        row.update(data=name, split=split, n_train=len(y_tr))
        trees = f"{row['trees']:3d} trees, {row['epochs']:3d} ep, " if "trees" in row else ""
        print(f"  {name} split {split} {row['model']:>9}: RMSE {row['rmse']:.4f} "
              f"({trees}{row['fit_s']:.1f} s)", flush=True)  # fmt: skip
    return rows


def mean_of(rows, data, model, field):
    vals = [r[field] for r in rows if r["data"] == data and r["model"] == model]
    return float(np.mean(vals)) if vals else None


def summarize(rows):
    """Per data set: means over splits and the gaps of the issue's targets."""
    table = []
    for data in dict.fromkeys(r["data"] for r in rows):
        hgb, dense = mean_of(rows, data, "HGB", "rmse"), mean_of(rows, data, "dense", "rmse")
        entry = {"data": data, "n_train": mean_of(rows, data, "HGB", "n_train")}
        entry |= {"hgb_rmse": hgb, "hgb_fit_s": mean_of(rows, data, "HGB", "fit_s")}
        entry |= {"dense_rmse": dense, "dense_gap_pct": 100 * (dense / hgb - 1)}
        entry["dense_fit_s"] = mean_of(rows, data, "dense", "fit_s")
        for model in MODELS:
            if model != "dense":
                entry[model] = {f: mean_of(rows, data, model, f)
                                for f in ("rmse", "trees", "fit_s", "epochs")}  # fmt: skip
                # sparsity gap over the splits: the largest "dead" and smallest live norm
                runs = [r for r in rows if r["data"] == data and r["model"] == model]
                entry[model]["gap_dead_max"] = max(r["gap_dead"] for r in runs)
                entry[model]["gap_live_min"] = min(r["gap_live"] for r in runs)
        small = [m for m in MODELS if m != "dense" and entry[m]["trees"] <= MAX_TREES]
        if small:
            best = min(small, key=lambda m: entry[m]["rmse"])
            gap = 100 * (entry[best]["rmse"] / dense - 1)
            entry["sparse"] = {"model": best, **entry[best], "gap_to_dense_pct": gap}
        table.append(entry)
    return table


def plot(table, path):
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    x = np.arange(len(table))
    ax1.bar(x - 0.25, [t["dense_gap_pct"] for t in table], 0.25, label="dense NODE vs HGB")
    default_gap = [100 * (t["default"]["rmse"] / t["hgb_rmse"] - 1) for t in table]
    ax1.bar(x, default_gap, 0.25, label="default NODE vs HGB")
    sparse = [t["sparse"]["gap_to_dense_pct"] if "sparse" in t else np.nan for t in table]
    ax1.bar(x + 0.25, sparse, 0.25, label=f"sparse (<= {MAX_TREES} trees) vs dense")
    for y0 in (-3, 3):
        ax1.axhline(y0, ls=":", color="k")
    ax1.set(xticks=x, xticklabels=[t["data"] for t in table], ylabel="test RMSE gap (%)")
    ax1.legend(fontsize=8)
    for key, label in (("hgb_fit_s", "HGB"), ("dense_fit_s", "dense NODE")):
        ax2.plot(x, [t[key] for t in table], "o-", label=label)
    ax2.plot(x, [t["default"]["fit_s"] for t in table], "o-", label="default NODE")
    ax2.set(xticks=x, xticklabels=[t["data"] for t in table], ylabel="fit time (s)",
            yscale="log", title="one torch thread")  # fmt: skip
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(args):
    single_thread(args.threads)
    load_before = uptime()
    rows = []
    for name in args.datasets:
        X, y = load(name, args.data_home)
        for split in range(args.splits if name != "white" else args.white_splits):
            rows.extend(run_split(name, split, X, y))
    settings = {k: v for k, v in vars(args).items() if k not in ("data_home", "out")}
    return {
        "settings": settings,
        "models": MODELS,
        "summary": summarize(rows),
        "runs": rows,
        "uptime_before": load_before,
        "uptime_after": uptime(),
        "machine": machine(),
    }


def report(results, out):
    print(f"\nmean over splits; load before: {results['uptime_before']}")
    print(f"                after:  {results['uptime_after']}")
    print(
        f"{'data':<9}{'n':>6}{'HGB':>8}{'dense NODE (gap)':>20}{'default NODE':>22}"
        f"{'sparse <=10 trees (gap to dense)':>36}{'fit s: HGB/dense/default':>28}"
        f"{'default gap: dead/live':>26}"
    )
    for t in results["summary"]:
        d = t["default"]
        sp = t.get("sparse")
        sparse = (f"{sp['model']}: {sp['trees']:.1f} tr {sp['rmse']:.4f} "
                  f"({sp['gap_to_dense_pct']:+.1f}%)" if sp else "-")  # fmt: skip
        print(f"{t['data']:<9}{t['n_train']:>6.0f}{t['hgb_rmse']:>8.4f}"
              f"{t['dense_rmse']:>11.4f} ({t['dense_gap_pct']:+5.1f}%)"
              f"{d['rmse']:>10.4f} ({d['trees']:5.1f} tr)"
              f"{sparse:>36}"
              f"{t['hgb_fit_s']:>10.1f}/{t['dense_fit_s']:.1f}/{d['fit_s']:.1f}"
              f"{d['gap_dead_max']:>16.1e}/{d['gap_live_min']:.1e}")  # fmt: skip
    out = write_json(results, out, indent=1)
    plot(results["summary"], out.with_suffix(".png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_home_argument(parser)
    parser.add_argument("--datasets", nargs="+", default=["white", "red", "diabetes", "friedman1"])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--white-splits", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    add_out_argument(parser, "node_defaults.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
