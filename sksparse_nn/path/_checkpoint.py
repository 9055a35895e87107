"""Checkpoints of a path computation: every finished point written to plain files, so that
a rerun resumes after the last finished point of each path.

A checkpoint directory holds ``manifest.json`` (what the run is:
:func:`~sksparse_nn.path._fingerprint.describe_run`) and one subdirectory per path,
``full`` for the full-data path and ``fold-K`` for CV fold K, with a file per finished
point (``point-0003.pkl``: the point's record and the fitted estimator the next point
warm-starts from) and ``start.pkl`` for an estimator's unrecorded start model
(``path_start()``). Only one process writes a given path's files (the caller writes the
manifest and the full-data path, each fold's worker its fold), every file is written to
a temporary name and renamed (``os.replace``: a reader sees a whole file or none), and
every file carries a checksum and the run's key, so a damaged or foreign file is found,
reported and recomputed. The directory can live on storage that every Dask worker sees.

Point files are pickles: load checkpoints only from a directory you trust.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pickle
import uuid
import warnings

import numpy as np

from ._fingerprint import GRID_RTOL, describe_run, differences, run_key

__all__ = ["PathStore", "open_checkpoint"]

MANIFEST = "manifest.json"
FORMAT = 1
#: What every file of a path starts with (then a JSON header line, the payload's sha256
#: and the pickled payload).
MAGIC = b"SKSPARSE_NN-CKPT1\n"


def _warn(text):
    warnings.warn(text, UserWarning, stacklevel=4)


def _write_atomic(path, data):
    """Write ``data`` (bytes) to ``path`` through a temporary file renamed over it: the
    file is whole or absent, whatever stops the process; fsync'd, so a closed laptop or a
    lost node keeps it too."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def _pack(header, payload):
    """A file's bytes: MAGIC, the header (JSON: the run's key, what the file holds) on one
    line, the sha256 of the pickled payload, the payload."""
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    line = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n"
    return MAGIC + line + hashlib.sha256(body).digest() + body


def _verify(data, key):
    """(header, pickled payload) of a file's bytes; ValueError when they are damaged or
    belong to another run (checked without unpickling)."""
    if not data.startswith(MAGIC):
        raise ValueError("not a checkpoint file")
    end = data.find(b"\n", len(MAGIC))
    if end < 0 or len(data) < end + 1 + 32:
        raise ValueError("cut short")
    header = json.loads(data[len(MAGIC) : end].decode("utf-8"))
    digest, body = data[end + 1 : end + 33], data[end + 33 :]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch (damaged or partly written)")
    if header.get("key") != key:
        raise ValueError("it belongs to another run")
    return header, body


class PathStore:
    """The files of one path (the full-data path or one fold) in a checkpoint directory.

    Picklable (three strings), so a fold's worker gets its own. :meth:`scan` (the
    calling process, before any fit: workers' warnings are lost) keeps the finished
    points up to the first missing or damaged one; :meth:`restore` then hands them back
    in the order they were fitted, and from the first missing one on the path is
    computed and :meth:`save` writes each point.
    """

    def __init__(self, root, name, key):
        self.root, self.name, self.key = root, name, key
        self.directory = os.path.join(root, name)
        self._resuming = True
        self._checked = False

    def __getstate__(self):
        return {"root": self.root, "name": self.name, "key": self.key}

    def __setstate__(self, state):
        self.__init__(state["root"], state["name"], state["key"])

    def _check_root(self):
        """The run's manifest is visible here (a Dask worker on another machine needs the
        directory on shared storage: a local directory of the same name would keep its
        points where no rerun finds them)."""
        if self._checked:
            return
        if not os.path.isfile(os.path.join(self.root, MANIFEST)):
            raise FileNotFoundError(
                f"Checkpoint directory {self.root!r} has no {MANIFEST} where this process "
                f"(pid {os.getpid()}) runs: with a Dask cluster, give a directory on "
                "storage that every worker sees under the same path."
            )
        os.makedirs(self.directory, exist_ok=True)
        self._checked = True

    def _point_file(self, index):
        return os.path.join(self.directory, f"point-{index:04d}.pkl")

    def _point_files(self):
        """{index: file} of the point files on disk."""
        found = {}
        for path in glob.glob(os.path.join(self.directory, "point-*.pkl")):
            stem = os.path.basename(path)[len("point-") : -len(".pkl")]
            if stem.isdigit():
                found[int(stem)] = path
        return found

    def _unusable(self, path, what, exc):
        _warn(
            f"Checkpoint file {path} ({what} of path {self.name!r}) is unusable "
            f"({type(exc).__name__}: {exc}); it is ignored and recomputed."
        )
        _remove(path)

    def _load(self, path, what):
        """The payload of ``path``, or None when it is missing or unusable (reported)."""
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        try:
            header, body = _verify(data, self.key)
            payload = pickle.loads(body)
        except Exception as exc:  # noqa: BLE001 (any unreadable file is recomputed)
            self._unusable(path, what, exc)
            return None
        return {**header, **payload}

    def scan(self):
        """Keep the point files this run can resume from: those up to the first missing
        or damaged one (reported: a warning), checked without unpickling; the others are
        removed (they continued a path from a point that is gone). Returns how many
        points are kept; a damaged start model is removed too."""
        files, kept = self._point_files(), 0
        while kept in files:
            try:
                with open(files[kept], "rb") as handle:
                    header, _ = _verify(handle.read(), self.key)
                if header.get("index") != kept:
                    raise ValueError(f"it holds point {header.get('index')}")
            except Exception as exc:  # noqa: BLE001
                self._unusable(files[kept], f"point {kept}", exc)
                break
            kept += 1
        for index, path in files.items():
            if index >= kept:
                _remove(path)
        start = os.path.join(self.directory, "start.pkl")
        if os.path.exists(start):
            try:
                with open(start, "rb") as handle:
                    _verify(handle.read(), self.key)
            except Exception as exc:  # noqa: BLE001
                self._unusable(start, "the start model", exc)
        return kept

    def restore(self, index, lam):
        """The point fitted ``index``-th at ``lam``, as ``(point, model, diverged)``, or
        None once the path must be computed from here on (then the later files, which
        continued a path this run does not resume, are removed)."""
        if not self._resuming:
            return None
        self._check_root()
        path = self._point_file(index)
        payload = self._load(path, f"point {index}")
        if payload is not None and not np.isclose(payload["lam"], lam, rtol=GRID_RTOL, atol=0):
            self._unusable(path, f"point {index}", ValueError(
                f"it holds lam={payload['lam']!r}, not the path's lam={lam!r}"
            ))  # fmt: skip
            payload = None
        if payload is None:
            self._resuming = False
            for later, file in self._point_files().items():
                if later >= index:
                    _remove(file)
            return None
        return dict(payload["point"]), payload["model"], payload["diverged"]

    def save(self, index, point, model, diverged=None):
        """Write the ``index``-th point (its record without a kept estimator) and the
        fitted ``model`` (None for a diverged point, which ends the path)."""
        self._check_root()
        header = {"key": self.key, "index": index, "lam": float(point["lam"])}
        record = {k: v for k, v in point.items() if k != "estimator"}
        payload = {"point": record, "model": model, "diverged": diverged}
        _write_atomic(self._point_file(index), _pack(header, payload))

    def load_start(self):
        """``(model, warm)`` of the saved start model, or None."""
        self._check_root()
        payload = self._load(os.path.join(self.directory, "start.pkl"), "the start model")
        return None if payload is None else (payload["model"], payload["warm"])

    def save_start(self, model, warm):
        """Write the path's start model (see ``path_start()``) and whether the first point
        can warm-start from it (it did not diverge)."""
        self._check_root()
        header = {"key": self.key, "start": True}
        payload = {"model": model, "warm": bool(warm)}
        _write_atomic(os.path.join(self.directory, "start.pkl"), _pack(header, payload))


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


class Checkpoint:
    """An opened checkpoint directory: the run's key, its grid and its paths' stores."""

    def __init__(self, root, key, lams):
        self.root, self.key, self.lams = root, key, lams

    def path(self, name):
        """The store of the path ``name`` (``"full"`` or ``"fold-K"``), its files checked
        here, in the calling process (see :meth:`PathStore.scan`)."""
        store = PathStore(self.root, name, self.key)
        store.scan()
        return store


def open_checkpoint(
    directory, estimator, X, y, X_val, y_val, lams, extend, splits, scoring, fit_params=None,
    cv_stride=1,
):  # fmt: skip
    """Open (or create) the checkpoint ``directory`` for this run, before any fit.

    Raises ValueError naming what differs when the directory holds another run (never
    mixes results). A damaged manifest is reported and replaced; the point files then
    count only if they carry this run's key. Returns a :class:`Checkpoint` whose ``lams``
    are the checkpoint's own grid (the same lams up to rounding of ``lambda_max``).
    """
    root = os.path.abspath(os.fspath(directory))
    if os.path.exists(root) and not os.path.isdir(root):
        raise ValueError(f"checkpoint={os.fspath(directory)!r} is a file, not a directory.")
    try:  # fail before any work, not at the first point's save
        pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(
            f"checkpoint needs a picklable estimator: {type(estimator).__name__} is not "
            f"({type(exc).__name__}: {exc})."
        ) from exc
    now = describe_run(
        estimator, X, y, X_val, y_val, lams, extend, splits, scoring, fit_params, cv_stride
    )
    os.makedirs(root, exist_ok=True)
    manifest = os.path.join(root, MANIFEST)
    saved = None
    if os.path.exists(manifest):
        try:
            with open(manifest, encoding="utf-8") as handle:
                saved = json.load(handle)
            if saved.get("format") != FORMAT or "run" not in saved or "key" not in saved:
                raise ValueError(f"not a manifest of format {FORMAT}")
        except Exception as exc:  # noqa: BLE001 (any unreadable manifest)
            _warn(
                f"Checkpoint manifest {manifest} is unusable ({type(exc).__name__}: {exc}); "
                "it is replaced, and only point files of this very run are kept."
            )
            saved = None
    if saved is not None:
        found = differences(saved["run"], now)
        if found:
            raise ValueError(
                f"checkpoint={os.fspath(directory)!r} holds another computation than this one; "
                "refusing to mix their results. What differs: "
                + "; ".join(found)
                + ". Use another directory, or delete this one to start over."
            )
        key, lams = saved["key"], np.asarray(saved["run"]["grid"], dtype=float)
    else:
        key = run_key(now)
        text = json.dumps({"format": FORMAT, "key": key, "run": now}, indent=1, sort_keys=True)
        _write_atomic(manifest, text.encode("utf-8"))
    # temporary files of writes that a killed run left behind (one run per directory at
    # a time: no writer of this run has started yet)
    for tmp in glob.glob(os.path.join(root, ".*.tmp")) + glob.glob(
        os.path.join(root, "*", ".*.tmp")
    ):
        _remove(tmp)
    return Checkpoint(root, key, np.asarray(lams, dtype=float))
