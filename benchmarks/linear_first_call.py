"""The first call of a fresh process: the D=2 group-lasso path against skglm's.

``benchmarks/linear_path.py`` times every path after a warm-up in the same worker, so
one-time costs (numba compilation, imports, the first load of cached kernels) are left
out for every method. A user's script pays them once per process. This script times
what the first ``SparseLinearRegressor(D=2).regularization_path`` of a fresh process
costs, on the wide problem of ``linear_path.py`` (``n = 500, p = 5000`` in 1000 groups
of 5, 10 informative; 20 lams over ``lam_max * [1e-2, 1]``; no intercept), against
skglm's ``GroupLasso`` warm-started path (``tol=1e-8``, ``max_iter=1000``) in a fresh
process of its own, *after* skglm's compilation (an untimed path on tiny data): the
comparison the peer is most favoured by.

Each measurement is a fresh subprocess with one thread everywhere (``THREAD_ENV``,
``torch.set_num_threads(1)``); ours and skglm's alternate ``--repeats`` times and the
fastest of each is kept (the machine may be shared: ``uptime`` is recorded). Rows:

* ``ours, first call``: the package's compiled kernel as built ahead of time
  (:func:`sksparse_nn.solvers.build_kernels`; built first if missing, untimed);
* ``ours, first call, numba cache``: ``SKSPARSE_NN_AOT=0``: numba's JIT kernel loaded
  from its on-disk cache (what every fresh process paid before);
* ``ours, second call``: the same path again in the first row's process;
* ``skglm, warm path``: skglm after its compilation (first and second call in the
  process: the fastest).

Ratios are CPU time (``time.process_time``, the process's own: robust to other load)
over skglm's; wall times are recorded too. ``--build`` also times the one-time build
of the kernel into a temporary directory.

Usage::

    python benchmarks/linear_first_call.py [--repeats 3] [--build] [--out FILE]

Writes ``benchmarks/results/linear_first_call.json``.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)  # before numpy (and numba) are imported

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from _common import machine, uptime, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# The child's script: data, then the timed calls; prints one JSON line.
_CHILD = r"""
import json, os, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from sksparse_nn.datasets import make_group_regression
from sksparse_nn.solvers import lambda_max
d = make_group_regression(n_samples=500, n_test=0, n_groups=1000, group_size=5,
                          n_informative=10, noise=1.0, random_state=0)
X, y, labels = d.X, d.y, d.groups
lams = lambda_max(X, y, labels, np.ones(1000), fit_intercept=False) * np.geomspace(
    1e-2, 1.0, 20)
out = []
if sys.argv[1] == "ours":
    from sksparse_nn import SparseLinearRegressor
    def path():
        SparseLinearRegressor(D=2, groups=labels, fit_intercept=False,
                              random_state=0).regularization_path(X, y, lams=lams)
else:
    from skglm import GroupLasso
    def path(X=X, y=y, lams=lams):
        model = GroupLasso(groups=5, warm_start=True, tol=1e-8, max_iter=1000,
                           fit_intercept=False)
        for lam in lams[::-1]:
            model.set_params(alpha=float(lam)).fit(X, y)
    path(X[:50, :100], y[:50], lams[-3:] / 10)  # compilation, untimed
for _ in range(2):
    wall, cpu = time.perf_counter(), time.process_time()
    path()
    out.append([time.perf_counter() - wall, time.process_time() - cpu])
print(json.dumps({"calls": out, "numba": "numba" in sys.modules}))
"""


def _child(kind, aot=True):
    env = {**os.environ, **THREAD_ENV, "SKSPARSE_NN_AOT": "1" if aot else "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, kind], env=env, capture_output=True, text=True,
        check=True, cwd=ROOT,
    )  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


def _build_seconds():
    """Wall seconds of one build of the AOT kernel into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **THREAD_ENV, "SKSPARSE_NN_KERNEL_DIR": tmp}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "from sksparse_nn.solvers import build_kernels as b; "
             "assert b()"], env=env, check=True, cwd=ROOT,
        )  # fmt: skip
        return time.perf_counter() - start


def run(args):
    # the kernel as installed: built once here if missing (untimed)
    subprocess.run(
        [sys.executable, "-c", "from sksparse_nn.solvers import build_kernels as b; b()"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, cwd=ROOT,
    )  # fmt: skip
    rows = {"ours_first": [], "ours_first_numba_cache": [], "ours_second": [], "skglm": []}
    load = [uptime()]
    numba_in_first = []
    for _ in range(args.repeats):
        ours = _child("ours")
        rows["ours_first"].append(ours["calls"][0])
        rows["ours_second"].append(ours["calls"][1])
        numba_in_first.append(ours["numba"])
        rows["ours_first_numba_cache"].append(_child("ours", aot=False)["calls"][0])
        skglm = _child("skglm")
        rows["skglm"].append(min(skglm["calls"], key=lambda c: c[1]))
    load.append(uptime())
    best = {k: min(v, key=lambda c: c[1]) for k, v in rows.items()}
    results = {
        "config": {"repeats": args.repeats, "problem": "n=500 p=5000 groups of 5, 20 lams"},
        "machine": machine(peers=("skglm",)),
        "load": load,
        "numba_imported_by_first_call": numba_in_first,
        "runs": rows,
        "best": {k: {"wall": v[0], "cpu": v[1]} for k, v in best.items()},
        "ratio_cpu_to_skglm": {k: v[1] / best["skglm"][1] for k, v in best.items()},
    }
    if args.build:
        results["build_seconds"] = _build_seconds()
    return results


def report(results, out):
    print(f"load: {results['load'][0]} -> {results['load'][1]}")
    print(f"{'row':34s} {'cpu s':>8s} {'wall s':>8s} {'cpu / skglm':>12s}")
    names = {
        "ours_first": "ours, first call (AOT kernel)",
        "ours_first_numba_cache": "ours, first call, numba cache",
        "ours_second": "ours, second call",
        "skglm": "skglm, warm path (compiled)",
    }
    for key, name in names.items():
        b = results["best"][key]
        ratio = results["ratio_cpu_to_skglm"][key]
        print(f"{name:34s} {b['cpu']:8.3f} {b['wall']:8.3f} {ratio:12.2f}")
    print("numba imported by the first call:", results["numba_imported_by_first_call"])
    if "build_seconds" in results:
        print(f"one-time build of the kernel: {results['build_seconds']:.1f} s")
    print("written to", write_json(results, out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per row")
    parser.add_argument("--build", action="store_true", help="also time the kernel's build")
    parser.add_argument("--out", default="linear_first_call.json", help="results file")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
