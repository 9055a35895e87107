"""Variables of a mixed-type table selected as wholes: variable_groups and VariableModel."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, SplineTransformer, StandardScaler

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMRegressor,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
)
from sksparse_nn.compose import VariableModel, variable_groups

COLOR_EFFECT = {"red": 1.5, "blue": -1.5, "green": 0.0, "white": 0.5}


def _table(n=400, seed=0):
    """``color`` (4 levels) and ``size`` drive y; ``shape`` (5 levels) and ``weight`` are
    noise."""
    rng = np.random.RandomState(seed)
    df = pd.DataFrame(
        {
            "color": rng.choice(list(COLOR_EFFECT), n),
            "shape": rng.choice(["disc", "star", "cube", "cone", "ring"], n),
            "size": rng.randn(n),
            "weight": rng.randn(n),
        }
    )
    y = df["color"].map(COLOR_EFFECT).to_numpy() + df["size"].to_numpy()
    return df, y + 0.3 * rng.randn(n)


def _encoder(handle_unknown="ignore"):
    return make_column_transformer(
        (OneHotEncoder(handle_unknown=handle_unknown), ["color", "shape"]),
        (StandardScaler(), ["size", "weight"]),
    )


# ------------------------------------------------------------------ variable_groups
def test_groups_follow_the_encoders_categories():
    df, _ = _table()
    df["id"] = np.arange(len(df))  # dropped by the encoder: no output column
    ct = make_column_transformer(
        (OneHotEncoder(drop="first"), ["shape"]),
        (make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder()), ["color"]),
        (SplineTransformer(n_knots=4), ["size"]),
        ("passthrough", ["weight"]),
    ).fit(df)
    labels, names = variable_groups(ct)
    assert names.tolist() == ["color", "shape", "size", "weight", "id"]
    encoders = {name: part for name, part, _ in ct.transformers_}
    n_shape = len(encoders["onehotencoder"].categories_[0]) - 1  # drop="first"
    n_color = len(encoders["pipeline"][-1].categories_[0])
    n_spline = encoders["splinetransformer"].n_features_out_
    expected = [1] * n_shape + [0] * n_color + [2] * n_spline + [3]
    assert labels.tolist() == expected
    assert len(labels) == ct.transform(df).shape[1]


def test_groups_of_infrequent_categories_and_a_bare_encoder():
    df, _ = _table()
    df.loc[:3, "shape"] = "rare"
    encoder = OneHotEncoder(min_frequency=10).fit(df[["shape", "color"]])
    labels, names = variable_groups(encoder)
    n_out = encoder.transform(df[["shape", "color"]]).shape[1]
    assert len(labels) == n_out and names.tolist() == ["shape", "color"]
    assert np.bincount(labels).tolist() == [6, 4]  # 5 frequent shapes + "infrequent"


def test_unfitted_encoder_and_unmappable_outputs_raise():
    from sklearn.decomposition import PCA
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        variable_groups(OneHotEncoder())
    X = np.random.RandomState(0).randn(20, 3)
    with pytest.raises(ValueError, match="Cannot tell which input variable"):
        variable_groups(PCA(2).fit(X))


# ------------------------------------------------------------------ VariableModel
ESTIMATORS = [
    SparseLinearRegressor(lam=0.05),
    DGatedMLPRegressor(random_state=0),
    DGatedNAMRegressor(random_state=0),
]


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_the_informative_categorical_is_kept_whole_and_the_noise_dropped(estimator):
    df, y = _table()
    model = _fit(VariableModel(estimator, encoder=_encoder()), df, y)
    assert model.selected_variables_.tolist() == ["color", "size"]
    np.testing.assert_array_equal(model.get_support(), [True, False, True, False])
    # all or nothing: every encoded column of a dropped variable is exactly 0, every
    # column of a kept one is live; the gap between them is clean
    columns = model.estimator_.feature_importances_
    for v, kept in enumerate(model.get_support()):
        own = columns[model.groups_ == v]
        assert np.all(own > 0) if kept else np.all(own == 0.0)
    dead, live = model.estimator_.sparsity_gap_
    assert dead < 1e-6 < 1e-2 < live
    assert model.score(df, y) > 0.8
    assert model.get_feature_names_out().tolist() == ["color", "size"]
    assert model.transform(df).columns.tolist() == ["color", "size"]


def test_unknown_categories_follow_the_encoder():
    df, y = _table()
    new = df.head(4).copy()
    new.loc[0, "color"] = "purple"  # unseen level
    ignoring = VariableModel(SparseLinearRegressor(lam=0.05), encoder=_encoder("ignore")).fit(df, y)
    pred = ignoring.predict(new)
    assert np.all(np.isfinite(pred))
    # an unknown level encodes as all zeros: the colour term of the reference level
    np.testing.assert_allclose(pred[1:], ignoring.predict(df.head(4))[1:])
    strict = VariableModel(SparseLinearRegressor(lam=0.05), encoder=_encoder("error")).fit(df, y)
    with pytest.raises(ValueError, match="unknown categor"):
        strict.predict(new)


def test_missing_values_need_an_imputing_encoder():
    df, y = _table()
    df.loc[5, "size"] = np.nan
    model = VariableModel(SparseLinearRegressor(lam=0.05), encoder=_encoder())
    with pytest.raises(ValueError, match="NaN"):
        model.fit(df, y)
    imputing = make_column_transformer(
        (OneHotEncoder(), ["color", "shape"]),
        (make_pipeline(SimpleImputer(), StandardScaler()), ["size", "weight"]),
    )
    fitted = VariableModel(SparseLinearRegressor(lam=0.05), encoder=imputing).fit(df, y)
    assert fitted.selected_variables_.tolist() == ["color", "size"]


def test_unpenalized_variables_survive_any_lam():
    df, y = _table()
    model = VariableModel(
        SparseLinearRegressor(lam=1e3), encoder=_encoder(), unpenalized=["weight"]
    )
    model.fit(df, y)
    assert model.selected_variables_.tolist() == ["weight"]
    assert np.all(model.groups_[model.groups_ >= 0] != 3)


def test_estimators_without_groups_are_refused_clearly():
    df, y = _table()
    with pytest.raises(ValueError, match="NODERegressor has no `groups`.*selects trees"):
        VariableModel(NODERegressor(max_epochs=1), encoder=_encoder()).fit(df, y)


def test_path_counts_variables():
    df, y = _table()
    model = VariableModel(SparseLinearRegressor(), encoder=_encoder())
    path = model.regularization_path(df, y, n_lams=8, lam_min_ratio=1e-2)
    assert path.feature_names.tolist() == ["color", "shape", "size", "weight"]
    assert path.selection_unit == "variables"
    assert np.all(path.n_selected <= 4)
    for chosen, n in zip(path.selected, path.n_selected, strict=True):
        assert len(chosen) == n
    assert path.n_selected[0] >= 2 and path.n_selected[-1] == 0
    # along the path a variable enters whole: its importance is 0 exactly when unselected
    for chosen, row in zip(path.selected, path.importances, strict=True):
        np.testing.assert_array_equal(np.flatnonzero(row), chosen)
    assert set(path.selected_at(path.lams[len(path) // 2])) <= {"color", "shape", "size", "weight"}
    # validation rows are encoded like the training rows
    held_out, y_held = _table(n=100, seed=1)
    scored = model.regularization_path(df, y, lams=path.lams[:3], X_val=held_out, y_val=y_held)
    assert np.all(scored.val_score > 0.8)


def test_works_with_grid_search_and_sparse_path_cv():
    df, y = _table(n=300)
    search = GridSearchCV(
        VariableModel(SparseLinearRegressor(D=3), encoder=_encoder()),  # the sparser penalty
        {"estimator__lam": [0.01, 0.1]},
        cv=3,
    ).fit(df, y)
    assert search.best_estimator_.selected_variables_.tolist() == ["color", "size"]
    cv_model = VariableModel(SparsePathCV(SparseLinearRegressor(), cv=3), encoder=_encoder()).fit(
        df, y
    )
    assert {"color", "size"} <= set(cv_model.selected_variables_)


def test_classifier_delegation():
    df, y = _table()
    label = (y > 0).astype(int)
    for estimator in (SparseLinearClassifier(lam=0.02), DGatedMLPClassifier(random_state=0)):
        model = _fit(VariableModel(estimator, encoder=_encoder()), df, label)
        np.testing.assert_array_equal(model.classes_, [0, 1])
        proba = model.predict_proba(df)
        assert proba.shape == (len(df), 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        assert "color" in model.selected_variables_ and "shape" not in model.selected_variables_


def test_shape_plot_speaks_in_variables_and_levels():
    import matplotlib

    matplotlib.use("Agg")
    from sksparse_nn.plotting import plot_shape_functions

    df, y = _table()
    model = _fit(VariableModel(DGatedNAMRegressor(random_state=0), encoder=_encoder()), df, y)
    axes = plot_shape_functions(model, df)
    assert [ax.get_title() for ax in axes] == ["color", "size"]
    bars = axes[0].patches
    levels = [t.get_text() for t in axes[0].get_xticklabels()]
    assert sorted(levels) == sorted(COLOR_EFFECT)  # one bar per level, named by the level
    _, f = model.estimator_.shape_functions()[model.estimator_.selected_terms_[0]]
    np.testing.assert_array_equal([b.get_height() for b in bars], f)
    # the bars are the true level effects up to a common shift (noise sd 0.3, ~100 rows
    # per level: 0.2 is several standard errors)
    truth = np.array([COLOR_EFFECT[name] for name in levels])
    np.testing.assert_allclose(f - f.mean(), truth - truth.mean(), atol=0.2)


# ------------------------------------------------------------- a raw table, no encoder
def _raw_table(n=400, seed=0):
    """``_table`` as users bring it: missing values in a number (its missingness is
    informative) and in a category, a rare level, a bool column, an object column."""
    df, y = _table(n, seed)
    rng = np.random.RandomState(seed + 1)
    missing = rng.rand(n) < 0.2
    y = y + 2.0 * missing  # the missingness of `size` carries signal
    df.loc[missing, "size"] = np.nan
    df.loc[rng.rand(n) < 0.1, "color"] = None
    df.loc[3, "shape"] = "pyramid"  # seen once: pooled
    df["flag"] = rng.rand(n) < 0.5
    return df, y


def test_a_raw_table_fits_with_no_encoder_and_is_left_untouched():
    df, y = _raw_table()
    before = df.copy()
    model = VariableModel(SparseLinearRegressor(lam=0.05)).fit(df, y)
    pd.testing.assert_frame_equal(df, before)
    assert model.selected_variables_.tolist() == ["color", "size"]
    names = model.encoder_.get_feature_names_out()
    # the missing indicator of `size` and the missing level of `color` are in their
    # variables' groups; the rare level is pooled
    size = model.variable_names_.tolist().index("size")
    assert model.groups_[names.tolist().index("missingindicator_size")] == size
    assert "shape_pyramid" not in names and "shape_infrequent_sklearn" in names
    assert "color_nan" in names
    coef = np.ravel(model.estimator_.coef_)
    dropped = ~np.isin(model.groups_, model.selected_features_)
    assert np.all(coef[dropped] == 0) and coef[names.tolist().index("missingindicator_size")] != 0
    # unknown levels and missing values at predict time
    new = df.head(3).copy()
    new.loc[new.index[0], "color"] = "purple"
    new.loc[new.index[1], "weight"] = np.nan
    assert np.all(np.isfinite(model.predict(new)))


def test_the_table_encoder_reads_column_kinds_and_refuses_others():
    from sksparse_nn.encoding import TableEncoder

    array = np.array([["a", 1.0, None], ["b", None, "x"], ["a", 2.0, 3]], dtype=object)
    encoder = TableEncoder(min_frequency=1).fit(array)
    # numbers (with a missing value) are numeric; strings, and numbers mixed with
    # strings, are levels
    assert encoder.numeric_columns_ == [1] and encoder.categorical_columns_ == [0, 2]
    assert variable_groups(encoder)[0].tolist() == [0, 0, 2, 2, 2, 1, 1]  # x, 3, nan
    frame = pd.DataFrame({"when": pd.date_range("2020", periods=3), "x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match=r"'when' \(datetime64.*convert"):
        TableEncoder().fit(frame)


def test_a_search_around_a_variable_model_says_to_put_it_inside():
    from sksparse_nn import DGatedMLPClassifier, SparsePathCV

    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
    with pytest.raises(TypeError, match=r"VariableModel\(SparsePathCV\(estimator\)\)"):
        SparsePathCV(VariableModel(DGatedMLPClassifier())).fit(X, y)
