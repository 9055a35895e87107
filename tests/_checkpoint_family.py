"""Test doubles for the checkpoint tests: a tiny MLP that logs every fit to a file (so a
test counts fits done in other processes: joblib workers, a killed script) and can be
slowed down (so a script can be killed while a path runs).

``CHECKPOINT_FIT_LOG``: the file each fit appends ``rows column-sum lam`` to (one line,
one write, the floats in hex: exact); ``CHECKPOINT_FIT_SLEEP``: seconds each fit sleeps
first. Both are read at every fit, from the environment (worker processes inherit it).
"""

import os
import time

import numpy as np

from sksparse_nn import DGatedMLPRegressor

LOG = "CHECKPOINT_FIT_LOG"
SLEEP = "CHECKPOINT_FIT_SLEEP"


class CountingMLP(DGatedMLPRegressor):
    """A DGatedMLPRegressor whose fits are logged (see the module's docstring)."""

    def fit(self, X, y, **kwargs):
        delay = float(os.environ.get(SLEEP, "0") or 0)
        if delay:
            time.sleep(delay)
        out = super().fit(X, y, **kwargs)
        log = os.environ.get(LOG)
        if log:
            X = np.asarray(X, dtype=float)
            line = f"{X.shape[0]} {float(X[:, 0].sum()).hex()} {float(self.lam).hex()}\n"
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        return out


def data(n=48, p=4, seed=0):
    """A small regression problem: two informative features of ``p``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)


def estimator():
    """The tiny MLP every checkpoint test uses (a few epochs: fits of milliseconds)."""
    return CountingMLP(hidden_layer_sizes=(4,), max_epochs=4, batch_size=16, random_state=0)


def read_fits(path):
    """The logged fits as a list of (rows, column-0 sum, lam)."""
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        rows = [line.split() for line in handle if line.strip()]
    return [(int(r), float.fromhex(s), float.fromhex(lam)) for r, s, lam in rows]
