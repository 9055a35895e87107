"""What identifies a path computation, so that a checkpoint is resumed only by the same
one: the data, the estimator's parameters, the grid, the CV splits and the scorer.

:func:`describe_run` builds a JSON-ready description of a run; :func:`differences` names
what differs between two of them.
"""

from __future__ import annotations

import json

import joblib
import numpy as np
import scipy.sparse as sp

__all__ = ["describe_run", "differences", "run_key", "same_grid"]

#: Parameters the path sets itself at every point (their value given by the user does
#: not change a point) or that change no number (progress output).
NOT_COMPARED = ("lam", "warm_start", "verbose")
#: Relative tolerance of two grids' lams: the default grid is computed from the data
#: (``lambda_max``), whose float64 reductions may round differently on another machine
#: or thread count (~1e-15 relative); 1e-9 is far above that and far below any change
#: of ``n_lams`` or ``lam_min_ratio``.
GRID_RTOL = 1e-9
#: Longest repr of a parameter kept to name it in an error.
REPR_LENGTH = 60


def _digest(value):
    """A stable hash of data: arrays, sparse matrices, pandas objects, lists or None."""
    if value is None:
        return "none"
    if sp.issparse(value):
        # the same digest for sorted and unsorted indices; a CSR shares the caller's
        # arrays, so an unsorted one is sorted on a copy, never in place
        csr = sp.csr_matrix(value)
        if not csr.has_sorted_indices:
            csr = csr.copy()
            csr.sort_indices()
        value = ("csr", csr.shape, csr.data, csr.indices, csr.indptr)
    elif not hasattr(value, "iloc"):  # pandas objects keep their names and dtypes
        value = np.asarray(value)
    return joblib.hash(value, hash_name="sha1")


def _hashable(value):
    """``value`` with torch modules and tensors replaced by their structure and numbers
    (their pickles differ between two copies of the same module)."""
    if type(value).__module__.split(".")[0] != "torch":
        return value
    import torch

    if isinstance(value, torch.nn.Module):
        state = value.state_dict()
        arrays = [(name, t.detach().cpu().numpy()) for name, t in state.items()]
        return ("torch module", type(value).__qualname__, repr(value), arrays)
    if isinstance(value, torch.Tensor):
        return ("torch tensor", str(value.dtype), value.detach().cpu().numpy())
    return value


def _param_fingerprint(value):
    """(hash, short repr) of a parameter value; unpicklable values hash their repr."""
    text = repr(value)
    try:
        digest = joblib.hash(_hashable(value), hash_name="sha1")
    except Exception:  # noqa: BLE001 (any pickling failure: compare the text instead)
        digest = "repr:" + text
    if len(text) > REPR_LENGTH:
        text = text[: REPR_LENGTH - 3] + "..."
    return {"hash": digest, "repr": text}


def _scoring_name(scoring):
    if scoring is None or isinstance(scoring, str):
        return repr(scoring)
    name = getattr(scoring, "__qualname__", None) or type(scoring).__qualname__
    return f"{getattr(scoring, '__module__', '')}.{name}"


def describe_run(
    estimator, X, y, X_val, y_val, lams, extend, splits, scoring, fit_params=None, cv_stride=1
):  # fmt: skip
    """A JSON-ready description of a path computation (see the module's docstring); the
    fit parameters (e.g. ``sample_weight``) only when given and the folds' first-pass
    stride only when above 1, so that the key of a run without them is what it was
    before they existed."""
    cls = type(estimator)
    params = estimator.get_params()
    described = {
        "estimator": f"{cls.__module__}.{cls.__qualname__}",
        "parameters": {
            name: _param_fingerprint(value)
            for name, value in sorted(params.items())
            if name not in NOT_COMPARED
        },
        "data": {"X": _digest(X), "y": _digest(y)},
        "validation data": {"X_val": _digest(X_val), "y_val": _digest(y_val)},
        "grid": [float(lam) for lam in lams],
        "grid extension": bool(extend),
        "CV splits": joblib.hash(
            [(np.asarray(train), np.asarray(test)) for train, test in splits], hash_name="sha1"
        ),
        "number of CV splits": len(splits),
        "scoring": _scoring_name(scoring),
    }
    if cv_stride > 1:
        described["CV stride"] = int(cv_stride)
    if fit_params:
        described["fit parameters"] = {
            name: _digest(value) for name, value in sorted(fit_params.items())
        }
    return described


def run_key(description):
    """A short hash of a run's description: point files carry it, so that a file of another
    run is never taken for one of this run."""
    text = json.dumps(description, sort_keys=True)
    return joblib.hash(text, hash_name="sha1")[:16]


def same_grid(a, b):
    """Whether two grids are the same lams (up to rounding, see ``GRID_RTOL``)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=GRID_RTOL, atol=0))


def _grid_text(lams):
    lams = list(lams)
    if not lams:
        return "no lams"
    return f"{len(lams)} lams from {lams[0]:.6g} to {lams[-1]:.6g}"


def differences(saved, now):
    """What differs between the description ``saved`` (a checkpoint's) and ``now``, in
    words (an empty list when they describe the same run)."""
    found = []
    if saved.get("estimator") != now["estimator"]:
        found.append(f"the estimator ({saved.get('estimator')} there, {now['estimator']} now)")
    old, new = saved.get("parameters", {}), now["parameters"]
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a is None or b is None or a["hash"] != b["hash"]:
            there = "unset" if a is None else a["repr"]
            here = "unset" if b is None else b["repr"]
            found.append(f"estimator parameter {name!r} ({there} there, {here} now)")
    for item in ("data", "validation data"):
        old = saved.get(item) or {}
        changed = [name for name in now[item] if old.get(name) != now[item][name]]
        if changed:
            found.append(f"the {item} ({' and '.join(changed)}: other values)")
    old_grid, extension = saved.get("grid", []), saved.get("grid extension")
    if not same_grid(old_grid, now["grid"]):
        found.append(f"the lam grid ({_grid_text(old_grid)} there, {_grid_text(now['grid'])} now)")
    elif extension != now["grid extension"]:
        found.append(
            "the lam grid's upward extension (a default grid without cv grows until the "
            f"model is empty: {'on' if extension else 'off'} there, "
            f"{'on' if now['grid extension'] else 'off'} now)"
        )
    if saved.get("number of CV splits") != now["number of CV splits"]:
        found.append(
            f"the CV splits ({saved.get('number of CV splits')} folds there, "
            f"{now['number of CV splits']} now)"
        )
    elif saved.get("CV splits") != now["CV splits"]:
        found.append(
            "the CV splits (other rows in the folds: a shuffled splitter needs a fixed "
            "random_state to be resumed)"
        )
    if saved.get("CV stride", 1) != now.get("CV stride", 1):
        found.append(
            f"the folds' first-pass stride (cv_stride={saved.get('CV stride', 1)} there, "
            f"{now.get('CV stride', 1)} now)"
        )
    old, new = saved.get("fit parameters", {}), now.get("fit parameters", {})
    changed = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
    if changed:
        found.append(f"the fit parameters ({', '.join(changed)}: other values)")
    if saved.get("scoring") != now["scoring"]:
        found.append(f"the scoring ({saved.get('scoring')} there, {now['scoring']} now)")
    return found
