"""Filter sparsity in a small VGG-style CNN (paper Sec. 5.2.2, App. C.3), at CPU scale.

Model: three 3x3 convolution blocks (8-16-32 filters), max pooling after the first,
global average pooling and a linear head. Data: MNIST-10k (``mnist_t10k.npz``, images
average-pooled to 14x14, 2000 training / 1000 test images) and COIL-20 (``coil20.npz``,
32x32 average-pooled to 16x16, 75% / 25% stratified split), from ``--data-home`` (default
``../shared/data``). Methods (on a data set every one trained by the same SGD, lr, batch
size and epochs, :data:`SETTINGS`):

* D-Gating, D = 2, 3, 4, over a lam path: every conv weight gated by filter
  (``"out"``) and the head's weight by input column (``"in"``, one group per last-layer
  filter). Filters end exactly at zero during training; nothing is pruned.
* direct L2,1 (``sparsifier="l21"``, threshold 0) on the same groups over a lam grid,
  then post-hoc global magnitude pruning of filters at fixed ratios; at each ratio the
  best test accuracy over the lam grid (the paper's one-shot protocol, no retraining).
* network slimming: the same CNN with BatchNorm after every (bias-free) conv, L1 on the
  BN scales (``"l21"`` with element groups on each BN weight) plus the L2,1 on the head's
  columns, then the channels with the smallest ``|gamma|`` pruned at fixed ratios (gamma,
  beta and the filter set to 0), best over lam at each ratio.

Why a gated filter is exactly removable here. A filter with zero weights still emits its
bias (after a BN: its shift beta), a constant map; :func:`compact_sequential` adds that
constant into the next layer's bias, which is exact only when the next conv has no zero
padding (at a padded border the constant is not constant). So every conv is "valid"
(padding 0): every filter at zero is folded away exactly, whatever its bias.
BN after a gated conv is the other choice; it is measured too (``dgating_bn``, D = 3) and
is not used for D-Gating: BN makes the loss invariant to a filter's scale, so a penalty on
the filter alone shrinks all filters together (the groups' norms fall uniformly): none
reached zero on MNIST; on COIL-20, with 4x the steps, 13 of 56 were cut at ``zero_tol``
with no gap (the committed runs). A filter gate now takes the BN's scale and shift into
its group, and a fixed budget ends with the groups still shrinking dropped where the
objective allows: rerun on MNIST at lam 0.014 it keeps 33 of 56 filters at 0.965
(``results/cnn_filters_enddrop.json``, with the D=3 points at lam 0.008 / 0.014: 46% /
30% of the filters at 0.953 / 0.942, where every filter was kept before).
The same happens without BN if an unpenalized layer can absorb the scale: conv layers
with ReLU are positively homogeneous, so shrinking every filter and growing an
unpenalized head lowers the penalty at no cost; the paper's VGG has weight decay on the
other parameters, here the head's columns carry the same group penalty instead.

Speed: after ``compact()``, the median of repeated forward passes (batch of 1024 images,
one thread, alternating full / compact; thread CPU time, which the other processes'
load does not inflate) gives the measured CPU speed-up.

What the committed runs show (one seed; results/cnn_filters.json). MNIST (batch 64, 60
epochs, SGD lr 0.05): D-Gating keeps 0.89 accuracy at 18-25% of the filters (10-15% of the
FLOPs), where L2,1 + pruning and slimming have fallen to 0.17 / 0.11; between 40% and 100%
of the filters the baselines are as good or better (D-Gating's lam path jumps from all
filters to about a third).

COIL-20 (1080 training images; batch 16 = 68 steps per epoch, 200 epochs, lr 0.03). An
earlier run at MNIST's settings (batch 64 = 17 steps per epoch, 60 epochs, lr 0.05) had
no sparse D-Gating model: an unused filter decays like exp(-2 lam sum_t lr_eff(t)), and in
~1000 steps (a cosine: half of them count) only lams that kill every filter got one to
``zero_tol``. With 4x the steps and 3.3x the epochs, each D has a path: D=2 keeps 1.000 /
0.997 / 1.000 / 0.997 accuracy at 79% / 50% / 29% / 23% of the filters (76 / 27 / 12 / 8%
of the FLOPs; 0.81 at 11%); D=3 1.000 at 34% (16% FLOPs), 0.98 at 21% (6%), 0.82 at 11%;
D=4 1.000 at 43%, 0.997 at 25% (10%), 0.93 at 16%, all filters gone at lam 0.018 (D=4 at
lam 0.003 diverged, NaN in epoch 11). L2,1 + magnitude pruning keeps 0.997 at 39%, 0.99
at 30% and 0.10 at 20%; slimming 1.000 at 59%, 0.71 at 50%, 0.14 at 39%. Direct L2,1
alone, before any pruning, has exact zeros with clean gaps at this budget (38 and 24 of
56 filters, accuracy 1.000), since the cosine takes the step size to 0 and with it the
subgradient's oscillation. Gaps: D-Gating's are clean (largest removed norm 4e-8 down to
exactly 0, smallest kept 0.45-2.3) only at the sparse end (D=2 lam >= 0.013, D=3 >= 0.0115,
D=4 >= 0.01); at the smaller lams that remove filters the smallest kept norm is 1.2e-7 to
2e-5, groups still on their way to zero when the cosine ends, cut at ``zero_tol`` = 1.2e-7.
lr 0.05 at batch 16-32 over 200 epochs spiked to chance-level losses and diverged at lam
0.004 (D=3); a constant rate (batch 16, 60 epochs, lr 0.05) lost accuracy (0.42 / 0.80 at
lam 0.008 / 0.005, D=3);
warm-started paths with the automatic budget did not help (the first warm epoch threw
the training loss from 0.35 to 4.1 at lr 0.02; some warm fits ended after 18-21 epochs
with a worse model than the point before). Compact CPU speed-up up to 1.97x
(D=2, 23% of the filters, 0.997) and 2.46x (D=3, 21%, 0.98).

Run: ``python benchmarks/cnn_filters.py`` (about 20 minutes for MNIST, 25 for COIL-20 on
2 shared cores, load 2-8; ``--datasets coil20``; ``--quick`` for a smoke run). Writes
``benchmarks/results/cnn_filters.json`` and ``cnn_filters.png``; ``--from-json a.json
b.json`` merges earlier results (a data set in a later file replaces the earlier one,
with ``--extend`` adds its points: the committed COIL-20 points are a run of the default
grid plus ``--lams '{"2": [0.018, 0.025], "3": [0.0115, 0.018], "4": [0.018], "bn": [],
"l21": [], "slimming": []}'``, merged so).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
from _common import (
    RESULTS,
    ROOT,
    machine,
    pyplot,
    single_thread,
    time_forward,
    uptime,
    write_json,
)
from torch import nn

from sksparse_nn import DGatedNeuralNetClassifier
from sksparse_nn.exceptions import TrainingDivergedError

RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
WIDTHS = (8, 16, 32)
#: A clean sparsity gap: the smallest kept group norm at least this times the largest
#: removed one (before the collapse).
CLEAN = 1e3
#: Per data set: mini-batch size, epochs and lam grids (every method on the same batch,
#: epochs, SGD and lr). COIL-20 has 1080 training images: at batch 64 (17 steps per epoch)
#: and 60 epochs an unused filter decays by only exp(-2 lam sum_t lr_eff(t)) ~ 1e-7 for the
#: lams that kill every filter, so batch 16 (68 steps per epoch) and more epochs; lr 0.05
#: at batch 16-32 and 200 epochs had loss spikes to chance level and diverged at lam 0.004.
SETTINGS = {
    "mnist": {"batch_size": 64, "epochs": 60, "lr": 0.05, "lams": {
        "2": [0.008, 0.014, 0.02, 0.026, 0.032], "3": [0.008, 0.014, 0.02, 0.026, 0.032],
        "4": [0.008, 0.014, 0.02, 0.026, 0.032], "bn": [0.014],
        "l21": [0.001, 0.003, 0.01], "slimming": [0.001, 0.003, 0.01]}},
    "coil20": {"batch_size": 16, "epochs": 200, "lr": 0.03, "lams": {
        **dict.fromkeys("234", [0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.013]),
        "bn": [0.006],
        "l21": [0.001, 0.003, 0.01], "slimming": [0.001, 0.003, 0.01]}},
}


# ---------------------------------------------------------------------------- data
def _pool(X, k):
    n, c, h, w = X.shape
    return X.reshape(n, c, h // k, k, w // k, k).mean(axis=(3, 5))


def load(name, data_home, n_train=2000, n_test=1000, seed=0):
    rng = np.random.RandomState(seed)
    if name == "mnist":
        d = np.load(Path(data_home) / "mnist_t10k.npz")
        X = _pool(d["X"].reshape(-1, 1, 28, 28).astype(np.float32) / 255, 2)
        y = d["y"]
        idx = rng.permutation(len(X))
        tr, te = idx[:n_train], idx[n_train : n_train + n_test]
    else:
        d = np.load(Path(data_home) / "coil20.npz")
        # column-major 32x32 rows -> upright images
        X = d["X"].reshape(-1, 32, 32).transpose(0, 2, 1)[:, None].astype(np.float32)
        X = _pool(X, 2)
        y = d["y"]
        tr, te = [], []
        for c in np.unique(y):
            rows = rng.permutation(np.flatnonzero(y == c))
            cut = int(0.75 * len(rows))
            tr.extend(rows[:cut])
            te.extend(rows[cut:])
        tr, te = np.array(tr), np.array(te)
    return X[tr], y[tr], X[te], y[te]


# ---------------------------------------------------------------------------- model
def make_cnn(in_ch, n_classes, bn=False, widths=WIDTHS):
    """conv(3x3, valid)-[BN]-ReLU blocks, max pool after the first, GAP, linear head."""
    layers, c = [], in_ch
    for i, w in enumerate(widths):
        layers.append(nn.Conv2d(c, w, 3, bias=not bn))
        if bn:
            layers.append(nn.BatchNorm2d(w))
        layers.append(nn.ReLU())
        if i == 0:
            layers.append(nn.MaxPool2d(2))
        c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n_classes)]
    return nn.Sequential(*layers)


def conv_names(model):
    return [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]


def bn_names(model):
    return [n for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]


def head_name(model):
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear)][-1]


def gates_for(model, method):
    head = {f"{head_name(model)}.weight": "in"}
    if method == "slimming":
        return {**{f"{n}.weight": "element" for n in bn_names(model)}, **head}
    return {**{f"{n}.weight": "out" for n in conv_names(model)}, **head}


# ---------------------------------------------------------------------- measures
def accuracy(module, X, y):
    with torch.no_grad():
        logits = module.eval()(torch.as_tensor(X))
    return float((logits.argmax(1).numpy() == y).mean())


def filter_norms(user):
    return {n: user.get_submodule(n).weight.detach().flatten(1).norm(dim=1).numpy()
            for n in conv_names(user)}


def compact_record(clf, X_te, y_te, x_time, repeats):
    """Compaction of the fitted (possibly pruned) ``clf``: equality, counts, speed."""
    small, report = clf.compact(return_report=True)
    convs = set(conv_names(clf.module_.module))
    kept = sum(len(v) for k, v in report.kept_units.items() if k in convs)
    total = sum(WIDTHS)
    with torch.no_grad():
        xb = torch.as_tensor(X_te[:256])
        diff = float((small(xb) - clf.module_.eval()(xb)).abs().max())
    t_full, t_small = time_forward(clf.module_.eval(), small, x_time, repeats)
    return {
        "filters_kept": kept,
        "filters_total": total,
        "frac_filters": kept / total,
        "kept_per_layer": [len(report.kept_units[n]) for n in conv_names(clf.module_.module)],
        "params_before": report.params_before,
        "params_after": report.params_after,
        "flops_before": report.flops_before,
        "flops_after": report.flops_after,
        "frac_flops": report.flops_after / report.flops_before,
        "compact_acc": accuracy(small, X_te, y_te),
        "compact_max_abs_diff": diff,
        "t_full_ms": 1e3 * t_full,
        "t_compact_ms": 1e3 * t_small,
        "speedup": t_full / t_small,
    }


# ------------------------------------------------------------------------ fitting
def fit(method, D, lam, data, args, seed=0):
    X_tr, y_tr, X_te, y_te = data
    n_classes = len(np.unique(y_tr))
    model = make_cnn(X_tr.shape[1], n_classes, bn=method in ("slimming", "dgating_bn"))
    sparsifier = "l21" if method in ("l21", "slimming") else "dgating"
    clf = DGatedNeuralNetClassifier(
        model,
        gates=gates_for(model, method),
        lam=lam,
        D=D,
        sparsifier=sparsifier,
        sparsifier_params={"threshold": 0.0} if sparsifier == "l21" else None,
        lr=args.lr,
        max_epochs=args.epochs,
        batch_size=args.batch_size,
        lr_schedule=args.lr_schedule,
        random_state=seed,
    )
    t0 = time.perf_counter()
    try:
        clf.fit(X_tr, y_tr)
    except TrainingDivergedError as exc:
        return None, {"method": method, "D": D, "lam": lam, "diverged": str(exc)[:200]}
    rec = {
        "method": method,
        "D": D,
        "lam": lam,
        "fit_s": time.perf_counter() - t0,
        "epochs": clf.n_iter_,
        "acc": clf.score(X_te, y_te),
        "sparsity_gap": list(clf.sparsity_gap_),
        "nonzero_groups": {k: int((v > 0).sum()) for k, v in clf.tensor_group_norms_.items()},
        "smallest_norms": sorted(
            float(x) for v in clf.tensor_group_norms_.values() for x in v
        )[:5],
    }
    return clf, rec


def prune(clf, ratio, method):
    """A copy of ``clf`` with the fraction ``ratio`` of all filters removed, those with the
    smallest filter norm (L2,1) or BN scale (slimming), one kept per layer at least."""
    clf = copy.deepcopy(clf)
    user = clf.module_.module
    convs = conv_names(user)
    if method == "slimming":
        bns = bn_names(user)
        scores = [user.get_submodule(b).weight.detach().abs().numpy() for b in bns]
    else:
        scores = [user.get_submodule(c).weight.detach().flatten(1).norm(dim=1).numpy()
                  for c in convs]
    flat = np.concatenate(scores)
    n_prune = int(round(ratio * len(flat)))
    order = np.argsort(flat, kind="stable")[:n_prune]
    offsets = np.cumsum([0] + [len(s) for s in scores])
    with torch.no_grad():
        for li in range(len(convs)):
            idx = order[(order >= offsets[li]) & (order < offsets[li + 1])] - offsets[li]
            if len(idx) == len(scores[li]):  # never a whole layer
                idx = idx[idx != np.argmax(scores[li])]
            idx = torch.as_tensor(idx, dtype=torch.long)
            user.get_submodule(convs[li]).weight[idx] = 0
            if method == "slimming":
                bn = user.get_submodule(bns[li])
                bn.weight[idx] = 0
                bn.bias[idx] = 0
    return clf


def run_dataset(name, args):
    args = settings_for(name, args)
    data = load(name, args.data_home, n_train=args.n_train)
    X_te, y_te = data[2], data[3]
    x_time = torch.as_tensor(np.concatenate([X_te] * 4)[:1024])
    print(f"\n== {name}: X_train {data[0].shape}, X_test {X_te.shape}  [{uptime()}]", flush=True)
    points, pruned, diagnostics = [], [], []

    def log(rec):
        c = rec.get("compact", {})
        print(
            f"{rec['method']:>10} D={rec['D']} lam={rec['lam']:<8.4g} "
            + (
                f"acc={rec['acc']:.3f} filters={c.get('filters_kept')}/{c.get('filters_total')} "
                f"flops={c.get('frac_flops', float('nan')):.2f} "
                f"speedup={c.get('speedup', float('nan')):.2f} fit={rec['fit_s']:.0f}s "
                f"min|w|={rec['smallest_norms'][0]:.2e}"
                if "acc" in rec
                else "diverged"
            ),
            flush=True,
        )

    # D-Gating paths (independent fits per lam; dense to sparse)
    for D in args.D:
        for lam in args.lams[str(D)]:
            clf, rec = fit("dgating", D, lam, data, args)
            if clf is not None:
                rec["compact"] = compact_record(clf, X_te, y_te, x_time, args.repeats)
            points.append(rec)
            log(rec)
    # BN after the gated convs: the scale-invariance diagnostic
    for lam in args.lams["bn"]:
        clf, rec = fit("dgating_bn", 3, lam, data, args)
        if clf is not None:
            rec["compact"] = compact_record(clf, X_te, y_te, x_time, args.repeats)
        diagnostics.append(rec)
        log(rec)
    # baselines: train over lam, prune at fixed ratios
    for method in ("l21", "slimming"):
        for lam in args.lams[method]:
            clf, rec = fit(method, 2, lam, data, args)
            if clf is None:
                points.append(rec)
                log(rec)
                continue
            rec["compact"] = compact_record(clf, X_te, y_te, x_time, args.repeats)
            points.append(rec)
            log(rec)
            for ratio in RATIOS:
                p = prune(clf, ratio, method)
                prec = {"method": method, "lam": lam, "ratio": ratio,
                        "acc": accuracy(p.module_, X_te, y_te)}
                prec["compact"] = compact_record(p, X_te, y_te, x_time, max(5, args.repeats // 3))
                pruned.append(prec)
    return {"points": points, "pruned": pruned, "diagnostics": diagnostics,
            "n_train": len(data[0]), "n_test": len(X_te), "shape": list(X_te.shape[1:]),
            "settings": {k: getattr(args, k) for k in
                         ("epochs", "batch_size", "lr", "lr_schedule", "lams", "D")}}


def settings_for(name, args):
    """``args`` with this data set's defaults where the command line left them unset."""
    args = copy.copy(args)
    own = SETTINGS[name]
    if args.quick:
        args.epochs, args.n_train, args.repeats = 3, 300, 3
        args.lams = {k: v[-1:] for k, v in {**own["lams"], **(args.lams or {})}.items()}
    args.epochs = args.epochs or own["epochs"]
    args.batch_size = args.batch_size or own["batch_size"]
    args.lr = args.lr or own["lr"]
    args.lams = {**own["lams"], **(args.lams or {})}
    return args


def tradeoff(result):
    """Accuracy vs kept filters/FLOPs per method: D-Gating points as trained, baselines
    the best accuracy over lam at each pruning ratio."""
    curves = {}
    for rec in result["points"]:
        if rec["method"] == "dgating" and "acc" in rec:
            c = rec["compact"]
            curves.setdefault(f"D-Gating D={rec['D']}", []).append(
                (c["frac_filters"], c["frac_flops"], rec["acc"], c["speedup"], rec["lam"]))
    for method, label in (("l21", "L2,1 + magnitude pruning"), ("slimming", "network slimming")):
        for ratio in RATIOS:
            cands = [p for p in result["pruned"] if p["method"] == method and p["ratio"] == ratio]
            if cands:
                b = max(cands, key=lambda p: p["acc"])
                c = b["compact"]
                curves.setdefault(label, []).append(
                    (c["frac_filters"], c["frac_flops"], b["acc"], c["speedup"], b["lam"]))
    return {k: sorted(v) for k, v in curves.items()}


def report(results, out):
    print(f"\nload during the run: {results['uptime_start']} -> {results['uptime_end']}")
    for name, res in results["datasets"].items():
        print(f"\n### {name} (train {res['n_train']}, test {res['n_test']}, images "
              f"{res['shape']})")
        print("| method | lam | filters kept | FLOPs kept | test acc | speed-up (compact) |")
        print("|---|---|---|---|---|---|")
        for label, pts in tradeoff(res).items():
            for f, fl, acc, sp, lam in sorted(pts, key=lambda t: -t[0]):
                print(f"| {label} | {lam:.3g} | {f:.2f} | {fl:.2f} | {acc:.3f} | {sp:.2f}x |")
        for rec in res["diagnostics"]:
            if "acc" in rec:
                print(f"| D-Gating D=3, BN after the gated convs | {rec['lam']:.3g} | "
                      f"{rec['compact']['frac_filters']:.2f} | {rec['compact']['frac_flops']:.2f} "
                      f"| {rec['acc']:.3f} | smallest norm {rec['smallest_norms'][0]:.1e} |")
        print("\nD-Gating, group norms before the collapse (a clean gap: the smallest kept "
              f"norm >= {CLEAN:.0e} x the largest removed one)")
        print("| D | lam | filters kept | FLOPs kept | test acc | largest removed | "
              "smallest kept | clean gap |")
        print("|---|---|---|---|---|---|---|---|")
        for rec in res["points"]:
            if rec["method"] == "dgating" and "acc" in rec:
                dead, live = rec["sparsity_gap"]
                c = rec["compact"]
                print(f"| {rec['D']} | {rec['lam']:.3g} | {c['filters_kept']}/{c['filters_total']}"
                      f" ({c['frac_filters']:.2f}) | {c['frac_flops']:.2f} | {rec['acc']:.3f} | "
                      f"{dead:.1e} | {live:.1e} | "
                      f"{gap_word(dead, live, c['filters_kept'] < c['filters_total'])} |")
        l21 = [r for r in res["points"] if r["method"] == "l21" and "acc" in r]
        if l21:
            print("direct L2,1 before pruning, smallest group norms: " + "; ".join(
                f"lam={r['lam']:.3g}: {r['smallest_norms'][0]:.1e}" for r in l21))
    write_json(results, out)
    plot(results, Path(out).with_suffix(".png"))
    print(f"\nwrote {out} and {Path(out).with_suffix('.png')}")


def gap_word(dead, live, removed):
    """Whether the kept groups are far from the removed ones (none in transit); ``removed``:
    whether any filter was removed (a removed group may have decayed to exactly 0.0)."""
    if not removed or live == float("inf"):
        return "all removed" if removed else "none removed"
    return "yes" if live >= CLEAN * dead else "no"


def plot(results, path):
    plt = pyplot()
    names = list(results["datasets"])
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.6 * len(names)), squeeze=False)
    styles = {"D-Gating D=2": "o-", "D-Gating D=3": "s-", "D-Gating D=4": "^-",
              "L2,1 + magnitude pruning": "x--", "network slimming": "d--"}
    for row, name in zip(axes, names, strict=True):
        for label, pts in tradeoff(results["datasets"][name]).items():
            pts = np.array(pts)
            for ax, col in zip(row, (0, 1), strict=True):
                order = np.argsort(pts[:, col])
                ax.plot(pts[order, col], pts[order, 2], styles.get(label, "o-"), label=label)
        row[0].set_xlabel("fraction of filters kept")
        row[1].set_xlabel("fraction of FLOPs kept")
        for ax in row:
            ax.set_ylabel(f"{name} test accuracy")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["mnist", "coil20"])
    parser.add_argument("--data-home", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=None,
                        help="default per data set (SETTINGS: MNIST 60, COIL-20 200)")
    parser.add_argument("--lr", type=float, default=None,
                        help="default per data set (SETTINGS: MNIST 0.05, COIL-20 0.03)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="default per data set (SETTINGS: MNIST 64, COIL-20 16)")
    parser.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--D", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--lams", type=json.loads, default=None,
                        help='JSON {"2": [...], "3": [...], "4": [...], "bn": [...], '
                             '"l21": [...], "slimming": [...]}, over the data set\'s '
                             'SETTINGS grid')
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--from-json", nargs="+", default=None,
                        help="report (and merge) earlier results files instead of running")
    parser.add_argument("--extend", action="store_true",
                        help="with --from-json: a data set in several files gets the points "
                             "of all (e.g. a run of more lams) instead of the last file's")
    parser.add_argument("--out", default=str(RESULTS / "cnn_filters.json"))
    args = parser.parse_args()
    if args.from_json:
        # a data set in a later file replaces (--extend: adds its points to) the earlier
        # one; "runs" keeps, per data set, the runs (args, load, machine) its points come from
        parts = [json.loads(Path(f).read_text()) for f in args.from_json]
        datasets, runs = {}, {}
        for p in parts:
            own = p.get("runs") or [{k: p[k] for k in ("uptime_start", "uptime_end")}
                                    | {"datasets": list(p["datasets"]), "args": p.get("args"),
                                       "machine": p.get("machine")}]
            for name, res in p["datasets"].items():
                mine = [{**run, "datasets": [name]} for run in own if name in run["datasets"]]
                old = datasets.get(name)
                if args.extend and old is not None:
                    keys = ("points", "pruned", "diagnostics")
                    res = {**old, **{k: old[k] + res[k] for k in keys},
                           "extensions": old.get("extensions", []) + [res.get("settings")]}
                    mine = runs[name] + mine
                datasets[name], runs[name] = res, mine
        results = {**parts[0], "datasets": datasets, "uptime_end": parts[-1]["uptime_end"],
                   "runs": [run for name in datasets for run in runs.get(name, [])]}
        report(results, args.out)
        return
    single_thread()
    results = {"machine": machine(), "uptime_start": uptime(), "args": vars(args),
               "datasets": {}}
    for name in args.datasets:
        results["datasets"][name] = run_dataset(name, args)
    results["uptime_end"] = uptime()
    report(results, args.out)


if __name__ == "__main__":
    main()
