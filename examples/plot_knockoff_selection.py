"""
Features selected at a stated false discovery rate: the knockoff filter
=======================================================================

Breast cancer (scikit-learn, 30 measurements) with 30 standard-normal noise columns
appended, 400 rows. :class:`~sksparse_nn.selection.KnockoffFilter` draws Gaussian
knockoffs of every column, runs a cross-validated path of a sparse logistic model on the
columns and their knockoffs, and scores each unit by its importance (here ``|coef|``) at
the CV-chosen lam minus its knockoff's (``W > 0``: the unit beats its knockoff). The
measurements come in clusters of strongly correlated columns (radius, perimeter and
area, corr ~0.99), which the filter treats as units with group knockoffs.

The left panel shows every unit's statistic in each draw, real units and noise columns
apart; the right one which columns the filter keeps. The knockoff+ threshold needs at least
``1 / fdr`` selected units, so where few units carry signal a low ``fdr`` selects nothing:
the price of the guarantee. Here ``fdr=0.3`` and the convex (``D=2``, lasso) model: the
filter keeps seven units, five clusters of measurements (20 columns) and two noise
columns, a share of noise within what ``fdr=0.3`` allows. On 400 rows of breast cancer
only a handful of the 12-13 clusters of measurements carry a signal given the others
(see the knockoff filter's user guide), so at ``fdr=0.1``, which needs ten selected
units, the filter keeps nothing.

Writes docs/images/knockoff_selection.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402

from sksparse_nn import SparseLinearClassifier  # noqa: E402
from sksparse_nn.selection import KnockoffFilter  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    data = load_breast_cancer()
    rng = np.random.RandomState(0)
    rows = rng.permutation(len(data.target))[:400]
    X = np.hstack([data.data[rows], rng.randn(400, 30)])
    y = data.target[rows]
    names = [*data.feature_names, *(f"noise {j}" for j in range(30))]
    kf = KnockoffFilter(SparseLinearClassifier(D=2), fdr=0.3, random_state=0).fit(X, y)
    kept = kf.selected_features_
    print(f"{kf.n_units_} units; kept {kept.size} columns:")
    print(", ".join(names[j] for j in kept))
    print(f"real kept: {(kept < 30).sum()}, noise kept: {(kept >= 30).sum()}")

    real_unit = np.array([np.any(kf.groups_[:30] == u) for u in range(kf.n_units_)])
    fig, (ax, bar) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=[3, 2])
    for d, W in enumerate(kf.statistics_):
        order = np.argsort(-W)
        colors = np.where(real_unit[order], "tab:blue", "tab:gray")
        ax.scatter(np.arange(W.size), W[order], c=colors, s=12, label=None)
        if np.isfinite(kf.draw_thresholds_[d]):
            ax.axhline(kf.draw_thresholds_[d], color="tab:red", lw=0.8, ls="--")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel("unit, by statistic (blue: measurements, grey: noise)")
    ax.set_ylabel("W (importance minus the knockoff's)")
    ax.set_title("statistics of each draw; dashed: knockoff+ thresholds")
    mask = np.zeros(60)
    mask[kept] = 1
    bar.bar(np.arange(60), mask, color=["tab:blue"] * 30 + ["tab:gray"] * 30)
    bar.set_xlabel("column (0-29 measurements, 30-59 noise)")
    bar.set_yticks([0, 1], ["dropped", "kept"])
    bar.set_title(f"kept at fdr={kf.fdr}: {kept.size} columns")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "knockoff_selection.png", dpi=110)
    print(f"wrote {out / 'knockoff_selection.png'}")


if __name__ == "__main__":
    main()
