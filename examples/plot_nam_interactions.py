"""
A sparse GA2M: main effects, one kept interaction and a local explanation
=========================================================================

``interactions="auto"`` gives a :class:`~sksparse_nn.DGatedNAMRegressor` the pairwise
interaction terms that a screening finds significant (a test of interaction on binned
residuals, at family-wise level 0.05) beside its main effects; each pair is one more
group of the penalty, kept or removed whole. A pair is pure: averaged
over the training data along either of its axes it is zero, so it never holds a main
effect and "the model kept this pair" means one thing.

The simulation has four main effects and one interaction, ``2 x0 x1``, among six
features. Of the 15 pairs the screening finds that one significant; the fit keeps the
four mains and the pair, and the two noise features end at exactly zero. The first
figure shows the kept terms, the pair as a heat map; the second explains one prediction
term by term, from the intercept to the output.

Writes docs/images/nam_interactions.png and docs/images/nam_explanation.png.
"""

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from sksparse_nn import DGatedNAMRegressor  # noqa: E402
from sksparse_nn.datasets import make_interaction_regression  # noqa: E402
from sksparse_nn.plotting import plot_explanation, plot_shape_functions  # noqa: E402

# the examples directory (sphinx-gallery runs an example there, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
# the README's figures; the docs build writes its copies elsewhere (docs/conf.py)
OUT = Path(os.environ.get("SKSPARSE_NN_FIGURES", HERE.parent / "docs" / "images"))


def main(out=OUT):
    X, y = make_interaction_regression(n_samples=500, n_features=6, random_state=0)
    # a small fit: 16 hinges per network, 40 epochs of batches of 32 (the defaults,
    # with lam chosen by SparsePathCV, take longer)
    ga2m = DGatedNAMRegressor(
        lam=0.03,
        interactions="auto",
        hidden_layer_sizes=(16,),
        batch_size=32,
        max_epochs=40,
        random_state=0,
    ).fit(X, y)
    kept = ga2m.term_names_[ga2m.selected_terms_]
    print(f"candidate pairs {[str(n) for n in ga2m.term_names_[6:]]}")
    print(f"kept terms {[str(n) for n in kept]}")
    print(
        f"sparsity gap: largest removed norm {ga2m.sparsity_gap_[0]:.1e}, "
        f"smallest kept {ga2m.sparsity_gap_[1]:.2f}"
    )
    axes = plot_shape_functions(ga2m, X, grid=60, n_cols=5)
    fig = axes[0].figure
    fig.suptitle("Kept terms: four main effects and the interaction x0 x x1")
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "nam_interactions.png", dpi=100)

    print(ga2m.explain(X[:3]).round(3).to_string())
    ax = plot_explanation(ga2m, X[0])
    ax.figure.savefig(out / "nam_explanation.png", dpi=100)
    print(f"wrote {out / 'nam_interactions.png'} and {out / 'nam_explanation.png'}")
    assert np.isfinite(ga2m.predict(X[:3])).all()


if __name__ == "__main__":
    main()
