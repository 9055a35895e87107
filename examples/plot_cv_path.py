"""
Let cross-validation choose lam: the CV curve with its one-standard-error rule
==============================================================================

A D-gated MLP on scikit-learn's digits (64 pixels): 5-fold CV along a warm-started path,
run in parallel. The folds fit every other lam first and then only the lams next to the
chosen ones (``cv_stride=2``, set here: the default of most networks on a default grid,
while the MLP's and the plain NAM's folds fit every lam, a fold's score depending on its
warm-start path): the curve has points where the folds fitted. The plot shows the mean
CV accuracy with its standard-error band, the number of pixels the network keeps, and the
lams chosen by the best-score and the 1-SE rule; a second panel shows which pixels
survive at ``lam_1se_``.

Writes docs/images/cv_path.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sksparse_nn import DGatedMLPClassifier  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = DGatedMLPClassifier(D=3, hidden_layer_sizes=(64,), max_epochs=30, random_state=0)
    path = est.regularization_path(
        X, y, lams=np.geomspace(3e-3, 0.3, 10), cv=5, cv_stride=2, n_jobs=2
    )
    print(path.to_frame()[["lam", "n_selected", "cv_mean", "cv_se"]].round(4).to_string())
    print(f"best lam {path.best_lam_:.4f}, 1-SE lam {path.lam_1se_:.4f}")
    fig, (ax, img) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=[2, 1])
    path.plot(ax=ax, kind="cv")
    mask = np.zeros(64)
    mask[path.selected_at(path.lam_1se_)] = 1
    img.imshow(mask.reshape(8, 8), cmap="Greys")
    img.set_title(f"pixels kept at lam_1se_ ({int(mask.sum())} of 64)")
    img.axis("off")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "cv_path.png", dpi=110)
    print(f"wrote {out / 'cv_path.png'}")


if __name__ == "__main__":
    main()
