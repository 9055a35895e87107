"""sksparse_nn.plotting: what each figure draws (data, labels, legends) and the import guard."""

import sys
import warnings
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from sklearn.datasets import make_classification

from sksparse_nn import SparseLinearRegressor, plotting
from sksparse_nn.datasets import make_additive_regression, make_group_regression
from sksparse_nn.estimators.nam import DGatedNAMClassifier, DGatedNAMRegressor
from sksparse_nn.plotting import plot_cv_path, plot_path, plot_shape_functions, plot_tradeoff

LAMS = np.array([0.01, 0.1, 1.0, 10.0])


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def fake_path(**changes):
    """The attributes of a RegularizationPath that the figures read, with known values."""
    values = {
        "lams": LAMS,
        "D": 3,
        # three groups: one dies at lam=1, one at lam=10, one stays
        "group_norms": np.array([[2.0, 1.0, 0.5], [1.5, 0.5, 0.2], [1.0, 0.1, 0.0], [0.4, 0, 0]]),
        "n_selected": np.array([6, 5, 3, 1]),
        "train_score": np.array([0.9, 0.85, 0.7, 0.3]),
        "val_score": np.array([0.6, 0.75, 0.65, 0.2]),
        "cv_mean": np.array([0.5, 0.7, 0.6]),  # an interrupted CV: three lams of four
        "cv_se": np.array([0.05, 0.04, 0.1]),
        "best_lam_": 0.1,
        "lam_1se_": 1.0,
        "selection_unit": "features",
    }
    values.update(changes)
    return SimpleNamespace(**values)


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def twin_of(ax):
    (twin,) = [other for other in ax.figure.axes if other is not ax]
    return twin


# ---------------------------------------------------------------------------------------
# the package
# ---------------------------------------------------------------------------------------


def test_public_names_and_one_module():
    assert plotting.__all__ == [
        "plot_cv_path",
        "plot_explanation",
        "plot_path",
        "plot_shape_functions",
        "plot_stability_path",
        "plot_tradeoff",
    ]
    with pytest.raises(ModuleNotFoundError):
        __import__("sksparse_nn.plotting_nam")


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails
    with pytest.raises(ImportError, match=r"pip install 'sksparse-nn\[plot\]'"):
        plot_path(fake_path())
    with pytest.raises(ImportError, match=r"sksparse-nn\[plot\]"):
        plot_tradeoff([fake_path()])


def test_given_axes_need_no_pyplot(monkeypatch):
    ax = plt.figure().gca()
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    assert plot_path(fake_path(), ax=ax) is ax
    assert plot_cv_path(fake_path(), ax=ax) is ax


# ---------------------------------------------------------------------------------------
# plot_path
# ---------------------------------------------------------------------------------------


def test_norms_one_line_per_group_with_zeros_on_the_floor():
    path = fake_path()
    ax = plot_path(path)
    *groups, floor_line = ax.get_lines()
    assert len(groups) == 3
    floor = 0.1 / 10  # a tenth of the smallest non-zero norm
    np.testing.assert_array_equal(floor_line.get_ydata(), [floor, floor])
    for j, line in enumerate(groups):
        np.testing.assert_array_equal(line.get_xdata(), LAMS)
        norms = path.group_norms[:, j]
        np.testing.assert_array_equal(line.get_ydata(), np.where(norms > 0, norms, floor))
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "lam"
    assert ax.get_ylabel() == "group norm (bottom line: exactly 0)"
    assert ax.get_title() == "Regularization path (D=3)"
    assert ax.get_legend() is None


def test_norms_of_a_failed_point_are_a_gap_not_a_zero():
    norms = fake_path().group_norms.copy()
    norms[3] = np.nan  # the last point diverged
    ax = plot_path(fake_path(group_norms=norms))
    for j, line in enumerate(ax.get_lines()[:-1]):
        assert np.isnan(line.get_ydata()[3])
        np.testing.assert_array_equal(
            line.get_ydata()[:3], np.where(norms[:3, j] > 0, norms[:3, j], 0.01)
        )


def test_norms_of_an_all_zero_path_and_without_D():
    ax = plot_path(fake_path(group_norms=np.zeros((4, 2)), D=None))
    assert len(ax.get_lines()) == 3
    for line in ax.get_lines():
        np.testing.assert_array_equal(line.get_ydata(), 1e-3)
    assert ax.get_title() == "Regularization path"


def test_score_lines_legend_and_selected_features_on_a_twin():
    path = fake_path()
    ax = plot_path(path, kind="score")
    train, val = ax.get_lines()
    np.testing.assert_array_equal(train.get_xdata(), LAMS)
    np.testing.assert_array_equal(train.get_ydata(), path.train_score)
    np.testing.assert_array_equal(val.get_ydata(), path.val_score)
    assert legend_texts(ax) == ["train", "validation"]
    assert ax.get_ylabel() == "score" and ax.get_xscale() == "log"
    assert ax.get_title() == "Score and sparsity along the path (D=3)"
    twin = twin_of(ax)
    (steps,) = twin.get_lines()
    np.testing.assert_array_equal(steps.get_ydata(), path.n_selected)
    assert steps.get_drawstyle() == "steps-mid"
    assert twin.get_ylabel() == "selected features"


def test_score_without_validation_draws_train_only():
    ax = plot_path(fake_path(val_score=None), kind="score")
    assert len(ax.get_lines()) == 1
    assert legend_texts(ax) == ["train"]


def test_plot_path_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind must be"):
        plot_path(fake_path(), kind="cv")


# ---------------------------------------------------------------------------------------
# plot_cv_path
# ---------------------------------------------------------------------------------------


def test_cv_mean_band_and_chosen_lams():
    path = fake_path()
    ax = plot_cv_path(path)
    mean, best, one_se = ax.get_lines()
    np.testing.assert_array_equal(mean.get_xdata(), LAMS[:3])  # only lams with CV scores
    np.testing.assert_array_equal(mean.get_ydata(), path.cv_mean)
    np.testing.assert_array_equal(best.get_xdata(), [0.1, 0.1])
    np.testing.assert_array_equal(one_se.get_xdata(), [1.0, 1.0])
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    corners = band.get_paths()[0].vertices
    np.testing.assert_allclose(corners[:, 1].min(), (path.cv_mean - path.cv_se).min())
    np.testing.assert_allclose(corners[:, 1].max(), (path.cv_mean + path.cv_se).max())
    assert legend_texts(ax) == [
        "mean CV score",
        "+- 1 standard error",
        "best lam = 0.1",
        "1-SE lam = 1",
    ]
    assert ax.get_ylabel() == "CV score" and ax.get_title() == "Cross-validated path (D=3)"
    (steps,) = twin_of(ax).get_lines()
    np.testing.assert_array_equal(steps.get_ydata(), path.n_selected[:3])


def test_cv_path_marks_the_lams_whose_fit_did_not_converge():
    # only the plotted lams (three of four have CV scores): the second did not converge
    path = fake_path(converged=np.array([True, False, True, False]))
    ax = plot_cv_path(path)
    *_, marked = ax.get_lines()
    np.testing.assert_array_equal(marked.get_xdata(), [LAMS[1]])
    np.testing.assert_array_equal(marked.get_ydata(), [path.cv_mean[1]])
    assert legend_texts(ax)[-1] == "full-data fit not converged"
    # a diverged point is failed, not "not converged": not marked
    path = fake_path(converged=np.array([True, False, False, True]),
                     failed=np.array([False, False, True, False]))  # fmt: skip
    *_, marked = plot_cv_path(path).get_lines()
    np.testing.assert_array_equal(marked.get_xdata(), [LAMS[1]])
    # every fit converged: nothing marked
    ax = plot_cv_path(fake_path(converged=np.ones(4, dtype=bool)))
    assert len(ax.get_lines()) == 3 and "full-data fit not converged" not in legend_texts(ax)


def test_cv_path_needs_cv_scores():
    with pytest.raises(ValueError, match="no CV scores: compute it with cv"):
        plot_cv_path(fake_path(cv_mean=None))
    # a CV path interrupted before any fold finished says so (it was computed with cv)
    with pytest.raises(ValueError, match="no CV scores: its computation was interrupted"):
        plot_cv_path(fake_path(cv_mean=None, completed=False))


# ---------------------------------------------------------------------------------------
# plot_tradeoff
# ---------------------------------------------------------------------------------------


def test_tradeoff_one_curve_per_path_sorted_by_selected_features():
    sparse = fake_path(D=4, n_selected=np.array([4, 4, 2, 0]), cv_mean=None)
    ax = plot_tradeoff([fake_path(), sparse], score="val")
    assert legend_texts(ax) == ["D=3", "D=4"]
    d3, d4 = ax.get_lines()
    np.testing.assert_array_equal(d3.get_xdata(), [1, 3, 5, 6])
    np.testing.assert_array_equal(d3.get_ydata(), [0.2, 0.65, 0.75, 0.6])
    np.testing.assert_array_equal(d4.get_xdata(), [0, 2, 4, 4])
    np.testing.assert_array_equal(d4.get_ydata(), [0.2, 0.65, 0.6, 0.75])  # stable ties
    assert ax.get_xlabel() == "selected features" and ax.get_ylabel() == "score"


def test_tradeoff_auto_takes_cv_then_validation_then_train():
    ax = plot_tradeoff({"cv": fake_path(), "val": fake_path(cv_mean=None)})
    cv, val = ax.get_lines()
    np.testing.assert_array_equal(cv.get_ydata(), [0.6, 0.7, 0.5])  # 3 CV lams
    np.testing.assert_array_equal(val.get_ydata(), [0.2, 0.65, 0.75, 0.6])
    assert legend_texts(ax) == ["cv", "val"]
    ax = plot_tradeoff({"train": fake_path(cv_mean=None, val_score=None)})
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), [0.3, 0.7, 0.85, 0.9])
    with pytest.raises(ValueError, match="score='cv' is not available"):
        plot_tradeoff([fake_path(cv_mean=None)], score="cv")
    with pytest.raises(ValueError, match="score='test'"):
        plot_tradeoff([fake_path()], score="test")


# ---------------------------------------------------------------------------------------
# a real path: RegularizationPath.plot draws the path's own values
# ---------------------------------------------------------------------------------------


def test_regularization_path_plot_draws_its_values():
    data = make_group_regression(
        n_samples=80, n_test=40, n_groups=6, group_size=2, n_informative=2, random_state=0
    )
    est = SparseLinearRegressor(D=3, groups=data.groups, random_state=0)
    path = est.regularization_path(
        data.X, data.y, lams=np.geomspace(0.01, 5.0, 5), X_val=data.X_test, y_val=data.y_test, cv=3
    )
    norms = np.asarray(path.group_norms)
    assert (norms == 0).any() and (norms > 0).any()  # the path removes groups
    ax = path.plot()
    lines = ax.get_lines()[:-1]
    assert len(lines) == norms.shape[1]
    floor = norms[norms > 0].min() / 10
    for j, line in enumerate(lines):
        np.testing.assert_array_equal(line.get_xdata(), path.lams)
        np.testing.assert_array_equal(
            line.get_ydata(), np.where(norms[:, j] > 0, norms[:, j], floor)
        )
    ax = path.plot(kind="score")
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), path.val_score)
    ax = path.plot(kind="cv")
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), path.cv_mean)
    np.testing.assert_array_equal(ax.get_lines()[1].get_xdata(), [path.best_lam_] * 2)


# ---------------------------------------------------------------------------------------
# plot_shape_functions
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nam():
    """A NAM fitted on a DataFrame that keeps some of its 8 features and removes others."""
    X, y = make_additive_regression(
        n_samples=300, n_noise=3, noise=0.5, feature_distribution="normal", random_state=0
    )
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    est = DGatedNAMRegressor(
        lam=0.1, D=3, hidden_layer_sizes=(8,), batch_size=64, max_epochs=60, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short fit: ConvergenceWarning expected
        est.fit(frame, y)
    removed = np.setdiff1d(np.arange(8), est.selected_features_)
    assert 0 < len(est.selected_features_) < 8, "the fixture needs kept and removed features"
    return est, frame, removed


def test_shape_functions_one_panel_per_selected_feature(nam):
    est, frame, _ = nam
    axes = plot_shape_functions(est, frame, grid=25)
    selected = est.selected_features_
    assert len(axes) == len(selected)
    assert [ax.get_title() for ax in axes] == [f"c{j}" for j in selected]
    curves = est.shape_functions(grid=25)
    for ax, j in zip(axes, selected, strict=True):
        curve, zero, rug = ax.get_lines()
        np.testing.assert_array_equal(curve.get_xdata(), curves[j][0])
        np.testing.assert_array_equal(curve.get_ydata(), curves[j][1])
        np.testing.assert_array_equal(rug.get_xdata(), frame.iloc[:, j].to_numpy())
        assert rug.get_marker() == "|"
        np.testing.assert_array_equal(zero.get_ydata(), [0.0, 0.0])  # the axhline at 0
        assert [t.get_text() for t in ax.texts] == [f"sd {est.feature_importances_[j]:.2g}"]
        assert ax.get_legend() is None  # one output: no legend
    figure = axes[0].figure
    assert figure.get_suptitle() == "Shape functions (centred contributions)"
    hidden = [ax for ax in figure.axes if not ax.get_visible()]
    assert len(figure.axes) == len(hidden) + len(selected)


def test_removed_feature_is_a_flat_zero_line(nam):
    est, _, removed = nam
    j = int(removed[0])
    (ax,) = plot_shape_functions(est, features=[f"c{j}"])
    curve, _zero = ax.get_lines()  # no X: no rug
    np.testing.assert_array_equal(curve.get_xdata(), est.feature_ranges_[j])
    np.testing.assert_array_equal(curve.get_ydata(), [0.0, 0.0])
    assert ax.get_title() == f"c{j}"
    assert [t.get_text() for t in ax.texts] == ["sd 0"]


def test_shape_functions_on_given_axes_by_index(nam):
    est, _, removed = nam
    features = [int(est.selected_features_[0]), int(removed[0])]
    given = plt.subplots(1, 3)[1]
    axes = plot_shape_functions(est, features=features, axes=given)
    assert list(axes) == list(given[:2])
    assert [ax.get_title() for ax in axes] == [f"c{j}" for j in features]
    assert not given[2].lines


def test_shape_functions_errors(nam):
    est, frame, _ = nam
    with pytest.raises(ValueError, match=r"Unknown features \['nope'\]"):
        plot_shape_functions(est, features=["c0", "nope"])
    with pytest.raises(ValueError, match="indices below 8"):
        plot_shape_functions(est, features=[8])
    with pytest.raises(ValueError, match="Need 2 axes, got 1"):
        plot_shape_functions(est, features=[0, 1], axes=[plt.figure().gca()])
    with pytest.raises(ValueError, match="X must have 8 columns"):
        plot_shape_functions(est, frame.iloc[:, :3])


def test_shape_functions_multiclass_one_line_per_class():
    X, y = make_classification(
        n_samples=200, n_features=4, n_informative=3, n_redundant=0, n_classes=3,
        n_clusters_per_class=1, random_state=0,
    )  # fmt: skip
    labels = np.array(["a", "b", "c"])[y]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DGatedNAMClassifier(
            lam=0.01, hidden_layer_sizes=(8,), batch_size=32, max_epochs=10, random_state=0
        ).fit(X, labels)
    j = int(est.selected_features_[0])
    (ax,) = plot_shape_functions(est, features=[j], grid=10)
    x, f = est.shape_functions(grid=10)[j]
    *curves, zero = ax.get_lines()
    assert len(curves) == 3
    np.testing.assert_array_equal(zero.get_ydata(), [0.0, 0.0])
    for c, line in enumerate(curves):
        np.testing.assert_array_equal(line.get_xdata(), x)
        np.testing.assert_array_equal(line.get_ydata(), f[:, c])
    assert legend_texts(ax) == ["a", "b", "c"]
    assert ax.get_title() == f"x{j}"  # fitted on an array: no names
    with pytest.raises(ValueError, match="fitted on a DataFrame"):
        plot_shape_functions(est, features=["x0"])


def test_axes_count_what_the_path_selects():
    """A path counted in variables (VariableModel) or components (the autoencoder) says so
    on its second axis and on the trade-off plot."""
    path = fake_path(selection_unit="variables")
    ax = plot_cv_path(path)
    assert twin_of(ax).get_ylabel() == "selected variables"
    ax = plot_tradeoff([path], score="train")
    assert ax.get_xlabel() == "selected variables"
