"""What a kill costs a checkpointed path: the time lost to a SIGKILL and a resume.

A default ``regularization_path`` of ``DGatedNAMRegressor`` (its 16-lam default grid,
extended upward until the model is empty; only ``random_state`` set) on the additive
simulation (``make_additive_regression``, 1,000 rows, 20 features), one thread. Each run
is a fresh single-threaded process of this script (``--child``), timed from its start
(imports included) to its exit:

1. ``plain``: the path without a checkpoint;
2. ``checkpoint``: the same path writing every point (the cost of writing: its path's
   time against the plain one's, imports left out);
3. ``killed``: the same, SIGKILLed once ``k`` points are written plus a random part of
   the next point (``k`` and the fraction drawn from ``--seed``);
4. ``resumed``: the same command again, on the killed run's checkpoint.

The time lost is ``killed + resumed - checkpoint``: what the killed part of a point, a
second process start and reading the checkpoint cost. The fits of every run are
counted (a subclass counting ``fit`` calls): the resumed run must fit exactly the points
the killed one had not finished, and give the uninterrupted run's group norms exactly.

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


class CountingNAM(DGatedNAMRegressor):
    """The default NAM, counting its fits (in the process that runs them)."""

    fits = 0

    def fit(self, X, y, **kwargs):
        type(self).fits += 1
        return super().fit(X, y, **kwargs)


def child(args):
    """One run of the path in this process; prints its fits and norms as JSON."""
    single_thread()
    X, y = make_additive_regression(n_samples=args.rows, n_noise=15, random_state=0)
    start = time.perf_counter()
    path = regularization_path(
        CountingNAM(random_state=0), X, y, checkpoint=args.checkpoint or None
    )
    out = {
        "path_seconds": time.perf_counter() - start,
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


def _finish(proc, start):
    output, _ = proc.communicate()
    seconds = time.perf_counter() - start
    line = next((x for x in output.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the child failed (exit {proc.returncode}):\n{output[-2000:]}")
    return {**json.loads(line[len("RESULT ") :]), "seconds": seconds}


def timed_run(args, checkpoint):
    start = time.perf_counter()
    return _finish(_spawn(args, checkpoint), start)


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
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seconds = time.perf_counter() - start
    finished = len(list(points.glob("point-*.pkl")))
    return {"seconds": seconds, "k": k, "fraction": fraction, "finished": finished}


def run(args):
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="checkpoint_resume_"))
    try:
        plain = timed_run(args, None)
        written = timed_run(args, str(work / "uninterrupted"))
        point_seconds = written["path_seconds"] / written["fits"]
        size = sum(f.stat().st_size for f in (work / "uninterrupted").rglob("*") if f.is_file())
        killed = killed_run(args, str(work / "killed"), point_seconds, rng)
        resumed = timed_run(args, str(work / "killed"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lost = killed["seconds"] + resumed["seconds"] - written["seconds"]
    return {
        "machine": machine(),
        "uptime": os.popen("uptime").read().strip(),
        "rows": args.rows,
        "seed": args.seed,
        "plain": {k: v for k, v in plain.items() if k != "norms"},
        "checkpoint": {k: v for k, v in written.items() if k != "norms"},
        "killed": killed,
        "resumed": {k: v for k, v in resumed.items() if k != "norms"},
        "write_overhead": written["path_seconds"] / plain["path_seconds"],
        "checkpoint_bytes": size,
        "seconds_per_point": point_seconds,
        "lost_seconds": lost,
        "lost_in_points": lost / point_seconds,
        "refitted_finished_points": resumed["fits"] + killed["finished"] - written["fits"],
        "same_norms_as_uninterrupted": resumed["norms"] == written["norms"],
        "same_norms_plain_vs_checkpoint": plain["norms"] == written["norms"],
    }


def report(results, out):
    print(f"default DGatedNAMRegressor path, {results['rows']} rows, one thread")
    print(f"{'run':<12} {'process s':>9} {'path s':>7} {'fits':>5} {'points':>6}")
    for name in ("plain", "checkpoint", "resumed"):
        r = results[name]
        print(
            f"{name:<12} {r['seconds']:9.1f} {r['path_seconds']:7.1f} {r['fits']:5d} "
            f"{r['points']:6d}"
        )
    k = results["killed"]
    print(
        f"{'killed':<12} {k['seconds']:8.1f}   (after {k['finished']} points written, "
        f"{k['fraction']:.2f} of a point into the next)"
    )
    print(
        f"writing: {results['write_overhead']:.3f}x the plain path "
        f"({results['checkpoint_bytes'] / 1e6:.1f} MB); "
        f"one point ~{results['seconds_per_point']:.1f} s; "
        f"lost to the kill and resume: {results['lost_seconds']:.1f} s "
        f"({results['lost_in_points']:.2f} points); finished points refitted: "
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
