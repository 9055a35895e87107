"""The GA2M's training step against the plain NAM's: what the pairs cost per epoch.

``make_interaction_regression`` (20 features, 1,000 rows). Three fits of
``DGatedNAMRegressor(lam=0.01, max_epochs=E)``, one thread, CPU time of this process:

* ``nam``: the main terms only (compiled, :mod:`sksparse_nn.nn._nam_kernels`);
* ``ga2m``: ``interactions="auto"`` (20 screened pairs beside the 20 mains), the pairs'
  factor networks by the compiled loops of :mod:`sksparse_nn.nn._nam_pair_kernels`;
* ``ga2m_tensor``: the same with the pairs' factor networks as batched tensor products
  (the path taken when the input needs a gradient or under a tracer), forced here.

Fits are interleaved over ``--repeats`` rounds and the fastest round of each is kept
(the machine is shared: ``uptime`` is recorded). Reported: CPU ms per epoch and the
ratio to ``nam``; the epochs are the same ``E`` for every fit (``max_epochs``), and the
three fits must keep the same terms (the compiled loops only reassociate sums).

Usage::

    python benchmarks/ga2m_step.py [--epochs 30] [--repeats 3]

Writes ``benchmarks/results/ga2m_step.json``.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

from _common import add_out_argument, machine, single_thread, uptime, write_json  # noqa: E402

VARIANTS = ("nam", "ga2m", "ga2m_tensor")


@contextlib.contextmanager
def tensor_pairs(active):
    """The pairs' factor networks as tensor products while ``active``."""
    from sksparse_nn.nn._nam_pairs import PairTerms

    original = PairTerms._compiled_path
    if active:
        PairTerms._compiled_path = lambda self, x, first: False
    try:
        yield
    finally:
        PairTerms._compiled_path = original


def fit(variant, X, y, epochs):
    """(CPU seconds, epochs run, kept term names) of one fit."""
    from sksparse_nn import DGatedNAMRegressor

    inter = None if variant == "nam" else "auto"
    est = DGatedNAMRegressor(lam=0.01, max_epochs=epochs, interactions=inter, random_state=0)
    with tensor_pairs(variant == "ga2m_tensor"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_epochs ends the fits on purpose
        start = time.process_time()
        est.fit(X, y)
        cpu = time.process_time() - start
    kept = sorted(str(t) for t in est.term_names_[est.selected_terms_])
    return cpu, len(est.history_), kept


def run(args):
    from sksparse_nn.datasets import make_interaction_regression

    single_thread()
    X, y = make_interaction_regression(n_samples=1000, random_state=0)
    for variant in VARIANTS:  # warm-up: compiled code loaded, caches filled
        fit(variant, X, y, 2)
    best = {}
    for _ in range(args.repeats):
        for variant in VARIANTS:
            cpu, epochs, kept = fit(variant, X, y, args.epochs)
            if variant not in best or cpu < best[variant]["cpu_s"]:
                best[variant] = {"cpu_s": cpu, "epochs": epochs, "kept": kept}
    for record in best.values():
        record["ms_per_epoch"] = 1000 * record["cpu_s"] / record["epochs"]
        record["ratio_to_nam"] = record["cpu_s"] / best["nam"]["cpu_s"]
    return {"machine": machine(), "uptime": uptime(), "epochs": args.epochs, "rows": best}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    add_out_argument(parser, "ga2m_step.json")
    args = parser.parse_args()
    results = run(args)
    print(f"machine load: {results['uptime']}")
    for name, r in results["rows"].items():
        print(
            f"{name:12s} {r['ms_per_epoch']:7.1f} ms/epoch  x{r['ratio_to_nam']:.2f} of nam  "
            f"({r['epochs']} epochs, kept {len(r['kept'])} terms)"
        )
    print(f"wrote {write_json(results, args.out)}")


if __name__ == "__main__":
    main()
