"""Does the 1-SE choice of a default SparsePathCV keep the true features, with exact zeros?

Additive problems with known support (issue 13, item 3): ``y = sum_j f_j(x_j) + noise``
with 4-6 true features among 20-40, each ``f_j`` drawn from a small library of shapes
(sine, cosine, square, absolute value, step, linear, exponential bump), features uniform
on [-2.5, 2.5], noise sd 0.5 or 1; one of them is the paper's additive simulation
(``make_additive_regression``). On each: ``SparsePathCV(DGatedNAMRegressor(D=3))`` and
``SparsePathCV(DGatedMLPRegressor(D=3))`` with DEFAULT parameters (only ``random_state``),
one torch thread. Recorded: wall time, true features kept, noise features kept, the
sparsity gap of the chosen full-data model (largest group norm set to zero, smallest
selected one: a clean gap has orders of magnitude between them) and the test RMSE in
units of the noise sd (1.0 = the Bayes error), next to LassoCV's selection.

Usage::

    python benchmarks/cv_additive.py [--quick] [--out FILE]

Prints a table and writes ``benchmarks/results/cv_additive.json`` and ``cv_additive.png``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import add_out_argument, machine, pyplot, single_thread, timed, write_json

SHAPES = {
    "sin": lambda x: np.sin(1.5 * x),
    "cos": lambda x: np.cos(x),
    "square": lambda x: 0.5 * x**2,
    "abs": lambda x: -np.abs(x),
    "step": lambda x: np.where(x > 0.5, 1.0, -1.0),
    "linear": lambda x: 0.7 * x,
    "bump": lambda x: 2.0 * np.exp(-(x**2)),
}


def make_problem(n_true, n_features, noise, seed, n_samples=1200):
    """X uniform on [-2.5, 2.5], ``n_true`` random shapes on the first columns."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2.5, 2.5, size=(n_samples, n_features))
    names = rng.choice(list(SHAPES), size=n_true, replace=False)
    signal = sum(
        SHAPES[name](X[:, j]) - SHAPES[name](X[:, j]).mean() for j, name in enumerate(names)
    )
    y = signal + noise * rng.randn(n_samples)
    return X, y, list(names)


def problems(quick):
    from sksparse_nn.datasets import make_additive_regression

    X, y = make_additive_regression(n_samples=1200, n_noise=25, noise=1.0, random_state=0)
    cases = [("paper E.6 (5 of 30, sd 1)", X, y, ["sin", "cos", "square", "-x", "-abs"], 1.0)]
    if quick:
        return cases
    for n_true, p, noise, seed in [(4, 20, 0.5, 1), (6, 40, 1.0, 2), (5, 30, 0.5, 3)]:
        X, y, names = make_problem(n_true, p, noise, seed)
        cases.append((f"{n_true} of {p}, sd {noise}", X, y, names, noise))
    return cases


def evaluate(name, make_estimator, X, y, n_true, noise):
    from sklearn.model_selection import train_test_split

    from sksparse_nn import SparsePathCV

    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timing = timed(SparsePathCV(make_estimator()).fit, X_tr, y_tr)
    search = timing.value
    selected = np.asarray(search.selected_features_)
    dead, live = search.estimator_.sparsity_gap_
    rmse = float(np.sqrt(np.mean((search.predict(X_te) - y_te) ** 2)))
    return {
        "method": name,
        "seconds": timing.wall,
        "lam": float(search.lam_),
        "selected": selected.tolist(),
        "true_kept": int(np.sum(selected < n_true)),
        "noise_kept": int(np.sum(selected >= n_true)),
        "gap_dead_max": dead,
        "gap_live_min": live,
        "rmse_over_sd": rmse / noise,
        "warnings": sorted({str(w.message)[:200] for w in caught}),
    }


def lasso_cv(X, y, n_true):
    from sklearn.linear_model import LassoCV

    coef = LassoCV(random_state=0).fit(X, y).coef_
    selected = np.flatnonzero(coef)
    true_kept = int(np.sum(selected < n_true))
    return {"true_kept": true_kept, "noise_kept": len(selected) - true_kept}


def run(args):
    single_thread()
    from sksparse_nn import DGatedMLPRegressor, DGatedNAMRegressor

    methods = {
        "NAM D=3": lambda: DGatedNAMRegressor(D=3, random_state=0),
        "MLP D=3": lambda: DGatedMLPRegressor(D=3, random_state=0),
    }
    rows = []
    for case, X, y, shapes, noise in problems(args.quick):
        n_true = len(shapes)
        lasso = lasso_cv(X, y, n_true)
        for method, make in methods.items():
            row = evaluate(method, make, X, y, n_true, noise)
            row.update(case=case, shapes=shapes, n_true=n_true, n_features=X.shape[1])
            row["lasso_cv"] = lasso
            rows.append(row)
            print(
                f"{case:28s} {method:8s} {row['seconds']:6.1f} s  true {row['true_kept']}/{n_true}"
                f"  noise {row['noise_kept']}  gap {row['gap_dead_max']:.1e} / "
                f"{row['gap_live_min']:.1e}  RMSE/sd {row['rmse_over_sd']:.3f}",
                flush=True,
            )
    return {"machine": machine(), "rows": rows}


def report(results, out):
    rows = results["rows"]
    print(
        "\n| problem | method | time (s) | true kept | noise kept | LassoCV true / noise "
        "| gap: largest zero / smallest live | test RMSE / noise sd |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lasso = r["lasso_cv"]
        print(
            f"| {r['case']} | {r['method']} | {r['seconds']:.1f} | {r['true_kept']}/{r['n_true']} "
            f"| {r['noise_kept']} | {lasso['true_kept']}/{r['n_true']} / {lasso['noise_kept']} "
            f"| {r['gap_dead_max']:.1e} / {r['gap_live_min']:.1e} | {r['rmse_over_sd']:.3f} |"
        )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{r['case']}\n{r['method']}" for r in rows]
    x = np.arange(len(rows))
    kept = [r["true_kept"] / r["n_true"] for r in rows]
    ax.bar(x - 0.2, kept, 0.4, label="true kept (fraction)")
    ax.bar(x + 0.2, [r["noise_kept"] for r in rows], 0.4, label="noise kept (count)")
    ax.set_xticks(x, labels, fontsize=6, rotation=30, ha="right")
    ax.set_title("SparsePathCV defaults (1-SE rule) on additive problems")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(out).replace(".json", ".png"), dpi=120)
    print(f"wrote {write_json(results, out, indent=1)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the paper's problem only")
    add_out_argument(parser, "cv_additive.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
