"""How much of the GA2M's gap to EBM is the variance of one network fit.

For every table and split of the GA2M panel (``ga2m_panel.py``: cells of our GA2M and
of EBM), the GA2M is fitted again, cold, at the lam its default search chose, once per
``random_state`` in ``--seeds`` (the networks' start and batch order; same data, same
screened pairs). Per split: the search's own point (warm-started along the path), the
cold fits' test scores, their mean and spread, and the test score of the average of
their predictions (an equal-weight ensemble: an additive model whose terms are the union
of the members' kept terms). EBM itself averages 14 bagged boosting runs by default.

Nothing here changes the search: the lam is the cell's ``best_lam``, so the numbers say
what averaging fits would give at the point the search chose, not what a search over
averaged fits would choose. Two variants ask what keeps the average's terms few:
``--lam-factor F`` fits at ``F`` times the chosen lam (sparser members);
``--on-support`` fits on the chosen point's variables only, its pairs given
(``interactions`` as a list), so that no member holds a term the search did not keep.
Each split is cached under the ignored ``cells/<--cache>/``::

    python benchmarks/ga2m_seeds.py --tables ames saratoga wage  # fits, then the report
    python benchmarks/ga2m_seeds.py --tables ames saratoga wage --lam-factor 2 \
        --cache ga2m_seeds_lam2
    python benchmarks/ga2m_seeds.py --tables ames saratoga wage --on-support \
        --cache ga2m_seeds_support
    python benchmarks/ga2m_seeds.py --report  # the report of --cache (ga2m_seeds)
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
from _common import CELLS, RESULTS, machine, single_thread, write_json  # noqa: E402
from ga2m_panel import MAX_AUC_GAP, MAX_RMSE_GAP, cell, chosen, format_gap, gap  # noqa: E402

GA2M_CACHES = ["real_tables_ga2m_robust", "real_tables_ga2m_auto"]  # the panel's


def _split_pair(name):
    """A pair's term name ``"a x b"`` as ``(a, b)`` (sides may be ``[x1, x2]``), else None."""
    depth = 0
    for i, ch in enumerate(name):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0 and name.startswith(" x ", i):
            return name[:i], name[i + 3 :]
    return None


def _support(X_train, terms):
    """The search point's terms as (its variables, its pairs of variables): a term name
    holds encoded columns ``x<j>``, each from one variable of the table."""
    from sksparse_nn import TableEncoder, variable_groups

    sources, names = variable_groups(TableEncoder().fit(X_train))

    def variable(side):
        return str(names[sources[int(re.search(r"x(\d+)", side).group(1))]])

    mains, pairs = [], []
    for term in terms:
        pair = _split_pair(term)
        if pair is None:
            mains.append(variable(term))
        else:
            pairs.append(tuple(variable(side) for side in pair))
    return list(dict.fromkeys(mains + [v for p in pairs for v in p])), pairs


def _given_pairs(X, pairs):
    """Pairs of variables as the encoded column indices ``interactions`` takes (a
    variable's first column stands for its term)."""
    from sksparse_nn import TableEncoder, variable_groups

    sources, names = variable_groups(TableEncoder().fit(X))
    first = {str(n): int(np.flatnonzero(sources == j)[0]) for j, n in enumerate(names)}
    return [(first[a], first[b]) for a, b in pairs] or None


def refit(table, split, args):
    """The cold fits of one panel cell (at its chosen lam times ``--lam-factor``; with
    ``--on-support`` on the chosen point's variables and pairs), and their average."""
    import real_tables as rt

    from sksparse_nn.compose import VariableModel

    found, source = cell(GA2M_CACHES, table, "ga2m", split)
    X, y, task = rt.load(table)
    X_train, X_test, y_train, y_test = rt.split(X, y, task, split)
    path_score, path_terms = chosen(found)
    interactions = "auto"
    if args.on_support:
        index = int(np.argmin(np.abs(np.asarray(found["lams"]) - found["best_lam"])))
        variables, pairs = _support(X_train, found["terms"][index])
        X_train, X_test = X_train[variables], X_test[variables]
        interactions = _given_pairs(X_train, pairs)
    lam = found["best_lam"] * args.lam_factor
    outputs, fits = [], []
    for seed in args.seeds:
        start = time.process_time()
        est = rt._ours("ga2m", task).set_params(  # the panel's estimator
            interactions=interactions, lam=lam, random_state=seed
        )
        model = VariableModel(est).fit(X_train, y_train)
        output = rt._output(model, X_test, task)
        inner = model.estimator_
        outputs.append(output)
        fits.append(
            dict(
                seed=seed,
                test_score=rt.test_score(task, y_test, output),
                terms=[str(n) for n in np.asarray(inner.term_names_)[inner.selected_terms_]],
                cpu=time.process_time() - start,
            )
        )
    terms = [set(f["terms"]) for f in fits]
    return dict(
        table=table,
        split=split,
        task=task,
        lam=lam,
        ga2m_cache=source,
        path_score=path_score,
        path_terms=int(path_terms),
        fits=fits,
        average_score=rt.test_score(task, y_test, np.mean(outputs, axis=0)),
        union_terms=len(set.union(*terms)),
        common_terms=len(set.intersection(*terms)),
    )


def run(args):
    cache = CELLS / args.cache
    cache.mkdir(parents=True, exist_ok=True)
    single_thread()
    for table in args.tables:
        for split in range(5):
            path = cache / f"{table}__{split}.json"
            have_cells = (
                cell(GA2M_CACHES, table, "ga2m", split)[0]
                and cell(["real_tables"], table, "ebm", split)[0]
            )
            if path.exists() or not have_cells:
                continue
            out = refit(table, split, args)
            write_json(dict(out, machine=machine()), path)
            scores = ", ".join(f"{f['test_score']:.4f}" for f in out["fits"])
            print(
                f"{table} {split}: path {out['path_score']:.4f}, cold {scores}, "
                f"average {out['average_score']:.4f}",
                flush=True,
            )


def report(args):
    cells = [json.loads(p.read_text()) for p in sorted((CELLS / args.cache).glob("*.json"))]
    if not cells:
        print("no cells")
        return
    print(
        f"{'table':10s} {'split':>5s} {'path':>7s} {'cold mean':>9s} {'sd':>7s} "
        f"{'average':>7s} {'EBM':>7s} {'gap path':>8s} {'gap avg':>8s}  terms (each/all/common)"
    )
    rows = []
    for c in cells:
        ebm = cell(["real_tables"], c["table"], "ebm", c["split"])[0]["test_score"]
        scores = np.array([f["test_score"] for f in c["fits"]])
        row = dict(
            table=c["table"],
            task=c["task"],
            split=c["split"],
            path=c["path_score"],
            cold_mean=float(scores.mean()),
            cold_sd=float(scores.std(ddof=1)),
            average=c["average_score"],
            ebm=ebm,
            gap_path=gap(c["task"], c["path_score"], ebm),
            gap_cold=gap(c["task"], float(scores.mean()), ebm),
            gap_average=gap(c["task"], c["average_score"], ebm),
            path_terms=c["path_terms"],
            member_terms=float(np.mean([len(f["terms"]) for f in c["fits"]])),
            union_terms=c["union_terms"],
            common_terms=c["common_terms"],
        )
        rows.append(row)
        fmt = partial(format_gap, c["task"])
        print(
            f"{row['table']:10s} {row['split']:5d} {row['path']:7.4f} "
            f"{row['cold_mean']:9.4f} {row['cold_sd']:7.4f} {row['average']:7.4f} "
            f"{ebm:7.4f} {fmt(row['gap_path']):>8s} {fmt(row['gap_average']):>8s} "
            f"{row['member_terms']:4.1f}/{row['union_terms']:2d}/{row['common_terms']:2d}"
        )
    means = {}
    for task, bound in (("clf", MAX_AUC_GAP), ("reg", MAX_RMSE_GAP)):
        tables = sorted({r["table"] for r in rows if r["task"] == task})
        if not tables:
            continue
        per = {
            k: [np.mean([r[k] for r in rows if r["table"] == t]) for t in tables]
            for k in ("gap_path", "gap_cold", "gap_average")
        }
        means[task] = {k: float(np.mean(v)) for k, v in per.items()} | dict(
            bound=bound, tables=tables
        )
        fmt = partial(format_gap, task)
        print(
            f"{task} ({len(tables)} tables), mean gap to EBM: search's point "
            f"{fmt(means[task]['gap_path'])}, one cold fit {fmt(means[task]['gap_cold'])}, "
            f"average of fits {fmt(means[task]['gap_average'])} (bound {fmt(bound)})"
        )
    write_json(dict(rows=rows, means=means, args=vars(args), machine=machine()), args.out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="*", default=[])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--lam-factor", type=float, default=1.0, help="lam = chosen x this")
    parser.add_argument(
        "--on-support", action="store_true", help="fit on the chosen point's terms only"
    )
    parser.add_argument("--report", action="store_true", help="only the report")
    parser.add_argument("--cache", default="ga2m_seeds", help="cells' directory in results/")
    parser.add_argument("--out", default=None, help="default: results/<cache>.json")
    args = parser.parse_args()
    args.out = args.out or str(RESULTS / f"{args.cache}.json")
    if not args.report:
        run(args)
    report(args)


if __name__ == "__main__":
    main()
