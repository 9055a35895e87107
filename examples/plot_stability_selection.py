"""
Stability selection: which features survive on most half-samples
================================================================

Breast cancer's 30 features with 30 appended standard-normal noise columns. A single
path of a sparse model keeps some noise columns at many lams; stability selection runs
the model's path on many pairs of complementary half-samples and keeps the features
selected on most of them, with a bound on the expected number of false selections.

The units are clusters of correlated columns (the default, as the knockoff filter's:
radius, perimeter and area are one unit, selected on a half when any of them is) and
single columns elsewhere. The stability path shows the selection probability of every
unit against lam, named by its first column: the selected units in colour, the others in
grey, the threshold as a dashed line and the region of lams the bound allows shaded. A
linear model keeps this example fast; any family (the MLP, the NAM, NODE, a
``VariableModel``) works the same way.

Writes docs/images/stability_selection.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sksparse_nn import SparseLinearClassifier  # noqa: E402
from sksparse_nn.selection import StabilitySelection  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    data = load_breast_cancer(as_frame=True)
    rng = np.random.RandomState(0)
    noise = pd.DataFrame(rng.randn(len(data.frame), 30), columns=[f"noise{j}" for j in range(30)])
    X = pd.concat([data.data, noise], axis=1).iloc[:300]
    X = pd.DataFrame(StandardScaler().fit_transform(X), columns=X.columns)
    y = data.target.iloc[:300]
    est = SparseLinearClassifier(D=2)  # the convex model: a fast example
    sel = StabilitySelection(est, n_pairs=8, lam_min_ratio=0.02, random_state=0).fit(X, y)
    print(f"selected: {sel.get_feature_names_out().tolist()}")
    print(
        f"threshold {sel.threshold_:.2f}, region {sel.lam_region_[0]:.3g} to "
        f"{sel.lam_region_[1]:.3g}, E[false selections] <= {sel.expected_false_selections_:.2f}"
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sel.plot_stability_path(ax=ax)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "stability_selection.png", dpi=110)
    print(f"wrote {out / 'stability_selection.png'}")


if __name__ == "__main__":
    main()
