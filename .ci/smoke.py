"""Smoke test of an installed sksparse_nn: every family fits and predicts.

Run by ``.ci/check_dist.py`` in a fresh virtual environment where the wheel is installed
(read-only): tiny data and budgets, one thread; each family once, including the fits
that compile numba kernels (sparse logistic and wide least-squares coordinate descent,
the NAM's and the pairs' loops). With ``--export`` (the ``export`` extra installed) a
fitted model also goes through ONNX and onnxruntime. Prints one line per family and
exits non-zero on the first failure.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.exceptions import ConvergenceWarning

import sksparse_nn
from sksparse_nn import (
    DGatedAutoencoder,
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    DGatedNeuralNetClassifier,
    DGatedNeuralNetRegressor,
    GroupLassoClassifier,
    GroupLassoRegressor,
    NODEClassifier,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
    VariableModel,
)

warnings.simplefilter("ignore", ConvergenceWarning)  # tiny budgets, on purpose
torch.set_num_threads(1)


class TwoLayer(torch.nn.Module):
    """A user's module (sized by the estimator)."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, 8)
        self.out = torch.nn.Linear(8, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def data(n=120, p=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] - 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y, (y > np.median(y)).astype(int)


def cases():
    X, y, c = data()
    rng = np.random.default_rng(1)
    wide = rng.normal(size=(30, 120))  # wider than its samples: coordinate descent
    wide_y = wide[:, :3].sum(1)
    text = sp.random(200, 60, density=0.1, format="csr", random_state=2)  # sparse logistic
    text_y = (np.asarray(text[:, :5].sum(1)).ravel() > 0.1).astype(int)
    net = {"lam": 1e-3, "max_epochs": 3, "random_state": 0}
    gates = {"hidden.weight": "in"}  # the user's module's input features
    table = {
        "city": np.array(["a", "b", "c"] * 40, dtype=object),
        "x": X[:, 0],
        "z": np.where(np.arange(120) % 7 == 0, np.nan, X[:, 1]),
    }
    import pandas as pd

    return [
        ("SparseLinearRegressor D=3", SparseLinearRegressor(lam=0.01), X, y),
        ("SparseLinearRegressor wide D=2", SparseLinearRegressor(lam=0.1, D=2), wide, wide_y),
        ("SparseLinearClassifier sparse X", SparseLinearClassifier(lam=0.01, D=2), text, text_y),
        ("GroupLassoRegressor", GroupLassoRegressor(lam=0.01, groups=2), X, y),
        ("GroupLassoClassifier sparse X", GroupLassoClassifier(lam=0.01), text, text_y),
        ("DGatedMLPRegressor", DGatedMLPRegressor(**net), X, y),
        ("DGatedMLPClassifier", DGatedMLPClassifier(**net), X, c),
        ("DGatedNAMRegressor", DGatedNAMRegressor(**net), X, y),
        ("DGatedNAMClassifier", DGatedNAMClassifier(**net), X, c),
        ("DGatedNAMRegressor pairs", DGatedNAMRegressor(interactions=2, **net), X, y),
        ("NODERegressor", NODERegressor(num_trees=4, depth=2, max_epochs=3, random_state=0), X, y),
        ("NODEClassifier", NODEClassifier(num_trees=4, depth=2, max_epochs=3, random_state=0),
         X, c),  # fmt: skip
        ("DGatedNeuralNetRegressor", DGatedNeuralNetRegressor(TwoLayer, gates=gates, **net),
         X, y),  # fmt: skip
        ("DGatedNeuralNetClassifier",
         DGatedNeuralNetClassifier(TwoLayer, gates=gates, **net), X, c),  # fmt: skip
        ("DGatedAutoencoder", DGatedAutoencoder(n_components=2, max_epochs=3, random_state=0),
         X, None),  # fmt: skip
        ("SparsePathCV", SparsePathCV(SparseLinearRegressor(), n_lams=4, cv=2), X, y),
        ("VariableModel raw table", VariableModel(SparseLinearClassifier(lam=0.01)),
         pd.DataFrame(table), c),  # fmt: skip
    ]


def export_check(est, X):
    import onnxruntime as ort

    from sksparse_nn.export import to_onnx

    model = to_onnx(est)
    session = ort.InferenceSession(model.SerializeToString())
    name = session.get_inputs()[0].name
    got = session.run(None, {name: X.astype(np.float32)})[0]
    np.testing.assert_allclose(np.ravel(got), est.predict(X), rtol=1e-3, atol=1e-3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", action="store_true", help="also check ONNX export")
    args = parser.parse_args()
    print(f"sksparse_nn {sksparse_nn.__version__} from {Path(sksparse_nn.__file__).parent}")
    for name, est, X, y in cases():
        est.fit(X) if y is None else est.fit(X, y)
        out = est.transform(X) if y is None else est.predict(X)
        assert np.all(np.isfinite(np.asarray(out, dtype=float))), name
        print(f"ok  {name}")
    if args.export:
        X, y, _ = data()
        export_check(DGatedMLPRegressor(lam=1e-3, max_epochs=3, random_state=0).fit(X, y), X)
        print("ok  ONNX export of DGatedMLPRegressor (onnxruntime)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
