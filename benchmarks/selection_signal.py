"""How many units of breast cancer carry a signal given the others (issue 44): the
knockoff filter tests, per unit, whether ``y`` depends on it *given all other columns*;
at ``fdr=0.1`` knockoff+ (and e-BH over draws) selects nothing or at least ten units, so
fewer than ten units with a conditional signal leave a selection to luck.

For each draw of rows of ``selection_error.py``'s breast-cancer table (400 rows; the 30
appended noise columns are independent of everything and left out), a logistic model of
``y`` on the 30 standardized measurements (a ridge of 1e-3 on the coefficients keeps the
fit finite where the classes nearly separate) and, for every unit, the likelihood-ratio
test of dropping it (chi-square with as many degrees of freedom as the unit has
columns). Units: the clusters of ``correlation_clusters`` at 0.7 (the filters' default)
and single columns. Prints the number of units below p = 0.05 / 0.01 / 0.001 and writes
``benchmarks/results/selection_signal.json``.

Usage::

    python benchmarks/selection_signal.py
"""

from __future__ import annotations

import os

from _common import RESULTS, THREAD_ENV, single_thread, write_json

os.environ.update(THREAD_ENV)

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

RIDGE = 1e-3


def logistic_nll(X, y):
    """Minimal negative log-likelihood (+ ridge) of a logistic model with intercept."""
    design = np.hstack([np.ones((len(X), 1)), X])

    def objective(b):
        z = design @ b
        value = np.sum(np.logaddexp(0, z) - y * z) + RIDGE * np.sum(b[1:] ** 2)
        grad = design.T @ (1 / (1 + np.exp(-z)) - y)
        grad[1:] += 2 * RIDGE * b[1:]
        return value, grad

    start = np.zeros(design.shape[1])
    fit = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    return float(fit.fun)


def drop_unit_pvalues(X, y, units):
    """p-value of the likelihood-ratio test of dropping each unit, in order of units."""
    full = logistic_nll(X, y)
    out = []
    for u in np.unique(units):
        keep = units != u
        deviance = 2 * (logistic_nll(X[:, keep], y) - full)
        out.append(float(stats.chi2.sf(max(deviance, 0.0), int((~keep).sum()))))
    return out


def main():
    single_thread()
    from selection_error import load_real

    from sksparse_nn.selection import correlation_clusters, estimate_correlation

    summary = {"ridge": RIDGE, "draws": []}
    for seed in range(3):
        X, y, _, n_real = load_real("breast_cancer", seed)
        clusters = correlation_clusters(estimate_correlation(X)[2], 0.7)[:n_real]
        entry = {"seed": seed}
        for name, units in (("clusters", clusters), ("columns", np.arange(n_real))):
            p = drop_unit_pvalues(X[:, :n_real], y, units)
            counts = {str(a): int(np.sum(np.asarray(p) < a)) for a in (0.05, 0.01, 0.001)}
            entry[name] = {"n_units": len(p), "below": counts, "pvalues": sorted(p)}
            print(f"seed {seed} {name:8s} units {len(p):2d}  p < 0.05 / 0.01 / 0.001: "
                  f"{counts['0.05']} / {counts['0.01']} / {counts['0.001']}")  # fmt: skip
        summary["draws"].append(entry)
    write_json(summary, RESULTS / "selection_signal.json")


if __name__ == "__main__":
    main()
