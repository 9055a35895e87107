"""Empirical FDR and power of the knockoff filter, its cost, and real data with noise.

Three panels, one thread, results merged into ``benchmarks/results/selection_error.json``
(a panel run later replaces only its own entry):

* ``timing``: CPU seconds of the default :class:`~sksparse_nn.selection.KnockoffFilter`
  against one default CV path (``SparsePathCV``, cv=5: six paths) of the same family, on
  500 rows (linear regressor and MLP regressor); the target is a ratio <= 10;
* ``sim``: simulated truths (n rows, p Gaussian AR(1) features with correlation 0.5, k of
  them active): the linear family on a linear, an additive and an interaction truth, the
  MLP and the NAM on the additive (nonlinear) truth; per repetition the false discovery
  proportion and the power of our filter and of knockpy's lasso-statistic Gaussian
  knockoffs (``knockpy.knockoff_filter.KnockoffFilter(fstat="lasso",
  ksampler="gaussian")``, when knockpy imports); the table gives the means and their
  standard errors;
* ``real``: breast cancer (scikit-learn) with 30 standard-normal columns appended, 400
  rows: real and noise columns kept, per seed.

Usage::

    python benchmarks/selection_error.py --quick            # a few repetitions of all
    python benchmarks/selection_error.py --panel sim --reps 20 --net-reps 10
"""

from __future__ import annotations

import argparse
import json
import time

from _common import RESULTS, machine, single_thread, uptime, write_json

OUT = RESULTS / "selection_error.json"


# --------------------------------------------------------------------------- data
def ar1_design(rng, n, p, rho=0.5):
    import numpy as np

    X = rng.standard_normal((n, p))
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * X[:, j]
    return X


def simulate(truth, rng, n, p, k, amplitude):
    """(X, y, active) of one truth; the active features are spread over the columns."""
    import numpy as np

    X = ar1_design(rng, n, p)
    active = np.sort(rng.choice(p, k, replace=False))
    signs = rng.choice([-1.0, 1.0], k)
    if truth == "linear":
        signal = X[:, active] @ (amplitude * signs)
    elif truth == "additive":
        shapes = (np.sin, lambda x: x**2 - 1, lambda x: np.abs(x) - 0.8, np.tanh)
        signal = sum(
            amplitude * signs[i] * shapes[i % 4](1.5 * X[:, j]) for i, j in enumerate(active)
        )
    elif truth == "interaction":  # pairs of active features, plus a weak main effect
        pairs = active.reshape(-1, 2)
        signal = sum(amplitude * X[:, a] * X[:, b] for a, b in pairs)
        signal = signal + 0.5 * amplitude * X[:, active] @ signs
    else:
        raise ValueError(truth)
    y = signal + rng.standard_normal(n)
    return X, y, active


def fdp_power(selected, active, k):
    import numpy as np

    selected = np.asarray(selected, dtype=int)
    false = np.setdiff1d(selected, active).size
    return false / max(selected.size, 1), np.intersect1d(selected, active).size / k


# ------------------------------------------------------------------------ methods
def family(name, seed):
    from sksparse_nn import DGatedMLPRegressor, DGatedNAMRegressor, SparseLinearRegressor

    return {
        "linear": lambda: SparseLinearRegressor(),
        "linear_d2": lambda: SparseLinearRegressor(D=2),  # the convex (lasso) path
        "mlp": lambda: DGatedMLPRegressor(random_state=seed),
        "nam": lambda: DGatedNAMRegressor(random_state=seed),
    }[name]()


def ours(name, X, y, fdr, seed):
    from sksparse_nn.selection import KnockoffFilter

    kf = KnockoffFilter(family(name, seed), fdr=fdr, random_state=seed).fit(X, y)
    return kf.selected_features_


def knockpy_lasso(X, y, fdr, seed):
    import numpy as np
    from knockpy.knockoff_filter import KnockoffFilter as KpFilter

    np.random.seed(seed)  # noqa: NPY002 (knockpy draws from numpy's global generator)
    rejections = KpFilter(fstat="lasso", ksampler="gaussian").forward(X=X, y=y, fdr=fdr)
    return np.flatnonzero(rejections)


# ------------------------------------------------------------------------- panels
def panel_timing(args):
    import numpy as np

    from sksparse_nn import SparsePathCV
    from sksparse_nn.selection import KnockoffFilter

    rows = []
    for name in ("linear", "mlp"):
        rng = np.random.default_rng(0)
        X, y, _ = simulate("linear", rng, 500, args.p_timing, 5, 0.5)
        t0 = time.process_time()
        SparsePathCV(family(name, 0), cv=5).fit(X, y)
        cv = time.process_time() - t0
        t0 = time.process_time()
        KnockoffFilter(family(name, 0), random_state=0).fit(X, y)
        kn = time.process_time() - t0
        rows.append(
            {
                "family": name,
                "n": 500,
                "p": args.p_timing,
                "cv_path_s": cv,
                "knockoff_s": kn,
                "ratio": kn / cv,
            }
        )
        print(
            f"{name:7s} cv path {cv:7.1f} s  knockoffs {kn:7.1f} s  ratio {kn / cv:5.2f}",
            flush=True,
        )
    return rows


def panel_sim(args):
    import numpy as np

    try:
        import knockpy  # noqa: F401

        have_knockpy = True
    except ImportError:
        have_knockpy = False
    cells = [
        (f, t, args.reps)
        for f in ("linear", "linear_d2")
        for t in ("linear", "additive", "interaction")
    ]
    cells += [(f, "additive", args.net_reps) for f in ("mlp", "nam")]
    cells = [c for c in cells if c[0] in args.families and c[1] in args.truths]
    rows = []
    for name, truth, reps in cells:
        for rep in range(reps):
            rng = np.random.default_rng(1000 + rep)
            amplitude = args.amplitude if truth != "additive" else 2 * args.amplitude
            X, y, active = simulate(truth, rng, args.n, args.p, args.k, amplitude)
            t0 = time.process_time()
            sel = ours(name, X, y, args.fdr, rep)
            row = {
                "family": name,
                "truth": truth,
                "rep": rep,
                "method": "ours",
                "seconds": time.process_time() - t0,
            }
            row["fdp"], row["power"] = fdp_power(sel, active, args.k)
            rows.append(row)
            done = {(r["truth"], r["rep"]) for r in rows if r["method"] == "knockpy"}
            if have_knockpy and (truth, rep) not in done:  # one run per data set
                t0 = time.process_time()
                sel_kp = knockpy_lasso(X, y, args.fdr, rep)
                kp = {
                    "family": "lasso",
                    "truth": truth,
                    "rep": rep,
                    "method": "knockpy",
                    "seconds": time.process_time() - t0,
                }
                kp["fdp"], kp["power"] = fdp_power(sel_kp, active, args.k)
                rows.append(kp)
            print(
                f"{name:7s} {truth:12s} rep {rep:2d}: fdp {row['fdp']:.2f} power "
                f"{row['power']:.2f} ({row['seconds']:.0f} s)",
                flush=True,
            )
    return rows


def panel_real(args):
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    from sksparse_nn import DGatedMLPClassifier, SparseLinearClassifier
    from sksparse_nn.selection import KnockoffFilter

    X0, y0 = load_breast_cancer(return_X_y=True)
    rows = []
    for fdr in args.real_fdrs:
        for name in args.real_families:
            for seed in range(args.seeds):
                rng = np.random.RandomState(seed)
                rows_idx = rng.permutation(len(y0))[:400]
                X = np.hstack([X0[rows_idx], rng.randn(400, 30)])
                y = y0[rows_idx]
                est = {
                    "linear": lambda: SparseLinearClassifier(),
                    "linear_d2": lambda: SparseLinearClassifier(D=2),
                    "mlp": lambda s=seed: DGatedMLPClassifier(random_state=s),
                }[name]()
                t0 = time.process_time()
                kf = KnockoffFilter(est, fdr=fdr, random_state=seed).fit(X, y)
                sel = kf.selected_features_
                row = {
                    "family": name,
                    "fdr": fdr,
                    "seed": seed,
                    "real_kept": int((sel < 30).sum()),
                    "noise_kept": int((sel >= 30).sum()),
                    "units": int(kf.n_units_),
                    "seconds": time.process_time() - t0,
                }
                rows.append(row)
                print(
                    f"breast cancer {name:7s} fdr {fdr}: seed {seed} real {row['real_kept']:2d}"
                    f" noise {row['noise_kept']:2d} ({row['seconds']:.0f} s)",
                    flush=True,
                )
    return rows


# ------------------------------------------------------------------------- report
def se(a):
    import numpy as np

    return a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")


def summarize(rows):
    import numpy as np

    table = {}
    for r in rows:
        table.setdefault((r["family"], r["truth"], r["method"]), []).append(r)
    out = []
    for (fam, truth, method), rs in table.items():
        fdp = np.array([r["fdp"] for r in rs])
        power = np.array([r["power"] for r in rs])
        out.append(
            {
                "family": fam,
                "truth": truth,
                "method": method,
                "reps": len(rs),
                "fdr": fdp.mean(),
                "fdr_se": se(fdp),
                "power": power.mean(),
                "power_se": se(power),
                "seconds": np.mean([r["seconds"] for r in rs]),
            }
        )
    return out


def report(results):
    for key in sorted(k for k in results if k.startswith("sim")):
        amplitude = results[key]["args"]["amplitude"]
        print(
            f"\n[{key}] amplitude {amplitude}, n {results[key]['args']['n']}, "
            f"p {results[key]['args']['p']}, k {results[key]['args']['k']}"
        )
        print("family  truth        method   reps   FDR (se)       power (se)     s/rep")
        for s in results[key]["summary"]:
            print(
                f"{s['family']:7s} {s['truth']:12s} {s['method']:8s} {s['reps']:4d}  "
                f"{s['fdr']:.3f} ({s['fdr_se']:.3f})  {s['power']:.3f} ({s['power_se']:.3f})"
                f"  {s['seconds']:6.1f}"
            )
    if "timing" in results:
        print("\nfamily   CV path (s)  knockoffs (s)  ratio")
        for r in results["timing"]["rows"]:
            print(
                f"{r['family']:7s} {r['cv_path_s']:11.1f} {r['knockoff_s']:14.1f} {r['ratio']:6.2f}"
            )
    for key in sorted(k for k in results if k.startswith("real")):
        print(f"\n[{key}] breast cancer + 30 noise columns, 400 rows")
        for r in results[key]["rows"]:
            print(
                f"{r['family']:9s} fdr {r['fdr']}: seed {r['seed']} real kept {r['real_kept']:2d}"
                f"  noise kept {r['noise_kept']:2d}  units {r['units']}"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--panel", nargs="+", default=["timing", "sim", "real"], choices=["timing", "sim", "real"]
    )
    parser.add_argument("--quick", action="store_true", help="2 reps, 1 net rep, 1 seed")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--net-reps", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--p", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--p-timing", type=int, default=30)
    parser.add_argument("--amplitude", type=float, default=0.35)
    parser.add_argument("--fdr", type=float, default=0.1)
    parser.add_argument("--families", nargs="+", default=["linear", "linear_d2", "mlp", "nam"])
    parser.add_argument("--truths", nargs="+", default=["linear", "additive", "interaction"])
    parser.add_argument("--tag", default="", help="suffix of the panel's key in the JSON")
    parser.add_argument("--real-fdrs", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--real-families", nargs="+", default=["linear", "linear_d2", "mlp"])
    parser.add_argument("--report", action="store_true", help="only print the saved table")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.net_reps, args.seeds = 2, 1, 1
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    if not args.report:
        single_thread()
        for panel in args.panel:
            load = uptime()
            rows = {"timing": panel_timing, "sim": panel_sim, "real": panel_real}[panel](args)
            entry = {
                "rows": rows,
                "uptime_before": load,
                "uptime_after": uptime(),
                "args": vars(args),
                "machine": machine(peers=("knockpy",)),
            }
            if panel == "sim":
                entry["summary"] = summarize(rows)
            # re-read: another run may have written its panel meanwhile
            results = json.loads(OUT.read_text()) if OUT.exists() else {}
            results[panel + args.tag] = entry
            write_json(results, OUT)
    report(results)


if __name__ == "__main__":
    main()
