"""CV folds in parallel (joblib) while the calling process runs the full-data path,
with Ctrl-C forwarded to the workers through a flag file (:mod:`sksparse_nn.utils.interrupt`)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager

from joblib import Parallel, delayed

from ..utils.interrupt import interrupt_on
from ._points import fold_scores, run_path

__all__ = ["n_workers", "parallel_path"]


def _fold_task(index, flag, parent, estimator, X, y, train, test, lams, scorer, threads, rest):
    """One fold in a worker: stops when the parent raises ``flag``; a Ctrl-C that reached
    this worker itself (a terminal signals the whole process group) raises it for all.
    ``rest``: the fold's checkpoint store (written from here, or None), the fit
    parameters and :func:`fold_scores`'s ``fit_at`` / ``keep_models``."""
    store, fit_params, folds_at = rest
    # a worker process runs tasks in its main thread; a thread-based backend does not
    alone = threading.current_thread() is threading.main_thread() and os.getpid() != parent
    received = []
    with interrupt_on(flag), _sigint_raises(flag, received, alone):
        out = fold_scores(
            estimator, X, y, train, test, lams, scorer, threads, store, fit_params, **folds_at
        )
    if received or out["interrupted"] == "here":
        out["interrupted"] = "here"
        _raise_flag(flag)
    return index, out


@contextmanager
def _sigint_raises(flag, received, active):
    """In a worker process, a SIGINT raises ``flag`` (and is noted in ``received``) instead
    of raising KeyboardInterrupt at whatever line runs: every fit then stops at its next
    batch boundary, and a fold that is scoring its last point when the terminal's Ctrl-C
    arrives finishes and is kept, exactly as when only the parent was signalled."""
    if not active:
        yield
        return

    def handler(signum, frame):
        received.append(signum)
        _raise_flag(flag)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise_flag(flag):
    try:
        with open(flag, "a"):
            pass
    except OSError:  # the folds have all finished and cleaned up: nothing to stop
        pass


def _collect(outputs, results, errors, done, flag, flag_dir):
    """Consume joblib's unordered results in a helper thread (SIGINT only ever reaches the
    main thread, so finished folds are never lost to joblib's abort on an interrupt)."""
    try:
        for index, out in outputs:
            results[index] = out
    except BaseException as exc:  # noqa: BLE001 (judged by the caller)
        errors.append(exc)
        _raise_flag(flag)  # stop the full-data path too
    finally:
        shutil.rmtree(flag_dir, ignore_errors=True)
        done.set()


def _wait(done):
    # polled sleeps, not Thread.join: a KeyboardInterrupt inside join() makes CPython
    # (< 3.13) report the still running thread as stopped
    while not done.is_set():
        time.sleep(0.02)


def parallel_path(
    base, X, y, lams, splits, scorer, workers, verbose, full_kwargs, stores, folds_at=None
):  # fmt: skip
    """The full-data path in this process (its finished points survive a Ctrl-C as with
    n_jobs=1) while joblib runs the folds, each writing its checkpoint ``stores[k]``
    (None: no checkpoint) and taking ``folds_at`` (:func:`fold_scores`'s ``fit_at`` and
    ``keep_models``); returns (full, folds, error)."""
    folds_at = folds_at or {}
    threads = max(1, (os.cpu_count() or 1) // (workers + 1))
    flag_dir = tempfile.mkdtemp(prefix="sksparse_nn_path_")
    flag = os.path.join(flag_dir, "interrupt")
    parent, fit_params = os.getpid(), full_kwargs.get("fit_params")
    tasks = [
        delayed(_fold_task)(
            k,
            flag,
            parent,
            base,
            X,
            y,
            train,
            test,
            lams,
            scorer,
            threads,
            (stores[k], fit_params, folds_at),
        )
        for k, (train, test) in enumerate(splits)
    ]
    results, errors, done = {}, [], threading.Event()
    try:
        # dispatch starts here, in this thread (joblib's backend config is thread-local)
        parallel = Parallel(n_jobs=workers, return_as="generator_unordered", verbose=verbose)
        outputs = parallel(tasks)
    except BaseException:
        shutil.rmtree(flag_dir, ignore_errors=True)
        raise
    collector = threading.Thread(
        target=_collect, args=(outputs, results, errors, done, flag, flag_dir), daemon=True
    )
    collector.start()
    full, interrupted_here = None, False
    try:
        with interrupt_on(flag):  # a fold's error or Ctrl-C stops this path too
            full = run_path(base, X, y, lams, threads=threads, verbose=verbose, **full_kwargs)
        if full["completed"]:
            _wait(done)
    except KeyboardInterrupt:
        interrupted_here = True
    except BaseException:
        _raise_flag(flag)
        _wait(done)
        raise
    if full is None:  # interrupted outside the path's own loop
        full = {"completed": False, "interrupted": "here", "diverged": None, "points": [],
                "has_coef": False, "feature_names": None}  # fmt: skip
    interrupted_here = interrupted_here or full["interrupted"] == "here"
    if not done.is_set():  # interrupted: the running folds stop within one batch
        _raise_flag(flag)
        try:
            _wait(done)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for remote workers
            interrupted_here = True
    results = results.copy()  # after a second Ctrl-C the helper may still be adding
    folds = [results[k] for k in sorted(results)]
    # After a Ctrl-C (a terminal sends it to the workers too), a worker's
    # KeyboardInterrupt or a worker killed by it is part of the interruption; otherwise
    # a fold's error is the caller's error.
    interrupted_here = interrupted_here or any(f["interrupted"] == "here" for f in folds)
    error = None
    if errors and not interrupted_here and not isinstance(errors[0], KeyboardInterrupt):
        error = errors[0]
    if errors or interrupted_here:
        full["completed"] = False
    return full, folds, error


def n_workers(n_jobs, n_tasks):
    if n_jobs is None or n_jobs == 1:
        return 1
    n = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
    return max(1, min(n, n_tasks))
