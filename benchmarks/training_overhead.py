"""Training overhead of D-Gating and of the estimator's skorch plumbing (issues 4, 43).

Measured on the training part of ISOLET (6238 x 617, 26 classes; ``--data-home`` or
``$SKSPARSE_NN_DATA``) or scikit-learn's digits (``--dataset digits``), standardized, with
the estimator's defaults: MLP hidden (100,), ReLU, SGD with Nesterov momentum 0.9, lr 0.1,
batch 64, shuffled, float32, D=3 (lam=1e-3 in the plain loops: the dense regime, so no
group dies and every variant does the same arithmetic).

1. Per-epoch time against one plain PyTorch loop over the ungated MLP (the anchor). The
   headline row is the estimator's own step: the net ``DGatedMLPClassifier`` builds for
   a fit (its module, sparsifier, penalty, ridge, optimizer, batches), an epoch of
   skorch's ``run_single_epoch`` with the net's ``train_step``. Beside it the same net with
   its module's gating collapsed (the net's own cost), and the plain loop over variants of
   the model: gated with ``lam * penalty(model)`` in the loss; gated without penalty;
   gated with the penalty's gradient added after ``backward``; and prototypes without
   torch's parametrization ("lean", "fused"); the ungated loop with 2 torch threads.
   Target (issue 43): the estimator's gated step <= 1.15x the plain step.
2. Whole fit: ``DGatedMLPClassifier.fit`` against the plain loop with the same model,
   epochs, batch size, optimizer and cosine schedule (ungated, and gated with the
   penalty). Target: estimator / plain ungated <= 1.3. Also: the cost of the first fit in
   a fresh process (one-time imports).
3. cProfile of ``DGatedMLPClassifier.fit``, grouped by where the time goes.
4. A prototype of a further fix (a benchmark-local net subclass, nothing in the package
   is changed), timed on a whole fit.

Variants are interleaved over ``--repeats`` rounds and medians reported, so that the
machine's varying load (recorded) hits all variants alike. Part 1 times each epoch by
this thread's CPU time (torch runs on this one thread), which other processes on the
machine disturb far less than the wall clock; the wall times are recorded too. Writes
``benchmarks/results/training_overhead.json`` and ``training_overhead.png``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _common import (
    add_data_home_argument,
    add_out_argument,
    load_dataset,
    machine,
    pyplot,
    timed,
    write_json,
)
from skorch.callbacks import Callback, LRScheduler

from sksparse_nn import DGatedMLPClassifier
from sksparse_nn.gating import collapse, dgate, gated_tensors, penalty_function
from sksparse_nn.nn.mlp import MLP
from sksparse_nn.training import PenalizedNet

LAM, D, LR, BATCH, HIDDEN = 1e-3, 3, 0.1, 64, (100,)
HEADLINE = "DGatedMLPClassifier's step (its own net)"


# ---------------------------------------------------------------------------- data
def load(name, data_home):
    from sklearn.preprocessing import StandardScaler

    data = load_dataset(name, data_home)
    X, y = data.X, data.y
    X = StandardScaler().fit_transform(np.asarray(X, dtype=np.float64)).astype(np.float32)
    return X, np.asarray(y, dtype=np.int64)


# ---------------------------------------------------------------------- plain loops
def build(n_features, n_classes, gated, seed=0):
    torch.manual_seed(seed)
    model = MLP(n_features, HIDDEN, n_classes)
    if gated:
        dgate(model.linears[0], "weight", groups="in", D=D)
    return model


class LeanGatedMLP(torch.nn.Module):
    """The gated MLP without torch.nn.utils.parametrize: omega and gates are plain
    parameters of the first layer and its weight is ``omega * prod(gates)`` (prototype)."""

    def __init__(self, mlp):
        super().__init__()
        first = mlp.linears[0]
        self.omega = torch.nn.Parameter(first.weight.detach().clone())
        self.gates = torch.nn.Parameter(torch.ones(D - 1, first.weight.shape[1]))
        self.bias = torch.nn.Parameter(first.bias.detach().clone())
        self.rest = mlp.linears[1:]
        self.activation = mlp.activation

    def forward(self, x):
        x = self.activation(
            torch.nn.functional.linear(x, self.omega * self.gates.prod(0), self.bias)
        )
        *hidden, last = self.rest
        for layer in hidden:
            x = self.activation(layer(x))
        return last(x)


class _FusedGate(torch.autograd.Function):
    """``omega * prod(gates)`` with the penalty's gradient folded into one backward node."""

    @staticmethod
    def forward(ctx, omega, gates, c):
        scale = gates.prod(0)
        ctx.save_for_backward(omega, gates, scale)
        ctx.c = c
        return omega * scale

    @staticmethod
    def backward(ctx, grad_w):
        omega, gates, scale = ctx.saved_tensors
        grad_scale = (grad_w * omega).sum(0)
        grad_omega = (grad_w * scale).add_(omega, alpha=ctx.c)
        others = torch.stack(
            [torch.cat([gates[:d], gates[d + 1 :]]).prod(0) for d in range(len(gates))]
        )
        grad_gates = (others * grad_scale).add_(gates, alpha=ctx.c)
        return grad_omega, grad_gates, None


class FusedGatedMLP(LeanGatedMLP):
    """LeanGatedMLP whose gating and penalty gradient are one autograd node (prototype)."""

    def forward(self, x):
        weight = _FusedGate.apply(self.omega, self.gates, 2 * LAM / D if self.training else 0.0)
        x = self.activation(torch.nn.functional.linear(x, weight, self.bias))
        *hidden, last = self.rest
        for layer in hidden:
            x = self.activation(layer(x))
        return last(x)


class PlainLoop:
    """A plain PyTorch training loop, one epoch per call (so variants can be interleaved).

    variant: "plain" (ungated); "gated" (parametrized first layer, ``lam * penalty`` in the
    loss, as the estimator); "gated_nopen" (no penalty: the parametrization alone);
    "gated_grad" (penalty gradient ``(2 lam / D) p`` added to ``.grad`` after backward);
    "gated_lean" (no parametrize machinery, penalty gradient added to ``.grad``);
    "gated_fused" (no parametrize, gating + penalty gradient in one autograd node).
    """

    def __init__(self, X, y, variant="plain", seed=0, epochs=10, threads=1, schedule=True):
        self.threads, self.variant = threads, variant
        self.X, self.y = torch.as_tensor(X), torch.as_tensor(y)
        n_classes = int(self.y.max()) + 1
        parametrized = variant in ("gated", "gated_nopen", "gated_grad")
        model = build(X.shape[1], n_classes, parametrized, seed)
        if variant == "gated_lean":
            model = LeanGatedMLP(model)
        elif variant == "gated_fused":
            model = FusedGatedMLP(model)
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, nesterov=True)
        self.sched = (
            torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs) if schedule else None
        )
        self.crit = torch.nn.CrossEntropyLoss()
        # the penalty with the gated tensors looked up once (as the estimator does)
        self.penalty = penalty_function(model) if variant == "gated" else None
        self.penalized = []
        if variant == "gated_grad":
            for _, module, name, gate in gated_tensors(model):
                self.penalized += [module.parametrizations[name].original, gate.gates]
        elif variant == "gated_lean":
            self.penalized = [model.omega, model.gates]
        self.gen = torch.Generator().manual_seed(seed)

    def epoch(self):
        """Train one epoch; returns its wall time in seconds (its CPU time in
        ``self.cpu``)."""
        previous = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        t0, c0 = time.perf_counter(), time.thread_time()
        model, opt, crit, X, y = self.model, self.opt, self.crit, self.X, self.y
        model.train()
        order = torch.randperm(len(X), generator=self.gen)
        for i in range(0, len(X), BATCH):
            idx = order[i : i + BATCH]
            opt.zero_grad()
            loss = crit(model(X[idx]), y[idx])
            if self.variant == "gated":
                loss = loss + LAM * self.penalty()
            loss.backward()
            if self.penalized:
                grads = [p.grad for p in self.penalized]
                torch._foreach_add_(grads, self.penalized, alpha=2 * LAM / D)
            opt.step()
        if self.sched is not None:
            self.sched.step()
        elapsed = time.perf_counter() - t0
        self.cpu = time.thread_time() - c0
        torch.set_num_threads(previous)
        return elapsed


def plain_fit(X, y, epochs, variant="plain", seed=0, threads=1):
    """A whole plain-loop fit (data conversion, model, optimizer included); seconds."""

    def fit():
        loop = PlainLoop(X, y, variant, seed, epochs, threads)
        for _ in range(epochs):
            loop.epoch()

    return timed(fit).wall


# ------------------------------------------------------------- the estimator's step
class _Captured(Exception):  # noqa: N818 (a signal)
    """Raised by :class:`_CaptureNet` once the estimator's net is initialized."""


class EstimatorEpochs:
    """The net ``DGatedMLPClassifier`` trains (built by its own fit: module, sparsifier,
    ridge, optimizer and its parameter groups, callbacks, batches), caught before its
    first epoch; :meth:`epoch` runs one training epoch as skorch's fit loop does
    (``run_single_epoch`` with the net's ``train_step``, batch callbacks and history
    included). ``gated=False`` collapses the module's gating first (the net's own cost:
    same network, no sparsifier)."""

    def __init__(self, X, y, gated=True, seed=0, **params):
        captured = []

        class _CaptureNet(DGatedMLPClassifier._traits.net_class):
            def fit(self, X, y=None, **fit_params):
                self.initialize()
                captured.append((self, X))
                raise _Captured

        cls = type(
            "DGatedMLPClassifier",
            (DGatedMLPClassifier,),
            {"_traits": replace(DGatedMLPClassifier._traits, net_class=_CaptureNet)},
        )
        try:
            cls(random_state=seed, **params).fit(X, y)
        except _Captured:
            pass
        self.net, self.dataset = captured[-1]
        if not gated:
            collapse(self.net.module_, 0.0)  # the same instance: re-read by the net
            self.net.initialize_module()
            self.net.initialize_optimizer()

    def epoch(self):
        """One training epoch; returns its wall time (its CPU time in ``self.cpu``)."""
        net = self.net
        t0, c0 = time.perf_counter(), time.thread_time()
        net.history.new_epoch()
        iterator = net.get_iterator(self.dataset, training=True)
        net.run_single_epoch(iterator, training=True, prefix="train", step_fn=net.train_step)
        self.cpu = time.thread_time() - c0
        return time.perf_counter() - t0


# ------------------------------------------------------------ prototypes of the fixes
class _EpochCosine(Callback):
    """Cosine annealing per epoch without batch hooks (prototype)."""

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history)
        lr = 0.5 * net.lr * (1 + math.cos(math.pi * min(epoch, self.max_epochs) / self.max_epochs))
        for group in net.optimizer_.param_groups:
            group["lr"] = lr


def _overrides(cb, name):
    return getattr(type(cb), name) is not getattr(Callback, name)


class ProtoNet(PenalizedNet):
    """The package's PenalizedNet plus a further fix (prototype).

    fixes: "epoch" - per-batch notify only to callbacks that override batch hooks, loss
                     values collected as tensors and written to the history once per
                     epoch (one .tolist() instead of a .item() per batch).
    (The penalty gradient in closed form, the step without skorch's closure, switching
    modes only when they change and looking the gated tensors up once were prototyped
    here before and are now in the package.)
    """

    fixes = frozenset()

    def initialize_callbacks(self):
        if "epoch" in self.fixes:  # the cosine schedule without batch hooks
            self.callbacks = [
                (n, _EpochCosine(self.max_epochs) if n == "lr_schedule" else cb)
                for n, cb in self.callbacks
            ]
        return super().initialize_callbacks()

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        if "epoch" not in self.fixes or iterator is None:
            return super().run_single_epoch(iterator, training, prefix, step_fn, **fit_params)
        listeners = [
            cb
            for _, cb in self.callbacks_
            if (_overrides(cb, "on_batch_begin") or _overrides(cb, "on_batch_end"))
            and not (isinstance(cb, LRScheduler) and cb.step_every == "epoch")
        ]
        losses, sizes = [], []
        for batch in iterator:
            for cb in listeners:
                cb.on_batch_begin(self, batch=batch, training=training)
            step = step_fn(batch, **fit_params)
            losses.append(step["loss"].detach())
            sizes.append(len(batch[0]))
            for cb in listeners:
                cb.on_batch_end(self, batch=batch, training=training, **step)
        values = torch.stack(losses).tolist() if losses else []
        self.history[-1]["batches"].extend(
            {prefix + "_loss": loss, prefix + "_batch_size": size}
            for loss, size in zip(values, sizes, strict=True)
        )
        self.history.record(prefix + "_batch_count", len(values))


def proto_estimator(fixes, **params):
    """A DGatedMLPClassifier whose net (its declared ``Traits.net_class``) is a ProtoNet."""
    net_class = type("ProtoNet_", (ProtoNet,), {"fixes": frozenset(fixes)})
    cls = type(
        "DGatedMLPClassifier",
        (DGatedMLPClassifier,),
        {"_traits": replace(DGatedMLPClassifier._traits, net_class=net_class)},
    )
    return cls(**params)


# --------------------------------------------------------------------- profiling
PROFILE_GROUPS = [
    ("forward (module call incl. gating recompute)", "skorch/net.py", "infer"),
    ("  of which: gating parametrization", "torch/nn/utils/parametrize.py", "get_parametrized"),
    ("backward (autograd)", "torch/autograd/__init__.py", "backward"),
    ("optimizer update (sgd math)", "torch/optim/sgd.py", "sgd"),
    ("zero_grad", "torch/optim/optimizer.py", "zero_grad"),
    ("loss + penalty (get_loss)", "training/net.py", "get_loss"),
    ("  of which: penalty()", "sparsifiers/_model.py", "_penalty"),
    ("  of which: sparsified_tensors() walk", "sparsifiers/_model.py", "sparsified_tensors"),
    ("module.train() (only on a mode change)", "torch/nn/modules/module.py", "train"),
    ("callbacks (notify)", "skorch/net.py", "notify"),
    ("history.record_batch", "skorch/history.py", "record_batch"),
    ("batches (BatchIterator)", "training/data.py", "__iter__"),
    ("loss.item() per batch", "~", "<method 'item' of 'torch._C.TensorBase' objects>"),
    ("setup: validate, build, gate, init net", "skorch/net.py", "initialize"),
    ("after fit: collapse, norms", "sparsifiers/_model.py", "collapse"),
]


def profile_fit(X, y, epochs):
    est = DGatedMLPClassifier(lam=LAM, D=D, max_epochs=epochs, random_state=0)
    prof = cProfile.Profile()
    prof.enable()
    est.fit(X, y)
    prof.disable()
    stats = pstats.Stats(prof)
    total = max(v[3] for v in stats.stats.values())
    groups = {}
    for label, file_part, func in PROFILE_GROUPS:
        # max, not sum: same-named functions of one file may nest (penalty -> .penalty)
        groups[label] = max(
            [
                ct
                for (filename, _, fname), (_, _, _, ct, _) in stats.stats.items()
                if fname == func and (file_part == "~" or file_part in filename)
            ],
            default=0.0,
        )
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(20)
    top = [line for line in buf.getvalue().splitlines() if line.strip()][-22:]
    return {"total_s": total, "groups_s": groups, "top_tottime": top}


def cold_first_fit(data_home, dataset, epochs):
    """Seconds of the first and of a second fit in a fresh interpreter."""
    code = f"""
import time, json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import torch; torch.set_num_threads(1)
from training_overhead import load
from sksparse_nn import DGatedMLPClassifier
X, y = load({dataset!r}, {data_home!r})
out = []
for _ in range(2):
    t = time.perf_counter()
    DGatedMLPClassifier(lam={LAM}, D={D}, max_epochs={epochs}, random_state=0).fit(X, y)
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = json.loads(res.stdout.strip().splitlines()[-1])
    return {"first_fit_s": first, "second_fit_s": second, "one_time_s": first - second}


# ---------------------------------------------------------------------------- main
def med(values):
    return float(np.median(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_home_argument(parser)
    parser.add_argument("--dataset", default="isolet", choices=["isolet", "digits"])
    parser.add_argument("--epochs", type=int, default=4, help="epochs per timed run")
    parser.add_argument("--fit-epochs", type=int, default=8, help="epochs of a whole fit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    add_out_argument(parser, "training_overhead.json")
    args = parser.parse_args(argv)
    if args.dataset != "digits" and args.data_home is None:
        parser.error("give --data-home or set SKSPARSE_NN_DATA (or --dataset digits)")
    report(run(args), Path(args.out))


def run(args):
    """Parts 1-4, interleaved as described above; saves the JSON after each part."""
    torch.set_num_threads(args.threads)  # torch only: part 1 switches it per loop
    # the estimators train with subnormal floats flushed to zero (flush_denormals): the
    # plain loops too, so that like is compared with like (a plain loop's epoch took
    # 138 ms instead of ~80 without it, slower than the gated loops')
    torch.set_flush_denormal(True)
    X, y = load(args.dataset, args.data_home)
    out = {
        "dataset": args.dataset,
        "shape": list(X.shape),
        "settings": {
            "lam": LAM,
            "D": D,
            "lr": LR,
            "batch_size": BATCH,
            "hidden": list(HIDDEN),
            "epochs_per_timing": args.epochs,
            "fit_epochs": args.fit_epochs,
            "repeats": args.repeats,
            "threads": args.threads,
        },
        "environment": machine(),
        "load_start": os.getloadavg(),
    }
    path = Path(args.out)

    def save():
        out["load_end"] = os.getloadavg()
        write_json(out, path)

    # warm-up: one-time imports (torch._dynamo through the optimizer) and allocations
    plain_fit(X[:512], y[:512], 1)
    DGatedMLPClassifier(lam=LAM, max_epochs=1, random_state=0).fit(X[:512], y[:512])

    # 1. per-epoch time against the plain loop, interleaved epoch by epoch --------------
    rounds = args.epochs * args.repeats
    plain_variants = {
        "plain": "plain",
        "plain loop, gated (penalty in loss)": "gated",
        "plain loop, gated, no penalty": "gated_nopen",
        "plain loop, gated (penalty gradient in .grad)": "gated_grad",
        "prototype: gated lean (no parametrize, grad)": "gated_lean",
        "prototype: gated fused (one autograd node)": "gated_fused",
    }
    loops = {
        name: PlainLoop(X, y, v, seed=0, epochs=rounds, threads=args.threads)
        for name, v in plain_variants.items()
    }
    loops = {
        "plain": loops.pop("plain"),
        HEADLINE: EstimatorEpochs(X, y, gated=True, D=D, max_epochs=rounds),
        "estimator's net, gating collapsed": EstimatorEpochs(X, y, gated=False, D=D),
        **loops,
    }
    for loop in loops.values():
        loop.epoch()  # warm-up epoch, not timed
    walls = {name: [] for name in loops}
    cpus = {name: [] for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            walls[name].append(loop.epoch())
            cpus[name].append(loop.cpu)

    def paired(times, name):
        return med([t / b for t, b in zip(times[name], times["plain"], strict=True)])

    out["per_epoch"] = {
        name: {
            "median_cpu_s": med(cpus[name]),
            "ratio_to_plain": paired(cpus, name),
            "median_wall_s": med(walls[name]),
            "wall_ratio_to_plain": paired(walls, name),
            "all_cpu_s": cpus[name],
            "all_wall_s": walls[name],
        }
        for name in loops
    }
    two = PlainLoop(X, y, "plain", seed=0, epochs=2, threads=2)
    two_wall = two.epoch()  # one epoch: very slow when busy
    one = PlainLoop(X, y, "plain", seed=0, epochs=2, threads=args.threads)
    out["per_epoch"]["plain, 2 threads (wall)"] = {
        "median_wall_s": two_wall,
        "wall_ratio_to_plain": two_wall / one.epoch(),
    }
    out["headline"] = {
        "row": HEADLINE,
        "ratio_to_plain": out["per_epoch"][HEADLINE]["ratio_to_plain"],
        "target": 1.15,
    }
    save()
    print(
        f"1. per-epoch time against a plain PyTorch loop ({args.dataset} {X.shape}, "
        f"load {out['load_start'][0]:.1f}); ratio = median of paired epoch ratios; "
        "CPU time of this thread (wall time beside it)"
    )
    for name, v in out["per_epoch"].items():
        cpu = v.get("median_cpu_s")
        cpu_text = f"{cpu * 1e3:8.1f} ms  {v['ratio_to_plain']:.2f}x" if cpu else " " * 19
        print(
            f"   {name:<48} {cpu_text}   wall {v['median_wall_s'] * 1e3:7.1f} ms  "
            f"{v['wall_ratio_to_plain']:.2f}x"
        )

    # 2. whole fit: estimator against the plain loop ----------------------------------
    E = args.fit_epochs
    fits = {"plain loop, ungated": [], "plain loop, gated + penalty": [], "DGatedMLPClassifier": []}
    for r in range(args.repeats):
        fits["plain loop, ungated"].append(plain_fit(X, y, E, "plain", r, args.threads))
        fits["plain loop, gated + penalty"].append(plain_fit(X, y, E, "gated", r, args.threads))
        est = DGatedMLPClassifier(lam=LAM, D=D, max_epochs=E, random_state=r)
        fits["DGatedMLPClassifier"].append(timed(est.fit, X, y).wall)
    base_fits = fits["plain loop, ungated"]
    out["whole_fit"] = {
        name: {
            "median_s": med(v),
            "ratio_to_plain_ungated": med([t / b for t, b in zip(v, base_fits, strict=True)]),
            "all_s": v,
        }
        for name, v in fits.items()
    }
    save()
    print(f"2. whole fit, {E} epochs")
    for name, v in out["whole_fit"].items():
        print(f"   {name:<36} {v['median_s']:8.2f} s   {v['ratio_to_plain_ungated']:.2f}x")
    out["cold_start"] = cold_first_fit(args.data_home, args.dataset, 1)
    print(
        f"   first fit in a fresh process pays {out['cold_start']['one_time_s']:.1f} s of "
        "one-time imports (torch._dynamo, loaded by torch.optim's first use)"
    )
    save()

    # 3. profile ------------------------------------------------------------------------
    prof = profile_fit(X, y, max(2, E // 2))
    out["profile"] = prof
    save()
    print(f"3. cProfile of DGatedMLPClassifier.fit ({max(2, E // 2)} epochs, profiler on)")
    for label, s in prof["groups_s"].items():
        print(f"   {label:<46} {s:7.3f} s  {100 * s / prof['total_s']:5.1f}%")
    print(f"   {'total':<46} {prof['total_s']:7.3f} s")

    # 4. prototypes of the fixes ----------------------------------------------------------
    protos = {"as is": set(), "epoch": {"epoch"}}
    proto_times = {name: [] for name in protos}
    proto_base, scores = [], {}
    for r in range(args.repeats):
        proto_base.append(plain_fit(X, y, E, "plain", r, args.threads))
        for name, fixes in protos.items():
            est = proto_estimator(fixes, lam=LAM, D=D, max_epochs=E, random_state=r)
            proto_times[name].append(timed(est.fit, X, y).wall)
            if r == 0:
                scores[name] = float(est.score(X, y))
    out["prototypes"] = {
        name: {
            "fixes": sorted(protos[name]),
            "plain_loop_s": proto_base,
            "median_s": med(v),
            "ratio_to_plain_ungated": med([t / b for t, b in zip(v, proto_base, strict=True)]),
            "train_acc": scores[name],
            "all_s": v,
        }
        for name, v in proto_times.items()
    }
    save()
    print(f"4. whole fit with a prototype fix ({E} epochs; plain ungated loop = 1, paired)")
    for name, v in out["prototypes"].items():
        print(
            f"   {name:<8} {','.join(v['fixes']) or '-':<28} {v['median_s']:7.2f} s  "
            f"{v['ratio_to_plain_ungated']:.2f}x  train acc {v['train_acc']:.3f}"
        )
    return out


def report(out, path):
    """Write the JSON and the figure (the tables were printed part by part)."""
    out["load_end"] = os.getloadavg()
    write_json(out, path)
    plot(out, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png')}; load at end {out['load_end'][0]:.1f}")


def plot(out, png):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    per_epoch = {k: v for k, v in out["per_epoch"].items() if "ratio_to_plain" in v}
    two = out["per_epoch"].get("plain, 2 threads (wall)")
    title = "per-epoch CPU time (x plain loop)"
    if two is not None:  # off the scale of the others: quoted in the title instead
        title += f"\n2 torch threads (wall): {two['wall_ratio_to_plain']:.2f}x"
    panels = [
        (title, per_epoch, "ratio_to_plain", 1.15),
        ("whole fit (x plain ungated loop)", out["whole_fit"], "ratio_to_plain_ungated", 1.3),
        ("whole fit with a prototype fix", out["prototypes"], "ratio_to_plain_ungated", 1.3),
    ]
    for ax, (title, table, key, target) in zip(axes, panels, strict=True):
        names = list(table)
        values = [table[n][key] for n in names]
        ax.barh(names, values, color="tab:blue")
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.2f}", va="center", fontsize=8)
        ax.axvline(1.0, color="k", linewidth=0.8)
        ax.axvline(target, color="tab:red", linestyle="--", label=f"target {target}x")
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Training overhead on {out['dataset']} {tuple(out['shape'])}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
