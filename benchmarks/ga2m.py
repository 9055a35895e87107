"""Sparse GA2M on a simulation with a known pair: which terms does each model keep?

``make_interaction_regression``: four main effects and one pure interaction (features 0
and 1) among 20 features uniform on [-1, 1], noise sd 0.5, 1,000 training rows and
5,000 test rows per seed. Models, defaults only (``random_state`` fixed), one thread:

* ``nam``: ``SparsePathCV(DGatedNAMRegressor())``, main effects only;
* ``ga2m``: ``SparsePathCV(DGatedNAMRegressor(interactions="auto"))``: the screened
  pairs significant at family-wise level 0.05 gated beside the 20 mains, lam by the
  search's default rule (best CV score);
* ``ebm``: interpret's ``ExplainableBoostingRegressor()`` (interactions on);
* ``hgb``: scikit-learn's ``HistGradientBoostingRegressor()``.

Recorded per model and seed: test R^2 (the Bayes R^2 of the simulation next to it),
the number of terms (EBM: its terms, none exactly zero; HGB: none, a black box), whether
the kept terms are exactly the true five, the chosen fit's sparsity gap (largest group
norm set to zero, smallest kept one), the screening's rank of the true pair, and
wall and CPU seconds.

Usage::

    python benchmarks/ga2m.py [--seeds 0 1] [--models nam ga2m ebm hgb] [--out FILE]

Prints a table and writes ``benchmarks/results/ga2m.json``.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import add_out_argument, machine, single_thread, timed, uptime, write_json  # noqa: E402

MODELS = ("ga2m", "ebm", "hgb", "nam")
TRUE_TERMS = {"x0", "x1", "x2", "x3", "x0 x x1"}


def _data(seed):
    from sksparse_nn.datasets import make_interaction_regression

    train = make_interaction_regression(n_samples=1000, random_state=seed, return_info=True)
    test = make_interaction_regression(n_samples=5000, random_state=10_000 + seed, return_info=True)
    return train, test


def _r2(y, pred):
    return float(1.0 - np.mean((y - pred) ** 2) / np.var(y))


def fit_model(name, train, seed):
    """(fitted model, record of what it kept)."""
    X, y = train.X, train.y
    if name in ("nam", "ga2m"):
        from sksparse_nn import DGatedNAMRegressor, SparsePathCV

        inter = "auto" if name == "ga2m" else None
        search = SparsePathCV(DGatedNAMRegressor(interactions=inter, random_state=seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            search.fit(X, y)
        est = search.estimator_
        kept = [str(t) for t in est.term_names_[est.selected_terms_]]
        ranked = [tuple(p) for p in est.interaction_pairs_.tolist()]
        return search, {
            "terms": kept,
            "n_terms": len(kept),
            "exact": set(kept) == TRUE_TERMS,
            "gap": list(est.sparsity_gap_),
            "lam": float(est.lam),
            "pair_rank": ranked.index((0, 1)) if (0, 1) in ranked else None,
            "n_terms_path": search.cv_path_.n_terms.tolist(),
            "lams": search.cv_path_.lams.tolist(),
            "cv_mean": search.cv_path_.cv_mean.tolist(),
            "cv_se": search.cv_path_.cv_se.tolist(),
            "group_norms": est.group_norms_.tolist(),
            "names": [str(t) for t in est.term_names_],
        }
    if name == "ebm":
        from interpret.glassbox import ExplainableBoostingRegressor

        model = ExplainableBoostingRegressor(n_jobs=1, random_state=seed).fit(X, y)
        names = [
            str(t).replace(" & ", " x ").replace("feature_000", "x") for t in model.term_names_
        ]
        names = [n.replace("feature_00", "x").replace("feature_0", "x") for n in names]
        return model, {"terms": names, "n_terms": len(names), "exact": False}
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        model = HistGradientBoostingRegressor(random_state=seed).fit(X, y)
        return model, {"terms": None, "n_terms": None, "exact": False}
    raise ValueError(name)


def run(args):
    single_thread()
    rows = []
    for seed in args.seeds:
        train, test = _data(seed)
        bayes = _r2(test.y, test.y_true)
        for name in args.models:
            t = timed(fit_model, name, train, seed)
            model, record = t.value
            record.update(
                model=name,
                seed=seed,
                test_r2=_r2(test.y, model.predict(test.X)),
                bayes_r2=bayes,
                wall_s=t.wall,
                cpu_s=t.cpu,
            )
            rows.append(record)
            print(_line(record), flush=True)
            write_json({"rows": rows}, args.out)  # what finished, should a later model fail
    return {"machine": machine(peers=("interpret",)), "uptime": uptime(), "rows": rows}


def _line(r):
    gap = r.get("gap")
    gap = f"{gap[0]:.1e} / {gap[1]:.2g}" if gap else "-"
    n = "-" if r["n_terms"] is None else str(r["n_terms"])
    return (
        f"{r['model']:5s} seed {r['seed']}  R2 {r['test_r2']:.4f} (Bayes {r['bayes_r2']:.4f})  "
        f"terms {n:>4s}  exact {str(r['exact']):5s}  gap {gap:17s}  "
        f"wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s"
    )


def report(results, out):
    print(f"\nmachine load: {results['uptime']}")
    for name in MODELS:
        rows = [r for r in results["rows"] if r["model"] == name]
        if not rows:
            continue
        r2 = np.mean([r["test_r2"] for r in rows])
        wall = np.mean([r["wall_s"] for r in rows])
        exact = sum(r["exact"] for r in rows)
        terms = [r["n_terms"] for r in rows if r["n_terms"] is not None]
        n = f"{np.mean(terms):.1f}" if terms else "-"
        print(f"{name:5s} mean R2 {r2:.4f}  terms {n:>6s}  exactly the true 5: {exact}/{len(rows)}"
              f"  wall {wall:.1f} s")  # fmt: skip
    path = write_json(results, out)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    add_out_argument(parser, "ga2m.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
