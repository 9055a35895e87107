"""
SparsePathCV in a Pipeline, with GridSearchCV over D
====================================================

:class:`~sksparse_nn.SparsePathCV` is an ordinary scikit-learn estimator: it goes at the end
of a :class:`~sklearn.pipeline.Pipeline` (here after a
:class:`~sklearn.preprocessing.StandardScaler`, which the penalty needs: it compares the
features' weights) and inside a :class:`~sklearn.model_selection.GridSearchCV`.

The two searches split the work. ``lam`` is chosen *inside* by ``SparsePathCV``, from its own
cross-validated, warm-started path (one path per fold costs little more than one fit), by
the one-standard-error rule. ``GridSearchCV`` chooses what a path cannot: the exponent
``D`` (2 is the lasso; 3 and 4 select more abruptly), by an outer cross-validation of
the whole pipeline. Putting ``lam`` in the outer grid too would refit without warm starts
what the path already computes.

On the breast-cancer data (30 features), the panels show the outer CV score of each ``D``,
the inner CV curve of the chosen pipeline (refit on all the data) with its best and 1-SE
``lam``, and the coefficients of the features it keeps (the others are exactly zero).
The three ``D`` score within one standard deviation of each other here (0.96-0.97
accuracy), so the outer choice between them is a close call; what differs more is how
few features the 1-SE ``lam`` keeps.

Writes docs/images/pipeline_grid_search.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sksparse_nn import SparseLinearClassifier, SparsePathCV  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    data = load_breast_cancer()
    X, y, names = data.data, data.target, data.feature_names

    pipe = make_pipeline(
        StandardScaler(),
        SparsePathCV(SparseLinearClassifier(), n_lams=12, cv=3, rule="1se"),
    )
    search = GridSearchCV(pipe, {"sparsepathcv__estimator__D": [2, 3, 4]}, cv=3)
    search.fit(X, y)

    results = search.cv_results_
    for D, mean, std in zip(
        results["param_sparsepathcv__estimator__D"],
        results["mean_test_score"],
        results["std_test_score"],
        strict=True,
    ):
        print(f"D={D}: outer CV accuracy {mean:.3f} +- {std:.3f}")
    path_cv = search.best_estimator_[-1]
    fit = path_cv.estimator_
    print(f"chosen D={fit.D}, lam={path_cv.lam_:.4g} (1-SE rule; best lam {path_cv.best_lam_:.4g})")
    kept = fit.selected_features_
    print(f"{kept.size} of {X.shape[1]} features kept: {', '.join(names[kept])}")
    dead, live = fit.sparsity_gap_
    print(f"sparsity gap: largest removed weight {dead:.1e}, smallest kept {live:.3f}")

    fig = plt.figure(figsize=(11, 8))
    grid = fig.add_gridspec(2, 2, width_ratios=[1, 2])
    ax_d, ax_coef = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_cv = fig.add_subplot(grid[1, :])
    Ds = np.asarray(results["param_sparsepathcv__estimator__D"], dtype=int)
    ax_d.errorbar(Ds, results["mean_test_score"], yerr=results["std_test_score"], fmt="o-")
    ax_d.set_xticks(Ds)
    ax_d.set_xlabel("D")
    ax_d.set_ylabel("outer CV accuracy")
    ax_d.set_title("GridSearchCV over D")

    path_cv.cv_path_.plot(ax=ax_cv, kind="cv")
    ax_cv.set_title(f"inner CV path of the chosen pipeline (D={fit.D})")

    coef = fit.coef_.ravel()[kept]
    order = np.argsort(np.abs(coef))
    ax_coef.barh(np.arange(kept.size), coef[order])
    ax_coef.set_yticks(np.arange(kept.size), names[kept][order], fontsize=8)
    ax_coef.axvline(0, color="k", lw=0.5)
    ax_coef.set_xlabel("coefficient (standardized features)")
    ax_coef.set_title(f"{kept.size} of {X.shape[1]} features kept at lam_")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "pipeline_grid_search.png", dpi=100)
    print(f"wrote {out / 'pipeline_grid_search.png'}")


if __name__ == "__main__":
    main()
