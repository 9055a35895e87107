"""The sparse GA2M against EBM on the real-tables panel: the issue's criterion, per table.

Reads cached cells of ``real_tables.py`` (nothing is fitted here): our GA2M
(``interactions="auto"``) and plain NAM with today's defaults, EBM (default, interactions
on). For every table and split where the GA2M and EBM both have a cell, the GA2M's test
score at the search's choice (best mean CV score, the default rule), its number of terms
(mains and pairs), EBM's; per table the means over those splits, the gap (AUC: EBM's
minus ours, so positive means below EBM; RMSE: ours over EBM's minus 1) and the ratio of
terms. The criterion: on average over the classification tables a gap of at most 0.005
AUC, over the regression tables at most 2% RMSE, with at most 30 terms and at most a
fifth of EBM's on every table.

A cell is looked up in the caches in the order given (``--ga2m``, ``--nam``: directories
under the ignored ``benchmarks/cells/``), the first that holds it wins, so cells of the current
code go first and older runs of the same computation fill in::

    python benchmarks/ga2m_panel.py  # today's defaults (robust: the regressors' cells)
    python benchmarks/ga2m_panel.py --ga2m real_tables_ga2m_refine2 real_tables_ga2m_now \
        real_tables_extension ga2m_deep_grid  # before "auto" tested its pairs
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _common import CELLS, RESULTS, machine, write_json

#: the issue's bounds
MAX_AUC_GAP, MAX_RMSE_GAP, MAX_TERMS, MAX_TERMS_SHARE = 0.005, 0.02, 30, 0.2


def cell(caches, table, model, seed):
    """(the cached cell, the cache it came from), or (None, None)."""
    for cache in caches:
        path = CELLS / cache / f"{table}__{model}__{seed}.json"
        if path.exists():
            found = json.loads(path.read_text())
            if not found.get("error"):
                return found, cache
    return None, None


def chosen(found):
    """(test score, terms) at the best-CV lam of one of our cells."""
    lams = np.asarray(found["lams"])
    index = int(np.argmin(np.abs(lams - found["best_lam"])))
    terms = found.get("n_terms") or found["n_selected"]
    return found["test_scores"][index], terms[index]


def oracle(found, task):
    """The best test score on the path among points of at most ``MAX_TERMS`` terms: a
    bound that no rule choosing a point of this path can beat."""
    terms = np.asarray(found.get("n_terms") or found["n_selected"])
    scores = [
        s
        for s, t in zip(found["test_scores"], terms, strict=True)
        if s is not None and t <= MAX_TERMS
    ]
    return max(scores) if task == "clf" else min(scores)


def gap(task, ours, ebm):
    """AUC: EBM's minus ours; RMSE: ours relative to EBM's, minus 1."""
    return ebm - ours if task == "clf" else ours / ebm - 1.0


def rows(args):
    tables = sorted(
        {p.name.split("__")[0] for c in args.ga2m for p in (CELLS / c).glob("*.json")}
    )
    out = []
    for table in tables:
        for seed in range(5):
            ebm, _ = cell([args.ebm], table, "ebm", seed)
            ga2m, source = cell(args.ga2m, table, "ga2m", seed)
            if ebm is None or ga2m is None:
                continue
            score, terms = chosen(ga2m)
            nam, nam_source = cell(args.nam, table, "nam", seed)
            nam_score, nam_terms = chosen(nam) if nam else (None, None)
            out.append(
                dict(
                    table=table,
                    seed=seed,
                    task=ebm["task"],
                    ga2m=score,
                    ga2m_terms=int(terms),
                    ga2m_cpu=ga2m.get("cpu"),
                    ga2m_cache=source,
                    n_below=ga2m.get("n_below"),
                    ebm=ebm["test_score"],
                    ebm_terms=int(ebm["n_terms"]),
                    ebm_cpu=ebm.get("cpu"),
                    gap=gap(ebm["task"], score, ebm["test_score"]),
                    oracle_gap=gap(ebm["task"], oracle(ga2m, ebm["task"]), ebm["test_score"]),
                    nam=nam_score,
                    nam_terms=nam_terms,
                    nam_gap=None if nam is None else gap(ebm["task"], nam_score, ebm["test_score"]),
                    nam_cache=nam_source,
                )
            )
    return out


def per_table(cells):
    """Means over each table's splits, the terms' worst case and the criterion's verdict."""
    out = []
    for table in sorted({c["table"] for c in cells}):
        group = [c for c in cells if c["table"] == table]
        task = group[0]["task"]
        terms = np.array([c["ga2m_terms"] for c in group])
        ebm_terms = group[0]["ebm_terms"]
        nam = [c for c in group if c["nam"] is not None]
        row = dict(
            table=table,
            task=task,
            splits=[c["seed"] for c in group],
            ga2m=float(np.mean([c["ga2m"] for c in group])),
            ebm=float(np.mean([c["ebm"] for c in group])),
            gap=float(np.mean([c["gap"] for c in group])),
            gaps=[c["gap"] for c in group],
            oracle_gap=float(np.mean([c["oracle_gap"] for c in group])),
            terms=float(terms.mean()),
            terms_max=int(terms.max()),
            ebm_terms=ebm_terms,
            share=float(terms.max() / ebm_terms),
            nam_gap=float(np.mean([c["nam_gap"] for c in nam])) if len(nam) == len(group) else None,
            nam_terms=float(np.mean([c["nam_terms"] for c in nam])) if nam else None,
            cpu=float(np.mean([c["ga2m_cpu"] for c in group])),
            ebm_cpu=float(np.mean([c["ebm_cpu"] for c in group])),
        )
        row["terms_ok"] = row["terms_max"] <= MAX_TERMS and row["share"] <= MAX_TERMS_SHARE
        bound = MAX_AUC_GAP if task == "clf" else MAX_RMSE_GAP
        row["score_ok"] = row["gap"] <= bound
        out.append(row)
    return out


def averages(tables):
    """The criterion's averages: the mean gap over the classification and the regression
    tables, each with the bound it is held to."""
    out = {}
    for task, bound in (("clf", MAX_AUC_GAP), ("reg", MAX_RMSE_GAP)):
        gaps = [t["gap"] for t in tables if t["task"] == task]
        if gaps:
            out[task] = dict(mean_gap=float(np.mean(gaps)), bound=bound, tables=len(gaps))
            oracle_gaps = [t["oracle_gap"] for t in tables if t["task"] == task]
            out[task]["oracle_mean_gap"] = float(np.mean(oracle_gaps))
            out[task]["met"] = out[task]["mean_gap"] <= bound
    return out


def format_gap(task, value):
    return "-" if value is None else f"{value:+.4f}" if task == "clf" else f"{100 * value:+.1f}%"


def report(args):
    cells = rows(args)
    if not cells:
        print("no table has both a GA2M and an EBM cell")
        return None
    tables = per_table(cells)
    print(
        f"{'table':10s} {'splits':8s} {'GA2M':>7s} {'EBM':>7s} {'gap':>8s} "
        f"{'terms':>11s} {'EBM':>4s} {'share':>6s} {'NAM gap':>8s} {'CPU s':>11s}"
    )
    for t in tables:
        splits = ",".join(map(str, t["splits"]))
        print(
            f"{t['table']:10s} {splits:8s} {t['ga2m']:7.4f} {t['ebm']:7.4f} "
            f"{format_gap(t['task'], t['gap']):>8s} {t['terms']:5.1f} ({t['terms_max']:3d}) "
            f"{t['ebm_terms']:4d} {t['share']:6.2f} {format_gap(t['task'], t['nam_gap']):>8s} "
            f"{t['cpu']:5.0f}/{t['ebm_cpu']:<5.0f}"
        )
    mean = averages(tables)
    for task, m in mean.items():
        verdict = "met" if m["met"] else "not met"
        print(
            f"mean gap, {task} ({m['tables']} tables): {format_gap(task, m['mean_gap'])} "
            f"(bound {format_gap(task, m['bound'])}): {verdict}; best point of each path "
            f"within {MAX_TERMS} terms (an oracle): {format_gap(task, m['oracle_mean_gap'])}"
        )
    print("\n" + rst_table(tables))
    results = dict(machine=machine(), cells=cells, tables=tables, averages=mean, args=vars(args))
    write_json(results, args.out)
    return results


def rst_table(tables):
    """The per-table rows as a reST list-table (for docs/benchmarks.rst)."""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    head = (
        "table (metric, splits)",
        "GA2M (terms, max)",
        "EBM (terms)",
        "gap",
        "share of EBM's terms",
    )
    lines += [f"   {'*' if i == 0 else ' '} - {h}" for i, h in enumerate(head)]
    for t in tables:
        metric = "AUC" if t["task"] == "clf" else "RMSE"
        splits = ", ".join(map(str, t["splits"]))
        nam = "" if t["nam_gap"] is None else f" (NAM {format_gap(t['task'], t['nam_gap'])})"
        cells = (
            f"{t['table']} ({metric}, {splits})",
            f"{t['ga2m']:.4f} ({t['terms']:.1f}, {t['terms_max']})",
            f"{t['ebm']:.4f} ({t['ebm_terms']})",
            format_gap(t["task"], t["gap"]) + nam,
            f"{t['share']:.2f}",
        )
        lines += [f"   {'*' if i == 0 else ' '} - {c}" for i, c in enumerate(cells)]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--ga2m",
        nargs="+",
        default=["real_tables_ga2m_robust", "real_tables_ga2m_auto"],
        help="caches of GA2M cells, first match wins",
    )
    parser.add_argument("--nam", nargs="+", default=["real_tables_extension"])
    parser.add_argument("--ebm", default="real_tables")
    parser.add_argument("--out", default=str(RESULTS / "ga2m_panel.json"))
    report(parser.parse_args())


if __name__ == "__main__":
    main()
