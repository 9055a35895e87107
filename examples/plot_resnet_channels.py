"""
Channel sparsity in a small ResNet: groups through batch norms and shortcuts
============================================================================

In a ResNet a channel is not one tensor slice. Its filter is followed by a batch norm
(which divides the filter's scale out, so a penalty on the filter alone removes
nothing), and the channels of a residual stage are added to the shortcut's: one channel
of the sum is carried by the stem's filter, by the last filter of every block of the
stage and by their batch norms. ``gates="channels"`` traces the module with ``torch.fx``
and gives each such group one set of D-Gating factors over all its slices
(:func:`~sksparse_nn.channels.channel_groups`); a group the data do not need ends at
exactly zero in every tensor at once, and
:meth:`~sksparse_nn.DGatedNeuralNetClassifier.compact` removes it everywhere: filters,
batch-norm parameters and statistics, and the input slices of the layers that read it.

A ResNet of three stages (identity and projection shortcuts) on scikit-learn's 8x8
digits. The figure shows the channels each convolution keeps and the compacted model's
share of FLOPs; the compacted model predicts the same classes. CPU latencies are
measured with one thread.

Writes docs/images/resnet_channels.png.
"""

import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from torch import nn  # noqa: E402

from sksparse_nn import DGatedNeuralNetClassifier  # noqa: E402

HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


class Block(nn.Module):
    """Two 3x3 convolutions with batch norms, and a shortcut: the identity, or a 1x1
    convolution with a batch norm where the width or the resolution changes."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, n_features=1, n_outputs=10, width=8):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(n_features, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
        )
        self.layer1 = Block(width, width)
        self.layer2 = Block(width, 2 * width, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(2 * width, n_outputs)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.head(torch.flatten(self.pool(x), 1))


def median_cpu_ms(model, x, repeats=30):
    times = []
    with torch.no_grad():
        model(x)
        for _ in range(repeats):
            t0 = time.thread_time()
            model(x)
            times.append(time.thread_time() - t0)
    return 1e3 * float(np.median(times))


def main(out=OUT, lam=0.04, max_epochs=30):
    torch.set_num_threads(1)
    X, y = load_digits(return_X_y=True)
    X = X.reshape(-1, 1, 8, 8).astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    clf = DGatedNeuralNetClassifier(
        ResNet,
        gates="channels",
        lam=lam,
        lr=0.2,
        batch_size=128,
        max_epochs=max_epochs,
        random_state=0,
    )
    clf.fit(X_train, y_train)
    print(f"test accuracy {clf.score(X_test, y_test):.3f}")
    for leader, layers in clf.channel_group_layers_.items():
        norms = clf.tensor_group_norms_[leader]
        print(
            f"{leader}: {np.count_nonzero(norms)} of {len(norms)} groups kept, e.g. "
            f"one spanning {', '.join(layers[0])}"
        )

    small, report = clf.compact(return_report=True)
    print(report)
    x = torch.as_tensor(X_test, dtype=next(small.parameters()).dtype)
    with torch.no_grad():
        same = np.array_equal(small(x).argmax(1).numpy(), clf.predict(X_test))
    print(f"compact model predicts the same classes: {same}")
    full_ms, small_ms = median_cpu_ms(clf.module_, x), median_cpu_ms(small, x)
    print(
        f"forward on {len(x)} images, one thread: {full_ms:.1f} ms -> {small_ms:.1f} ms CPU "
        f"({full_ms / small_ms:.2f}x)"
    )

    convs = [n for n, m in clf.module_.module.named_modules() if isinstance(m, nn.Conv2d)]
    before = [clf.module_.module.get_submodule(n).out_channels for n in convs]
    after = [small.module.get_submodule(n).out_channels for n in convs]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    idx = np.arange(len(convs))
    ax.bar(idx, before, color="0.85", label="channels before")
    ax.bar(idx, after, color="C0", label="kept")
    ax.set_xticks(idx, convs, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("output channels")
    ax.legend(fontsize=8)
    ax.set_title(
        f"gates='channels', lam={lam}: accuracy {clf.score(X_test, y_test):.3f}, "
        f"FLOPs kept {report.flops_after / report.flops_before:.0%}, "
        f"{full_ms:.1f} -> {small_ms:.1f} ms",
        fontsize=9,
    )
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "resnet_channels.png", dpi=110)
    print(f"wrote {out / 'resnet_channels.png'}")


if __name__ == "__main__":
    main()
