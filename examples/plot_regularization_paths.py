"""
Regularization paths of the group-sparse linear model for D = 2, 3, 4
=====================================================================

On the paper's group simulation (40 groups of 5 features, 7 informative), every group norm
is drawn against lam: D=2 (the group lasso) shrinks groups gradually, while D=3 and D=4
keep the informative groups large and drop the others abruptly, to exactly zero.
A last panel shows held-out R^2 against the number of selected groups.

Writes docs/images/regularization_paths.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sksparse_nn import SparseLinearRegressor  # noqa: E402
from sksparse_nn.datasets import make_group_regression  # noqa: E402
from sksparse_nn.plotting import plot_tradeoff  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    data = make_group_regression(random_state=0)
    lams = np.geomspace(1e-3, 3.0, 20)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    paths = {}
    for ax, D in zip(axes[:3], (2, 3, 4), strict=True):
        est = SparseLinearRegressor(D=D, groups=data.groups, random_state=0)
        path = est.regularization_path(
            data.X, data.y, lams=lams, X_val=data.X_test, y_val=data.y_test
        )
        path.plot(ax=ax)
        informative = np.isin(np.arange(40), data.informative_groups)
        for line, good in zip(ax.get_lines(), informative, strict=False):
            line.set_color("C3" if good else "0.6")
        paths[f"D={D}"] = path
        best = int(np.argmax(path.val_score))
        print(
            f"D={D}: best held-out R^2 {path.val_score[best]:.3f} with "
            f"{path.group_norms[best].astype(bool).sum()} groups (7 are informative)"
        )
    for path in paths.values():  # trade-off in groups rather than features
        path.n_selected = (path.group_norms > 0).sum(axis=1)
    plot_tradeoff(paths, ax=axes[3], score="val")
    axes[3].set_xlabel("selected groups")
    axes[3].set_ylabel("held-out R^2")
    fig.suptitle("Group norms along the path (red: informative groups)")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "regularization_paths.png", dpi=110)
    print(f"wrote {out / 'regularization_paths.png'}")


if __name__ == "__main__":
    main()
