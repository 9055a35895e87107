"""Inference latency of the shipped models: dense torch, compacted torch, onnxruntime.

A sparse model pays off at prediction time: fewer input columns to read, a smaller
network to run. For each family this script fits one sparse classifier, then times
the same predictions (probabilities and labels from the raw rows) four ways, one
thread each:

* ``torch dense``: the fitted module as the estimator holds it (every input, every
  unit; exact zeros computed), float32, with the output link;
* ``torch compact``: the graph ``to_onnx`` exports (:func:`sksparse_nn.export.torch_graph`:
  the selected columns, the compacted module, the output link), float32, in torch;
* ``onnx dense`` / ``onnx compact``: the same two graphs exported by ``torch.onnx`` and
  run by onnxruntime (``intra_op_num_threads=1``);
* ``onnx selected``: the compact graph exported with ``drop_inputs=True``, fed the
  selected columns alone (an application that collects only the inputs the model uses);

and, for reference, the estimator's own ``predict_proba`` (input validation and float64
arithmetic, which makes a row's output independent of its batch). Latency per call is
the median thread CPU time over repeated calls at 1, 64 and 4096 rows (the rows are
drawn from the test split), in three rounds over the six ways, the smallest of a way's
round medians kept (a round another process disturbed counts less; the same for wall
time in the JSON); ratios are against ``torch dense`` of the same family and batch.
File sizes: the dense and compact ONNX files, the skops file and the pickle of the
fitted estimator.

Families: the linear model, the MLP, the NAM and NODE on a synthetic table (2000 rows
of 60 features, 6 informative, 3 classes; the sparse models keep few of the columns),
and the compacted CNN of the structured-sparsity work (``DGatedNeuralNetClassifier``
with two valid 3x3 convolutions gated by filter on scikit-learn's 8x8 digits).

Run: ``python benchmarks/inference.py`` (``--quick``: fewer epochs and repeats).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from _common import RESULTS, add_out_argument, load_dataset, machine, single_thread  # noqa: E402

BATCHES = (1, 64, 4096)
WAYS = (
    "predict_proba",
    "torch dense",
    "torch compact",
    "onnx dense",
    "onnx compact",
    "onnx selected",
)


def _table(seed=0):
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(
        n_samples=6000,
        n_features=60,
        n_informative=6,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        class_sep=1.5,
        random_state=seed,
    )
    X = X * 3.0 + 1.0  # the user's units: the scaling is folded into the graphs
    return train_test_split(X, y, train_size=2000, random_state=seed)


def _digits(seed=0):
    from sklearn.model_selection import train_test_split

    data = load_dataset("digits")
    images = data.X.reshape(-1, 1, 8, 8)
    return train_test_split(images, data.y, test_size=0.3, random_state=seed)


class SmallCNN(torch.nn.Module):
    """Two valid 3x3 convolutions (16, 32 filters) and a linear head, 8x8 inputs."""

    def __init__(self, n_outputs):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3)
        self.conv2 = torch.nn.Conv2d(16, 32, 3)
        self.head = torch.nn.Linear(32 * 4 * 4, n_outputs)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.head(h.flatten(1))


def _models(quick):
    import sksparse_nn as s

    epochs = 20 if quick else None
    cnn_epochs = 20 if quick else 100
    return {
        "linear": (s.SparseLinearClassifier(lam=0.02, random_state=0), _table),
        "mlp": (
            s.DGatedMLPClassifier(
                lam=0.03, hidden_layer_sizes=(64, 32), max_epochs=epochs, random_state=0
            ),
            _table,
        ),
        "nam": (s.DGatedNAMClassifier(lam=0.03, max_epochs=epochs, random_state=0), _table),
        "node": (
            s.NODEClassifier(num_trees=64, depth=4, max_epochs=epochs, random_state=0),
            _table,
        ),
        "cnn": (
            s.DGatedNeuralNetClassifier(
                SmallCNN,
                gates={"conv1.weight": "out", "conv2.weight": "out"},
                lam=0.03,
                lr=0.05,
                max_epochs=cnn_epochs,
                random_state=0,
            ),
            _digits,
        ),
    }


def _latency(fn, x, budget):
    """Median seconds per call of ``fn(x)``, ``(thread CPU, wall)``, over calls filling
    about ``budget`` seconds (at least 5, after 3 warm-up calls). Everything runs on
    this thread (one torch thread, onnxruntime with one intra-op thread), so its CPU
    time is the call's cost whatever else the machine runs; wall time is kept too."""
    for _ in range(3):
        fn(x)
    start = time.perf_counter()
    fn(x)
    once = max(time.perf_counter() - start, 1e-7)
    cpu, wall = [], []
    for _ in range(max(5, min(3000, int(budget / once)))):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn(x)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.thread_time() - c0)
    return statistics.median(cpu), statistics.median(wall)


def _session(model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _ways(est):
    """``{way: callable on a float32 numpy batch}`` and the ONNX sizes."""
    import torch

    from sksparse_nn.export import InferenceGraph, to_onnx, torch_graph
    from sksparse_nn.export._torch_export import _export, _with_labels

    compact, _, task = torch_graph(est)
    module = est.module_
    dense = InferenceGraph(module, None, task, torch.float32)
    shape = tuple(est._inference_module()[2])
    # the dense graph exported the same way as the compact one
    dense_onnx = _with_labels(
        __import__("onnx").load_from_string(
            _export(dense, shape, task, "float32", None, "torchscript", "dense")
        ),
        est.classes_,
    )
    compact_onnx = to_onnx(est)
    selected_onnx = to_onnx(est, drop_inputs=True)
    columns = est._inference_module()[1]
    sessions = {
        "onnx dense": _session(dense_onnx),
        "onnx compact": _session(compact_onnx),
        "onnx selected": _session(selected_onnx),
    }

    def run_torch(graph):
        def call(x):
            with torch.inference_mode():
                return graph(torch.from_numpy(x))

        return call

    def run_onnx(session):
        return lambda x: session.run(None, {"X": x})

    def run_selected(session):
        # the rows' selected columns, gathered before the clock starts (see _latency)
        return lambda x: session.run(None, {"X": x})

    ways = {
        "predict_proba": est.predict_proba,
        "onnx selected": run_selected(sessions["onnx selected"]),
        "torch dense": run_torch(dense),
        "torch compact": run_torch(compact),
        "onnx dense": run_onnx(sessions["onnx dense"]),
        "onnx compact": run_onnx(sessions["onnx compact"]),
    }
    sizes = {
        "onnx dense": len(dense_onnx.SerializeToString()),
        "onnx compact": len(compact_onnx.SerializeToString()),
        "onnx selected": len(selected_onnx.SerializeToString()),
    }
    return ways, sizes, columns


def _check(ways, X, columns):
    """Every way gives the estimator's probabilities (float32 rounding)."""
    import numpy as np

    expected = ways["predict_proba"](X.astype(np.float64))
    for way in WAYS[1:]:
        out = ways[way](X[:, columns] if way == "onnx selected" else X)
        proba = out[1]
        proba = proba.numpy() if hasattr(proba, "numpy") else proba
        err = float(np.abs(proba - expected).max())
        if err > 1e-4:
            raise AssertionError(f"{way}: probabilities differ from predict_proba by {err:.2g}")


def run(args):
    import numpy as np
    import skops.io as sio

    single_thread()
    results = {"machine": machine(), "args": vars(args), "families": {}}
    for family, (est, data) in _models(args.quick).items():
        if args.families and family not in args.families:
            continue
        X, X_test, y, y_test = data()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        fit_seconds = time.perf_counter() - t0
        ways, sizes, columns = _ways(est)
        rows = X_test.astype(np.float32)
        _check(ways, rows[:256], columns)
        sizes["skops"] = len(sio.dumps(est))  # (the CNN's file also names SmallCNN)
        sizes["pickle"] = len(pickle.dumps(est))
        entry = {
            "fit_seconds": fit_seconds,
            "accuracy": float(est.score(X_test, y_test)),
            "columns_read": int(len(columns)),
            "n_features": int(np.prod(X.shape[1:])) if X.ndim == 2 else int(X.shape[1]),
            "parameters": _parameters(est),
            "sizes": sizes,
            "latency": {},
            "latency_wall": {},
        }
        for batch in BATCHES:
            x32 = np.ascontiguousarray(np.resize(rows, (batch, *rows.shape[1:])))
            inputs = {
                "predict_proba": x32.astype(np.float64),
                "onnx selected": np.ascontiguousarray(x32[:, columns]),
            }
            # rounds over the ways, each a share of the budget; the smallest median of a
            # way's rounds (a round another process disturbed counts less)
            rounds = [
                {w: _latency(ways[w], inputs.get(w, x32), args.budget / args.rounds) for w in WAYS}
                for _ in range(args.rounds)
            ]
            entry["latency"][batch] = {w: min(r[w][0] for r in rounds) for w in WAYS}
            entry["latency_wall"][batch] = {w: min(r[w][1] for r in rounds) for w in WAYS}
        results["families"][family] = entry
        print(f"{family}: fitted in {fit_seconds:.1f}s", flush=True)
    return results


def _parameters(est):
    from sksparse_nn.compaction import count_parameters

    module, _, _ = est._inference_module()
    return {"dense": count_parameters(est.module_), "compact": count_parameters(module)}


def report(results, out):
    print(f"load average {results['machine']['load_average']}")
    head = f"{'family':8s} {'rows':>5s} " + " ".join(f"{w:>17s}" for w in WAYS)
    print("latency per call, microseconds of thread CPU time (ratio to torch dense)")
    print(head)
    for family, entry in results["families"].items():
        for batch, row in entry["latency"].items():
            base = row["torch dense"]
            cells = " ".join(f"{row[w] * 1e6:9.1f} ({base / row[w]:4.2f}x)" for w in WAYS)
            print(f"{family:8s} {int(batch):5d} {cells}")
    print()
    print(f"{'family':8s} {'columns':>9s} {'params':>15s} {'accuracy':>8s} "
          f"{'onnx dense':>10s} {'onnx compact':>12s} {'skops':>8s} {'pickle':>8s}  (bytes)")
    for family, e in results["families"].items():
        s, p = e["sizes"], e["parameters"]
        print(
            f"{family:8s} {e['columns_read']:4d}/{e['n_features']:<4d} "
            f"{p['compact']:6d}/{p['dense']:<8d} {e['accuracy']:8.3f} "
            f"{s['onnx dense']:10d} {s['onnx compact']:12d} {s['skops']:8d} {s['pickle']:8d}"
        )
    from _common import write_json

    print(f"results: {write_json(results, out)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs, shorter timing")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of calls per measurement (default 1, --quick 0.2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds over the ways per batch (the smallest median is kept)")
    parser.add_argument("--families", nargs="+", default=None,
                        choices=["linear", "mlp", "nam", "node", "cnn"])
    add_out_argument(parser, "inference.json")
    args = parser.parse_args()
    if args.budget is None:
        args.budget = 0.2 if args.quick else 1.0
    if args.quick and args.out == str(RESULTS / "inference.json"):
        args.out = str(RESULTS / "inference_quick.json")
    report(run(args), args.out)


if __name__ == "__main__":
    main()
