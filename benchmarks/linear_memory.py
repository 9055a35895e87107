"""Peak memory of the D=2 linear paths, in copies of ``X``.

The target: a path needs at most one more copy of ``X`` than the data it is given.
Each problem of ``benchmarks/linear_path.py`` (parts 2 and 3: the same specs, made by
its ``make_problem``) runs ``SparseLinearRegressor(D=2)`` or
``SparseLinearClassifier(D=2)``'s ``regularization_path`` twice in a fresh subprocess,
one thread everywhere: first untraced (the compiled kernel loaded, or built where it
is missing, and lazy imports done: one-time costs), then traced by :mod:`tracemalloc`,
started after the data are made, so that its peak is the memory the path allocated
beyond them (a new estimator: nothing kept from the first path): NumPy/SciPy arrays and
Python objects (what the compiled coordinate-descent kernel allocates inside itself,
a few vectors of length ``n`` or of the working set's size, is not traced). The ratio
is that peak over the bytes of ``X`` (a sparse ``X``: its data, indices and pointers).
The path's own result (coefficients, group norms, selections at every lam) is part of
the peak and is shown beside it: on sparse ``X`` it is larger than ``X`` itself.

Usage::

    python benchmarks/linear_memory.py [--skip-large] [--skip-larger] [--only TEXT] [--out FILE]

Prints a table and writes ``benchmarks/results/linear_memory.json``. The sparse
problems run with ``X`` as CSR (as ``linear_path.py`` gives it) and as CSC (which the
working sets read in place), at two sizes; from the two sizes of each pair the fits'
peak is split into ``a`` copies of ``X`` plus ``b`` vectors of length ``p`` (floats),
the two unknowns of two equations (a model: vectors of length ``n`` count in either).
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
ROOT = HERE.parent

# (name, linear_path spec): the dense and sparse problems of linear_path.py's parts 2
# and 3 whose D=2 paths fit in a few seconds
_COMMON = {"seed": 0, "n_lams": 20, "lam_ratio": 1e-2}
PROBLEMS = [
    ("regression 2000 x 1000, groups of 5",
     {"kind": "reg", "n": 2000, "p": 1000, "group_size": 5, "n_informative": 10}),
    ("regression 500 x 5000, groups of 5",
     {"kind": "reg", "n": 500, "p": 5000, "group_size": 5, "n_informative": 10}),
    ("logistic L1 2000 x 500",
     {"kind": "logistic", "n": 2000, "p": 500, "group_size": 1, "n_informative": 10,
      "n_classes": 2}),
    ("logistic L1 500 x 5000",
     {"kind": "logistic", "n": 500, "p": 5000, "group_size": 1, "n_informative": 10,
      "n_classes": 2}),
]  # fmt: skip
_TEXT = {"group_size": 1, "n_informative": 50}
_LASSO = {"kind": "reg", "n": 2000, "p": 10000, "density": 0.01, **_TEXT}
_LOGISTIC = {"kind": "logistic", "n": 2000, "p": 10000, "density": 0.01, "n_classes": 2,
             **_TEXT}  # fmt: skip
_LARGER = {"n": 20000, "p": 20000, "density": 0.005}
# the sparse problems as CSR (linear_path.py's) and as CSC (read in place), and the
# same at 20000 x 20000, 0.5% (X ten times larger, p twice): what a path needs beyond
# the data, a * X + b * p, solved from the two sizes
LARGE = [
    ("sparse Lasso 2000 x 10000, 1%", _LASSO),
    ("sparse Lasso 2000 x 10000, 1%, CSC", {**_LASSO, "format": "csc"}),
    ("sparse logistic 2000 x 10000, 1%", _LOGISTIC),
    ("sparse logistic 2000 x 10000, 1%, CSC", {**_LOGISTIC, "format": "csc"}),
]
LARGER = [
    ("sparse Lasso 20000 x 20000, 0.5%", {**_LASSO, **_LARGER}),
    ("sparse Lasso 20000 x 20000, 0.5%, CSC", {**_LASSO, **_LARGER, "format": "csc"}),
    ("sparse logistic 20000 x 20000, 0.5%", {**_LOGISTIC, **_LARGER}),
    ("sparse logistic 20000 x 20000, 0.5%, CSC",
     {**_LOGISTIC, **_LARGER, "format": "csc"}),
]  # fmt: skip

# The child: one problem's path, traced; prints one JSON line.
_CHILD = r"""
import dataclasses, gc, json, sys, time, tracemalloc
import numpy as np
import scipy.sparse as sp
import torch
torch.set_num_threads(1)
from linear_path import make_problem
from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor
spec = json.loads(sys.argv[1])
est = SparseLinearRegressor if spec["kind"] == "reg" else SparseLinearClassifier
def make(d):
    return est(D=2, groups=d.labels, random_state=0, fit_intercept=False)
def path(d):
    return make(d).regularization_path(d.X, d.y, lams=d.lams)
def fits(d):  # the path's warm-started fits, largest lam first, nothing kept
    model = make(d)
    for lam in np.sort(d.lams)[::-1]:
        model.set_params(lam=lam, warm_start=True).fit(d.X, d.y)
    return model
def traced(run):
    gc.collect()
    tracemalloc.start()
    cpu = time.process_time()
    out = run(d)
    cpu = time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak, cpu
d = make_problem(spec)
if spec.get("format") == "csc":
    d.X = d.X.tocsc()
path(d)  # untraced: the compiled kernel loaded (or built), lazy imports done
X = d.X
x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if sp.issparse(X) else X.nbytes
_, fits_peak, _ = traced(fits)
result, peak, cpu = traced(path)
arrays = [getattr(result, f.name) for f in dataclasses.fields(result)]
arrays += [a for a in result.selected]
out_bytes = sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
print(json.dumps({"x_bytes": int(x_bytes), "peak_bytes": int(peak), "result_bytes": out_bytes,
                  "fits_peak_bytes": int(fits_peak), "traced_cpu_s": cpu}))
"""


def measure(spec):
    """One problem's traced path in a fresh subprocess."""
    env = {**os.environ, **THREAD_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps({**_COMMON, **spec})], env=env,
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    out = json.loads(run.stdout.strip().splitlines()[-1])
    out["peak_over_x"] = out["peak_bytes"] / out["x_bytes"]
    out["fits_peak_over_x"] = out["fits_peak_bytes"] / out["x_bytes"]
    return out


def _split(rows):
    """Per sparse problem measured at both sizes (CSR and CSC apart): ``(a, b)`` with
    the fits' peak ``= a * x_bytes + b * 8 p`` at both (two equations, two unknowns)."""
    import numpy as np

    out = {}
    for name, row in rows.items():
        big = name.replace("2000 x 10000, 1%", "20000 x 20000, 0.5%")
        if big == name or big not in rows:
            continue
        pair = [row, rows[big]]
        A = np.array([[r["x_bytes"], 8.0 * r["spec"]["p"]] for r in pair])
        peaks = np.array([r["fits_peak_bytes"] for r in pair], dtype=float)
        a, b = np.linalg.solve(A, peaks)
        out[name.replace(" 2000 x 10000, 1%", "")] = (float(a), float(b))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-large", action="store_true", help="no sparse problems")
    parser.add_argument("--skip-larger", action="store_true", help="no sparse 20000 x 20000")
    parser.add_argument("--only", default=None, help="problems whose name contains this")
    parser.add_argument("--out", default="linear_memory.json", help="results file")
    args = parser.parse_args()
    problems = PROBLEMS + ([] if args.skip_large else LARGE)
    problems += [] if args.skip_large or args.skip_larger else LARGER
    if args.only:
        problems = [(name, spec) for name, spec in problems if args.only in name]
    load = [uptime()]
    rows = {}
    print(f"{'problem (D=2 path, 20 lams)':36s} {'X MB':>7s} {'peak MB':>8s} {'peak / X':>9s} "
          f"{'result MB':>10s} {'fits / X':>9s}")  # fmt: skip
    for name, spec in problems:
        rows[name] = {"spec": spec, **measure(spec)}
        r = rows[name]
        print(f"{name:36s} {r['x_bytes'] / 2**20:7.1f} {r['peak_bytes'] / 2**20:8.1f} "
              f"{r['peak_over_x']:9.2f} {r['result_bytes'] / 2**20:10.1f} "
              f"{r['fits_peak_over_x']:9.2f}", flush=True)  # fmt: skip
    load.append(uptime())
    split = _split(rows)
    for name, (a, b) in split.items():
        print(f"{name}: fits' peak = {a:.2f} X + {b:.1f} p floats")
    results = {"machine": machine(), "load": load, "problems": rows, "split": split}
    print(f"load: {load[0]} -> {load[1]}")
    print("written to", write_json(results, args.out))


if __name__ == "__main__":
    main()
