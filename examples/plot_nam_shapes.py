"""
Read a sparse additive model: shape functions and the features it dropped
=========================================================================

A :class:`~sksparse_nn.DGatedNAMRegressor` predicts a sum of one small network per
feature. On a simulated problem with five informative features (``sin``, ``cos``, a square,
a line and an absolute value) and ten features without effect, the default fit keeps the
informative ones and sets the others' shape functions to exactly zero. The panels show
every learned shape function (dropped features are the flat line at 0) over a rug of the
training data, with the true function dashed.

Writes docs/images/nam_shapes.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from sksparse_nn import DGatedNAMRegressor  # noqa: E402
from sksparse_nn.datasets import make_additive_regression  # noqa: E402
from sksparse_nn.plotting import plot_shape_functions  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))

TRUE = [np.sin, np.cos, np.square, lambda x: -x, lambda x: -np.abs(x)]


def main(out=OUT):
    X, y = make_additive_regression(n_samples=600, n_noise=10, noise=0.5, random_state=0)
    nam = DGatedNAMRegressor(random_state=0).fit(X, y)
    print(f"kept features {nam.selected_features_.tolist()} (0-4 are informative)")
    print(
        f"sparsity gap: largest removed norm {nam.sparsity_gap_[0]:.1e}, "
        f"smallest kept {nam.sparsity_gap_[1]:.2f}"
    )
    axes = plot_shape_functions(nam, X, features=np.arange(8), n_cols=4)
    grid = np.linspace(X.min(), X.max(), 200)
    for j, (ax, f) in enumerate(zip(axes[:5], TRUE, strict=True)):
        ax.plot(grid, f(grid) - f(X[:, j]).mean(), "k--", lw=1, label="true")
    axes[0].legend(loc="best", fontsize=8)
    fig = axes[0].figure
    fig.suptitle("Learned shape functions (features 5-7 have no effect)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "nam_shapes.png", dpi=100)
    print(f"wrote {out / 'nam_shapes.png'}")


if __name__ == "__main__":
    main()
