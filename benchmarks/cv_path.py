"""Wall time of cross-validated regularization paths: n_jobs=1 vs n_jobs=2, and LassoNet.

5-fold CV along a 30-lam path for SparseLinearRegressor (the paper's group simulation) and
DGatedMLPClassifier (scikit-learn's digits, standardized), each with n_jobs=1 and n_jobs=2
in the same run; LassoNet's own CV class (its own path; the number of its lambdas is
reported) on the same digits data with the same epochs per path point, when ``lassonet``
is installed (``make bench``).

Usage::

    python benchmarks/cv_path.py [--quick] [--out FILE]

Prints a table and writes benchmarks/results/cv_path.json.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import add_out_argument, machine, standardized_digits, timed, write_json

from sksparse_nn import DGatedMLPClassifier, SparseLinearRegressor
from sksparse_nn.datasets import make_group_regression


def linear_case(n_lams):
    data = make_group_regression(random_state=0)
    est = SparseLinearRegressor(D=3, groups=data.groups, random_state=0)
    lams = np.geomspace(1e-3, 3.0, n_lams)
    return "SparseLinearRegressor D=3 (group simulation)", est, data.X, data.y, lams


def mlp_case(n_lams, epochs):
    X, y = standardized_digits()
    est = DGatedMLPClassifier(D=3, hidden_layer_sizes=(100,), max_epochs=epochs, random_state=0)
    return "DGatedMLPClassifier D=3 (digits)", est, X, y, np.geomspace(1e-3, 0.3, n_lams)


def lassonet_cv(X, y, epochs):
    """LassoNet's own CV class (its default path, hidden (100,), same epochs per point)."""
    try:
        from lassonet import LassoNetClassifierCV
    except ImportError:
        return None
    model = LassoNetClassifierCV(
        hidden_dims=(100,), cv=5, n_iters=(epochs, epochs), random_state=0, verbose=0
    )
    seconds = timed(model.fit, X, y).wall
    return {"seconds": seconds, "n_lambdas": len(model.lambdas_)}


def run(args):
    n_lams = 10 if args.quick else 30
    epochs = 5 if args.quick else 20
    rows = []
    for name, est, X, y, lams in (linear_case(n_lams), mlp_case(n_lams, epochs)):
        times = {}
        for n_jobs in (1, 2):
            t = timed(est.regularization_path, X, y, lams=lams, cv=5, n_jobs=n_jobs)
            times[n_jobs], path = t.wall, t.value
        rows.append(
            {
                "case": name,
                "n_lams": len(lams),
                "seconds_n_jobs_1": times[1],
                "seconds_n_jobs_2": times[2],
                "speedup": times[1] / times[2],
                "best_lam": path.best_lam_,
                "lam_1se": path.lam_1se_,
                "n_selected_1se": int(path.n_selected[path.index_of(path.lam_1se_)]),
            }
        )
        print(rows[-1], flush=True)
    lassonet = lassonet_cv(*standardized_digits(), epochs)
    lassonet_seconds = lassonet["seconds"] if lassonet else None
    mlp = rows[-1]
    info = machine(peers=("lassonet",))
    return {
        "rows": rows,
        "lassonet_cv": lassonet,
        "ratio_lassonet_over_ours_n_jobs_2": (
            lassonet_seconds / mlp["seconds_n_jobs_2"] if lassonet_seconds else None
        ),
        "cpu_count": info["cpu_count"],
        "load_average": info["load_average"],
        "machine": info,
    }


def report(results, out):
    rows, lassonet = results["rows"], results["lassonet_cv"]
    print(f"\n{'case':48s} {'n_jobs=1':>9s} {'n_jobs=2':>9s} {'speed-up':>8s}")
    for r in rows:
        print(
            f"{r['case']:48s} {r['seconds_n_jobs_1']:9.1f} {r['seconds_n_jobs_2']:9.1f} "
            f"{r['speedup']:8.2f}"
        )
    if lassonet:
        print(
            f"LassoNetClassifierCV (digits, {lassonet['n_lambdas']} lambdas): "
            f"{lassonet['seconds']:.1f} s, "
            f"{results['ratio_lassonet_over_ours_n_jobs_2']:.1f}x our n_jobs=2 time"
        )
    print(f"wrote {write_json(results, out, indent=2)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10 lams, few epochs")
    add_out_argument(parser, "cv_path.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
