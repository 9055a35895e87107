"""Group-lasso regularization paths: D-Gating against skglm, celer and our FISTA solver.

The simulation of the D-Gating paper (section 5.1.2, appendix C.1): ``n = 200`` training and
2000 test samples, 40 groups of 5 standard-normal features, 7 informative groups, unit
noise (``make_group_regression`` defaults); 30 lams log-spaced from 1e-5 to 15; several
seeds. Per seed and method, in the same process:

* wall time of the whole warm-started path, as a ratio to skglm's path in the same run:
  ``SparseLinearRegressor(D=2, 3, 4).regularization_path`` (dense to sparse, as the
  estimator does it), our ``group_lasso_path`` (FISTA, sparse to dense), and skglm's and
  celer's ``GroupLasso`` estimators refitted with ``warm_start=True`` along decreasing
  lams (how their documentation computes paths with an intercept), all at their default
  tolerances. skglm's one-time numba compilation is excluded by a warm-up fit and reported
  separately; every method gets one untimed warm-up fit;
* objective gap ``(F - F_ref) / F_ref`` at every lam of the group-lasso objective
  ``1/(2n) ||y - Xw - b||^2 + lam sum_j ||w_j||`` against skglm at a tight tolerance
  (1e-10), for D=2, our FISTA path and, for information, skglm and celer at their
  defaults. One lam first checks that skglm, celer and our solvers minimize the same
  objective (same intercept handling, unit group weights);
* test RMSE and number of selected groups along the path, their best values, the best
  test RMSE among lams with at most 10 selected groups, and the best test RMSE among lams
  that select exactly the 7 true groups; the oracle is least squares on the true features.

Usage::

    python benchmarks/linear_path.py [--seeds 3] [--repeats 2] [--before]

``--repeats`` times every path that many times (interleaved) and keeps the fastest, the
usual guard against a busy machine. ``--before`` also times the D=2 path of the first seed
with the linear estimator's pre-block-step training (L-BFGS from the ridge start only,
about 3 minutes).

Prints a table and writes benchmarks/results/linear_path.json and linear_path.png (a
reproduction of the paper's Figure 4, left and middle panels).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from sksparse_nn import SparseLinearRegressor
from sksparse_nn.datasets import make_group_regression
from sksparse_nn.estimators._base import BaseDGated
from sksparse_nn.solvers import group_lasso_path

RESULTS = Path(__file__).resolve().parent / "results"
LAMS = np.geomspace(1e-5, 15.0, 30)
GROUP_SIZE = 5
METHODS = ["skglm", "celer", "fista", "D=2", "D=3", "D=4"]
LABELS = {
    "skglm": "skglm GroupLasso",
    "celer": "celer GroupLasso",
    "fista": "our group_lasso_path (FISTA)",
    "D=2": "SparseLinearRegressor D=2",
    "D=3": "SparseLinearRegressor D=3",
    "D=4": "SparseLinearRegressor D=4",
}
TIGHT_TOL = 1e-10


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def _group_norms(coefs, labels):
    """(n_lams, n_groups) group norms of a stack of coefficient vectors."""
    n_groups = labels.max() + 1
    return np.sqrt(np.stack([np.bincount(labels, weights=c**2, minlength=n_groups) for c in coefs]))


def _objective(X, y, coefs, intercepts, lams, labels):
    """Group-lasso objective 1/(2n)||y - Xw - b||^2 + lam sum_j ||w_j|| at every lam."""
    resid = y[None, :] - coefs @ X.T - np.asarray(intercepts)[:, None]
    return 0.5 * np.mean(resid**2, axis=1) + lams * _group_norms(coefs, labels).sum(axis=1)


# ------------------------------------------------------------------------ the paths
# Each returns (coefs, intercepts) in ascending-lam order (shape (30, p) and (30,)).


def _library_path(cls, X, y, lams, **params):
    """Refit one estimator with warm_start=True along decreasing lams."""
    model = cls(groups=GROUP_SIZE, warm_start=True, **params)
    coefs, intercepts = [], []
    for lam in lams[::-1]:
        model.set_params(alpha=float(lam)).fit(X, y)
        coefs.append(np.array(model.coef_, dtype=float))
        intercepts.append(float(model.intercept_))
    return np.array(coefs[::-1]), np.array(intercepts[::-1])


def skglm_path(X, y, lams, **params):
    from skglm import GroupLasso

    return _library_path(GroupLasso, X, y, lams, **params)


def celer_path(X, y, lams, **params):
    from celer import GroupLasso

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn deprecations
        return _library_path(GroupLasso, X, y, lams, **params)


def fista_path(X, y, lams, labels, **params):
    coefs, intercepts, _, _ = group_lasso_path(
        X, y, lams[::-1], labels, np.ones(labels.max() + 1), **params
    )
    return coefs[::-1], intercepts[::-1]


def gated_path(X, y, lams, labels, D, estimator=SparseLinearRegressor):
    path = estimator(D=D, groups=labels, random_state=0).regularization_path(X, y, lams=lams)
    return path.coefs, path.intercepts


class _BeforeBlockSteps(SparseLinearRegressor):
    """The regressor as trained before block steps: L-BFGS from the ridge start only."""

    _block_steps = False

    def _fit(self, X, y, warm_module=None):  # without the single-thread context either
        return BaseDGated._fit(self, X, y, warm_module=warm_module)


def run_method(name, X, y, lams, labels):
    if name == "skglm":
        return skglm_path(X, y, lams)
    if name == "celer":
        return celer_path(X, y, lams)
    if name == "fista":
        return fista_path(X, y, lams, labels)
    return gated_path(X, y, lams, labels, D=int(name[-1]))


# ------------------------------------------------------------------------ checks


def same_objective_check(data, lam):
    """Fit one lam tightly with every group-lasso solver: same minimizer, same objective.

    If skglm or celer scaled the data term, the intercept or the group weights
    differently, their minimizers of *our* objective would not coincide with ours.
    """
    from skglm.penalties import WeightedGroupL2
    from skglm.utils.data import grp_converter

    X, y, labels = data.X, data.y, data.groups
    lams = np.array([lam])
    sk = skglm_path(X, y, lams, tol=1e-12, max_iter=1000, max_epochs=100_000)
    ce = celer_path(X, y, lams, tol=1e-12, max_iter=1000)
    fi = fista_path(X, y, lams, labels, tol=1e-12, max_iter=500_000)
    gated = SparseLinearRegressor(lam=lam, D=2, groups=labels, random_state=0).fit(X, y)
    ga = (gated.coef_[None], np.array([gated.intercept_]))
    objs = {
        k: float(_objective(X, y, *v, lams, labels)[0])
        for k, v in {"skglm": sk, "celer": ce, "fista": fi, "D=2": ga}.items()
    }
    # skglm's own objective at its solution: its datafit (||y - Xw - b||^2 / (2n), the
    # intercept inside Xw) plus the penalty object its GroupLasso builds (unit weights)
    grp_indices, grp_ptr = grp_converter(GROUP_SIZE, X.shape[1])
    penalty = WeightedGroupL2(lam, np.ones(len(grp_ptr) - 1), grp_ptr, grp_indices)
    resid = y - X @ sk[0][0] - sk[1][0]
    skglm_own = float(resid @ resid / (2 * len(y)) + penalty.value(sk[0][0]))
    ref = objs["fista"]
    return {
        "lam": lam,
        "objective": objs,
        "skglm_own_objective_value": skglm_own,
        "max_rel_objective_difference": max(abs(v - ref) / ref for v in objs.values()),
        "max_coef_difference_vs_fista": {
            k: float(np.max(np.abs(v[0][0] - fi[0][0])))
            for k, v in {"skglm": sk, "celer": ce, "D=2": ga}.items()
        },
        "intercepts": {
            k: float(v[1][0]) for k, v in {"skglm": sk, "celer": ce, "fista": fi, "D=2": ga}.items()
        },
        "n_groups_selected": int(np.sum(_group_norms(fi[0], labels)[0] > 0)),
    }


def oracle_rmse(data):
    cols = data.informative_features
    Xt, Xs = data.X[:, cols], data.X_test[:, cols]
    A = np.column_stack([Xt, np.ones(len(Xt))])
    beta = np.linalg.lstsq(A, data.y, rcond=None)[0]
    pred = Xs @ beta[:-1] + beta[-1]
    return float(np.sqrt(np.mean((pred - data.y_test) ** 2)))


def summarize_path(data, coefs, intercepts, ref_obj):
    labels = data.groups
    norms = _group_norms(coefs, labels)
    n_groups = (norms > 0).sum(axis=1)
    pred = coefs @ data.X_test.T + intercepts[:, None]
    rmse = np.sqrt(np.mean((pred - data.y_test[None, :]) ** 2, axis=1))
    obj = _objective(data.X, data.y, coefs, intercepts, LAMS, labels)
    best = int(np.argmin(rmse))
    true = set(data.informative_groups.tolist())
    exact = [k for k in range(len(LAMS)) if set(np.flatnonzero(norms[k]).tolist()) == true]
    small = n_groups <= 10
    return {
        "test_rmse": rmse.tolist(),
        "n_groups": n_groups.tolist(),
        "objective": obj.tolist(),
        "rel_objective_gap": ((obj - ref_obj) / ref_obj).tolist(),
        "best_rmse": float(rmse[best]),
        "best_lam": float(LAMS[best]),
        "groups_at_best": int(n_groups[best]),
        "best_rmse_with_at_most_10_groups": float(rmse[small].min()) if small.any() else None,
        "groups_at_that": int(n_groups[small][np.argmin(rmse[small])]) if small.any() else None,
        "rmse_at_true_support": float(rmse[exact].min()) if exact else None,
    }


def warm_up():
    """Untimed first fits: skglm's numba compile (timed), and every other method once."""
    from skglm import GroupLasso

    data = make_group_regression(random_state=12345)
    compile_s, _ = _timed(lambda: GroupLasso(groups=GROUP_SIZE, alpha=0.1).fit(data.X, data.y))
    second_s, _ = _timed(lambda: GroupLasso(groups=GROUP_SIZE, alpha=0.1).fit(data.X, data.y))
    lams = np.array([0.01, 0.1, 1.0])
    for name in METHODS:
        if name != "skglm":
            run_method(name, data.X, data.y, lams, data.groups)
    return {
        "first_fit_seconds": compile_s,
        "second_fit_seconds": second_s,
        "compile_seconds": compile_s - second_s,
    }


# ------------------------------------------------------------------------ report


def plot(results, oracle, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {
        "fista": dict(color="black", lw=2.5, label="group lasso (our FISTA)"),
        "skglm": dict(color="tab:gray", ls="--", lw=1.5, label="group lasso (skglm)"),
        "celer": dict(color="tab:olive", ls=":", lw=1.5, label="group lasso (celer)"),
        "D=2": dict(color="tab:blue", marker="o", ms=3, lw=1, label="D-Gating D=2"),
        "D=3": dict(color="tab:orange", marker="s", ms=3, lw=1.5, label="D-Gating D=3"),
        "D=4": dict(color="tab:green", marker="^", ms=3, lw=1.5, label="D-Gating D=4"),
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for key in ("test_rmse", "n_groups"):
        ax = axes[0] if key == "test_rmse" else axes[1]
        for name in ["fista", "skglm", "celer", "D=2", "D=3", "D=4"]:
            vals = np.array([r["paths"][name][key] for r in results], dtype=float)
            mean = vals.mean(axis=0)
            ax.plot(LAMS, mean, **styles[name])
            if name in ("fista", "D=3", "D=4"):
                ax.fill_between(
                    LAMS,
                    vals.min(axis=0),
                    vals.max(axis=0),
                    color=styles[name]["color"],
                    alpha=0.12,
                    lw=0,
                )
        ax.set_xscale("log")
        ax.set_xlabel(r"$\lambda$")
    axes[0].axhline(
        np.mean(oracle), color="tab:red", ls="-.", lw=1, label="oracle (OLS, true features)"
    )
    axes[0].set_ylabel("test RMSE")
    axes[0].set_yscale("log")
    axes[1].axhline(7, color="tab:red", ls="-.", lw=1, label="7 true groups")
    axes[1].set_ylabel("selected groups (of 40)")
    handles, labels = axes[0].get_legend_handles_labels()
    more = axes[1].get_legend_handles_labels()
    fig.legend(
        handles + more[0][-1:],
        labels + more[1][-1:],
        loc="lower center",
        ncol=4,
        fontsize=8,
        frameon=False,
    )
    n = len(results)
    fig.suptitle(
        f"Group-sparse linear regression (n=200, 40 groups of 5, 7 informative): mean and "
        f"min-max over {n} seeds\n(skglm and celer at their default tolerance, which is "
        f"loose at small lam)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _fmt_range(vals, spec):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo:{spec}}" if lo == hi else f"{lo:{spec}}-{hi:{spec}}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", action="store_true")
    args = parser.parse_args()
    load_start = os.getloadavg()
    t_start = time.perf_counter()

    compile_info = warm_up()
    print(
        f"skglm numba compile (first fit minus second): {compile_info['compile_seconds']:.1f} s",
        flush=True,
    )
    check = same_objective_check(make_group_regression(random_state=0), lam=0.1)
    print(
        f"same objective at lam=0.1: max relative difference "
        f"{check['max_rel_objective_difference']:.1e}, max |coef - FISTA| "
        f"{max(check['max_coef_difference_vs_fista'].values()):.1e}",
        flush=True,
    )

    results, oracle = [], []
    for seed in range(args.seeds):
        data = make_group_regression(random_state=seed)
        X, y, labels = data.X, data.y, data.groups
        times = {name: [] for name in METHODS}
        paths = {}
        for _ in range(args.repeats):  # interleaved, keep the fastest
            for name in METHODS:
                seconds, paths[name] = _timed(run_method, name, X, y, LAMS, labels)
                times[name].append(seconds)
        ref_seconds, ref = _timed(
            skglm_path, X, y, LAMS, tol=TIGHT_TOL, max_iter=1000, max_epochs=100_000
        )
        ref_obj = _objective(X, y, *ref, LAMS, labels)
        seconds = {name: min(v) for name, v in times.items()}
        record = {
            "seed": seed,
            "seconds": seconds,
            "all_seconds": times,
            "ratio_to_skglm": {k: v / seconds["skglm"] for k, v in seconds.items()},
            "reference_seconds": ref_seconds,
            "reference_objective": ref_obj.tolist(),
            "paths": {name: summarize_path(data, *paths[name], ref_obj) for name in METHODS},
            "load_average": os.getloadavg(),
        }
        oracle.append(oracle_rmse(data))
        record["oracle_rmse"] = oracle[-1]
        results.append(record)
        print(
            f"seed {seed}: "
            + ", ".join(f"{k} {v:.2f}s" for k, v in seconds.items())
            + f" (tight skglm reference {ref_seconds:.1f}s, load {record['load_average'][0]:.1f})",
            flush=True,
        )

    before = None
    if args.before:
        data = make_group_regression(random_state=0)
        ref = results[0]
        seconds, path = _timed(
            lambda: gated_path(data.X, data.y, LAMS, data.groups, 2, _BeforeBlockSteps)
        )
        summary = summarize_path(data, *path, np.array(ref["reference_objective"]))
        before = {
            "seed": 0,
            "D=2 seconds": seconds,
            "after seconds": ref["seconds"]["D=2"],
            "ratio_to_skglm": seconds / ref["seconds"]["skglm"],
            "max_abs_rel_objective_gap": float(np.max(np.abs(summary["rel_objective_gap"]))),
        }
        print(
            f"before (seed 0, D=2): {seconds:.1f} s vs {ref['seconds']['D=2']:.2f} s now",
            flush=True,
        )

    # ---------------------------------------------------------------- table
    def col(name, fn):
        return [fn(r, name) for r in results]

    header = (
        f"{'method':30s} {'time s':>11s} {'x skglm':>11s} {'max |gap|':>9s} "
        f"{'best RMSE':>11s} {'groups':>7s} {'RMSE<=10g':>11s} {'groups':>7s} "
        f"{'RMSE@true7':>11s}"
    )
    print("\n" + header)
    print("-" * len(header))
    table = {}
    for name in METHODS:
        gaps = col(name, lambda r, n: float(np.max(np.abs(r["paths"][n]["rel_objective_gap"]))))
        row = {
            "seconds": col(name, lambda r, n: r["seconds"][n]),
            "ratio_to_skglm": col(name, lambda r, n: r["ratio_to_skglm"][n]),
            "max_abs_rel_objective_gap": max(gaps),
            "best_rmse": col(name, lambda r, n: r["paths"][n]["best_rmse"]),
            "groups_at_best": col(name, lambda r, n: r["paths"][n]["groups_at_best"]),
            "best_rmse_le10": col(
                name, lambda r, n: r["paths"][n]["best_rmse_with_at_most_10_groups"]
            ),
            "groups_le10": col(name, lambda r, n: r["paths"][n]["groups_at_that"]),
            "rmse_at_true_support": col(name, lambda r, n: r["paths"][n]["rmse_at_true_support"]),
        }
        table[name] = row
        gap = "n/a" if name in ("D=3", "D=4") else f"{row['max_abs_rel_objective_gap']:.1e}"
        print(
            f"{LABELS[name]:30s} {_fmt_range(row['seconds'], '.2f'):>11s} "
            f"{_fmt_range(row['ratio_to_skglm'], '.2f'):>11s} "
            f"{gap:>9s} {_fmt_range(row['best_rmse'], '.3f'):>11s} "
            f"{_fmt_range(row['groups_at_best'], 'd'):>7s} "
            f"{_fmt_range(row['best_rmse_le10'], '.3f'):>11s} "
            f"{_fmt_range(row['groups_le10'], 'd'):>7s} "
            f"{_fmt_range(row['rmse_at_true_support'], '.3f'):>11s}"
        )
    print(
        f"{'oracle (OLS on true features)':30s} {'':>11s} {'':>11s} {'':>9s} "
        f"{_fmt_range(oracle, '.3f'):>11s} {'7':>7s}"
    )
    print(
        f"tight skglm reference (tol {TIGHT_TOL:g}): "
        f"{_fmt_range([r['reference_seconds'] for r in results], '.1f')} s per path"
    )
    print(
        "gap: max over lams and seeds of |F - F_ref| / F_ref of the group-lasso objective "
        "(D=3, 4 minimize other objectives)"
    )

    # ---------------------------------------------------------------- targets
    gl_best = table["fista"]["best_rmse"]
    deep_ok = [
        any(
            (r["paths"][d]["best_rmse_with_at_most_10_groups"] or np.inf) <= gl_best[i]
            for d in ("D=3", "D=4")
        )
        for i, r in enumerate(results)
    ]
    targets = {
        "D=2 objective within 1e-4 of skglm (tight) at every lam": table["D=2"][
            "max_abs_rel_objective_gap"
        ]
        <= 1e-4,
        "FISTA path <= 2x skglm": max(table["fista"]["ratio_to_skglm"]) <= 2.0,
        "D=2 path <= 5x skglm": max(table["D=2"]["ratio_to_skglm"]) <= 5.0,
        "D=3 or 4: best RMSE <= group lasso's best with <= 10 groups (every seed)": all(deep_ok),
    }
    print()
    for k, v in targets.items():
        print(f"[{'met' if v else 'NOT met'}] {k}")

    load_end = os.getloadavg()
    total = time.perf_counter() - t_start
    print(
        f"\nload average (1, 5, 15 min) at start {load_start}, at end {load_end}; "
        f"{os.cpu_count()} CPUs; benchmark took {total:.0f} s"
    )

    RESULTS.mkdir(exist_ok=True)
    plot(results, oracle, RESULTS / "linear_path.png")
    out = {
        "config": {
            "data": "make_group_regression defaults: n=200, n_test=2000, 40 groups of 5, "
            "7 informative",
            "seeds": args.seeds,
            "repeats": args.repeats,
            "lams": LAMS.tolist(),
            "tight_reference": f"skglm GroupLasso tol={TIGHT_TOL}, warm starts",
        },
        "versions": _versions(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average_start": load_start,
            "load_average_end": load_end,
            "platform": platform.platform(),
        },
        "skglm_compile": compile_info,
        "same_objective_check": check,
        "table": table,
        "targets": targets,
        "oracle_rmse": oracle,
        "before_block_steps": before,
        "per_seed": results,
        "total_seconds": total,
    }
    (RESULTS / "linear_path.json").write_text(json.dumps(out, indent=1, default=_jsonable))


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def _versions():
    import importlib.metadata as md

    out = {}
    for pkg in ("torch", "skorch", "scikit-learn", "numpy", "scipy", "skglm", "celer", "numba"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


if __name__ == "__main__":
    main()
