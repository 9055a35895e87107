"""Ctrl-C means stop: a real SIGINT sent to a process while it is inside training.

Each test runs a small script in a subprocess, waits until the script reports that
training is under way, sends SIGINT and reads what the script saw. No interrupt is mocked.
"""

import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent(
    """
    import sys, warnings
    import numpy as np
    import torch
    from skorch.callbacks import Callback
    from sksparse_nn import DGatedMLPClassifier

    torch.set_num_threads(1)
    warnings.simplefilter("always")
    mode = sys.argv[1]

    class Announce(Callback):
        # prints one line per finished epoch, so the parent knows training is under way
        def on_epoch_end(self, net, **kwargs):
            print(f"EPOCH {len(net.history)}", flush=True)

    class Clf(DGatedMLPClassifier):
        def _make_net(self, module, dataset, seed):
            net = super()._make_net(module, dataset, seed)
            net.callbacks.append(("announce", Announce()))
            return net

    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 8))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    est = Clf(hidden_layer_sizes=(32,), max_epochs=int(sys.argv[2]), random_state=0)
    try:
        if mode == "fit":
            est.fit(X, y)
            print("RETURNED", flush=True)
        else:
            cv = None if mode == "path" else 3
            n_jobs = 2 if mode == "cv2" else None
            with warnings.catch_warnings(record=True) as caught:
                path = est.regularization_path(
                    X, y, lams=[1e-3, 3e-3, 1e-2, 3e-2], cv=cv, n_jobs=n_jobs, verbose=0
                )
            folds = 0 if path.cv_scores is None else len(path.cv_scores)
            print(f"PATH completed={path.completed} points={len(path)} folds={folds} "
                  f"best={path.best_lam_}", flush=True)
            print("WARNED " + " | ".join(str(w.message) for w in caught), flush=True)
    except KeyboardInterrupt as exc:
        print(f"INTERRUPTED {exc}", flush=True)
        print(f"FITTED {hasattr(est, 'module_')}", flush=True)
    """
)


def _interrupt(mode, max_epochs, after, timeout=120):
    """Run the script, send SIGINT once ``after(line)`` is true, return all output."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode, str(max_epochs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    lines, sent, start = [], False, time.monotonic()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if not sent and after(line, lines):
                proc.send_signal(signal.SIGINT)
                sent = True
            if time.monotonic() - start > timeout:
                break
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sent, "training never started:\n" + "\n".join(lines[-20:])
    return lines


def _epochs(lines):
    return sum(line.startswith("EPOCH") for line in lines)


def test_ctrl_c_during_fit_raises_keyboard_interrupt():
    lines = _interrupt("fit", 100_000, lambda line, lines: _epochs(lines) >= 3)
    assert "RETURNED" not in lines  # the fit did not quietly finish with a partial model
    interrupted = [line for line in lines if line.startswith("INTERRUPTED")]
    assert interrupted and "epoch" in interrupted[0]
    assert "FITTED False" in lines


def test_ctrl_c_during_a_path_keeps_the_finished_points():
    # 200 epochs per point: interrupt in the middle of the third point
    lines = _interrupt("path", 200, lambda line, lines: _epochs(lines) >= 2 * 200 + 50)
    summary = next(line for line in lines if line.startswith("PATH"))
    assert "completed=False" in summary and "points=2" in summary
    assert "interrupted" in next(line for line in lines if line.startswith("WARNED"))


def test_ctrl_c_during_cv_drops_the_unfinished_fold_and_chooses_no_lam():
    # n_jobs=1: the full-data path (4 points) then fold 1; interrupt inside fold 2
    per_path = 4 * 60
    lines = _interrupt("cv1", 60, lambda line, lines: _epochs(lines) >= 2 * per_path + 30)
    summary = next(line for line in lines if line.startswith("PATH"))
    assert "completed=False" in summary and "points=4" in summary
    assert "folds=1" in summary and "best=None" in summary
    assert "1 of 3 folds finished" in next(line for line in lines if line.startswith("WARNED"))


def test_ctrl_c_during_parallel_cv_keeps_finished_folds():
    # n_jobs=2: two workers run the full-data path and fold 1 side by side (their epochs
    # reach the same stdout), then folds 2 and 3; interrupt the parent inside those
    per_path = 4 * 60
    lines = _interrupt("cv2", 60, lambda line, lines: _epochs(lines) >= 2 * per_path + 60)
    summary = next(line for line in lines if line.startswith(("PATH", "INTERRUPTED")))
    assert summary.startswith("PATH"), lines[-20:]
    assert "completed=False" in summary and "points=4" in summary and "best=None" in summary
    folds = int(summary.split("folds=")[1].split()[0])
    assert 1 <= folds < 3  # fold 1 kept, the unfinished ones dropped
