"""Checkpoints of paths and CV searches: a run killed (SIGKILL) at a random moment and
resumed gives the uninterrupted run's result without refitting a finished point; another
computation is refused; damaged files are recomputed with a warning.

Fits are counted through the log of ``_checkpoint_family.CountingMLP`` (every fit, in any
process, appends its data's size, a fingerprint of its rows and its lam). Every fit here
runs on one torch thread (small fits do, whatever ``n_jobs`` gives a worker; the scripts
set one thread, and so does ``one_thread`` for this process where a test compares with a
script's points, whatever ``SKSPARSE_NN_TEST_THREADS`` gives the session) with the same
seed, so a resumed run computes the very same floats as an uninterrupted one: results are
compared exactly.
"""

import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from _checkpoint_family import LOG, SLEEP, data, estimator, read_fits
from sklearn.model_selection import KFold
from sklearn.utils._param_validation import InvalidParameterError

from sksparse_nn import SparsePathCV, TrainingDivergedError, regularization_path

# four epochs: every path says it stopped before converging, which is not the point here
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

LAMS = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    torch.set_num_threads(1)
    from _checkpoint_family import data, estimator
    from sksparse_nn import SparsePathCV, regularization_path

    mode, directory, lams = sys.argv[1], sys.argv[2], [float(v) for v in sys.argv[3:]]
    X, y = data()
    if mode == "path":
        regularization_path(estimator(), X, y, lams=lams, checkpoint=directory)
    else:
        SparsePathCV(estimator(), lams=lams, cv=3, n_jobs=2, checkpoint=directory).fit(X, y)
    print("FINISHED", flush=True)
    """
)


@pytest.fixture
def one_thread(monkeypatch):
    """This process computes on one torch thread, as the scripts do: the points a killed
    script finished and the ones this process fits are then the same arithmetic (the
    session may run with more threads, and then with its small fits on them too)."""
    from sksparse_nn.training import runtime

    monkeypatch.setattr(runtime, "SMALL_STEP_WORK", 2**20)  # the shipped policy
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def fit_log(tmp_path, monkeypatch):
    """The file this test's fits are logged to (in this process and its workers)."""
    path = tmp_path / "fits.log"
    monkeypatch.setenv(LOG, str(path))
    monkeypatch.delenv(SLEEP, raising=False)
    return path


def _paths(X, splits):
    """{column-0 sum of a path's rows: its name} ("full", "fold-K")."""
    names = {float(X[:, 0].sum()): "full"}
    for k, (train, _) in enumerate(splits):
        names[float(X[train, 0].sum())] = f"fold-{k}"
    assert len(names) == len(splits) + 1  # the fingerprint tells the paths apart
    return names


def _fits(log, names):
    """Counter of (path, lam) over the logged fits."""
    return Counter((names[s], lam) for _, s, lam in read_fits(log))


def _finished(directory, names):
    """The (path, lam) of the point files in a checkpoint (ascending paths: file k is
    the k-th lam)."""
    found = set()
    for name in names.values():
        for file in (directory / name).glob("point-*.pkl"):
            found.add((name, LAMS[int(file.stem.split("-")[1])]))
    return found


def _kill_at_random(mode, directory, log, seed):
    """Run the script (each fit slowed down by 0.15 s) and SIGKILL its process group once
    ``k`` point files exist (``k`` drawn from ``seed``), after a random part of a fit."""
    rng = random.Random(seed)
    total = len(LAMS) * (1 if mode == "path" else 4)
    k = rng.randint(1, total - 2)
    env = {**os.environ, LOG: str(log), SLEEP: "0.15", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *sys.path])
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode, str(directory), *map(str, LAMS)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the workers die with it
    )
    deadline = time.monotonic() + 120
    try:
        while len(list(directory.glob("*/point-*.pkl"))) < k:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the script wrote no points"
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.15))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had stopped (the assertion says why)
            pass
        output = proc.communicate()[0].decode()
    assert "FINISHED" not in output, f"the run finished before the kill (seed {seed})"
    return k


@pytest.mark.parametrize(
    # a parallel CV search: its script starts two joblib workers (~20-30 s on 2 cores)
    "mode",
    ["path", pytest.param("cv", marks=pytest.mark.slow)],
)
def test_a_run_killed_at_a_random_moment_resumes_without_refitting(
    tmp_path, fit_log, one_thread, mode
):
    # a new moment at every run, named in every failure message (and replayed by
    # CHECKPOINT_KILL_SEED=<seed>)
    seed = int(os.environ.get("CHECKPOINT_KILL_SEED") or random.SystemRandom().randrange(2**32))
    X, y = data()
    splits = list(KFold(3).split(X)) if mode == "cv" else []
    names = _paths(X, splits)
    directory = tmp_path / "checkpoint"
    killed_log = tmp_path / "killed.log"
    k = _kill_at_random(mode, directory, killed_log, seed)
    finished = _finished(directory, names)
    assert len(finished) >= k, f"seed {seed}"  # the points seen before the kill are kept
    assert len(finished) < len(LAMS) * len(names), f"seed {seed}"
    # every finished point was fitted (once) by the killed run
    assert finished <= set(_fits(killed_log, names)), f"seed {seed}"

    if mode == "path":
        resumed = regularization_path(estimator(), X, y, lams=LAMS, checkpoint=directory)
        resumed_fits = _fits(fit_log, names)
        fit_log.unlink()
        plain = regularization_path(estimator(), X, y, lams=LAMS)
    else:
        # resumed in this process (n_jobs=1: the checkpoint does not depend on it)
        search = SparsePathCV(estimator(), lams=LAMS, cv=3, checkpoint=directory)
        resumed = search.fit(X, y).cv_path_
        resumed_fits = _fits(fit_log, names)
        fit_log.unlink()
        reference = SparsePathCV(estimator(), lams=LAMS, cv=3).fit(X, y)
        plain = reference.cv_path_
        assert search.lam_ == reference.lam_, f"seed {seed}"
        np.testing.assert_array_equal(search.predict(X), reference.predict(X), f"seed {seed}")
        np.testing.assert_array_equal(resumed.cv_scores, plain.cv_scores, f"seed {seed}")
    everything = _fits(fit_log, names)
    # nothing finished is refitted, every other point is fitted once
    assert not finished & set(resumed_fits), f"seed {seed}: refitted"
    assert max(resumed_fits.values(), default=1) == 1, f"seed {seed}"
    assert set(resumed_fits) | finished == set(everything), f"seed {seed}"
    np.testing.assert_array_equal(resumed.lams, plain.lams)
    np.testing.assert_array_equal(resumed.group_norms, plain.group_norms, f"seed {seed}")
    np.testing.assert_array_equal(resumed.train_score, plain.train_score, f"seed {seed}")
    assert resumed.completed


def test_a_finished_checkpoint_refits_nothing_and_keeps_the_chosen_model(tmp_path, fit_log):
    X, y = data()
    first = SparsePathCV(estimator(), lams=LAMS[:3], cv=2, checkpoint=tmp_path).fit(X, y)
    fitted = len(read_fits(fit_log))
    assert fitted == 3 * 3  # the full-data path and two folds
    again = SparsePathCV(estimator(), lams=LAMS[:3], cv=2, checkpoint=tmp_path).fit(X, y)
    assert len(read_fits(fit_log)) == fitted  # not one fit more
    assert again.lam_ == first.lam_
    np.testing.assert_array_equal(again.cv_path_.cv_scores, first.cv_path_.cv_scores)
    np.testing.assert_array_equal(again.predict(X), first.predict(X))
    # the kept model is the estimator as configured, not the path's warm-start copy
    assert again.estimator_.get_params()["warm_start"] is False


@pytest.fixture
def saved_run(tmp_path, fit_log):
    """A finished two-fold checkpoint and the arguments that made it."""
    X, y = data()
    kwargs = {"lams": LAMS[:2], "cv": KFold(2), "checkpoint": tmp_path / "run"}
    regularization_path(estimator(), X, y, **kwargs)
    fit_log.unlink()
    return X, y, kwargs


@pytest.mark.parametrize(
    "change, named",
    [
        ({"X": "other"}, r"the data \(X: other values\)"),
        ({"y": "other"}, r"the data \(y: other values\)"),
        ({"max_epochs": 5}, r"estimator parameter 'max_epochs' \(4 there, 5 now\)"),
        ({"lams": LAMS[:3]}, r"the lam grid \(2 lams .* there, 3 lams"),
        ({"cv": KFold(3)}, r"the CV splits \(2 folds there, 3 now\)"),
        ({"cv": KFold(2, shuffle=True, random_state=1)}, "other rows in the folds"),
        ({"scoring": "r2"}, r"the scoring \(None there, 'r2' now\)"),
        ({"X_val": "other"}, r"the validation data \(X_val and y_val"),
    ],
)
def test_another_computation_is_refused_naming_what_differs(saved_run, fit_log, change, named):
    X, y, kwargs = saved_run
    kwargs = dict(kwargs)
    est = estimator()
    if "X" in change:
        X = X.copy()
        X[0, 0] += 1e-9
    elif "y" in change:
        y = y + 1e-9
    elif "max_epochs" in change:
        est.set_params(**change)
    elif "X_val" in change:
        kwargs.update(X_val=X[:5], y_val=y[:5])
    else:
        kwargs.update(change)
    with pytest.raises(ValueError, match="refusing to mix") as info:
        regularization_path(est, X, y, **kwargs)
    assert info.match(named)
    assert not fit_log.exists()  # refused before any fit
    # the progress output changes no number: not a reason to refuse
    regularization_path(estimator().set_params(verbose=0, lam=5.0), *saved_run[:2], **saved_run[2])
    assert not fit_log.exists()


def test_a_damaged_point_file_is_recomputed_with_a_warning(tmp_path, fit_log):
    X, y = data()
    plain = regularization_path(estimator(), X, y, lams=LAMS)
    fit_log.unlink()
    regularization_path(estimator(), X, y, lams=LAMS, checkpoint=tmp_path)
    fit_log.unlink()
    file = tmp_path / "full" / "point-0002.pkl"
    file.write_bytes(file.read_bytes()[:-100])  # a partly written file
    (tmp_path / "full" / ".point-0003.pkl.123.abc.tmp").write_bytes(b"a killed write")
    with pytest.warns(UserWarning, match=r"point-0002.pkl \(point 2 of path 'full'\) is unusable"):
        resumed = regularization_path(estimator(), X, y, lams=LAMS, checkpoint=tmp_path)
    # from the damaged point on, the path is recomputed (the later points continued it)
    assert sorted(lam for _, _, lam in read_fits(fit_log)) == LAMS[2:]
    np.testing.assert_array_equal(resumed.group_norms, plain.group_norms)
    assert not list((tmp_path / "full").glob(".*.tmp"))  # a killed write's leftover


def test_a_damaged_manifest_is_replaced_and_the_run_s_points_kept(tmp_path, fit_log):
    X, y = data()
    regularization_path(estimator(), X, y, lams=LAMS[:3], checkpoint=tmp_path)
    fit_log.unlink()
    manifest = tmp_path / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    with pytest.warns(UserWarning, match="manifest.json is unusable"):
        regularization_path(estimator(), X, y, lams=LAMS[:3], checkpoint=tmp_path)
    assert not fit_log.exists()  # the point files carry the run's key: still this run's
    # a manifest of another run, whose files then carry another key: all recomputed
    manifest.write_text(manifest.read_text()[:40])
    with pytest.warns(UserWarning) as caught:
        regularization_path(estimator(), X, y, lams=LAMS[1:4], checkpoint=tmp_path)
    said = [str(w.message) for w in caught]
    assert any("manifest.json is unusable" in text for text in said), said
    assert any("point-0000.pkl (point 0 of path 'full')" in text for text in said), said
    assert any("belongs to another run" in text for text in said), said
    assert sorted(lam for _, _, lam in read_fits(fit_log)) == LAMS[1:4]


class _DivergingMLP(type(estimator())):
    """Training "diverges" at lam >= 1e-2 (a test double for the bookkeeping)."""

    def fit(self, X, y, **kwargs):
        if self.lam >= 1e-2:
            raise TrainingDivergedError(f"diverged at lam={self.lam}", lam=self.lam)
        return super().fit(X, y, **kwargs)


def test_a_diverged_point_is_kept_and_not_retrained(tmp_path, fit_log):
    X, y = data()
    est = _DivergingMLP(**estimator().get_params())
    with pytest.warns(UserWarning, match="diverged at lam=0.01"):
        first = regularization_path(est, X, y, lams=LAMS, checkpoint=tmp_path)
    fit_log.unlink()
    with pytest.warns(UserWarning, match="diverged at lam=0.01"):
        again = regularization_path(est, X, y, lams=LAMS, checkpoint=tmp_path)
    assert not fit_log.exists()
    np.testing.assert_array_equal(again.failed, first.failed)
    assert again.failed.tolist() == [False, False, True]


def test_dask_workers_write_their_folds(tmp_path, fit_log):
    distributed = pytest.importorskip("dask.distributed")
    from joblib import parallel_config

    X, y = data()
    kwargs = {"lams": LAMS[:3], "cv": 2, "checkpoint": tmp_path}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        with distributed.Client(cluster), parallel_config(backend="dask"):
            remote = regularization_path(estimator(), X, y, n_jobs=2, **kwargs)
    assert len(list(tmp_path.glob("fold-*/point-*.pkl"))) == 2 * 3
    fit_log.unlink()
    local = regularization_path(estimator(), X, y, **kwargs)
    assert not fit_log.exists()
    np.testing.assert_array_equal(local.cv_scores, remote.cv_scores)


def test_bad_checkpoint_arguments(tmp_path):
    X, y = data()
    file = tmp_path / "a-file"
    file.write_text("")
    with pytest.raises(ValueError, match="is a file, not a directory"):
        regularization_path(estimator(), X, y, lams=LAMS[:1], checkpoint=file)
    with pytest.raises(InvalidParameterError, match="checkpoint"):
        SparsePathCV(estimator(), lams=LAMS[:2], checkpoint=3).fit(X, y)
    # a store travels to the workers as its directory and the run's key
    from sksparse_nn.path._checkpoint import PathStore

    store = pickle.loads(pickle.dumps(PathStore(str(tmp_path), "fold-0", "k")))
    assert (store.directory, store.key) == (str(tmp_path / "fold-0"), "k")
    # a worker that does not see the run's manifest (no shared storage) writes nothing
    with pytest.raises(FileNotFoundError, match="storage that every worker sees"):
        store.save(0, {"lam": 1.0}, None)
    assert not (tmp_path / "fold-0").exists()


def test_a_torch_module_parameter_is_compared_by_its_structure_and_weights():
    torch = pytest.importorskip("torch")
    from sksparse_nn import DGatedNeuralNetRegressor
    from sksparse_nn.path._fingerprint import describe_run, differences

    def described(seed, width=4):
        torch.manual_seed(seed)
        module = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.ReLU())
        est = DGatedNeuralNetRegressor(module=module, gates=["0.weight"])
        X, y = data(p=3)
        return describe_run(est, X, y, None, None, LAMS, False, [], None)

    # two modules built alike (their pickles differ) are the same parameter
    assert differences(described(0), described(0)) == []
    for other in (described(1), described(0, width=5)):  # other weights, other layers
        assert differences(described(0), other) == [
            f"estimator parameter 'module' ({described(0)['parameters']['module']['repr']} "
            f"there, {other['parameters']['module']['repr']} now)"
        ]
