"""
Which of my variables matter? Categoricals in, kept variables out
=================================================================

Daily sales of a chain of shops depend on the ``region`` (5 levels), the ``weekday``
(7 levels), the ``price`` and the ``temperature``; the ``payment`` mix (3 levels), the
shop's ``colour`` scheme (4 levels) and its ``store_age`` have no effect. One-hot
encoding turns the 7 variables into 22 columns, but the question is which *variables*
matter, so each categorical must be kept or dropped whole.

:class:`~sksparse_nn.compose.VariableModel` encodes the table with a
``ColumnTransformer`` and fits a :class:`~sksparse_nn.DGatedNAMRegressor` with one group
per variable: a categorical gets one shape function of all its columns, drawn as bars of
its levels; dropped variables are exactly zero. The right panel counts variables along a
cross-validated path of the group-lasso model on the same encoding.

Writes docs/images/categorical_variables.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.compose import make_column_transformer  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

from sksparse_nn import (  # noqa: E402
    DGatedNAMRegressor,
    SparseLinearRegressor,
    VariableModel,
)
from sksparse_nn.plotting import plot_cv_path, plot_shape_functions  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))

REGION = {"north": 1.0, "south": -1.0, "east": 0.5, "west": 0.0, "centre": -0.5}
WEEKDAY = {"Mon": -0.5, "Tue": -0.5, "Wed": -0.3, "Thu": 0.0, "Fri": 0.3, "Sat": 1.0, "Sun": 0.8}
CATEGORICAL = ["region", "weekday", "payment", "colour"]
NUMERIC = ["price", "temperature", "store_age"]


def make_sales(n=1500, seed=0):
    """The table and its target (sales in standard units)."""
    rng = np.random.RandomState(seed)
    df = pd.DataFrame(
        {
            "region": rng.choice(list(REGION), n),
            "weekday": rng.choice(list(WEEKDAY), n),
            "payment": rng.choice(["cash", "card", "phone"], n),
            "colour": rng.choice(["red", "green", "blue", "grey"], n),
            "price": rng.uniform(1, 5, n),
            "temperature": rng.uniform(-5, 30, n),
            "store_age": rng.uniform(0, 40, n),
        }
    )
    y = (
        df["region"].map(REGION)
        + df["weekday"].map(WEEKDAY)
        - 0.6 * (df["price"] - 3)
        + np.sin(df["temperature"] / 6)
        + 0.4 * rng.randn(n)
    )
    return df, y.to_numpy()


def encoder(numeric="passthrough"):
    """One-hot categoricals; numbers as they are (the NAM standardizes internally and
    its shape functions then read in the user's units) or scaled (the linear model's
    penalty depends on the scale of its columns)."""
    return make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), CATEGORICAL),
        (numeric, NUMERIC),
    )


def main(out=OUT):
    df, y = make_sales()
    model = VariableModel(DGatedNAMRegressor(random_state=0), encoder=encoder()).fit(df, y)
    nam = model.estimator_
    print(f"{df.shape[1]} variables -> {len(model.groups_)} encoded columns")
    print(f"kept variables: {model.selected_variables_.tolist()}")
    print(
        f"sparsity gap: largest removed group norm {nam.sparsity_gap_[0]:.1e}, "
        f"smallest kept {nam.sparsity_gap_[1]:.2f}; R^2 {model.score(df, y):.3f}"
    )
    linear = VariableModel(SparseLinearRegressor(), encoder=encoder(StandardScaler()))
    path = linear.regularization_path(df, y, n_lams=20, lam_min_ratio=1e-2, cv=5)
    print(f"group lasso, 1-SE choice: {list(path.selected_at(path.lam_1se_))}")

    fig = plt.figure(figsize=(13, 6), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[2.2, 1])
    panels = left.subplots(2, 2).ravel()
    plot_shape_functions(model, df, axes=panels)
    left.suptitle("Kept variables of the sparse NAM (bars: a categorical's levels)")
    ax = right.subplots()
    plot_cv_path(path, ax=ax)
    ax.set_title("Group lasso: CV score and variables kept")
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "categorical_variables.png", dpi=100)
    print(f"wrote {out / 'categorical_variables.png'}")


if __name__ == "__main__":
    main()
