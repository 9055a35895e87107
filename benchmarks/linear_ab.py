"""Two versions of the package on the D = 2 linear paths: CPU time, alternating processes.

A change that must make no path slower is timed against the code before it: each
problem of ``linear_path.py`` / ``linear_memory.py`` (made by ``linear_path.make_problem``)
runs the warm-started path of ``SparseLinearRegressor(D=2)`` or
``SparseLinearClassifier(D=2)`` (``regularization_path``, 20 lams), or the reference
``GroupLasso*`` estimator refitted along them, in a fresh subprocess with one thread
everywhere, once untimed (kernels loaded, imports done) and then ``--repeats`` times
timed (the process's CPU time: the other processes sharing the machine count less than
in wall time; on a loaded machine single paths still varied by 30%). The two versions
(``--before`` and ``--after``: directories holding a ``sksparse_nn`` package) alternate,
``--rounds`` times; each keeps its fastest path. The ratio is after / before.

Usage::

    python benchmarks/linear_ab.py --before DIR --after DIR [--rounds 3] [--repeats 3]
                                   [--only TEXT] [--out FILE]

Prints a table and writes ``benchmarks/results/linear_ab.json``.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)  # before numpy is imported

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from _common import machine, uptime, write_json  # noqa: E402

HERE = Path(__file__).resolve().parent

_TEXT = {"group_size": 1, "n_informative": 50, "density": 0.01, "n": 2000, "p": 10000}
# (name, linear_path spec, estimator): "gated" the D = 2 estimator's path, "reference"
# the GroupLasso* estimator refitted with warm starts
PROBLEMS = [
    ("paper simulation 200 x 200, groups of 5", {"paper": True, "seed": 0}, "gated"),
    ("regression 2000 x 1000, groups of 5",
     {"kind": "reg", "n": 2000, "p": 1000, "group_size": 5, "n_informative": 10}, "gated"),
    ("regression 500 x 5000, groups of 5",
     {"kind": "reg", "n": 500, "p": 5000, "group_size": 5, "n_informative": 10}, "gated"),
    ("logistic L1 2000 x 500",
     {"kind": "logistic", "n": 2000, "p": 500, "group_size": 1, "n_informative": 10,
      "n_classes": 2}, "gated"),
    ("logistic groups of 5 2000 x 500",
     {"kind": "logistic", "n": 2000, "p": 500, "group_size": 5, "n_informative": 10,
      "n_classes": 2}, "gated"),
    ("logistic L1 500 x 5000",
     {"kind": "logistic", "n": 500, "p": 5000, "group_size": 1, "n_informative": 10,
      "n_classes": 2}, "gated"),
    ("sparse Lasso 2000 x 10000, 1%", {"kind": "reg", **_TEXT}, "gated"),
    ("sparse logistic 2000 x 10000, 1%", {"kind": "logistic", "n_classes": 2, **_TEXT},
     "gated"),
    ("sparse logistic 2000 x 10000, 1%, reference",
     {"kind": "logistic", "n_classes": 2, **_TEXT}, "reference"),
]  # fmt: skip

_CHILD = r"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from linear_path import make_problem
import sksparse_nn as sk
spec, route = json.loads(sys.argv[1]), sys.argv[2]
d = make_problem({"n_lams": 20, "lam_ratio": 1e-2, "seed": 0, **spec})
reg = d.kind == "reg"
def path():
    if route == "gated":
        est = (sk.SparseLinearRegressor if reg else sk.SparseLinearClassifier)(
            D=2, groups=d.labels, random_state=0, fit_intercept=d.fit_intercept)
        return est.regularization_path(d.X, d.y, lams=d.lams)
    est = (sk.GroupLassoRegressor if reg else sk.GroupLassoClassifier)(
        groups=d.labels, fit_intercept=d.fit_intercept, warm_start=True)
    for lam in np.sort(d.lams)[::-1]:
        est.set_params(lam=lam).fit(d.X, d.y)
path()  # untimed: kernels loaded, lazy imports done
times = []
for _ in range(int(sys.argv[3])):
    cpu = time.process_time()
    path()
    times.append(time.process_time() - cpu)
print(json.dumps({"cpu_s": min(times), "package": sk.__file__}))
"""


def measure(code_dir, spec, route, repeats):
    """The fastest of ``repeats`` timed paths of the package in ``code_dir``, in a
    fresh subprocess."""
    env = {**os.environ, **THREAD_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(code_dir), str(HERE)])
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(spec), route, str(repeats)], env=env,
        capture_output=True, text=True, check=True, cwd=code_dir,  # "-c": cwd first
    )  # fmt: skip
    out = json.loads(run.stdout.strip().splitlines()[-1])
    if not out["package"].startswith(str(Path(code_dir).resolve())):
        raise RuntimeError(f"{code_dir}: the package imported was {out['package']}")
    return out["cpu_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="directory of the old package")
    parser.add_argument("--after", required=True, help="directory of the new package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="timed paths per process")
    parser.add_argument("--only", default=None, help="problems whose name contains this")
    parser.add_argument("--out", default="linear_ab.json", help="results file")
    args = parser.parse_args()
    problems = [p for p in PROBLEMS if args.only is None or args.only in p[0]]
    load = [uptime()]
    rows = {}
    print(f"{'problem (D=2 path, 20 lams; CPU s)':44s} {'before':>8s} {'after':>8s} {'ratio':>6s}")
    for name, spec, route in problems:
        times = {"before": [], "after": []}
        for _ in range(args.rounds):
            for side in ("before", "after"):
                times[side].append(measure(getattr(args, side), spec, route, args.repeats))
        best = {side: min(t) for side, t in times.items()}
        rows[name] = {"spec": spec, "route": route, "times": times, "best": best,
                      "ratio": best["after"] / best["before"]}  # fmt: skip
        print(f"{name:44s} {best['before']:8.3f} {best['after']:8.3f} "
              f"{rows[name]['ratio']:6.3f}", flush=True)  # fmt: skip
    load.append(uptime())
    print(f"load: {load[0]} -> {load[1]}")
    results = {"machine": machine(), "load": load, "before": args.before, "after": args.after,
               "rounds": args.rounds, "repeats": args.repeats, "problems": rows}  # fmt: skip
    print("written to", write_json(results, args.out))


if __name__ == "__main__":
    main()
