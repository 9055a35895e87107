"""Stability selection (issue 44): false selections against the stated bound, power,
real data with noise columns, and the default's cost against a default CV path.

Panels (``--panels``), every cell cached as a JSON file under
``benchmarks/results/stability_selection/`` so panels can run in separate processes and
an interrupted run continues:

* ``cost``: breast cancer (scikit-learn) with 30 appended standard-normal columns, 500
  rows, standardized; CPU time of a default ``SparsePathCV`` (5 folds: 6 paths) and of
  a default ``StabilitySelection`` of the same family (linear, MLP), and their ratio
  (the target: at most 10);
* ``cancer``: the same table, 400 training rows drawn per seed: real features kept,
  noise columns kept, the bound; target: at least 3 real and no noise column;
* ``sim``: a linear truth with known support (n=400, p=100, 5 true features of
  coefficients 1.5, -1.25, 1, -1, 0.75, standard-normal design with correlation 0.3
  between neighbours, noise sd 1): the number of false selections V against the bound
  ``expected_false_selections_`` and the power (true features selected / 5); 20
  repetitions for the linear family, 5 for the MLP;
* ``cancer_d2``: the ``cancer`` panel for ``SparseLinearClassifier(D=2)``;
* ``simhard``: the same truth with noise sd 3, linear family, 20 repetitions.

Default settings everywhere (``StabilitySelection(est, random_state=seed)``,
``SparsePathCV(est)`` and the families' defaults), one thread. Run
``python benchmarks/stability_selection.py`` (all panels) or ``--panels sim`` etc.; the
summary goes to ``benchmarks/results/stability_selection.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

from _common import RESULTS, THREAD_ENV, machine, single_thread, uptime, write_json

os.environ.update(THREAD_ENV)

import numpy as np  # noqa: E402

CELLS = RESULTS / "stability_selection"
N_NOISE = 30
SIM = {"n": 400, "p": 100, "beta": [1.5, -1.25, 1.0, -1.0, 0.75], "rho": 0.3, "sigma": 1.0}
REPS = {"linear": 20, "mlp": 5}
#: The harder linear panel (``simhard``): the same truth under noise sd 3.
HARD_SIGMA = 3.0


def _families(task):
    from sksparse_nn import (
        DGatedMLPClassifier,
        DGatedMLPRegressor,
        SparseLinearClassifier,
        SparseLinearRegressor,
    )

    if task == "classification":
        return {
            "linear": SparseLinearClassifier(),
            "linear_d2": SparseLinearClassifier(D=2),
            "mlp": DGatedMLPClassifier(random_state=0),
        }
    return {"linear": SparseLinearRegressor(), "mlp": DGatedMLPRegressor(random_state=0)}


def cancer_with_noise(n_rows, seed):
    """Breast cancer's 30 features then 30 standard-normal columns, ``n_rows`` rows drawn
    at random, standardized (the linear family does not standardize its inputs)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.RandomState(seed)
    X = np.hstack([X, rng.randn(len(X), N_NOISE)])
    rows = rng.permutation(len(X))[:n_rows]
    return StandardScaler().fit_transform(X[rows]), y[rows], X.shape[1] - N_NOISE


def linear_truth(seed, sigma=None):
    sigma = SIM["sigma"] if sigma is None else sigma
    rng = np.random.RandomState(seed)
    n, p, beta = SIM["n"], SIM["p"], np.zeros(SIM["p"])
    beta[: len(SIM["beta"])] = SIM["beta"]
    # AR(1) design: correlation rho between neighbours
    X = rng.randn(n, p)
    for j in range(1, p):
        X[:, j] = SIM["rho"] * X[:, j - 1] + np.sqrt(1 - SIM["rho"] ** 2) * X[:, j]
    y = X @ beta + sigma * rng.randn(n)
    return X, y, len(SIM["beta"])


def _select(est, X, y, seed):
    from sksparse_nn.selection import StabilitySelection

    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = StabilitySelection(est, random_state=seed).fit(X, y)
    return sel, time.process_time() - t0


def _summary(sel, n_real, cpu):
    chosen = sel.selected_features_
    return {
        "cpu_s": cpu,
        "selected": chosen.tolist(),
        "real_kept": int(np.sum(chosen < n_real)),
        "noise_kept": int(np.sum(chosen >= n_real)),
        "threshold": sel.threshold_,
        "bound": sel.expected_false_selections_,
        "q": sel.n_selected_per_half_,
        "lam_region": sel.lam_region_,
    }


def cell_cost(family):
    from sksparse_nn import SparsePathCV

    X, y, n_real = cancer_with_noise(500, 0)
    est = _families("classification")[family]
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SparsePathCV(est).fit(X, y)
    cv = time.process_time() - t0
    sel, cpu = _select(est, X, y, 0)
    return {**_summary(sel, n_real, cpu), "cv_cpu_s": cv, "ratio": cpu / cv}


def cell_cancer(family, seed):
    X, y, n_real = cancer_with_noise(400, seed)
    sel, cpu = _select(_families("classification")[family], X, y, seed)
    return _summary(sel, n_real, cpu)


def cell_sim(family, rep, sigma=None):
    X, y, s = linear_truth(rep, sigma)
    sel, cpu = _select(_families("regression")[family], X, y, rep)
    out = _summary(sel, s, cpu)
    out["false"] = out.pop("noise_kept")
    out["power"] = out.pop("real_kept") / s
    return out


def cells(panels):
    for panel in panels:
        if panel == "cost":
            yield from ((f"cost-{f}", cell_cost, (f,)) for f in ("linear", "mlp"))
        elif panel == "cancer":
            for f in ("linear", "mlp"):
                yield from ((f"cancer-{f}-{s}", cell_cancer, (f, s)) for s in range(3))
        elif panel == "sim":
            for f in ("linear", "mlp"):
                yield from ((f"sim-{f}-{r}", cell_sim, (f, r)) for r in range(REPS[f]))
        elif panel == "cancer_d2":  # the convex linear model beside the default D = 3
            yield from ((f"cancer-linear_d2-{s}", cell_cancer, ("linear_d2", s)) for s in range(3))
        elif panel == "simhard":
            reps = range(REPS["linear"])
            yield from ((f"simhard-linear-{r}", cell_sim, ("linear", r, HARD_SIGMA)) for r in reps)


def run(args):
    single_thread()
    CELLS.mkdir(parents=True, exist_ok=True)
    for name, fn, fargs in cells(args.panels):
        if args.only and name not in args.only:
            continue
        path = CELLS / f"{name}.json"
        if path.exists() and not args.force:
            continue
        out = fn(*fargs)
        out["uptime"] = uptime()
        write_json(out, path)
        print(name, {k: out[k] for k in out if k not in ("selected", "uptime")}, flush=True)


def report(args):
    found = {p.stem: json.loads(p.read_text()) for p in sorted(CELLS.glob("*.json"))}
    summary = {"machine": machine(), "sim": SIM, "cells": found, "tables": {}}
    print("cost (breast cancer + 30 noise, 500 rows; CPU s, one thread)")
    for f in ("linear", "mlp"):
        c = found.get(f"cost-{f}")
        if c:
            print(f"  {f:6s} CV path {c['cv_cpu_s']:7.1f}  stability {c['cpu_s']:7.1f}  "
                  f"ratio {c['ratio']:.2f}")  # fmt: skip
    print("breast cancer + 30 noise, 400 rows: real kept / noise kept (bound)")
    for f in ("linear", "linear_d2", "mlp"):
        rows = [found[k] for k in sorted(found) if k.startswith(f"cancer-{f}-")]
        if rows:
            txt = ", ".join(f"{r['real_kept']}/{r['noise_kept']} ({r['bound']:.2f})" for r in rows)
            print(f"  {f:6s} {txt}")
    print("linear truth, n=400, p=100, s=5: mean V (se) vs mean bound; power")
    for f in ("sim-linear", "sim-mlp", "simhard-linear"):
        rows = [found[k] for k in sorted(found) if k.startswith(f"{f}-")]
        if not rows:
            continue
        V = np.array([r["false"] for r in rows], dtype=float)
        bound = np.array([r["bound"] for r in rows])
        power = np.array([r["power"] for r in rows])
        se = V.std(ddof=1) / np.sqrt(len(V)) if len(V) > 1 else float("nan")
        table = {
            "reps": len(rows), "mean_false": V.mean(), "se_false": se,
            "mean_bound": bound.mean(), "mean_power": power.mean(),
            "mean_cpu_s": float(np.mean([r["cpu_s"] for r in rows])),
        }  # fmt: skip
        summary["tables"][f] = table
        cpu = table["mean_cpu_s"]
        print(f"  {f:14s} reps {len(rows):2d}  V {V.mean():.2f} ({se:.2f})  bound "
              f"{bound.mean():.2f}  power {power.mean():.2f}  cpu {cpu:.0f} s")  # fmt: skip
    write_json(summary, "stability_selection.json")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", nargs="+", default=["cost", "cancer", "sim"])
    parser.add_argument("--force", action="store_true", help="recompute cached cells")
    parser.add_argument("--only", nargs="+", help="only these cells (e.g. sim-mlp-4)")
    parser.add_argument("--report", action="store_true", help="only the table of the cache")
    args = parser.parse_args()
    if not args.report:
        run(args)
    report(args)


if __name__ == "__main__":
    main()
