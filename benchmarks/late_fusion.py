"""Modality selection in a late-fusion network (the D-Gating paper's App. E.5, CPU scale).

Semi-synthetic data: an MNIST digit image (2x2-average-pooled to 14x14) and six tabular
covariates ``x_k ~ U[-1, 1]`` per row, with

    y = (1 - alpha) * eta_tabular + alpha * eta_image + eps,   eps ~ N(0, 1),

``eta_image`` the digit's face value and ``eta_tabular = sum_k f_k(x_k)`` for six fixed
smooth shape functions, both standardized to sd 2. ``alpha`` in {0, 0.5, 1}: only the
tabular modality, both, only the image.

Model: a small CNN branch (two padded 3x3 convolutions, 16 and 32 filters, each with max
pooling, flattened, dropout 0.3, 32 units, an 8-unit latent layer) and a tabular MLP
branch (6 -> 32 -> 8), fused by one linear layer on the 16 latent units whose weight
columns are grouped by modality (``AxisGroups(1, [0] * 8 + [1] * 8)``): one D-Gating
group per modality. Fitted with :class:`sksparse_nn.DGatedNeuralNetRegressor` (X of shape
(n, 1, 196 + 6): the pixels and the covariates side by side in one channel, so that the
estimator's input standardization is one shift and scale for all of them rather than
one per pixel; the module splits them), ``weight_decay`` 1e-2 on the ungated weights (so
that the branches cannot evade the fusion penalty by growing, and against overfitting
the noise), SGD (Nesterov momentum 0.9, lr 0.05, batch 32), a fixed budget of 40 epochs
per path point, a grid of 12 lams from 4 lambda_max down 3 decades, 2000 training and
2000 test rows (the paper's n; it used 300 epochs, a 4-convolution VGG-style branch,
momentum 0.8, lr 5e-3 and 10 splits). All of these are options.
``regularization_path(..., cv=3)`` chooses lam by the 1-SE rule; recorded per
alpha and D: the modality norms along the path, the modalities kept at ``lam_1se_`` (full
data), its sparsity gap and test R^2, and ``compact()`` of the first point that drops a
modality (parameters, FLOPs, measured forward speed-up on the test rows).

Data: ``mnist_t10k.npz`` from ``--data-home`` / ``$SKSPARSE_NN_DATA`` (the MNIST test set,
10,000 images). Writes ``benchmarks/results/late_fusion.json`` and ``late_fusion.png``.
"""

from __future__ import annotations

import argparse
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
from torch import nn

from sksparse_nn import DGatedNeuralNetRegressor
from sksparse_nn.groups import AxisGroups

N_PIXELS, N_TAB, LATENT = 14 * 14, 6, 8
SHAPES = [
    lambda x: np.sin(np.pi * x),
    lambda x: x**2,
    lambda x: np.cos(2 * x),
    lambda x: x**3,
    lambda x: np.tanh(3 * x),
    lambda x: np.exp(x) / 2,
]


class LateFusion(nn.Module):
    """CNN branch for the image, MLP branch for the table, one linear fusion layer.

    The image branch: two 3x3 convolutions (``filters`` and ``2 * filters``, padded), each
    followed by ReLU and 2x2 max pooling (14 -> 7 -> 3), flattened, dropout, a 32-unit
    layer, dropout and the ``LATENT``-unit layer. Un-gated fits (lam 0, alpha 1, 2000
    rows, 30 epochs; test R^2 at most about 0.8 with the noise): the first version (8 and
    16 filters, global average pooling, weight_decay 1e-3) 0.62; this one without dropout
    0.61 (train 0.93: it fits the noise), with weight_decay 1e-2 0.69, with dropout too
    0.71 (BatchNorm, 32 filters, 60 epochs or Adam did not do better).
    """

    def __init__(self, n_features=N_PIXELS + N_TAB, n_outputs=1, filters=16, dropout=0.3):
        super().__init__()
        f = filters
        self.image = nn.Sequential(
            nn.Conv2d(1, f, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(f, 2 * f, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(2 * f * 3 * 3, 32),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(32, LATENT),
            nn.ReLU(),
        )
        self.table = nn.Sequential(
            nn.Linear(N_TAB, 32), nn.ReLU(), nn.Linear(32, LATENT), nn.ReLU()
        )
        self.fusion = nn.Linear(2 * LATENT, n_outputs)

    def forward(self, x):
        x = x.flatten(1)  # X has one channel: (n, 1, pixels + covariates)
        pixels = x[:, :N_PIXELS].reshape(-1, 1, 14, 14)
        latent = torch.cat([self.image(pixels), self.table(x[:, N_PIXELS:])], dim=1)
        return self.fusion(latent)


MODALITY_GROUPS = {"fusion.weight": AxisGroups(1, np.repeat([0, 1], LATENT))}


def make_data(images, digits, alpha, n, seed):
    """(X, y) for ``n`` rows drawn from the images: pooled pixels, covariates, target."""
    rng = np.random.RandomState(seed)
    rows = rng.choice(len(images), n, replace=False)
    pixels = images[rows].reshape(n, 28, 28).astype(np.float32) / 255.0
    pixels = pixels.reshape(n, 14, 2, 14, 2).mean(axis=(2, 4)).reshape(n, -1)
    tab = rng.uniform(-1, 1, (n, N_TAB))
    eta_tab = sum(f(tab[:, k]) for k, f in enumerate(SHAPES))
    eta_img = digits[rows].astype(float)
    # standardized with the population constants (digits: mean 4.5, sd ~2.87), not per
    # sample, so that train and test rows share the scale
    eta_img = 2 * (eta_img - 4.5) / 2.87
    eta_tab = 2 * (eta_tab - TAB_MEAN) / TAB_SD
    y = (1 - alpha) * eta_tab + alpha * eta_img + rng.randn(n)
    # one channel, (n, 1, 196 + 6): the estimator standardizes 2-d X per column, which
    # for the pixels means per pixel, and a border pixel inked in a single training image
    # gets a tiny scale that blows up the test images inked there (un-gated fits: test
    # R^2 down to -1.7 at train R^2 0.9); n-d X is standardized per channel (axis 1)
    return np.hstack([pixels, tab]).astype(np.float32)[:, None, :], y


_grid = np.random.RandomState(123).uniform(-1, 1, (200000, N_TAB))
_eta = sum(f(_grid[:, k]) for k, f in enumerate(SHAPES))
TAB_MEAN, TAB_SD = float(_eta.mean()), float(_eta.std())


def run(images, digits, alpha, D, args):
    X, y = make_data(images, digits, alpha, args.n_train + args.n_test, seed=int(10 * alpha))
    Xtr, ytr, Xte, yte = X[: args.n_train], y[: args.n_train], X[args.n_train :], y[args.n_train :]
    torch.manual_seed(0)
    est = DGatedNeuralNetRegressor(
        LateFusion,
        gates=MODALITY_GROUPS,
        D=D,
        lr=args.lr,
        module__filters=args.filters,
        module__dropout=args.dropout,
        weight_decay=args.weight_decay,
        max_epochs=args.epochs,
        batch_size=32,
        random_state=0,
    )
    start = time.perf_counter()
    # the grid runs past lambda_max (the gradient norms at the initial weights): once the
    # branches have learned, the fusion groups can outlive it
    top = args.lam_max_factor * est.lambda_max(Xtr, ytr)
    lams = np.geomspace(top / 10 ** (args.decades), top, args.n_lams)
    path = est.regularization_path(Xtr, ytr, lams=lams, cv=3, keep_estimators=True)
    seconds = time.perf_counter() - start
    chosen = path.estimators[path.index_of(path.lam_1se_)]
    norms = chosen.group_norms_
    return {
        "alpha": alpha,
        "D": D,
        "seconds": seconds,
        "lams": path.lams.tolist(),
        "modality_norms": np.asarray(path.group_norms).tolist(),  # [image, table] per lam
        "cv_mean": path.cv_mean.tolist(),
        "cv_se": path.cv_se.tolist(),
        "lam_best": path.best_lam_,
        "lam_1se": path.lam_1se_,
        "kept_at_1se": [m for m, v in zip(("image", "table"), norms, strict=True) if v > 0],
        "norms_at_1se": norms.tolist(),
        "gap_at_1se": list(chosen.sparsity_gap_),
        "test_r2_at_1se": float(chosen.score(Xte, yte)),
        "compaction": compaction(path, Xte),
    }


def _forward_seconds(module, X, repeats=30):
    """Median wall time of one forward pass over ``X`` (one thread, no autograd)."""
    times = []
    with torch.no_grad():
        module(X)
        for _ in range(repeats):
            start = time.perf_counter()
            module(X)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def compaction(path, Xte):
    """``compact()`` of the first path point (smallest lam) where a modality is exactly
    0: parameters, FLOPs, largest prediction difference and measured forward speed-up on
    the test rows (interleaved medians), or None when no point drops a modality."""
    for lam, est in zip(path.lams, path.estimators, strict=True):
        if est is None or np.all(est.group_norms_ > 0):
            continue
        small, report = est.compact(return_report=True)
        full = est.module_.eval()
        X = torch.as_tensor(Xte, dtype=next(full.parameters()).dtype)
        with torch.no_grad():
            diff = float((full(X) - small(X)).abs().max())
        t_full, t_small = [], []
        for _ in range(3):
            t_full.append(_forward_seconds(full, X))
            t_small.append(_forward_seconds(small, X))
        return {
            "lam": float(lam),
            "dropped": [
                m for m, v in zip(("image", "table"), est.group_norms_, strict=True) if v == 0
            ],  # fmt: skip
            "params": [report.params_before, report.params_after],
            "flops": [report.flops_before, report.flops_after],
            "max_abs_prediction_difference": diff,
            "forward_seconds": [float(np.median(t_full)), float(np.median(t_small))],
            "speedup": float(np.median(t_full) / np.median(t_small)),
        }
    return None


def plot(results, path):
    plt = pyplot()
    runs = results["runs"]
    alphas = sorted({r["alpha"] for r in runs})
    Ds = sorted({r["D"] for r in runs})
    fig, axes = plt.subplots(
        len(alphas), len(Ds), figsize=(4 * len(Ds), 2.8 * len(alphas)), squeeze=False
    )
    for r in runs:
        ax = axes[alphas.index(r["alpha"])][Ds.index(r["D"])]
        norms = np.asarray(r["modality_norms"], dtype=float)
        floor = 1e-5
        for k, (label, color) in enumerate((("image", "C0"), ("table", "C1"))):
            ax.plot(r["lams"], np.maximum(norms[:, k], floor), color=color, label=label)
        ax.axvline(r["lam_best"], color="0.3", lw=1)
        ax.axvline(r["lam_1se"], color="0.3", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"alpha={r['alpha']}, D={r['D']}: kept {'+'.join(r['kept_at_1se'])}")
        ax.set_xlabel("lam")
        ax.set_ylabel(f"group norm (< {floor:g} clipped)")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_home_argument(parser)
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.0, 0.5, 1.0])
    parser.add_argument("--D", nargs="+", type=int, default=[2, 3])
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=40, help="epochs per path point")
    parser.add_argument("--n-lams", type=int, default=12)
    parser.add_argument("--lam-max-factor", type=float, default=4.0)
    parser.add_argument("--decades", type=float, default=3.0, help="grid depth below its top")
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--lr", type=float, default=0.05, help="SGD (Nesterov 0.9) rate")
    parser.add_argument("--filters", type=int, default=16, help="of the first convolution")
    parser.add_argument("--dropout", type=float, default=0.3, help="in the image branch")
    parser.add_argument("--out", default=str(RESULTS / "late_fusion.json"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    single_thread()
    data = load_dataset("mnist_t10k", args.data_home)
    images, digits = np.asarray(data.X), np.asarray(data.y)
    results = {"machine": machine(), "settings": vars(args), "load_start": uptime(), "runs": []}
    for alpha in args.alphas:
        for D in args.D:
            r = run(images, digits, alpha, D, args)
            results["runs"].append(r)
            print(
                f"alpha={alpha} D={D}: {r['seconds']:.0f} s, kept at lam_1se "
                f"{r['kept_at_1se']} (norms image {r['norms_at_1se'][0]:.2e}, table "
                f"{r['norms_at_1se'][1]:.2e}), gap {r['gap_at_1se'][0]:.1e} / "
                f"{r['gap_at_1se'][1]:.2e}, test R^2 {r['test_r2_at_1se']:.3f}",
                flush=True,
            )
            c = r["compaction"]
            if c is not None:
                print(
                    f"  compact at lam {c['lam']:.3g} (drops {'+'.join(c['dropped'])}): "
                    f"parameters {c['params'][0]} -> {c['params'][1]}, FLOPs {c['flops'][0]}"
                    f" -> {c['flops'][1]}, forward {c['speedup']:.2f}x faster, "
                    f"max |diff| {c['max_abs_prediction_difference']:.1e}",
                    flush=True,
                )
            write_json({**results, "load_end": uptime()}, args.out)
    plot(results, args.out.replace(".json", ".png"))


if __name__ == "__main__":
    main()
