"""Does the bottleneck of DGatedAutoencoder recover the intrinsic dimension? (DAM Sec. 4.1)

Data: ``make_latent_manifold(n, r, d)``: r-dimensional standard normal latents pushed
through a random decoder-shaped ReLU network (64 hidden units) into d dimensions, 1000
training and 1000 held-out rows, no noise, so the answer is ``r``.

Methods: the bottleneck sparsified by D-Gating (D = 2, 3, 4), DAM, DS and the direct L2,1
penalty (plain subgradient SGD; it gives no exact zeros, so a unit counts as removed below
its threshold, the sparsifier's default 1e-3). Every method runs the same warm-started
path over one lam grid (``LAMS``), every other parameter at the estimator's default.

The chosen dimension (one rule for every method, stated once): **the sparsest point of
the path whose held-out R^2 is within 0.01 of the path's best held-out R^2.** Why: a
latent factor carries about 1/r of the variance, at least 10% for r <= 10, so dropping a
true dimension costs far more than 0.01, while spurious units beyond r improve held-out
R^2 by training noise only; 0.01 is 1% of the total variance, a tolerance for SGD's
noise between neighbouring points.

Also the default fit (``DGatedAutoencoder()``, nothing set but the seed) and a cold fit
at lam = 0.03, for the defaults question. (The recorded run's "default" is lam = 0.05,
the default before these results moved it to 0.02.) Table: r, d, method, chosen dimension, held-out
R^2 there, sparsity gap there (largest removed-unit norm before collapse / smallest live
one), path time. JSON and plot in benchmarks/results/autoencoder_dimension.*

Usage::

    python benchmarks/autoencoder_dimension.py [--configs 2x20 5x50 10x100] [--out FILE]

(The recorded results ran 10x100 in a second process, ``--out
autoencoder_dimension_10x100.json``, beside the other two, to fit the time available.)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import add_out_argument, machine, pyplot, single_thread, uptime, write_json

from sksparse_nn import DGatedAutoencoder
from sksparse_nn.datasets import make_latent_manifold

LAMS = np.geomspace(0.005, 0.3, 7)
METHODS = {
    "dgating D=2": {"D": 2},
    "dgating D=3": {"D": 3},
    "dgating D=4": {"D": 4},
    "dam": {"sparsifier": "dam"},
    "ds": {"sparsifier": "ds"},
    "l21 (thr 1e-3)": {"sparsifier": "l21"},
}
TOL = 0.01  # the selection rule's R^2 tolerance (see the module docstring)


def choose(n_selected, val_score, tol=TOL):
    """Index of the sparsest point with held-out R^2 >= best - tol (ties: larger lam)."""
    val = np.asarray(val_score, float)
    ok = np.flatnonzero(np.isfinite(val) & (val >= np.nanmax(val) - tol))
    sizes = np.asarray(n_selected)[ok]
    return int(ok[sizes == sizes.min()][-1])


def one_fit(X, X_val, **params):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DGatedAutoencoder(random_state=0, **params).fit(X)
    return {
        "params": params,
        "dimension": est.n_components_,
        "val_r2": est.score(X_val),
        "gap": list(est.sparsity_gap_),
        "epochs": est.n_iter_,
        "time_s": time.perf_counter() - t0,
    }


def run_config(r, d, n=1000):
    data = make_latent_manifold(n, r, d, n_test=n, random_state=0)
    X, X_val = data.X, data.X_test
    rows = []
    for name, params in METHODS.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = DGatedAutoencoder(random_state=0, **params).regularization_path(
                X, lams=LAMS, X_val=X_val, y_val=X_val, keep_estimators=True  # y ignored
            )
        wall = time.perf_counter() - t0
        k = len(path.lams)
        gaps = [list(e.sparsity_gap_) if e is not None else [np.nan, np.nan]
                for e in path.estimators[:k]]  # fmt: skip
        i = choose(path.n_selected, path.val_score)
        rows.append({
            "r": r, "d": d, "method": name,
            "lams": path.lams, "n_selected": path.n_selected,
            "val_r2": path.val_score, "train_r2": path.train_score, "gaps": gaps,
            "chosen": i, "chosen_lam": float(path.lams[i]),
            "dimension": int(path.n_selected[i]), "chosen_r2": float(path.val_score[i]),
            "gap": gaps[i], "path_time_s": wall,
        })  # fmt: skip
        print(f"  {name:15s} k={path.n_selected.tolist()} R2={np.round(path.val_score, 3)}"
              f" -> {rows[-1]['dimension']} ({wall:.0f}s)", flush=True)  # fmt: skip
    defaults = {
        "default": one_fit(X, X_val),
        "lam=0.03": one_fit(X, X_val, lam=0.03),
    }
    print(f"  defaults {[(k, v['dimension'], round(v['val_r2'], 3)) for k, v in defaults.items()]}")
    return {"r": r, "d": d, "paths": rows, "defaults": defaults}


def run(args):
    single_thread()
    out = {"load_before": uptime(), "lams": LAMS, "tol": TOL, "configs": []}
    for spec in args.configs:
        r, d = map(int, spec.split("x"))
        print(f"r={r} d={d}", flush=True)
        out["configs"].append(run_config(r, d, args.n))
        out["load_after"] = uptime()
        write_json(out, args.out)  # after each configuration: a partial run is kept
    out["machine"] = machine()
    return out


def report(res, out):
    print(f"\nload before: {res['load_before']}\nload after:  {res['load_after']}")
    head = f"{'r':>3} {'d':>4} {'method':16s} {'dim':>4} {'lam':>7} {'R2':>7} " \
           f"{'gap dead':>9} {'gap live':>9} {'path s':>7}"  # fmt: skip
    print(head)
    for cfg in res["configs"]:
        for row in cfg["paths"]:
            dead, live = row["gap"]
            print(f"{row['r']:>3} {row['d']:>4} {row['method']:16s} {row['dimension']:>4} "
                  f"{row['chosen_lam']:7.4f} {row['chosen_r2']:7.4f} {dead:9.1e} {live:9.1e} "
                  f"{row['path_time_s']:7.0f}")  # fmt: skip
        for label, fit in cfg["defaults"].items():
            dead, live = fit["gap"]
            print(f"{cfg['r']:>3} {cfg['d']:>4} {'fit ' + label:16s} {fit['dimension']:>4} "
                  f"{'':7s} {fit['val_r2']:7.4f} {dead:9.1e} {live:9.1e} {fit['time_s']:7.0f}")
    write_json(res, out)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(res["configs"]), figsize=(5 * len(res["configs"]), 4),
                             squeeze=False)  # fmt: skip
    for ax, cfg in zip(axes[0], res["configs"], strict=True):
        for row in cfg["paths"]:
            ax.plot(row["lams"], row["n_selected"], marker="o", label=row["method"])
        ax.axhline(cfg["r"], color="k", ls=":", label="true r")
        ax.set(xscale="log", xlabel="lam", ylabel="learned dimension",
               title=f"r={cfg['r']}, d={cfg['d']}")  # fmt: skip
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(out).replace(".json", ".png"), dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["2x20", "5x50", "10x100"])
    parser.add_argument("--n", type=int, default=1000)
    add_out_argument(parser, "autoencoder_dimension.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
