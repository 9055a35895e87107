"""Wall time of cross-validated regularization paths: n_jobs=1 vs n_jobs=2, and LassoNet.

5-fold CV along a 30-lam path for SparseLinearRegressor (the paper's group simulation) and
DGatedMLPClassifier (scikit-learn's digits, standardized), each with n_jobs=1 and n_jobs=2
in the same run; LassoNet's own CV class (its own path; the number of its lambdas is
reported) on the same digits data with the same epochs per path point, when ``lassonet``
is installed (``make bench``).

Usage::

    python benchmarks/cv_path.py [--quick]

Prints a table and writes benchmarks/results/cv_path.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from sksparse_nn import DGatedMLPClassifier, SparseLinearRegressor
from sksparse_nn.datasets import make_group_regression

RESULTS = Path(__file__).resolve().parent / "results"


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def linear_case(n_lams):
    data = make_group_regression(random_state=0)
    est = SparseLinearRegressor(D=3, groups=data.groups, random_state=0)
    lams = np.geomspace(1e-3, 3.0, n_lams)
    return "SparseLinearRegressor D=3 (group simulation)", est, data.X, data.y, lams


def mlp_case(n_lams, epochs):
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
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
    seconds, _ = _timed(lambda: model.fit(X, y))
    return {"seconds": seconds, "n_lambdas": len(model.lambdas_)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10 lams, few epochs")
    args = parser.parse_args()
    n_lams = 10 if args.quick else 30
    epochs = 5 if args.quick else 20
    rows = []
    for name, est, X, y, lams in (linear_case(n_lams), mlp_case(n_lams, epochs)):
        times = {}
        for n_jobs in (1, 2):
            start = time.perf_counter()
            path = est.regularization_path(X, y, lams=lams, cv=5, n_jobs=n_jobs)
            times[n_jobs] = time.perf_counter() - start
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
    X, y = load_digits(return_X_y=True)
    lassonet = lassonet_cv(StandardScaler().fit_transform(X), y, epochs)
    lassonet_seconds = lassonet["seconds"] if lassonet else None
    mlp = rows[-1]
    summary = {
        "rows": rows,
        "lassonet_cv": lassonet,
        "ratio_lassonet_over_ours_n_jobs_2": (
            lassonet_seconds / mlp["seconds_n_jobs_2"] if lassonet_seconds else None
        ),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    print(f"\n{'case':48s} {'n_jobs=1':>9s} {'n_jobs=2':>9s} {'speed-up':>8s}")
    for r in rows:
        print(
            f"{r['case']:48s} {r['seconds_n_jobs_1']:9.1f} {r['seconds_n_jobs_2']:9.1f} "
            f"{r['speedup']:8.2f}"
        )
    if lassonet_seconds:
        print(
            f"LassoNetClassifierCV (digits, {lassonet['n_lambdas']} lambdas): "
            f"{lassonet_seconds:.1f} s, "
            f"{summary['ratio_lassonet_over_ours_n_jobs_2']:.1f}x our n_jobs=2 time"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cv_path.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
