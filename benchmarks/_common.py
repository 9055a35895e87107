"""What the benchmark scripts share: timing, machine/version records, JSON, threads, data.

Every script has the same shape: ``run(args) -> results``, ``report(results)`` (prints the
table, writes JSON and plot) and ``main()`` (argparse). This module holds the pieces they
would otherwise each write again:

* :func:`timed` - wall and CPU time of a call, best of ``repeats`` after ``warmup`` calls;
* :func:`time_forward` - median CPU time of a full and a compacted model's forward pass;
* :func:`machine` - platform, CPU, load average, library versions (peers included), git
  commit and a digest of the package's sources: what was measured, where;
* :func:`write_json` - a results file (``benchmarks/results/`` unless a path is given);
* :func:`single_thread` / :data:`THREAD_ENV` / :class:`Worker` - one thread everywhere,
  and a single-threaded subprocess running jobs with a time limit;
* :func:`load_dataset` - scikit-learn's bundled sets and the package's own loaders;
* :func:`pyplot` - matplotlib with the Agg backend.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import platform
import subprocess
import time
import traceback
from pathlib import Path
from typing import NamedTuple

# no numpy (or anything that loads BLAS) at import: a script may import THREAD_ENV from here
# and set it before its own numpy import
RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]
#: The cells of panels (one JSON per table x model x split): scratch, ignored by git;
#: only a panel's summary goes to ``RESULTS``.
CELLS = Path(__file__).resolve().parent / "cells"
#: Environment variables that cap BLAS/OpenMP/numba thread pools (read at import).
THREAD_ENV = dict.fromkeys(
    (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "NUMBA_NUM_THREADS",
    ),
    "1",
)
#: scikit-learn's bundled data sets by name (``load_<name>``).
BUNDLED = ("digits", "iris", "wine", "breast_cancer", "diabetes")


# ------------------------------------------------------------------------- timing
class Timing(NamedTuple):
    wall: float  # seconds, the best (smallest) of the repeats
    cpu: float  # process CPU seconds of that repeat
    value: object  # what the (last) call returned
    walls: list  # wall seconds of every repeat


def timed(fn, *args, repeats=1, warmup=0, **kwargs):
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns a :class:`Timing` with the best wall time, the CPU time of that call, the
    last return value and every wall time.
    """
    for _ in range(warmup):
        fn(*args, **kwargs)
    walls, cpus, value = [], [], None
    for _ in range(repeats):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        value = fn(*args, **kwargs)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    best = min(range(repeats), key=walls.__getitem__)
    return Timing(walls[best], cpus[best], value, walls)


# ------------------------------------------------------------------ machine record
def time_forward(full, small, x, repeats):
    """Median CPU seconds of a forward pass of ``full`` and of ``small`` on ``x``,
    alternating the two after one warm-up pass each. This thread's CPU time: torch runs on
    one thread here, so other processes' load does not enter."""
    import numpy as np  # not at import: see THREAD_ENV
    import torch

    tf, ts = [], []
    with torch.no_grad():
        full(x), small(x)
        for _ in range(repeats):
            for model, out in ((full, tf), (small, ts)):
                t0 = time.thread_time()
                model(x)
                out.append(time.thread_time() - t0)
    return float(np.median(tf)), float(np.median(ts))


def uptime():
    """The output of ``uptime`` (load averages with the time), or None."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def versions(peers=()):
    """python, numpy, torch, scikit-learn, skorch, the package and the given peers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for dist in ("numpy", "torch", "scikit-learn", "skorch", "sksparse_nn", *peers):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def code_version():
    """sha256 of the package's source files, the git commit and whether they differ."""
    digest = hashlib.sha256()
    for file in sorted((ROOT / "sksparse_nn").rglob("*.py")):
        digest.update(str(file.relative_to(ROOT)).encode())
        digest.update(file.read_bytes())

    def git(*args):
        try:
            cmd = ["git", "-C", str(ROOT), *args]
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return None

    dirty = git("status", "--porcelain", "--", "sksparse_nn")
    return {
        "source_sha256": digest.hexdigest()[:16],
        "commit": git("rev-parse", "HEAD") or None,
        "package_dirty": bool(dirty),
    }


def machine(peers=()):
    """Where and with what a benchmark ran: platform, CPUs, load, versions, code."""
    info = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), None
            )
        with open("/proc/meminfo") as fh:
            info["mem_total_gb"] = int(fh.readline().split()[1]) / 1024**2
    except OSError:
        pass
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return {**info, "versions": versions(peers), "code": code_version()}


# ----------------------------------------------------------------------- output
def jsonable(obj):
    """``json.dumps`` default: numpy scalars and arrays as Python values, else str."""
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def write_json(obj, path, indent=1):
    """Write ``obj`` as JSON to ``path`` (a bare file name goes into ``RESULTS``)."""
    path = Path(path)
    if path.parent == Path("."):
        path = RESULTS / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent, default=jsonable))
    return path


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def add_out_argument(parser, default):
    """``--out``: the results file (default ``benchmarks/results/<default>``)."""
    parser.add_argument("--out", default=str(RESULTS / default), help="results file")


def run_cached_panel(parser, run, report, out):
    """The command line of a panel whose cells are cached as JSON: the script's own
    arguments in ``parser``, then ``--force`` (recompute cached cells), ``--report``
    (only the table of the cache) and ``--out`` (the summary's path, default ``out``);
    runs the missing cells unless ``--report``, then reports."""
    parser.add_argument("--force", action="store_true", help="recompute cached cells")
    parser.add_argument("--report", action="store_true", help="only the table of the cache")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args()
    if not args.report:
        run(args)
    return report(args)


def add_data_home_argument(parser):
    """``--data-home``: the directory of the ``<name>.npz`` files ($SKSPARSE_NN_DATA)."""
    parser.add_argument("--data-home", default=os.environ.get("SKSPARSE_NN_DATA"))


# ---------------------------------------------------------------------- threads
_LIMITS = []


def single_thread(threads=1):
    """One torch thread (intra- and inter-op) and BLAS/OpenMP pools limited by threadpoolctl."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work has started
        pass
    _LIMITS[:] = [threadpool_limits(limits=threads)]  # kept alive: the limit holds


def _worker_main(conn, init):
    single_thread()
    if init is not None:
        init()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        fn, args, kwargs = message
        try:
            out = ("ok", fn(*args, **kwargs))
        except BaseException:  # noqa: BLE001 - reported to the parent
            out = ("error", traceback.format_exc())
        conn.send(out)


class Worker:
    """A single-threaded subprocess running jobs (module-level functions) with a time limit.

    Spawned with :data:`THREAD_ENV` in its environment; runs :func:`single_thread`, then
    ``init()``, then each call. A call that exceeds its time limit kills the worker (this
    object's own process, by its handle) and a fresh one takes the next call.
    ``warmed`` is per-process state for the caller (emptied when a worker starts).
    """

    def __init__(self, init=None):
        self.init = init
        self.proc = self.conn = None
        self.warmed = set()
        self.restarts = 0

    def _start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        saved = {k: os.environ.get(k) for k in THREAD_ENV}
        os.environ.update(THREAD_ENV)  # inherited by the spawned worker
        try:
            self.proc = ctx.Process(target=_worker_main, args=(child, self.init), daemon=True)
            self.proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self.warmed = set()

    def call(self, fn, *args, timeout, **kwargs):
        """``{"status": "ok", "value": ...}``, or status error / timeout / crashed."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
        start = time.perf_counter()
        self.conn.send((fn, args, kwargs))
        if not self.conn.poll(timeout):
            self.kill()
            return {"status": "timeout", "limit_seconds": timeout}
        try:
            status, value = self.conn.recv()
        except EOFError:
            code = self.proc.exitcode
            self.kill()
            return {
                "status": "crashed",
                "exitcode": code,
                "after_seconds": time.perf_counter() - start,
            }
        if status == "ok":
            return {"status": "ok", "value": value}
        return {"status": "error", "error": value.strip().splitlines()[-1], "traceback": value}

    def kill(self, restart=True):
        if self.proc is not None:
            self.proc.kill()  # only the worker this object started
            self.proc.join()
            self.restarts += restart
        self.proc = None

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(10)
            if self.proc.is_alive():
                self.kill(restart=False)
        self.proc = None


# ------------------------------------------------------------------------- data
def load_dataset(name, data_home=None):
    """``Bunch(X, y, X_test, y_test)`` of a bundled scikit-learn set or a benchmark.

    Bundled sets (:data:`BUNDLED`) come from ``sklearn.datasets.load_<name>``; the others
    from :func:`sksparse_nn.datasets.load_benchmark` (``<data_home>/<name>.npz``, no
    download). Arrays as stored; ``X_test``/``y_test`` None without a fixed split.
    """
    from sklearn.utils import Bunch

    if name in BUNDLED:
        from sklearn import datasets

        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return Bunch(X=X, y=y, X_test=None, y_test=None)
    from sksparse_nn.datasets import load_benchmark

    data = load_benchmark(name, data_home=data_home, download_if_missing=False)
    return Bunch(X=data.X, y=data.y, X_test=data.X_test, y_test=data.y_test)


def standardized_digits():
    """scikit-learn's digits, standardized (float64)."""
    from sklearn.preprocessing import StandardScaler

    data = load_dataset("digits")
    return StandardScaler().fit_transform(data.X), data.y
