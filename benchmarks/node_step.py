"""Cost of one NODE training step: the package's layout against the sample-first one.

NODE's trees run many small elementwise products (soft splits, leaf products). The package
computes them with the samples on the last, contiguous axis (``(trees, depth, n)``), takes
the soft split's derivative in closed form, and sorts the choice logits for 1.5-entmax
with numpy. This script keeps a benchmark-local copy of the earlier formulation (samples
first, ``(n, trees, depth)``, plain autograd through the soft split, torch's sort) and
times both on the same parameters:

1. forward and forward + backward of the estimators' default modules (regressor: two
   dense layers of 64 depth-6 trees; classifier: one layer of 128), batch 256, and the
   largest difference of their outputs and gradients (float32: rounding only);
2. a whole default ``NODERegressor`` fit with a fixed number of epochs, once with the
   package's forward and once with the reference forward swapped in.

One torch thread; the variants alternate over ``--repeats`` rounds and medians of the CPU
time are reported, as ratios in the same run. Writes ``benchmarks/results/node_step.json``.

Usage: ``python benchmarks/node_step.py [--repeats 7] [--epochs 30]``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings

import torch
from _common import add_out_argument, machine, single_thread, write_json
from sklearn.datasets import make_friedman1

import sksparse_nn.nn.node as node_module
from sksparse_nn import NODERegressor
from sksparse_nn.nn.node import NODE

BATCH = 256
MODULES = {  # the estimators' default modules
    "regressor (2 x 64 trees, dense)": dict(n_features=11, n_outputs=1, num_trees=64, num_layers=2),
    "classifier (1 x 128 trees)": dict(n_features=30, n_outputs=2, num_trees=128, num_layers=1),
}


# ------------------------------------------------- the earlier formulation (reference)
def _torch_sort(z):
    return torch.sort(z.detach(), dim=-1, descending=True).values


@contextlib.contextmanager
def _torch_sorting():
    """1.5-entmax sorts with torch (as the ``entmax`` package did) inside this block."""
    package = node_module._sorted_descending
    node_module._sorted_descending = _torch_sort
    try:
        yield
    finally:
        node_module._sorted_descending = package


def _entmoid_autograd(x):
    x = x.clamp(-2.0, 2.0)
    return (x + torch.sqrt(8.0 - x * x)).pow(2) / 16.0


def _leaves_sample_first(right):  # (n, T, k) -> (n, T, 2**k)
    leaves = right.new_ones(*right.shape[:-1], 1)
    for b in right.movedim(-1, 0).unsqueeze(-1).contiguous():
        leaves = torch.stack((leaves * (1.0 - b), leaves * b), dim=-1).flatten(start_dim=-2)
    return leaves


def _layer_sample_first(layer, x):  # (n, F) -> (n, T, C)
    trees, depth, c = layer.num_trees, layer.depth, layer.tree_dim
    weights = node_module.entmax15(layer.choice_logits).reshape(trees * depth, -1)
    values = (x @ weights.T).reshape(x.shape[0], trees, depth)
    right = _entmoid_autograd((values - layer.thresholds) * torch.exp(-layer.log_temperatures))
    d1 = depth // 2
    by_tree = right.transpose(0, 1)
    u, v = _leaves_sample_first(by_tree[..., :d1]), _leaves_sample_first(by_tree[..., d1:])
    blocks = layer.response.reshape(trees, c * 2**d1, 2 ** (depth - d1))
    partial = torch.bmm(v, blocks.transpose(1, 2)).reshape(trees, x.shape[0], c, 2**d1)
    return (partial * u.unsqueeze(2)).sum(dim=-1).transpose(0, 1)


def reference_forward(node, x):
    """``NODE.forward`` in the sample-first formulation (same parameters, same math)."""
    outputs, inputs = [], x
    for layer in node.layers:
        with _torch_sorting():
            out = _layer_sample_first(layer, inputs)
        outputs.append(out)
        flat = out.flatten(start_dim=1)
        inputs = torch.cat((inputs, flat), dim=1) if node.dense else flat
    used = outputs if node.dense else outputs[-1:]
    total = sum(out[:, :, : node.n_outputs].sum(dim=1) for out in used)
    return node.target_mean + node.target_scale * (node.bias + node.output_scale * total)


@contextlib.contextmanager
def reference_layout():
    """Every NODE forward in this block runs the reference formulation."""
    package = NODE.forward
    NODE.forward = reference_forward
    try:
        yield
    finally:
        NODE.forward = package


# ------------------------------------------------------------------------ timing
def _cpu(fn, calls):
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def module_rows(repeats, calls=20):
    rows = []
    for name, kwargs in MODULES.items():
        torch.manual_seed(0)
        node = NODE(**kwargs)
        x = torch.randn(BATCH, kwargs["n_features"])
        node.data_init(x)
        weights = torch.randn(BATCH, kwargs["n_outputs"])
        params = list(node.parameters())
        forwards = {"package": node, "reference": lambda x, node=node: reference_forward(node, x)}

        def step(f, x=x, weights=weights, params=params):
            return torch.autograd.grad((f(x) * weights).sum(), params)

        got, ref = step(forwards["package"]), step(forwards["reference"])
        pairs = zip(got, ref, strict=True)
        grad_diff = max(float((a - b).abs().max() / b.abs().max()) for a, b in pairs)
        with torch.no_grad():
            out_diff = float((node(x) - reference_forward(node, x)).abs().max())
        times = {k: {"forward": [], "step": []} for k in forwards}
        for _ in range(repeats):  # alternate the variants: the machine's load hits both
            for key, f in forwards.items():
                with torch.no_grad():
                    times[key]["forward"].append(_cpu(lambda f=f, x=x: f(x), calls))
                times[key]["step"].append(_cpu(lambda f=f: step(f), calls))
        med = {k: {p: statistics.median(v) for p, v in t.items()} for k, t in times.items()}
        rows.append(
            {
                "module": name,
                "forward_ms": {k: 1e3 * m["forward"] for k, m in med.items()},
                "step_ms": {k: 1e3 * m["step"] for k, m in med.items()},
                "step_ratio_reference_to_package": med["reference"]["step"]
                / med["package"]["step"],
                "max_output_difference": out_diff,
                "max_relative_gradient_difference": grad_diff,
            }
        )
    return rows


def fit_row(repeats, epochs):
    X, y = make_friedman1(n_samples=800, n_features=11, noise=1.0, random_state=0)

    def fit():
        est = NODERegressor(max_epochs=epochs, early_stopping=False, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fixed budget's ConvergenceWarning
            return est.fit(X, y)

    times = {"package": [], "reference": []}
    for _ in range(repeats):
        times["package"].append(_cpu(fit, 1))
        with reference_layout():
            times["reference"].append(_cpu(fit, 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "data": "make_friedman1, 800 x 11",
        "epochs": epochs,
        "fit_s": med,
        "ratio_reference_to_package": med["reference"] / med["package"],
    }


def run(args):
    single_thread()
    return {
        "settings": {"batch": BATCH, "repeats": args.repeats, "epochs": args.epochs},
        "modules": module_rows(args.repeats),
        "fit": fit_row(max(1, args.repeats // 2), args.epochs),
        "machine": machine(),
    }


def report(results, out):
    print(
        f"{'module':34s} {'fwd pkg':>8s} {'fwd ref':>8s} {'step pkg':>9s} {'step ref':>9s}"
        f" {'ref/pkg':>8s} {'max dy':>8s} {'max dg':>8s}"
    )
    for r in results["modules"]:
        f, s = r["forward_ms"], r["step_ms"]
        print(
            f"{r['module']:34s} {f['package']:8.2f} {f['reference']:8.2f} {s['package']:9.2f}"
            f" {s['reference']:9.2f} {r['step_ratio_reference_to_package']:8.2f}"
            f" {r['max_output_difference']:8.1e} {r['max_relative_gradient_difference']:8.1e}"
        )
    fit = results["fit"]
    print(
        f"default NODERegressor fit, {fit['epochs']} epochs on {fit['data']}: "
        f"package {fit['fit_s']['package']:.2f} s, reference {fit['fit_s']['reference']:.2f} s"
        f" CPU (reference / package {fit['ratio_reference_to_package']:.2f})"
    )
    write_json(results, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=30)
    add_out_argument(parser, "node_step.json")
    args = parser.parse_args()
    report(run(args), args.out)


if __name__ == "__main__":
    main()
