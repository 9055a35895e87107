"""
D-gate your own CNN: filters that end at exactly zero, then a smaller model
===========================================================================

Any torch module becomes a scikit-learn estimator with
:class:`~sksparse_nn.DGatedNeuralNetClassifier`; ``gates`` names the tensors to sparsify
and how to group them. Here a small CNN (16 + 16 filters) learns to tell horizontal bars,
vertical bars and plain noise apart in 12x12 images, a task that needs only a few filters.
Every conv weight is gated per filter (``"out"``) and the linear head per input column
(``"in"``, one group per last-layer filter: without a penalty there the head could grow
while every filter shrinks, and none would reach zero). Filters the task does not need end
exactly at zero during training; :meth:`~sksparse_nn.DGatedNeuralNetClassifier.compact`
then rebuilds the network without them (same predictions) and reports the parameters and
FLOPs saved.

The convolutions have no zero padding: a filter at zero still emits its bias, a constant
map, which compaction adds into the next layer's bias; that is exact only when the next
conv does not pad (see :func:`~sksparse_nn.compaction.compact_sequential`).

Writes docs/images/dgate_cnn.png.
"""

import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from sksparse_nn import DGatedNeuralNetClassifier  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def make_bars(n, size=12, seed=0):
    """Noise images; class 0 has a horizontal bar, class 1 a vertical bar, class 2 none."""
    rng = np.random.RandomState(seed)
    X = 0.3 * rng.randn(n, 1, size, size).astype(np.float32)
    y = rng.randint(3, size=n)
    pos = rng.randint(2, size - 2, size=n)
    for i in np.flatnonzero(y == 0):
        X[i, 0, pos[i], 2:-2] += 1
    for i in np.flatnonzero(y == 1):
        X[i, 0, 2:-2, pos[i]] += 1
    return X, y


def median_cpu_ms(model, x, repeats=20):
    times = []
    with torch.no_grad():
        model(x)
        for _ in range(repeats):
            t0 = time.thread_time()
            model(x)
            times.append(time.thread_time() - t0)
    return 1e3 * float(np.median(times))


def main(out=OUT):
    torch.set_num_threads(1)
    X, y = make_bars(1200)
    X_test, y_test = make_bars(600, seed=1)
    torch.manual_seed(0)  # an instance is used with its own initial weights
    cnn = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 3),
    )  # fmt: skip
    gates = {"0.weight": "out", "3.weight": "out", "7.weight": "in"}
    clf = DGatedNeuralNetClassifier(
        cnn, gates=gates, lam=0.02, D=2, lr=0.1, max_epochs=80, random_state=0
    )
    clf.fit(X, y)
    print(f"test accuracy {clf.score(X_test, y_test):.3f}")
    for name, norms in clf.tensor_group_norms_.items():
        print(f"{name}: {np.count_nonzero(norms)} of {len(norms)} groups non-zero")
    print(f"sparsity gap (largest zero, smallest non-zero): {clf.sparsity_gap_}")

    small, report = clf.compact(return_report=True)
    print(report)
    print("kept filters per layer:", report.kept_units)
    x = torch.as_tensor(X_test)
    with torch.no_grad():
        same = np.array_equal(small(x).argmax(1).numpy(), clf.predict(X_test))
    print(f"compact model predicts the same classes: {same}")
    full_ms, small_ms = median_cpu_ms(clf.module_, x), median_cpu_ms(small, x)
    print(f"forward on {len(x)} images: {full_ms:.1f} ms -> {small_ms:.1f} ms CPU "
          f"({full_ms / small_ms:.2f}x)")

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), width_ratios=[3, 2])
    offset = 0
    for name, norms in clf.tensor_group_norms_.items():
        idx = np.arange(offset, offset + len(norms))
        live = norms > 0
        axes[0].bar(idx[live], norms[live], label=f"{name} ({live.sum()}/{len(norms)})")
        axes[0].plot(idx[~live], np.full((~live).sum(), 1e-3), "kx")
        offset += len(norms) + 2
    axes[0].set_yscale("log")
    axes[0].set_ylabel("group norm (x: exactly 0)")
    axes[0].set_xticks([])
    axes[0].legend(fontsize=8)
    axes[0].set_title(f"D=2, lam=0.02: {report}", fontsize=8)
    axes[0].set_ylim(5e-4, None)
    # first-layer filters; removed ones are blank
    w = clf.module_.module[0].weight.detach().numpy()[:, 0]
    axes[1].axis("off")
    grid = np.full((2 * 4 - 1, 8 * 4 - 1), np.nan)
    for j in range(16):
        r, c = divmod(j, 8)
        if np.any(w[j]):
            grid[r * 4 : r * 4 + 3, c * 4 : c * 4 + 3] = w[j] / np.abs(w[j]).max()
    axes[1].imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1)
    for j in np.flatnonzero(~np.any(w, axis=(1, 2))):
        r, c = divmod(j, 8)
        axes[1].add_patch(plt.Rectangle((c * 4 - 0.5, r * 4 - 0.5), 3, 3, fill=False,
                                        hatch="xx", edgecolor="0.7"))
    axes[1].set_title("first-layer filters (hatched: exactly zero)", fontsize=9)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "dgate_cnn.png", dpi=110)
    print(f"wrote {out / 'dgate_cnn.png'}")


if __name__ == "__main__":
    main()
