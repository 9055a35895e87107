"""The NAM at a fixed budget: what the drop at the end of ``max_epochs`` costs.

Eight fits: scikit-learn's diabetes and breast cancer, ``make_regression`` (500 x 40,
5 informative) and ``make_classification`` (400 x 30, 5 informative), 25% test
split, seeds 0 and 1 (split and network); ``DGatedNAMRegressor(lam=0.02)`` /
``DGatedNAMClassifier(lam=0.01)`` with ``max_epochs=40``, one thread. Three ways to end
the same fit:

* ``no drop``: the end drop switched off (``DropInTransitAtEnd`` made a no-op in this
  process), as fixed budgets ended before they dropped groups in transit: every group
  still shrinking counts as selected;
* ``drop``: the package as it is;
* ``auto``: the automatic budget (``max_epochs=None``) at the same ``lam``, which trains
  until the support settles and retrains after its drops: the converged model.

Prints the test score (R^2, accuracy) and the features kept of each; the claim is that
the drop removes only what the fit does not use: its scores are the no-drop fit's.
``python fixed_budget.py`` (results in ``results/fixed_budget.json``).
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import warnings  # noqa: E402

from _common import add_out_argument, machine, single_thread, write_json  # noqa: E402

MODES = ("no drop", "drop", "auto")


def _data():
    from sklearn.datasets import (
        load_breast_cancer,
        load_diabetes,
        make_classification,
        make_regression,
    )

    return {
        "diabetes": (*load_diabetes(return_X_y=True), "reg"),
        "breast cancer": (*load_breast_cancer(return_X_y=True), "clf"),
        "make_regression": (
            *make_regression(500, 40, n_informative=5, noise=10, random_state=0),
            "reg",
        ),
        "make_classification": (
            *make_classification(400, 30, n_informative=5, random_state=0),
            "clf",
        ),
    }


def fit(X, y, task, seed, mode):
    """(test score, features kept) of one fit."""
    from sklearn.model_selection import train_test_split

    import sksparse_nn as sk

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=seed
    )
    cls = sk.DGatedNAMRegressor if task == "reg" else sk.DGatedNAMClassifier
    budget = None if mode == "auto" else 40
    est = cls(lam=0.02 if task == "reg" else 0.01, max_epochs=budget, random_state=seed)
    est.fit(X_train, y_train)
    return float(est.score(X_test, y_test)), int(len(est.selected_features_))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_out_argument(parser, "fixed_budget.json")
    args = parser.parse_args()
    single_thread()
    from sksparse_nn.training.pruning import DropInTransitAtEnd

    end_drop = DropInTransitAtEnd.on_train_end
    rows = []
    for name, (X, y, task) in _data().items():
        for seed in (0, 1):
            row = {"data": name, "seed": seed}
            for mode in MODES:
                DropInTransitAtEnd.on_train_end = (
                    (lambda self, net, **kwargs: None) if mode == "no drop" else end_drop
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row[mode] = fit(X, y, task, seed, mode)
            DropInTransitAtEnd.on_train_end = end_drop
            rows.append(row)
            cells = "  ".join(f"{m}: {row[m][0]:.3f} ({row[m][1]:2d})" for m in MODES)
            print(f"{name:20s} seed {seed}  {cells}")
    write_json({"rows": rows, "machine": machine()}, args.out)
    return rows


if __name__ == "__main__":
    main()
