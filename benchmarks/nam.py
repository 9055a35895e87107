"""Sparse neural additive models: D-Gating vs SNAM, EBM and the lasso (paper Appendix E.6).

Protocol (E.6 of *Structured Sparsity via D-Gating*): ``make_additive_regression`` with
n = 1000, 5 informative features (sin, cos, x^2, -x, -|x|) and 15 noise features, all
N(0, 1), noise sd 1; 5-fold CV. Methods:

* ``DGatedNAMRegressor`` for D in {2, 3, 4} over a lam grid;
* SNAM: the same NAM, same optimizer and schedule, but the group lasso
  ``lam * sum_j ||theta_j||`` added to the loss directly and trained by its subgradient
  (no gating); groups with norm < 1e-3 are pruned afterwards as in the paper;
* interpret's ``ExplainableBoostingRegressor`` with main effects only (interactions=0);
* scikit-learn's ``LassoCV`` (linear reference).

lam is chosen per method by the one-standard-error rule over the CV grid (the largest
lam whose mean CV RMSE is within one standard error of the best). Our loss is
``1/(2n) ||y - f||^2 + lam * sum_j ||theta_j||^(2/D)`` (scikit-learn's Lasso convention,
half the MSE) with ``theta_j`` the first layer of a subnetwork initialized at norm ~0.8,
so lam is not on the paper's scale: their grid 1e-2..1e1 would remove every feature from
about lam = 0.3 on. The grid used here, 0.01 * 2**k for k = 0..4 (0.01..0.16), spans
"noise features kept" to "true features shrunk" (5 points instead of a finer grid, to fit
the time budget).

Also: the time of one training epoch of the vectorized NAM for p = 100 features against
the same model written as a Python loop over per-feature subnetworks.

Run: ``python benchmarks/nam.py`` (about 10-25 minutes on 2 shared cores); ``--quick`` for a
smoke run; ``--out-dir DIR`` writes elsewhere. Writes ``benchmarks/results/nam.json``,
``nam_fits.json`` (every CV fit, reused by ``--reuse``) and ``nam_*.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _common import RESULTS, machine, pyplot, single_thread, timed, write_json
from joblib import Parallel, delayed
from sklearn.linear_model import LassoCV
from sklearn.model_selection import KFold

from sksparse_nn.datasets import make_additive_regression
from sksparse_nn.estimators.nam import DGatedNAMRegressor
from sksparse_nn.gating import dgate
from sksparse_nn.groups import AxisGroups
from sksparse_nn.nn.nam import NAM
from sksparse_nn.training import PenalizedNet

TRUE = np.arange(5)
PRUNE_TOL = 1e-3  # the paper's post-hoc threshold for SNAM
# CV fits use the estimator's defaults (2000 SGD steps of batch 64, lr 0.05, one hidden layer
# of 64 per feature); put overrides here.
NAM_CV = {}


# --------------------------------------------------------------------- SNAM
class _GroupLassoNet(PenalizedNet):
    """Loss + lam * sum_j ||theta_j||_2 on the NAM's first-layer groups, no gating."""

    def get_loss(self, y_pred, y_true, X=None, training=False):
        loss = self.criterion_(y_pred, y_true)
        if training and self.lam:
            first = self.module_.first
            loss = loss + self.lam * first.pow(2).sum(dim=(1, 2)).clamp_min(1e-30).sqrt().sum()
        return loss


class SNAMRegressor(DGatedNAMRegressor):
    """Sparse NAM of Xu et al. (2023): direct group-lasso subgradient training."""

    _traits = replace(DGatedNAMRegressor._traits, net_class=_GroupLassoNet)

    def _gate_module(self, module, init):  # the family hook: here, no gates
        with torch.no_grad():  # same warm-start bookkeeping as the gated model
            module.intercept.sub_(module.centers.sum(dim=0))
            module.centers.zero_()


def _group_norms(est):
    first = est.module_.first.detach().double()
    return first.pow(2).sum(dim=(1, 2)).sqrt().numpy()


# -------------------------------------------------------------- one CV cell
def _run(method, params, fold, X, y, train, test):
    torch.set_num_threads(1)
    Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
    t0 = time.perf_counter()
    extra = {}
    if method in ("dgate", "snam"):
        cls = DGatedNAMRegressor if method == "dgate" else SNAMRegressor
        est = cls(random_state=fold, **params).fit(Xtr, ytr)
        fit_time = time.perf_counter() - t0
        pred = est.predict(Xte)
        selected = est.selected_features_
        extra["n_epochs"] = int(est.n_iter_)
        extra["sparsity_gap"] = list(est.sparsity_gap_)
        if method == "snam":
            norms = _group_norms(est)
            extra["group_norms"] = norms.tolist()
            extra["n_exact_nonzero"] = int(np.count_nonzero(norms))
            pruned = np.flatnonzero(norms < PRUNE_TOL)
            # post-hoc pruning: drop the pruned features' (centred) contributions
            pred_pruned = pred - est.contributions(Xte)[:, pruned].sum(axis=1)
            extra["rmse_unpruned"] = float(np.sqrt(np.mean((pred - yte) ** 2)))
            pred, selected = pred_pruned, np.flatnonzero(norms >= PRUNE_TOL)
    elif method == "ebm":
        from interpret.glassbox import ExplainableBoostingRegressor

        est = ExplainableBoostingRegressor(random_state=fold, n_jobs=1, **params).fit(Xtr, ytr)
        fit_time = time.perf_counter() - t0
        pred = est.predict(Xte)
        importances = np.asarray(est.term_importances())
        mains = [i for i, t in enumerate(est.term_features_) if len(t) == 1]
        selected = np.array(
            sorted(est.term_features_[i][0] for i in mains if importances[i] > 0), dtype=int
        )
        extra["n_terms"] = len(est.term_features_)
    elif method == "lasso":
        est = LassoCV(cv=5, random_state=fold).fit(Xtr, ytr)
        fit_time = time.perf_counter() - t0
        pred = est.predict(Xte)
        selected = np.flatnonzero(est.coef_)
        extra["alpha"] = float(est.alpha_)
    else:
        raise ValueError(method)
    selected = np.asarray(selected, dtype=int)
    return {
        "method": method,
        "params": params,
        "fold": fold,
        "rmse": float(np.sqrt(np.mean((pred - yte) ** 2))),
        "selected": selected.tolist(),
        "n_selected": int(selected.size),
        "true_kept": int(np.isin(TRUE, selected).sum()),
        "noise_dropped": int(X.shape[1] - TRUE.size - np.setdiff1d(selected, TRUE).size),
        "exact_true": bool(np.array_equal(np.sort(selected), TRUE)),
        "fit_time": fit_time,
        **extra,
    }


# ----------------------------------------------------------- the 1-SE rule
def one_se_rule(lams, rmse):
    """Largest lam whose mean CV RMSE is within one SE of the best mean (rmse: folds x lams)."""
    mean = rmse.mean(axis=0)
    se = rmse.std(axis=0, ddof=1) / np.sqrt(rmse.shape[0])
    mean = np.where(np.isfinite(mean), mean, np.inf)  # a diverged fold disqualifies a lam
    best = int(np.argmin(mean))
    within = np.flatnonzero(mean <= mean[best] + se[best])
    within = within[within >= best]
    return best, int(within.max()), mean, se


def _summary(rows):
    rmse = np.array([r["rmse"] for r in rows])
    k = len(rows)
    return {
        "cv_rmse": float(rmse.mean()),
        "cv_rmse_se": float(rmse.std(ddof=1) / np.sqrt(k)) if k > 1 else float("nan"),
        "n_selected": float(np.mean([r["n_selected"] for r in rows])),
        "true_kept": float(np.mean([r["true_kept"] for r in rows])),
        "noise_dropped": float(np.mean([r["noise_dropped"] for r in rows])),
        "folds_exactly_true": int(sum(r["exact_true"] for r in rows)),
        "n_diverged": int(sum(not np.isfinite(r["rmse"]) for r in rows)),
        "fit_time": float(np.mean([r["fit_time"] for r in rows])),
        "n_folds": k,
    }


# ------------------------------------------------------- epoch-time timing
class LoopNAM(torch.nn.Module):
    """The same additive model as a Python loop over per-feature subnetworks."""

    def __init__(self, p, h):
        super().__init__()
        self.nets = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.Linear(1, h), torch.nn.ReLU(), torch.nn.Linear(h, 1, bias=False)
            )
            for _ in range(p)
        )
        self.intercept = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        out = self.intercept
        for j, net in enumerate(self.nets):
            out = out + net(x[:, j : j + 1])
        return out


def _epoch_time(module, X, y, batch_size, repeats, gated=False):
    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    n = X.shape[0]

    def epoch():
        for start in range(0, n, batch_size):
            xb, yb = X[start : start + batch_size], y[start : start + batch_size]
            opt.zero_grad()
            loss = 0.5 * (module(xb) - yb).pow(2).mean()
            if gated:
                from sksparse_nn.gating import penalty

                loss = loss + 1e-3 * penalty(module)
            loss.backward()
            opt.step()

    return float(np.median(timed(epoch, repeats=repeats, warmup=1).walls))


def epoch_timing(p=100, n=1000, h=64, batch_sizes=(32, 64, 256), repeats=5):
    """Median epoch time (forward, backward, SGD step) of the same model three ways."""
    torch.manual_seed(0)
    single_thread()
    X = torch.randn(n, p)
    y = torch.randn(n, 1)
    out = {"p": p, "n": n, "hidden": h, "threads": 1, "by_batch_size": {}}
    for bs in batch_sizes:
        vec = NAM(p, (h,))
        gated = NAM(p, (h,))
        dgate(gated, "first", groups=AxisGroups(0), D=3)
        loop = LoopNAM(p, h)
        row = {
            "vectorized_s": _epoch_time(vec, X, y, bs, repeats),
            "vectorized_dgated_s": _epoch_time(gated, X, y, bs, repeats, gated=True),
            "loop_s": _epoch_time(loop, X, y, bs, repeats),
        }
        row["speedup"] = row["loop_s"] / row["vectorized_s"]
        row["speedup_dgated"] = row["loop_s"] / row["vectorized_dgated_s"]
        out["by_batch_size"][str(bs)] = row
    return out


# ------------------------------------------------------------------ plots
def _plots(out_dir, summary, lams, X, final, data):
    plt = pyplot()
    from sksparse_nn.plotting import plot_shape_functions

    # 1. CV RMSE and number of selected features along lam
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, s in summary["paths"].items():
        a1.errorbar(lams, s["mean"], yerr=s["se"], marker="o", ms=3, capsize=2, label=key)
        a2.plot(lams, s["n_selected"], marker="o", ms=3, label=key)
    for key, color in (("EBM (interactions=0)", "0.3"), ("LassoCV", "0.6")):
        if key in summary["methods"]:
            rmse = summary["methods"][key]["cv_rmse"]
            a1.axhline(rmse, ls="--", lw=1, label=key, color=color)
    a1.set(xscale="log", xlabel="lam", ylabel="CV RMSE", title="5-fold CV RMSE (mean ± SE)")
    a2.axhline(5, color="0.6", ls=":")
    a2.set(xscale="log", xlabel="lam", ylabel="selected features", title="Sparsity")
    a1.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out_dir / "nam_cv_path.png", dpi=110)
    plt.close(fig)

    # 2. selection frequency per feature at the 1-SE lam, per method
    methods = list(summary["methods"])
    freq = np.zeros((len(methods), X.shape[1]))
    for i, m in enumerate(methods):
        rows = summary["methods"][m]["rows"]
        for r in rows:
            freq[i, r["selected"]] += 1.0 / len(rows)
    fig, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(methods)))
    ax.imshow(freq, aspect="auto", cmap="Greys", vmin=0, vmax=1)
    ax.set_yticks(range(len(methods)), methods)
    ax.set_xticks(range(X.shape[1]), [f"x{j + 1}" for j in range(X.shape[1])], fontsize=7)
    ax.axvline(4.5, color="tab:red", lw=1)
    ax.set_title("Selection frequency over folds (left of the red line: the 5 true features)")
    fig.tight_layout()
    fig.savefig(out_dir / "nam_selection.png", dpi=110)
    plt.close(fig)

    # 3. learned shape functions of the final model vs the truth
    if final is not None:
        axes = plot_shape_functions(final, X, features=np.arange(6))
        for ax, j in zip(axes, range(6), strict=True):
            if j < 5:
                grid = np.linspace(X[:, j].min(), X[:, j].max(), 200)
                truth = data.shape_functions[j](grid)
                truth = truth - data.shape_functions[j](X[:, j]).mean()  # same centring
                ax.plot(grid, truth, "--", color="tab:red", lw=1, label="truth")
                ax.legend(fontsize="x-small")
        axes[0].figure.savefig(out_dir / "nam_shape_functions.png", dpi=110)
        plt.close("all")


# ------------------------------------------------------------------- run
def cv_tasks(X, n_folds, lams, Ds, ebm_default):
    """(method, params, fold, train, test) of every CV fit, methods mixed over the pool."""
    tasks = []
    for fold, (tr, te) in enumerate(KFold(n_folds, shuffle=True, random_state=0).split(X)):
        for lam in lams:
            for D in Ds:
                tasks.append(("dgate", {"lam": float(lam), "D": D, **NAM_CV}, fold, tr, te))
            tasks.append(("snam", {"lam": float(lam), **NAM_CV}, fold, tr, te))
        tasks.append(("ebm", {"interactions": 0}, fold, tr, te))
        tasks.append(("lasso", {}, fold, tr, te))
        if ebm_default:
            tasks.append(("ebm", {}, fold, tr, te))
    order = np.random.RandomState(0).permutation(len(tasks))
    return [tasks[i] for i in order]


def select(results, Ds):
    """Per method: the CV curve along lam and the 1-SE (and best) lam's fits."""
    summary = {"paths": {}, "methods": {}}
    grid_methods = [(f"D-Gating D={D}", "dgate", {"D": D}) for D in Ds]
    grid_methods.append(("SNAM (group lasso subgradient)", "snam", {}))
    for label, method, fixed in grid_methods:
        cells = {}
        for r in results:
            if r["method"] == method and all(r["params"].get(k) == v for k, v in fixed.items()):
                cells.setdefault(r["params"]["lam"], []).append(r)
        cell_lams = sorted(cells)
        rmse = np.array([[r["rmse"] for r in sorted(cells[lam], key=lambda r: r["fold"])]
                         for lam in cell_lams]).T  # fmt: skip
        best, pick, mean, se = one_se_rule(np.array(cell_lams), rmse)
        summary["paths"][label] = {
            "lams": cell_lams,
            "mean": mean.tolist(),
            "se": se.tolist(),
            "n_selected": [
                float(np.mean([r["n_selected"] for r in cells[lam]])) for lam in cell_lams
            ],  # fmt: skip
            "folds_exactly_true": [
                int(sum(r["exact_true"] for r in cells[lam])) for lam in cell_lams
            ],  # fmt: skip
        }
        for tag, idx in (("1se", pick), ("best", best)):
            rows = cells[cell_lams[idx]]
            summary["methods"][f"{label} [{tag}]"] = {
                "lam": cell_lams[idx],
                **_summary(rows),
                "rows": rows,
            }
    for label, method, params in (
        ("EBM (interactions=0)", "ebm", {"interactions": 0}),
        ("EBM (default)", "ebm", {}),
        ("LassoCV", "lasso", {}),
    ):
        rows = [r for r in results if r["method"] == method and r["params"] == params]
        if rows:
            summary["methods"][label] = {**_summary(rows), "rows": rows}
    return summary


def run(args):
    """CV fits (or the saved ones), 1-SE selection, epoch timing, final fit, targets."""
    out_dir = Path(args.out_dir)
    t_start = time.perf_counter()
    data = make_additive_regression(
        n_samples=1000, n_noise=15, noise=1.0, feature_distribution="normal",
        random_state=0, return_info=True,
    )  # fmt: skip
    X, y = data.X, data.y
    n_folds = 2 if args.quick else 5
    lams = np.array([0.01, 0.04, 0.16]) if args.quick else 0.01 * 2.0 ** np.arange(5)
    Ds = (2, 3, 4)
    tasks = cv_tasks(X, n_folds, lams, Ds, args.ebm_default)
    if args.reuse:
        out = json.loads((out_dir / "nam_fits.json").read_text())
    else:
        print(f"{len(tasks)} fits on {args.n_jobs} workers ...", flush=True)
        out = Parallel(n_jobs=args.n_jobs, verbose=5)(
            delayed(_run)(m, p, f, X, y, tr, te) for m, p, f, tr, te in tasks
        )
    results = sorted(out, key=lambda r: (r["method"], json.dumps(r["params"]), r["fold"]))
    write_json(results, out_dir / "nam_fits.json", indent=None)  # checkpoint, see --reuse
    summary = select(results, Ds)

    # ---- epoch time, vectorized vs loop
    timing = epoch_timing(p=100, repeats=3 if args.quick else 5)

    # ---- final D=3 fit at its 1-SE lam on all data with the estimator's defaults, timed
    # against EBM on the same data, for the shape-function plot
    single_thread()
    lam3 = summary["methods"]["D-Gating D=3 [1se]"]["lam"]
    fitted = timed(DGatedNAMRegressor(lam=lam3, D=3, random_state=0).fit, X, y)
    final, final_time = fitted.value, fitted.wall
    from interpret.glassbox import ExplainableBoostingRegressor

    ebm = ExplainableBoostingRegressor(interactions=0, random_state=0, n_jobs=1)
    ebm_full_time = timed(ebm.fit, X, y).wall

    # ---- targets
    ebm = summary["methods"]["EBM (interactions=0)"]
    targets = {}
    for D in (3, 4):
        s = summary["methods"][f"D-Gating D={D} [1se]"]
        targets[f"D={D}"] = {
            "exactly_5_true_in_>=4_folds": s["folds_exactly_true"] >= 4,
            "cv_rmse_<=_1.10": s["cv_rmse"] <= 1.10,
            "cv_rmse_<=_ebm": s["cv_rmse"] <= ebm["cv_rmse"],
            "fit_time_<=_2x_ebm": s["fit_time"] <= 2 * ebm["fit_time"],
            "epoch_speedup_>=_5x_batch32": timing["by_batch_size"]["32"]["speedup"] >= 5,
            "epoch_speedup_>=_5x_batch64_default": timing["by_batch_size"]["64"]["speedup"] >= 5,
            "epoch_speedup_>=_5x_batch256": timing["by_batch_size"]["256"]["speedup"] >= 5,
            "default_fit_time_<=_2x_ebm_full_data": final_time <= 2 * ebm_full_time,
        }
    return {
        "protocol": {
            "data": "make_additive_regression(n_samples=1000, n_noise=15, noise=1, "
            "feature_distribution='normal', random_state=0)",
            "cv": f"KFold({n_folds}, shuffle=True, random_state=0)",
            "lams": lams.tolist(),
            "Ds": list(Ds),
            "nam_cv_overrides": NAM_CV,
            "nam_defaults": {
                k: v
                for k, v in DGatedNAMRegressor().get_params().items()
                if k in ("hidden_layer_sizes", "lr", "batch_size", "optimizer", "max_epochs")
            },
            "snam_prune_tol": PRUNE_TOL,
            "selection": "one-standard-error rule on CV RMSE",
        },
        "summary": summary["methods"],  # with each method's rows; saved without them
        "paths": summary["paths"],
        "epoch_timing": timing,
        "targets": targets,
        "final_D3": {
            "lam": lam3,
            "fit_time_defaults": final_time,
            "ebm_fit_time_full_data": ebm_full_time,
            "selected": final.selected_features_.tolist(),
            "sparsity_gap": list(final.sparsity_gap_),
        },
        "fits": results,
        "machine": {**machine(peers=("interpret-core",)), "n_jobs": args.n_jobs},
        "total_seconds": time.perf_counter() - t_start,
        "_plot": (lams, X, final, data),  # for the figures, not saved
    }


# ------------------------------------------------------------------- report
def report(results, out_dir):
    """Print the tables, draw the figures, write nam.json."""
    lams, X, final, data = results.pop("_plot")
    methods = results["summary"]
    print("\nE.6 additive problem: n=1000, 5 true + 15 noise features, 5-fold CV", flush=True)
    header = (
        f"{'method':42s} {'lam':>7s} {'CV RMSE':>15s} {'#sel':>5s} {'true':>5s} "
        f"{'noise':>6s} {'exact5':>6s} {'fit s':>6s}"
    )
    print(header)
    print("-" * len(header))
    for label, s in methods.items():
        lam = f"{s['lam']:.3g}" if "lam" in s else "-"
        print(
            f"{label:42s} {lam:>7s} {s['cv_rmse']:7.3f} ± {s['cv_rmse_se']:5.3f} "
            f"{s['n_selected']:5.1f} {s['true_kept']:5.1f} {s['noise_dropped']:6.1f} "
            f"{s['folds_exactly_true']:>4d}/{s['n_folds']} {s['fit_time']:6.1f}"
        )
    print("(true: of 5 true features kept; noise: of 15 noise features dropped; exact5: folds")
    print(" selecting exactly the 5 true features; SNAM pruned at group norm < 1e-3)")
    print("\nper-lam CV RMSE / folds with exactly the true features:")
    for label, s in results["paths"].items():
        cells = "  ".join(
            f"{lam:.3g}:{m:.3f}/{k}"
            for lam, m, k in zip(s["lams"], s["mean"], s["folds_exactly_true"], strict=True)
        )
        print(f"  {label:32s} {cells}")
    print("\nepoch time, p=100 features, n=1000, h=64, 1 thread (forward + backward + SGD step):")
    for bs, row in results["epoch_timing"]["by_batch_size"].items():
        print(
            f"  batch {bs:>3s}: vectorized {row['vectorized_s']:.3f}s (D-gated "
            f"{row['vectorized_dgated_s']:.3f}s), loop over features {row['loop_s']:.3f}s "
            f"-> {row['speedup']:.1f}x ({row['speedup_dgated']:.1f}x gated)"
        )
    f3 = results["final_D3"]
    print(
        f"\nall 1000 samples, defaults: D=3 NAM at lam={f3['lam']:.3g} fit "
        f"{f3['fit_time_defaults']:.1f}s (selected {f3['selected']}, gap "
        f"{f3['sparsity_gap'][0]:.1e}); EBM(interactions=0) {f3['ebm_fit_time_full_data']:.1f}s"
    )
    print("\ntargets:", json.dumps(results["targets"], indent=1))
    _plots(out_dir, {"paths": results["paths"], "methods": methods}, lams, X, final, data)
    results["summary"] = {
        k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in methods.items()
    }
    path = write_json(results, out_dir / "nam.json")
    print(f"\nwrote {path} and nam_*.png in {results['total_seconds']:.0f}s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 folds, 3 lams: a smoke run")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--ebm-default", action="store_true", help="also EBM with interactions")
    parser.add_argument(
        "--reuse", action="store_true", help="summarize <out-dir>/nam_fits.json, no CV fits"
    )
    parser.add_argument("--out-dir", default=str(RESULTS), help="where the JSON and plots go")
    args = parser.parse_args()
    report(run(args), Path(args.out_dir))


if __name__ == "__main__":
    main()
