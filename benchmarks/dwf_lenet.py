"""Unstructured weight sparsity by D-Gating every weight (Deep Weight Factorization).

LeNet-300-100 (784-300-100-10 ReLU MLP, 266,200 weights) on MNIST-10k (the MNIST test
set: 8,000 training and 2,000 test images, pixels scaled to [0, 1] and standardized by
the estimator): compression ratio (weights / non-zero weights) against test accuracy.

* D-Gating of every weight (``DGatedMLPClassifier(sparsity="weights")``, the DWF
  variance-matched init of the factors) for D = 2, 3, 4 over a lam grid, SGD as the
  estimator's default; every weight that ends exactly at 0 counts as removed, and the
  sparsity gap (largest removed |w| before collapse, smallest kept) is recorded;
* vanilla L1 by SGD on the same network (the same optimizer, schedule and epochs; the
  penalty ``lam * sum |w|`` by subgradient steps): weights never reach exactly 0, so it
  is compared at the same compression by keeping its largest weights (global magnitude
  threshold), without retraining;
* global magnitude pruning of the dense network (lam = 0) at the same compression,
  without retraining.

Each comparison point uses the compression ratio that a D-Gating fit reached. One torch
thread. Data: ``mnist_t10k.npz`` (``--data-home`` / ``$SKSPARSE_NN_DATA``). Writes
``benchmarks/results/dwf_lenet.json`` and ``dwf_lenet.png``.
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import numpy as np
import torch
from _common import (
    RESULTS,
    add_data_home_argument,
    load_dataset,
    machine,
    pyplot,
    single_thread,
    uptime,
    write_json,
)

from sksparse_nn import DGatedMLPClassifier, TrainingDivergedError

HIDDEN = (300, 100)


def data(data_home, n_train=8000):
    d = load_dataset("mnist_t10k", data_home)
    X, y = np.asarray(d.X, dtype=np.float32) / 255.0, np.asarray(d.y)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(X))
    train, test = order[:n_train], order[n_train:]
    return X[train], y[train], X[test], y[test]


def weights_of(est):
    return [layer.weight.detach() for layer in est.module_.linears]


def n_weights(est):
    return sum(w.numel() for w in weights_of(est))


def accuracy_with(est, X, y, keep_fraction=None):
    """Test accuracy, optionally after keeping only the largest ``keep_fraction`` of the
    weights by magnitude over all layers (global magnitude pruning, no retraining)."""
    if keep_fraction is None:
        return float(est.score(X, y))
    pruned = copy.deepcopy(est)
    ws = weights_of(pruned)
    magnitudes = torch.cat([w.abs().reshape(-1) for w in ws])
    k = max(1, int(round(keep_fraction * magnitudes.numel())))
    threshold = torch.topk(magnitudes, k).values.min()
    with torch.no_grad():
        for layer in pruned.module_.linears:
            layer.weight.mul_((layer.weight.abs() >= threshold).to(layer.weight.dtype))
    return float(pruned.score(X, y))


class L1MLPClassifier(DGatedMLPClassifier):
    """The same network and training as the estimator, with the plain L1 penalty on every
    weight by subgradient steps instead of D-Gating (a benchmark-local baseline)."""

    def _gate_module(self, module, init):
        self._l1_weights = [layer.weight for layer in module.linears]

    def _make_net(self, module, dataset, seed):
        net = super()._make_net(module, dataset, seed)
        weights = self._l1_weights

        def initialize_module(_net=net):  # keep the L1 penalty when skorch re-initializes
            type(_net).initialize_module(_net)
            _net.penalty_ = lambda: sum(w.abs().sum() for w in weights)
            _net.direct_penalties_ = []
            return _net

        net.initialize_module = initialize_module
        return net


def fit(cls, X, y, **params):
    """The fitted estimator and its time; ``None`` for a fit whose training diverged."""
    est = cls(hidden_layer_sizes=HIDDEN, random_state=0, **params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y)
        except TrainingDivergedError as exc:
            print(f"  diverged: {exc}", flush=True)
            return None, time.perf_counter() - start
    return est, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_home_argument(parser)
    parser.add_argument("--D", nargs="+", type=int, default=[2, 3, 4])
    # measured: 1e-3 removes nothing in 20-30 epochs, 1e-2 removes every weight
    parser.add_argument("--lams", nargs="+", type=float, default=[1.5e-3, 2e-3, 3e-3, 5e-3])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out", default=str(RESULTS / "dwf_lenet.json"))
    args = parser.parse_args()
    single_thread()
    Xtr, ytr, Xte, yte = data(args.data_home)
    results = {"machine": machine(), "settings": vars(args), "load_start": uptime()}

    dense, seconds = fit(DGatedMLPClassifier, Xtr, ytr, lam=0.0, max_epochs=args.epochs)
    total = n_weights(dense)
    results["dense"] = {"accuracy": accuracy_with(dense, Xte, yte), "seconds": seconds}
    print(f"dense: accuracy {results['dense']['accuracy']:.4f} ({seconds:.0f} s)", flush=True)

    runs, runs_diverged = [], []
    results["diverged"] = runs_diverged
    for D in args.D:
        for lam in args.lams:
            est, seconds = fit(
                DGatedMLPClassifier, Xtr, ytr, sparsity="weights", D=D, lam=lam,
                max_epochs=args.epochs,
            )  # fmt: skip
            if est is None:
                runs_diverged.append({"D": D, "lam": lam, "seconds": seconds})
                continue
            kept = est.n_nonzero_weights_
            ratio = total / max(kept, 1)
            run = {
                "method": f"D-Gating D={D}",
                "D": D,
                "lam": lam,
                "seconds": seconds,
                "nonzero": int(kept),
                "compression": ratio,
                "accuracy": accuracy_with(est, Xte, yte),
                "gap": list(est.sparsity_gap_),
                "magnitude_pruning_accuracy": accuracy_with(dense, Xte, yte, kept / total),
            }
            runs.append(run)
            print(
                f"D={D} lam={lam:g}: {kept} of {total} weights (x{ratio:.1f}), accuracy "
                f"{run['accuracy']:.4f}, gap {run['gap'][0]:.1e} / {run['gap'][1]:.1e}; "
                f"magnitude pruning at that size {run['magnitude_pruning_accuracy']:.4f} "
                f"({seconds:.0f} s)",
                flush=True,
            )
            write_json({**results, "runs": runs, "load_end": uptime()}, args.out)

    l1_runs = []
    for lam in args.lams:
        est, seconds = fit(L1MLPClassifier, Xtr, ytr, lam=lam, max_epochs=args.epochs)
        if est is None:
            continue
        exact_zeros = sum(int((w == 0).sum()) for w in weights_of(est))
        row = {"lam": lam, "seconds": seconds, "exact_zeros": exact_zeros,
               "accuracy": accuracy_with(est, Xte, yte), "at_compression": {}}  # fmt: skip
        for run in runs:
            row["at_compression"][f"{run['compression']:.2f}"] = accuracy_with(
                est, Xte, yte, run["nonzero"] / total
            )
        l1_runs.append(row)
        print(f"L1 lam={lam:g}: exact zeros {exact_zeros}, accuracy {row['accuracy']:.4f}")
        write_json({**results, "runs": runs, "l1": l1_runs, "load_end": uptime()}, args.out)
    # at every D-Gating point: the best L1 fit thresholded to the same size
    for run in runs:
        key = f"{run['compression']:.2f}"
        run["l1_threshold_accuracy"] = max(
            (r["at_compression"][key] for r in l1_runs), default=float("nan")
        )
    results.update(runs=runs, l1=l1_runs, load_end=uptime())
    write_json(results, args.out)
    plot(results, args.out.replace(".json", ".png"))


def plot(results, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    runs = results["runs"]
    for k, D in enumerate(sorted({r["D"] for r in runs})):
        rs = sorted((r for r in runs if r["D"] == D), key=lambda r: r["compression"])
        ax.plot([r["compression"] for r in rs], [r["accuracy"] for r in rs], "o-",
                color=f"C{k}", label=f"D-Gating D={D}")  # fmt: skip
    rs = sorted(runs, key=lambda r: r["compression"])
    ax.plot([r["compression"] for r in rs], [r["magnitude_pruning_accuracy"] for r in rs],
            "s:", color="0.4", label="magnitude pruning (dense)")  # fmt: skip
    ax.plot([r["compression"] for r in rs], [r["l1_threshold_accuracy"] for r in rs],
            "^:", color="0.7", label="L1 by SGD + threshold")  # fmt: skip
    ax.axhline(results["dense"]["accuracy"], color="k", lw=0.8, ls="--", label="dense")
    ax.set_xscale("log")
    ax.set_xlabel("compression ratio (weights / non-zero weights)")
    ax.set_ylabel("test accuracy")
    ax.set_title("LeNet-300-100 on MNIST-10k")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
