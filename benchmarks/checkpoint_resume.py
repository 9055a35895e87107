"""What a kill costs a checkpointed path: the time lost to a SIGKILL and a resume.

A default ``regularization_path`` of ``DGatedNAMRegressor`` (its 16-lam default grid,
extended upward until the model is empty; only ``random_state`` set) on the additive
simulation (``make_additive_regression``, 1,000 rows, 20 features). Each run is a fresh
single-threaded process of this script (``--child``):

1. ``plain``: the path without a checkpoint;
2. ``checkpoint``: the same path writing every point;
3. ``killed``: the same, SIGKILLed once ``k`` points are written plus a random part of
   the next point (``k`` and the fraction drawn from each of ``--seeds``);
4. ``resumed``: the same command again, on the killed run's checkpoint.

Every run's CPU time is taken whole (imports included: ``/proc/<pid>/stat`` of the
killed one just before the kill); CPU seconds grow far less than wall seconds when other
processes share the cores (both are recorded, with the load). The time lost is
``killed + resumed - checkpoint``, made of the killed process's work after its last saved
point (its CPU seconds at every save are logged to a file that survives the kill), a
second process start and the reading of the checkpoint; the rest is the noise of
refitting the same points. The checkpoint's own work (opening it, scanning, writing and
reading the points) is timed inside the runs. The fits of every run are counted: the
resumed run must fit exactly the points the killed one had not finished, and give the
uninterrupted run's group norms exactly.

Usage::

    python benchmarks/checkpoint_resume.py [--quick] [--seeds N ...] [--out FILE]

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


def _timing_checkpoint_io(spent, stamps):
    """Add the CPU seconds of the checkpoint's work to ``spent``: ``"write"`` (saving
    points) and ``"read"`` (opening the directory, scanning and restoring points); the
    process's CPU seconds after every saved point are appended to the file ``stamps``
    (it survives a kill)."""
    from sksparse_nn.path import _checkpoint, _engine

    def timed(fn, kind):
        def wrapper(*args, **kwargs):
            cpu = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[kind] += time.process_time() - cpu
                if kind == "write" and stamps:
                    with open(stamps, "a") as handle:
                        handle.write(f"{time.process_time()}\n")

        return wrapper

    for name in ("save", "restore", "scan", "load_start", "save_start"):
        kind = "write" if name.startswith("save") else "read"
        setattr(_checkpoint.PathStore, name, timed(getattr(_checkpoint.PathStore, name), kind))
    _engine.open_checkpoint = timed(_engine.open_checkpoint, "read")


def child(args):
    """One run of the path in this process; prints its numbers as JSON."""
    single_thread()
    spent = {"write": 0.0, "read": 0.0}
    _timing_checkpoint_io(spent, args.stamps)
    X, y = make_additive_regression(n_samples=args.rows, n_noise=15, random_state=0)
    wall, cpu = time.perf_counter(), time.process_time()
    path = regularization_path(
        CountingNAM(random_state=0), X, y, checkpoint=args.checkpoint or None
    )
    out = {
        "path_seconds": time.perf_counter() - wall,
        "path_cpu": time.process_time() - cpu,
        "cpu": time.process_time(),  # the whole process, imports included
        "write_cpu": spent["write"],
        "read_cpu": spent["read"],
        "fits": CountingNAM.fits,
        "points": len(path),
        "norms": np.asarray(path.group_norms).tolist(),
    }
    print("RESULT " + json.dumps(out), flush=True)


def _spawn(args, checkpoint):
    command = [sys.executable, str(HERE), "--child", "--rows", str(args.rows)]
    command += ["--checkpoint", checkpoint or ""]
    if checkpoint:
        command += ["--stamps", checkpoint + ".stamps"]
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
    stamps = [float(x) for x in Path(checkpoint + ".stamps").read_text().split()]
    return {
        "seconds": seconds,
        "cpu": cpu,
        "k": k,
        "fraction": fraction,
        "finished": finished,
        "tail_cpu": cpu - stamps[-1],  # the work after its last saved point: lost
    }


def one_seed(args, seed, work):
    """The four runs, with the kill drawn from ``seed``."""
    rng = random.Random(seed)
    plain = timed_run(args, None)
    written = timed_run(args, str(work / f"uninterrupted-{seed}"))
    files = [f for f in (work / f"uninterrupted-{seed}").rglob("*") if f.is_file()]
    point_seconds = written["path_seconds"] / written["fits"]
    killed = killed_run(args, str(work / f"killed-{seed}"), point_seconds, rng)
    resumed = timed_run(args, str(work / f"killed-{seed}"))
    point_cpu = written["path_cpu"] / written["fits"]
    lost_cpu = killed["cpu"] + resumed["cpu"] - written["cpu"]
    startup = resumed["cpu"] - resumed["path_cpu"]
    # what the loss is made of: the killed process's work after its last saved point, a
    # process start, reading the checkpoint (the rest: the resumed points' CPU differing
    # from the uninterrupted run's, noise of a loaded machine)
    parts = killed["tail_cpu"] + startup + resumed["read_cpu"]
    return {
        "seed": seed,
        "plain": {k: v for k, v in plain.items() if k != "norms"},
        "checkpoint": {k: v for k, v in written.items() if k != "norms"},
        "killed": killed,
        "resumed": {k: v for k, v in resumed.items() if k != "norms"},
        "checkpoint_bytes": sum(f.stat().st_size for f in files),
        "checkpoint_files": len(files),
        "write_share_of_path_cpu": written["write_cpu"] / written["path_cpu"],
        "cpu_per_point": point_cpu,
        "lost_cpu": lost_cpu,
        "lost_cpu_parts": parts,
        "startup_cpu": startup,
        "lost_wall": killed["seconds"] + resumed["seconds"] - written["seconds"],
        "refitted_finished_points": resumed["fits"] + killed["finished"] - written["fits"],
        "same_norms_as_uninterrupted": resumed["norms"] == written["norms"],
        "same_norms_plain_vs_checkpoint": plain["norms"] == written["norms"],
    }


def run(args):
    work = Path(tempfile.mkdtemp(prefix="checkpoint_resume_"))
    try:
        runs = [one_seed(args, seed, work) for seed in args.seeds]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "machine": machine(),
        "uptime": os.popen("uptime").read().strip(),
        "rows": args.rows,
        "runs": runs,
    }


def report(results, out):
    print(f"default DGatedNAMRegressor path, {results['rows']} rows, one thread (CPU seconds)")
    print(
        f"{'seed':>4} {'plain':>6} {'ckpt':>6} {'killed':>6} {'resumed':>7} {'points':>9} "
        f"{'write %':>7} {'lost':>5} {'= tail':>6} {'+ start':>7} {'+ read':>6} "
        f"{'refit':>5} {'same':>5}"
    )
    for r in results["runs"]:
        k = r["killed"]
        print(
            f"{r['seed']:4d} {r['plain']['cpu']:6.1f} {r['checkpoint']['cpu']:6.1f} "
            f"{k['cpu']:6.1f} {r['resumed']['cpu']:7.1f} {k['finished']:9d} "
            f"{100 * r['write_share_of_path_cpu']:7.2f} {r['lost_cpu']:5.1f} "
            f"{k['tail_cpu']:6.2f} {r['startup_cpu']:7.1f} {r['resumed']['read_cpu']:6.2f} "
            f"{r['refitted_finished_points']:5d} "
            f"{str(r['same_norms_as_uninterrupted']):>5}"
        )
    print(
        "points: written before the kill; write %: saving points, "
        "share of the path's CPU; lost: killed + resumed - uninterrupted (noisy under "
        "load), its parts: the killed process's work after its last saved point, a "
        "process start, reading the checkpoint (the rest: noise in refitting the same "
        f"points; CPU per point: {results['runs'][0]['cpu_per_point']:.2f} s)"
    )
    print(results["uptime"])
    write_json(results, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 rows instead of 1,000")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="draw the moments of the kills"
    )
    parser.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stamps", default=None, help=argparse.SUPPRESS)
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
