"""What a kill costs a checkpointed path: the time lost to a SIGKILL and a resume.

A default ``regularization_path`` of ``DGatedNAMRegressor`` (its 16-lam default grid,
extended upward until the model is empty; only ``random_state`` set) on the additive
simulation (``make_additive_regression``, 1,000 rows, 20 features). Each run is a fresh
single-threaded process of this script (``--child``):

1. ``plain``: the path without a checkpoint;
2. ``checkpoint``: the same path writing every point;
3. ``killed``: the same, SIGKILLed once ``k`` points are written plus a random part of
   the next point (``k`` and the fraction drawn from ``--seed``);
4. ``resumed``: the same command again, on the killed run's checkpoint.

Every run's CPU time is taken whole (imports included: ``/proc/<pid>/stat`` of the
killed one just before the kill); CPU seconds do not grow when other processes share
the cores, wall seconds do (both are recorded, with the load). The time lost is
``killed + resumed - checkpoint``: the killed part of a point, a second process start
and reading the checkpoint. The checkpoint's own work (opening it, scanning, writing and
reading the points) is timed inside the runs. The fits of every run are counted: the
resumed run must fit exactly the points the killed one had not finished, and give the
uninterrupted run's group norms exactly.

Usage::

    python benchmarks/checkpoint_resume.py [--quick] [--seed N] [--out FILE]

Prints a table and writes ``benchmarks/results/checkpoint_resume.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import THREAD_ENV, add_out_argument, machine, single_thread, write_json

from sksparse_nn import DGatedNAMRegressor, regularization_path
from sksparse_nn.datasets import make_additive_regression

HERE = Path(__file__).resolve()
TICKS = os.sysconf("SC_CLK_TCK")


class CountingNAM(DGatedNAMRegressor):
    """The default NAM, counting its fits (in the process that runs them)."""

    fits = 0

    def fit(self, X, y, **kwargs):
        type(self).fits += 1
        return super().fit(X, y, **kwargs)


def _timing_checkpoint_io(spent):
    """Add the wall and CPU seconds of the checkpoint's work to ``spent``."""
    from sksparse_nn.path import _checkpoint, _engine

    def timed(fn):
        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent["wall"] += time.perf_counter() - wall
                spent["cpu"] += time.process_time() - cpu

        return wrapper

    for name in ("save", "restore", "scan", "load_start", "save_start"):
        setattr(_checkpoint.PathStore, name, timed(getattr(_checkpoint.PathStore, name)))
    _engine.open_checkpoint = timed(_engine.open_checkpoint)


def child(args):
    """One run of the path in this process; prints its numbers as JSON."""
    single_thread()
    spent = {"wall": 0.0, "cpu": 0.0}
    _timing_checkpoint_io(spent)
    X, y = make_additive_regression(n_samples=args.rows, n_noise=15, random_state=0)
    wall, cpu = time.perf_counter(), time.process_time()
    path = regularization_path(
        CountingNAM(random_state=0), X, y, checkpoint=args.checkpoint or None
    )
    out = {
        "path_seconds": time.perf_counter() - wall,
        "path_cpu": time.process_time() - cpu,
        "cpu": time.process_time(),  # the whole process, imports included
        "checkpoint_io_seconds": spent["wall"],
        "checkpoint_io_cpu": spent["cpu"],
        "fits": CountingNAM.fits,
        "points": len(path),
        "norms": np.asarray(path.group_norms).tolist(),
    }
    print("RESULT " + json.dumps(out), flush=True)


def _spawn(args, checkpoint):
    command = [sys.executable, str(HERE), "--child", "--rows", str(args.rows)]
    command += ["--checkpoint", checkpoint or ""]
    env = {**os.environ, **THREAD_ENV}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)


def timed_run(args, checkpoint):
    start = time.perf_counter()
    proc = _spawn(args, checkpoint)
    output, _ = proc.communicate()
    seconds = time.perf_counter() - start
    line = next((x for x in output.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the child failed (exit {proc.returncode}):\n{output[-2000:]}")
    return {**json.loads(line[len("RESULT ") :]), "seconds": seconds}


def _cpu_of(pid):
    """CPU seconds (user + system) of a running process (Linux)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def killed_run(args, checkpoint, point_seconds, rng):
    """SIGKILL the run once ``k`` points are written plus a random part of a point."""
    k = rng.randint(2, 12)
    fraction = rng.uniform(0.2, 0.8)
    start = time.perf_counter()
    proc = _spawn(args, checkpoint)
    points = Path(checkpoint, "full")
    while len(list(points.glob("point-*.pkl"))) < k:
        if proc.poll() is not None:
            raise RuntimeError("the run ended before it was killed")
        time.sleep(0.01)
    time.sleep(fraction * point_seconds)
    cpu = _cpu_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    seconds = time.perf_counter() - start
    finished = len(list(points.glob("point-*.pkl")))
    return {"seconds": seconds, "cpu": cpu, "k": k, "fraction": fraction, "finished": finished}


def run(args):
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="checkpoint_resume_"))
    try:
        plain = timed_run(args, None)
        written = timed_run(args, str(work / "uninterrupted"))
        files = [f for f in (work / "uninterrupted").rglob("*") if f.is_file()]
        size = sum(f.stat().st_size for f in files)
        point_seconds = written["path_seconds"] / written["fits"]
        killed = killed_run(args, str(work / "killed"), point_seconds, rng)
        resumed = timed_run(args, str(work / "killed"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    point_cpu = written["path_cpu"] / written["fits"]
    lost_cpu = killed["cpu"] + resumed["cpu"] - written["cpu"]
    return {
        "machine": machine(),
        "uptime": os.popen("uptime").read().strip(),
        "rows": args.rows,
        "seed": args.seed,
        "plain": {k: v for k, v in plain.items() if k != "norms"},
        "checkpoint": {k: v for k, v in written.items() if k != "norms"},
        "killed": killed,
        "resumed": {k: v for k, v in resumed.items() if k != "norms"},
        "checkpoint_bytes": size,
        "checkpoint_files": len(files),
        "io_share_of_path_cpu": written["checkpoint_io_cpu"] / written["path_cpu"],
        "path_cpu_ratio_checkpoint_vs_plain": written["path_cpu"] / plain["path_cpu"],
        "cpu_per_point": point_cpu,
        "lost_cpu": lost_cpu,
        "lost_cpu_in_points": lost_cpu / point_cpu,
        "lost_wall": killed["seconds"] + resumed["seconds"] - written["seconds"],
        "startup_cpu_resumed": resumed["cpu"] - resumed["path_cpu"],
        "refitted_finished_points": resumed["fits"] + killed["finished"] - written["fits"],
        "same_norms_as_uninterrupted": resumed["norms"] == written["norms"],
        "same_norms_plain_vs_checkpoint": plain["norms"] == written["norms"],
    }


def report(results, out):
    print(f"default DGatedNAMRegressor path, {results['rows']} rows, one thread")
    head = (
        f"{'run':<11} {'wall s':>7} {'CPU s':>7} {'path CPU':>8} {'ckpt I/O CPU':>12} {'fits':>5}"
    )
    print(head)
    for name in ("plain", "checkpoint", "resumed"):
        r = results[name]
        print(
            f"{name:<11} {r['seconds']:7.1f} {r['cpu']:7.1f} {r['path_cpu']:8.1f} "
            f"{r['checkpoint_io_cpu']:12.3f} {r['fits']:5d}"
        )
    k = results["killed"]
    print(
        f"{'killed':<11} {k['seconds']:7.1f} {k['cpu']:7.1f}   after {k['finished']} points "
        f"written, {k['fraction']:.2f} of a point into the next"
    )
    print(
        f"checkpoint: {results['checkpoint_files']} files, "
        f"{results['checkpoint_bytes'] / 1e6:.2f} MB; its work "
        f"{100 * results['io_share_of_path_cpu']:.2f}% of the path's CPU "
        f"(path CPU with / without: {results['path_cpu_ratio_checkpoint_vs_plain']:.3f}x)"
    )
    print(
        f"lost to the kill and resume: {results['lost_cpu']:.1f} CPU s = "
        f"{results['lost_cpu_in_points']:.2f} points of {results['cpu_per_point']:.2f} CPU s "
        f"(a process start: {results['startup_cpu_resumed']:.1f} CPU s; "
        f"wall: {results['lost_wall']:.1f} s); finished points refitted: "
        f"{results['refitted_finished_points']}; resumed == uninterrupted: "
        f"{results['same_norms_as_uninterrupted']}"
    )
    print(results["uptime"])
    write_json(results, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 rows instead of 1,000")
    parser.add_argument("--seed", type=int, default=0, help="draws the moment of the kill")
    parser.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)
    add_out_argument(parser, "checkpoint_resume.json")
    args = parser.parse_args()
    if args.rows is None:
        args.rows = 300 if args.quick else 1000
    if args.child:
        child(args)
        return
    report(run(args), args.out)


if __name__ == "__main__":
    main()
