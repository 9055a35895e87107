"""
Remove the trees of a NODE ensemble, then drop them with compact()
==================================================================

A :class:`~sksparse_nn.NODERegressor` (neural oblivious decision ensembles: two layers of
differentiable oblivious trees) puts one D-Gating group on every tree's leaf responses.
Along a path of increasing ``lam``, on Friedman #1 (ten features, five of them noise),
more and more trees reach exactly zero while the held-out :math:`R^2` barely moves.

The removed trees are *exactly* zero, far below the smallest kept tree (the sparsity gap),
so :meth:`~sksparse_nn.NODERegressor.compact` can delete them: the compact module holds
only the kept trees, predicts the same numbers and is smaller and faster.

The panels show every tree's norm along the path (removed trees drop to the bottom line),
the number of kept trees with the held-out score, the sorted tree norms at the default
``lam`` with the gap between removed and kept trees, and the size and forward time of
the compact module relative to the full one. The table printed below gives each point's
sparsity gap: the largest tree norm set to zero at that ``lam`` (0 when no tree was newly
removed: trees removed earlier on the path stay exactly 0) and the smallest kept.

Writes docs/images/node_trees.png.
"""

import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import make_friedman1  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sksparse_nn import NODERegressor, regularization_path  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))

#: from the estimator's default lam (3e-3) up to 30 times stronger
LAMS = np.geomspace(3e-3, 9e-2, 6)


def n_numbers(module):
    """Numbers a module stores (parameters and buffers such as the fixed choices)."""
    return sum(v.numel() for v in module.state_dict().values())


def forward_seconds(module, X, repeats=20):
    """Best time of one forward pass over the rows of ``X`` (a float tensor)."""
    best = np.inf
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            module(X)
            best = min(best, time.perf_counter() - start)
    return best


def main(out=OUT):
    X, y = make_friedman1(n_samples=800, n_features=10, noise=1.0, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

    est = NODERegressor(random_state=0)  # two layers of 64 depth-6 trees
    path = regularization_path(
        est, X_train, y_train, lams=LAMS, X_val=X_test, y_val=y_test, keep_estimators=True
    )
    n_trees = path.group_norms.shape[1]
    # the gap: largest norm set to 0 at this lam (0: none newly removed) / smallest kept
    print(f"{'lam':>7} {'trees':>9} {'removed':>9} {'kept':>6} {'R^2':>6}")
    for lam, fit, score in zip(path.lams, path.estimators, path.val_score, strict=True):
        dead, live = fit.sparsity_gap_
        trees = f"{fit.n_active_trees_}/{n_trees}"
        print(f"{lam:7.4f} {trees:>9} {dead:9.1e} {live:6.2f} {score:6.3f}")

    # the default lam: compact() keeps only its live trees
    fit = path.estimators[0]
    full, small = fit.module_, fit.compact()
    X_full = torch.as_tensor(X_test, dtype=torch.float32)
    X_small = torch.as_tensor(X_test[:, fit.selected_features_], dtype=torch.float32)
    with torch.no_grad():
        diff = (full(X_full) - small(X_small)).abs().max().item()
    numbers = n_numbers(full), n_numbers(small)
    times = forward_seconds(full, X_full), forward_seconds(small, X_small)
    print(f"compact(): {fit.n_active_trees_} of {n_trees} trees")
    print(f"  stored numbers {numbers[1]} instead of {numbers[0]}")
    print(f"  largest prediction difference {diff:.1e} (float32 rounding)")
    print(
        f"  forward pass over {len(X_test)} rows {1e3 * times[1]:.2f} ms "
        f"instead of {1e3 * times[0]:.2f} ms"
    )

    fig, ((ax_norms, ax_score), (ax_gap, ax_small)) = plt.subplots(2, 2, figsize=(11, 8))
    path.plot(ax=ax_norms)
    ax_norms.set_title("tree norms along the path")

    ax_score.semilogx(path.lams, [f.n_active_trees_ for f in path.estimators], "o-")
    ax_score.set_xlabel("lam")
    ax_score.set_ylabel("trees kept", color="C0")
    ax_score.set_ylim(0, None)
    twin = ax_score.twinx()
    twin.semilogx(path.lams, path.val_score, "s--", color="C1")
    twin.set_ylabel("held-out $R^2$", color="C1")
    twin.set_ylim(0, 1)
    ax_score.set_title("sparsity and score")

    norms = np.sort(fit.tree_norms_)[::-1]
    floor = 1e-14  # removed trees are exactly 0: drawn on this line of the log scale
    kept = norms > 0
    ranks = np.arange(1, n_trees + 1)
    ax_gap.semilogy(ranks[kept], norms[kept], "o", ms=4, label="kept")
    ax_gap.semilogy(ranks[~kept], np.full((~kept).sum(), floor), "x", ms=4, label="removed (0)")
    ax_gap.axhline(fit.zero_tol, color="grey", ls=":", label="zero_tol")
    if fit.sparsity_gap_[0] > 0:
        ax_gap.axhline(fit.sparsity_gap_[0], color="C1", ls="--", label="largest removed, before 0")
    ax_gap.set_xlabel("tree (sorted by norm)")
    ax_gap.set_ylabel("norm of the leaf responses")
    ax_gap.set_title(f"the gap at lam={fit.lam:g} (default)")
    ax_gap.legend(loc="upper right", fontsize=8)

    ratios = [numbers[1] / numbers[0], times[1] / times[0]]
    bars = ax_small.bar(["stored numbers", "forward time"], ratios, color=["C2", "C4"])
    ax_small.bar_label(bars, [f"{r:.1%}" for r in ratios])
    ax_small.set_ylim(0, 1)
    ax_small.set_ylabel("compact / full model")
    ax_small.set_title(f"compact(): {fit.n_active_trees_} of {n_trees} trees, same predictions")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "node_trees.png", dpi=100)
    print(f"wrote {out / 'node_trees.png'}")


if __name__ == "__main__":
    main()
