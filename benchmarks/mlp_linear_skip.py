"""Does a linear skip path inside each feature's group keep fewer noise columns? (issue 13)

DGatedMLP* with its defaults, with and without ``linear_skip=True``, on scikit-learn's
breast_cancer, diabetes and wine with one permuted copy of every real column appended
(noise), 2 seeds, 75/25 split, standardized on the training part (and y for diabetes): a
default path per model; among its points with 1..10 selected features, the largest number
of noise columns kept and the best test score (accuracy, or R^2 for diabetes). One torch
thread.

Writes benchmarks/results/mlp_linear_skip.json.
"""

import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.model_selection import train_test_split

from sksparse_nn import DGatedMLPClassifier, DGatedMLPRegressor

DATASETS = [
    ("breast_cancer", load_breast_cancer, True),
    ("diabetes", load_diabetes, False),
    ("wine", load_wine, True),
]
OUT = Path(__file__).resolve().parent / "results" / "mlp_linear_skip.json"


def split(X, y, seed, classification):
    rng = np.random.RandomState(seed)
    noise = np.column_stack([rng.permutation(X[:, j]) for j in range(X.shape[1])])
    Xtr, Xte, ytr, yte = train_test_split(
        np.hstack([X, noise]),
        y,
        test_size=0.25,
        random_state=seed,
        stratify=y if classification else None,
    )
    mean, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    Xtr, Xte = (Xtr - mean) / sd, (Xte - mean) / sd
    if not classification:
        m, s = ytr.mean(), ytr.std()
        ytr, yte = (ytr - m) / s, (yte - m) / s
    return Xtr, Xte, ytr, yte


def main():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    out = []
    for name, loader, classification in DATASETS:
        X, y = loader(return_X_y=True)
        p = X.shape[1]
        for seed in (0, 1):
            Xtr, Xte, ytr, yte = split(X, y, seed, classification)
            Estimator = DGatedMLPClassifier if classification else DGatedMLPRegressor
            for skip in (False, True):
                start = time.time()
                path = Estimator(linear_skip=skip, random_state=seed).regularization_path(
                    Xtr, ytr, keep_estimators=True
                )
                elapsed = time.time() - start
                rows = [
                    (int(sel.size), int((sel >= p).sum()), float(est.score(Xte, yte)))
                    for sel, est in zip(path.selected, path.estimators, strict=True)
                    if 1 <= sel.size <= 10
                ]
                noise = max((r[1] for r in rows), default=None)
                best = max((r[2] for r in rows), default=None)
                out.append(
                    {
                        "data": name,
                        "seed": seed,
                        "skip": skip,
                        "time": elapsed,
                        "points": len(path.lams),
                        "noise_at_le10": noise,
                        "best_test_le10": best,
                        "rows": rows,
                    }
                )
                print(
                    name,
                    seed,
                    "skip" if skip else "plain",
                    f"{elapsed:.0f}s",
                    "noise@<=10:",
                    noise,
                    "best test (<=10):",
                    best,
                    flush=True,
                )
    OUT.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
