"""Sweep of failure modes: what every estimator does with inputs that once failed silently.

For each estimator (small settings, default optimizer) and each case, records the verdict:
``ok`` (finite predictions, importances and selection), ``empty`` (ok and nothing
selected), the class of the clear error raised with the start of its message, or
``NaN!`` / ``silent`` when a fit returned non-finite output without a word. Prints a
table and writes benchmarks/results/failure_modes.json (or ``--out``).

    python benchmarks/failure_modes.py [--out FILE]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import add_out_argument, single_thread, timed, write_json
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    GroupLassoRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
)

ESTIMATORS = [
    GroupLassoRegressor(lam=0.01),
    SparseLinearRegressor(lam=0.01),
    SparseLinearClassifier(lam=0.01),
    DGatedMLPRegressor(max_epochs=20, random_state=0),
    DGatedMLPClassifier(max_epochs=20, random_state=0),
    DGatedNAMRegressor(max_epochs=20, random_state=0),
    DGatedNAMClassifier(max_epochs=20, random_state=0),
    NODERegressor(num_trees=16, depth=3, max_epochs=20, random_state=0),
    NODEClassifier(num_trees=16, depth=3, max_epochs=20, random_state=0),
]


def _data(est, n=120, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X = (X - X.mean(0)) / X.std(0)
    if is_classifier(est):
        return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, (y - y.mean()) / y.std()


def _params(est, **kw):
    return {k: v for k, v in kw.items() if k in est.get_params()}


# (name, function(estimator, X, y) -> (fitted estimator, X to predict on))
CASES = [
    ("lam=10", lambda e, X, y: (_lam(e, 10.0).fit(X, y), X)),
    ("lam=30", lambda e, X, y: (_lam(e, 30.0).fit(X, y), X)),
    ("lam=1e3", lambda e, X, y: (_lam(e, 1e3).fit(X, y), X)),
    ("lr=100", lambda e, X, y: (clone(e).set_params(**_params(e, lr=100.0)).fit(X, y), X)),
    ("X*1e6", lambda e, X, y: (clone(e).fit(X * 1e6, y), X * 1e6)),
    ("y*1e4+1e5", lambda e, X, y: (clone(e).fit(X, y if is_classifier(e) else y * 1e4 + 1e5), X)),
    ("X*1e39", lambda e, X, y: (clone(e).fit(X * 1e39, y), X * 1e39)),
    ("X*1e300", lambda e, X, y: (clone(e).fit(X * 1e300, y), X * 1e300)),
    ("all unpenalized", lambda e, X, y: (_set(e, groups=[-1] * X.shape[1]).fit(X, y), X)),
    ("warm start, p-1", lambda e, X, y: (_warm(e, X, y).fit(X[:, :-1], y), X[:, :-1])),
    ("max_epochs=0", lambda e, X, y: (_set(e, max_epochs=0).fit(X, y), X)),
    ("path, batch_size=0", lambda e, X, y: (_path(e, X, y, batch_size=0), X)),
    ("proba of X*1e3", lambda e, X, y: (_proba(e, X, y), X)),
]  # fmt: skip


def _set(est, **params):
    """A clone with the given parameters (those the estimator has)."""
    return clone(est).set_params(**_params(est, **params))


def _lam(est, lam):
    """Large lam with the default epoch budget of networks (max_epochs=None)."""
    auto = {"max_epochs": None} if "lr" in est.get_params() and "lbfgs" != est.optimizer else {}
    return clone(est).set_params(lam=lam, **auto)


def _warm(est, X, y):
    return clone(est).set_params(**_params(est, warm_start=True)).fit(X, y)


def _path(est, X, y, **params):
    est = clone(est).set_params(**_params(est, **params))
    est.regularization_path(X, y, lams=[0.01, 0.1])
    return None


def _proba(est, X, y):
    if not is_classifier(est):
        return None
    fitted = clone(est).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        proba = fitted.predict_proba(X * 1e3)
    if not np.all(np.isfinite(proba)):
        raise AssertionError("NaN probabilities")
    return None


def verdict(est, case):
    X, y = _data(est)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fitted, X_pred = case(est, X, y)
    except Exception as exc:  # noqa: BLE001 -- the verdict is the exception
        return f"{type(exc).__name__}: {str(exc)[:60]}"
    if fitted is None:
        return "ok"
    pred = fitted.predict(X_pred)
    finite = np.all(np.isfinite(np.asarray(pred, dtype=float))) if not is_classifier(est) else True
    imp = getattr(fitted, "feature_importances_", np.zeros(1))
    if not finite or not np.all(np.isfinite(imp)):
        return "NaN!"
    if getattr(fitted, "selected_features_", np.ones(1)).size == 0:
        return "empty"
    return "ok"


def run(args):
    single_thread()
    table = {}
    for est in ESTIMATORS:
        name = type(est).__name__
        table[name] = {}
        for case_name, case in CASES:
            t = timed(verdict, est, case)
            table[name][case_name] = t.value
            print(f"{name:24s} {case_name:20s} {t.wall:6.2f}s {t.value}", flush=True)
    return table


def report(table, out):
    write_json(table, out)
    cases = [c for c, _ in CASES]
    print("\n| estimator | " + " | ".join(cases) + " |")
    print("|---" * (len(cases) + 1) + "|")
    for name, row in table.items():
        short = [row[c].split(":")[0] for c in cases]
        print(f"| {name} | " + " | ".join(short) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_argument(parser, "failure_modes.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
