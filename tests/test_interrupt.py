"""Ctrl-C means stop: a real SIGINT sent to a process while it is inside training.

Each test runs a small script in a subprocess, waits until the script reports that
training is under way, sends SIGINT and reads what the script saw. No interrupt is mocked.
SIGINT goes either to the script's process alone (``kill -INT``; parallel workers do not
see it) or, as a terminal's Ctrl-C does, to its whole process group.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from sksparse_nn import DGatedMLPRegressor
from sksparse_nn.training import EarlyStopping, StopTraining
from sksparse_nn.training.early_stopping import StopWhenConverged
from sksparse_nn.utils.interrupt import InterruptRequested, interrupt_on

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time, warnings
    import numpy as np
    import torch
    from skorch.callbacks import Callback
    from sksparse_nn import DGatedMLPClassifier

    torch.set_num_threads(1)
    warnings.simplefilter("always")
    # a user's Ctrl-C raises KeyboardInterrupt; a child of a shell's background job
    # (`pytest ... &`) starts with SIGINT ignored, and Python then keeps it ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mode = sys.argv[1]
    PID = os.getpid()

    def say(text):  # one write: lines of parallel workers never interleave
        os.write(1, (text + "\\n").encode())

    class Announce(Callback):
        # one line per finished epoch and per finished fit, tagged with the process and
        # the data size (240 rows: the full-data path; 160: a fold)
        def on_epoch_end(self, net, dataset_train=None, **kwargs):
            say(f"EPOCH pid={os.getpid()} rows={len(dataset_train)} lam={net.lam:g} "
                f"{len(net.history)}")
            if mode == "cv2" and os.getpid() == PID:
                time.sleep(0.03)  # the full-data path outlasts the workers' start-up

        def on_train_end(self, net, X=None, **kwargs):
            say(f"END pid={os.getpid()} rows={len(X)} lam={net.lam:g}")

    class Clf(DGatedMLPClassifier):
        def _training_callbacks(self, module):
            return [("announce", Announce())]

    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 8))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    est = Clf(hidden_layer_sizes=(32,), max_epochs=int(sys.argv[2]), random_state=0)
    say(f"START pid={PID}")
    try:
        if mode == "fit":
            est.fit(X, y)
            say("RETURNED")
        else:
            cv = None if mode == "path" else 3
            n_jobs = 2 if mode == "cv2" else None
            with warnings.catch_warnings(record=True) as caught:
                path = est.regularization_path(
                    X, y, lams=[1e-3, 3e-3, 1e-2, 3e-2], cv=cv, n_jobs=n_jobs, verbose=0
                )
            folds = 0 if path.cv_scores is None else len(path.cv_scores)
            cols = 0 if path.cv_scores is None else path.cv_scores.shape[1]
            say(f"PATH completed={path.completed} points={len(path)} folds={folds} "
                f"cols={cols} best={path.best_lam_} lams={path.lams.tolist()}")
            say("WARNED " + " | ".join(str(w.message) for w in caught))
    except KeyboardInterrupt as exc:
        say(f"INTERRUPTED {exc}")
        say(f"FITTED {hasattr(est, 'module_')}")
    """
)

LAMS = [1e-3, 3e-3, 1e-2, 3e-2]


class _Run:
    """The script's output lines, parsed as they arrive."""

    def __init__(self):
        self.lines, self.pid = [], None

    def add(self, line):
        self.lines.append(line)
        if line.startswith("START"):
            self.pid = int(line.split("pid=")[1])

    def tagged(self, kind):
        """(pid, rows, lam) of every EPOCH or END line."""
        out = []
        for line in self.lines:
            if line.startswith(kind + " "):
                fields = dict(f.split("=") for f in line.split()[1:] if "=" in f)
                out.append((int(fields["pid"]), int(fields["rows"]), float(fields["lam"])))
        return out

    def epochs(self):
        return len(self.tagged("EPOCH"))

    def finished_fits(self, rows, lam=None):
        return [t for t in self.tagged("END") if t[1] == rows and (lam is None or t[2] == lam)]

    def line(self, prefix):
        return next((x for x in self.lines if x.startswith(prefix)), None)


def _interrupt(mode, max_epochs, ready, group=False, timeout=120):
    """Run the script; send SIGINT once ``ready(run)``; return (run at the signal, run at
    the end, seconds from the signal to the script's exit)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode, str(max_epochs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=group,  # its own process group, so killpg spares pytest
    )
    run, at_signal, sent_at, start = _Run(), None, None, time.monotonic()
    try:
        for line in proc.stdout:
            run.add(line.rstrip())
            if at_signal is None and ready(run):
                at_signal = _Run()
                at_signal.lines, at_signal.pid = list(run.lines), run.pid
                if group:
                    os.killpg(proc.pid, signal.SIGINT)
                else:
                    proc.send_signal(signal.SIGINT)
                sent_at = time.monotonic()
            if time.monotonic() - start > timeout:
                break
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
    assert at_signal is not None, "training never started:\n" + "\n".join(run.lines[-20:])
    return at_signal, run, time.monotonic() - sent_at


def _summary(run):
    summary = run.line("PATH")
    assert summary is not None, "\n".join(run.lines[-30:])
    fields = dict(f.split("=", 1) for f in summary.split()[1:5])
    return summary, {k: (v if k == "completed" else int(v)) for k, v in fields.items()}


def test_ctrl_c_during_fit_raises_keyboard_interrupt():
    _, run, _ = _interrupt("fit", 100_000, lambda run: run.epochs() >= 3)
    assert run.line("RETURNED") is None  # the fit did not quietly finish a partial model
    interrupted = run.line("INTERRUPTED")
    assert interrupted is not None and "interrupted during epoch" in interrupted, run.lines[-5:]
    assert run.line("FITTED False") is not None


def test_ctrl_c_during_a_path_keeps_the_finished_points():
    # 200 epochs per point: interrupt in the middle of the third point
    def inside_third_point(run):
        return sum(lam == LAMS[2] for _, _, lam in run.tagged("EPOCH")) >= 50

    _, run, _ = _interrupt("path", 200, inside_third_point)
    summary, fields = _summary(run)
    assert fields["completed"] == "False" and fields["points"] == 2, summary
    assert f"lams={LAMS[:2]}" in summary  # only finished points, none presented as done
    assert "interrupted" in run.line("WARNED")


def test_ctrl_c_during_cv_drops_the_unfinished_fold_and_chooses_no_lam():
    # n_jobs=1: the full-data path (4 points), fold 1, then fold 2: interrupt inside it
    def inside_fold_2(run):
        return len(run.finished_fits(160, lam=LAMS[-1])) == 1 and run.tagged("EPOCH")[-1][1:] == (
            160,
            LAMS[1],
        )

    _, run, _ = _interrupt("cv1", 60, inside_fold_2)
    summary, fields = _summary(run)
    assert fields["completed"] == "False" and fields["points"] == 4, summary
    assert fields["folds"] == 1 and fields["cols"] == 4 and "best=None" in summary
    assert "1 of 3 CV folds" in run.line("WARNED")


@pytest.mark.parametrize("group", [False, True], ids=["kill-parent", "terminal-ctrl-c"])
def test_ctrl_c_during_parallel_cv_keeps_finished_folds(group):
    # n_jobs=2: two worker processes run the 3 folds (160 rows) while the script's own
    # process runs the full-data path (240 rows, slowed down so that it usually is still
    # running). Interrupt once a fold has finished and another is still early in its path:
    # the finished one is kept, the other dropped (the parent's SIGINT is forwarded to the
    # workers, which stop within a batch); the full-data path keeps its finished points.
    def one_fold_done_one_early(run):
        if not run.finished_fits(160, lam=LAMS[-1]):
            return False
        last = {}
        for pid, rows, lam in run.tagged("EPOCH"):
            last[pid] = (rows, lam)
        return any(rows == 160 and lam <= LAMS[1] for rows, lam in last.values())

    before, run, seconds = _interrupt("cv2", 60, one_fold_done_one_early, group=group)
    summary, fields = _summary(run)
    assert fields["completed"] == "False" and "best=None" in summary, summary
    assert len(before.finished_fits(160, lam=LAMS[-1])) <= fields["folds"] <= 2, summary
    # the full-data path keeps exactly its finished points: a point is recorded (whole)
    # before the next one starts, so every lam followed by a started one is kept; the last
    # ended fit may or may not have been recorded when SIGINT arrived, one more may end
    started = len({lam for _, rows, lam in before.tagged("EPOCH") if rows == 240})
    ended = len(before.finished_fits(240))
    assert max(started - 1, 0) <= fields["points"] <= min(ended + 1, 4), summary
    assert fields["cols"] == (fields["points"] if fields["folds"] else 0)
    assert "CV folds that finished" in run.line("WARNED")
    assert seconds < 60  # the script stopped (generous: a loaded machine)


# ---- in-process: the stopping signals and callbacks (no signal involved)


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4))
    return X, X[:, 0] + 0.1 * rng.normal(size=80)


class _Net:
    """The parts of a skorch net the callbacks read."""

    def __init__(self, module):
        self.module_, self.history = module, []


def test_early_stopping_uses_stop_training_and_restores_the_best_weights():
    import torch

    module = torch.nn.Linear(2, 1)
    stopper = EarlyStopping(patience=2).initialize()
    net = _Net(module)

    class _History(list):
        def __getitem__(self, key):
            return super().__getitem__(key[0])[key[1]] if isinstance(key, tuple) else key

    net.history = _History()
    best = None
    for epoch, loss in enumerate([3.0, 1.0, 2.0, 5.0]):
        with torch.no_grad():
            module.weight.fill_(epoch)
        net.history.append({"valid_loss": loss})
        if loss == 1.0:
            best = module.weight.detach().clone()
        if epoch < 3:
            stopper.on_epoch_end(net)
        else:
            with pytest.raises(StopTraining):  # two epochs without improvement
                stopper.on_epoch_end(net)
    stopper.on_train_end(net)
    torch.testing.assert_close(module.weight, best)


def test_early_stopping_fit_and_converged_stop_end_training_normally():
    X, y = _data()
    est = DGatedMLPRegressor(
        hidden_layer_sizes=(8,), max_epochs=500, early_stopping=True, n_iter_no_change=3,
        lr=0.05, random_state=0,
    )  # fmt: skip
    est.fit(X, y)  # StopTraining ends it; a fitted model, no KeyboardInterrupt anywhere
    assert est.n_iter_ < 500 and hasattr(est, "module_")
    stop = StopWhenConverged(tol=1e-3)

    class _Hist:
        def __init__(self, losses):
            self.losses = losses

        def __getitem__(self, key):
            return self.losses

    net = _Net(None)
    net.history = _Hist([1.0, float("inf")])
    stop.on_epoch_end(net)  # a non-finite loss is the divergence guard's to judge
    net.history = _Hist([1.0, 1.0])
    with pytest.raises(StopTraining):
        stop.on_epoch_end(net)


def test_forwarded_interrupt_stops_a_fit_in_any_thread(tmp_path):
    import threading

    X, y = _data()
    flag = tmp_path / "interrupt"
    outcome = {}

    class _Raise(DGatedMLPRegressor):
        def _training_callbacks(self, module):
            from skorch.callbacks import Callback

            class _RaiseAt(Callback):
                def on_epoch_end(self, net, **kwargs):
                    if len(net.history) == 5:
                        flag.touch()

            return [("raise_flag", _RaiseAt())]

    def work():  # not the main thread: no signal handlers are involved
        est = _Raise(hidden_layer_sizes=(8,), max_epochs=10_000, random_state=0)
        try:
            with interrupt_on(str(flag)):
                est.fit(X, y)
        except KeyboardInterrupt as exc:
            outcome["exc"], outcome["fitted"] = exc, hasattr(est, "module_")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert isinstance(outcome["exc"], InterruptRequested)  # a KeyboardInterrupt
    assert "epoch 6" in str(outcome["exc"]) and not outcome["fitted"]
