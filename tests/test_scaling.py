"""Units do not matter: estimators give the same model whatever the units of X and y.

The networks (MLP, NAM) train on standardized inputs and targets and fold the scaling
back into the fitted module, so an affine change of units of X or y leaves the model
unchanged (to float32 rounding). The linear models keep the user's units (they must
equal Lasso), so there the change of units is an exact reparametrization: with
``X' = c X`` the solution is ``w' = w / c`` at ``lam' = lam * c^(2/D)``, and the zero
threshold follows the coefficients' scale.
"""

import numpy as np
import pytest
import torch

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMClassifier,
    DGatedNAMRegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
)

pytestmark = pytest.mark.numerics  # all of this module: see pyproject.toml

NETWORKS = [DGatedMLPRegressor, DGatedNAMRegressor, DGatedMLPClassifier, DGatedNAMClassifier]
# per-column units: scales from 1e-3 to 1e6 and offsets up to 1e5
SCALE = np.array([1e6, 1e-3, 5.0, 1.0, 1e4])
SHIFT = np.array([1e3, -2.0, 0.0, 7.0, 1e5])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 5))
    y = X[:, 0] + np.sin(X[:, 1]) + 0.1 * rng.normal(size=150)
    return X, y


def _output(est, X):
    return (
        est.predict(X)
        if hasattr(est, "coef_") or not hasattr(est, "classes_")
        else (est.decision_function(X))
    )


@pytest.mark.parametrize("cls", NETWORKS, ids=lambda c: c.__name__)
def test_networks_do_not_depend_on_the_units_of_X(cls, data):
    X, y = data
    y = y if "Regressor" in cls.__name__ else (y > 0).astype(int)
    params = {"lam": 0.01, "max_epochs": 10, "hidden_layer_sizes": (16,), "random_state": 0}
    plain = cls(**params).fit(X, y)
    moved = cls(**params).fit(X * SCALE + SHIFT, y)
    np.testing.assert_array_equal(moved.selected_features_, plain.selected_features_)
    f_plain, f_moved = _output(plain, X), _output(moved, X * SCALE + SHIFT)
    # float32: the folded first layer computes (w / a) (a x + b) - w b / a with |b / a| up
    # to 1e3 here, a cancellation error of ~1e3 * eps32 ~ 1e-4 of the output's scale; the
    # two trainings see the same standardized data up to float64 rounding
    np.testing.assert_allclose(f_moved, f_plain, atol=1e-3 * np.abs(f_plain).max())


@pytest.mark.parametrize("cls", NETWORKS, ids=lambda c: c.__name__)
def test_offsets_beyond_float32_precision_keep_the_model(cls, data):
    # columns at 1.7e9 +- 1 (timestamps) and, for regressors, targets at 1e9 +- 1: float32
    # weights folded to these units round at 1e9 * eps32 ~ 100 times the spread; the
    # fitted module keeps float64 instead, and predicts what the plain fit predicts
    X, y = data
    regressor = "Regressor" in cls.__name__
    y = y if regressor else (y > 0).astype(int)
    params = {"lam": 0.01, "max_epochs": 10, "hidden_layer_sizes": (16,), "random_state": 0}
    plain = cls(**params).fit(X, y)
    moved = cls(**params).fit(X + 1.7e9, y + 1e9 if regressor else y)
    assert next(plain.module_.parameters()).dtype == torch.float32
    assert next(moved.module_.parameters()).dtype == torch.float64
    np.testing.assert_array_equal(moved.selected_features_, plain.selected_features_)
    f_plain, f_moved = _output(plain, X), _output(moved, X + 1.7e9) - (1e9 if regressor else 0)
    # the two trainings see the same standardized data up to float64 rounding of
    # (x + 1.7e9 - mean) (~1.7e9 * eps64 = 4e-7, a few float32 ulps), then float32
    # training: the MLPs' outputs agree to ~3e-7 of their scale. The NAMs put each
    # hinge's kink at a training point (b = -u x_i): that row's pre-activation x_i u + b is
    # 0 up to rounding, and where the compiled step contracts it into an FMA it is the
    # rounding error of x_i u, whose sign (the ReLU's side for that row) follows the last
    # bits of x_i, so the two fits differ in a few rows' first gradients: measured up to
    # 1.6e-3 of the outputs' scale over seeds 0-9 on an FMA CPU (1e-7 without FMA).
    # The failure guarded against (offsets rounded in float32) is O(1) of that scale
    tol = 1e-2 if cls in (DGatedNAMRegressor, DGatedNAMClassifier) else 1e-3
    np.testing.assert_allclose(f_moved, f_plain, atol=tol * np.abs(f_plain).max())


@pytest.mark.parametrize("cls", [DGatedMLPRegressor, DGatedNAMRegressor], ids=lambda c: c.__name__)
def test_regressors_do_not_depend_on_the_units_of_y(cls, data):
    X, y = data
    params = {"lam": 0.01, "max_epochs": 10, "hidden_layer_sizes": (16,), "random_state": 0}
    plain = cls(**params).fit(X, y)
    moved = cls(**params).fit(X, 1e4 * y + 1e5)
    np.testing.assert_array_equal(moved.selected_features_, plain.selected_features_)
    # the standardized targets agree to float64 rounding, predictions to float32 eps of
    # the output (1e5 + 1e4 * f): ~1e5 * 6e-8 / 1e4 = 6e-7 in units of f
    np.testing.assert_allclose((moved.predict(X) - 1e5) / 1e4, plain.predict(X), atol=1e-5)


@pytest.mark.parametrize("D", [2, 3])
@pytest.mark.parametrize("c", [1e-6, 1e9])
def test_linear_models_change_units_by_an_exact_reparametrization(data, D, c):
    # X' = c X, w' = w / c: the data term is unchanged and lam' ||w'||^(2/D) equals
    # lam ||w||^(2/D) for lam' = lam c^(2/D). Before the zero threshold followed the
    # coefficients' scale, c = 1e9 (coefficients ~1e-9) returned an all-zero model.
    X, y = data
    plain = SparseLinearRegressor(lam=0.05, D=D).fit(X, y)
    moved = SparseLinearRegressor(lam=0.05 * c ** (2.0 / D), D=D).fit(X * c, y)
    np.testing.assert_array_equal(moved.selected_features_, plain.selected_features_)
    assert 0 < plain.selected_features_.size < X.shape[1]
    # both stop at a relative objective decrease of tol=1e-12: coefficients agree to
    # ~sqrt(1e-12) relative (strongly convex near the solution)
    np.testing.assert_allclose(moved.coef_ * c, plain.coef_, rtol=1e-5, atol=1e-6)
    clf = SparseLinearClassifier(lam=0.02 * c ** (2.0 / D), D=D).fit(X * c, y > 0)
    assert clf.selected_features_.size > 0 and np.all(np.isfinite(clf.coef_))


@pytest.mark.parametrize("channels", [False, True], ids=["features", "channels"])
def test_general_estimator_standardizes_offsets_in_float64(data, channels):
    # the user's module trains in float32 on inputs standardized in float64 (per feature,
    # or per channel of n-d X); columns at 1.7e9 +- 1 become noise when cast to float32
    # first (rounded to multiples of 128)
    from sksparse_nn import DGatedNeuralNetRegressor

    X, y = data
    if channels:  # (n, 5 channels, 1 position): a 1x1 convolution over the channels
        X = X[:, :, None]
        module = torch.nn.Sequential(
            torch.nn.Conv1d(5, 16, 1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16, 1)
        )
    else:
        module = torch.nn.Sequential(
            torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
        )
    params = {"gates": {"0.weight": "in"}, "lam": 0.01, "max_epochs": 10, "random_state": 0}
    plain = DGatedNeuralNetRegressor(module, **params).fit(X, y)
    moved = DGatedNeuralNetRegressor(module, **params).fit(X + 1.7e9, y + 1e9)
    # as for the families above: float64 standardization, then the same float32 training
    f_plain, f_moved = plain.predict(X), moved.predict(X + 1.7e9) - 1e9
    np.testing.assert_allclose(f_moved, f_plain, atol=1e-3 * np.abs(f_plain).max())
    norms = moved.tensor_group_norms_["0.weight"], plain.tensor_group_norms_["0.weight"]
    np.testing.assert_allclose(*norms, rtol=1e-3, atol=1e-6)


def test_node_with_offsets_beyond_float32_precision(data):
    # NODE trained on X and y cast to float32 as given: a target at 1e9 +- 1 (rounded to
    # multiples of 64) or a column at 1.7e9 +- 1 (multiples of 128) became noise, R^2 0.
    # Its targets are now standardized in float64 (the map kept in the module's
    # target_mean / target_scale, float64 when needed); its trees read the features as
    # given, so such a column is a clear error
    from sksparse_nn import NODERegressor

    X, y = data
    params = {"num_trees": 16, "depth": 3, "lam": 1e-3, "max_epochs": 10, "random_state": 0}
    plain = NODERegressor(**params).fit(X, y)
    moved = NODERegressor(**params).fit(X, y + 1e9)
    assert moved.module_.target_mean.dtype == torch.float64  # the offset needs it
    f_plain, f_moved = plain.predict(X), moved.predict(X) - 1e9
    # the same float32 training on standardized targets up to float64 rounding of
    # (y + 1e9 - mean) (~1e9 * eps64 = 2e-7)
    np.testing.assert_allclose(f_moved, f_plain, atol=1e-3 * np.abs(f_plain).max())
    with pytest.raises(ValueError, match="column 0 of X has values around 1.7e"):
        NODERegressor(**params).fit(X + np.array([1.7e9, 0, 0, 0, 0]), y)


def test_standardized_inputs_are_bounded_and_ordinary_columns_keep_their_deviation():
    # a rare level's indicator (one 1 in 400 rows: 20 deviations from its mean) and a
    # heavy tail are scaled to reach MAX_STANDARDIZED; Gaussian columns are standardized
    from sksparse_nn.training import MAX_STANDARDIZED, Scaling

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    X[:, 1] = 0.0
    X[7, 1] = 1.0
    X[:, 2] = rng.standard_cauchy(400)
    X[:, 3] = 5.0  # constant
    scaling = Scaling.fit(X)
    Z, _ = scaling.transform(X, None)
    assert np.abs(Z).max() <= MAX_STANDARDIZED * (1 + 1e-12)
    assert np.isclose(np.abs(Z[:, 1]).max(), MAX_STANDARDIZED)  # its one 1
    assert scaling.x_scale[0] == pytest.approx(X[:, 0].std(), rel=1e-12)
    assert scaling.x_scale[3] == 1.0
    # sparse input: the same scales (centring happens per batch)
    import scipy.sparse as sp

    np.testing.assert_allclose(Scaling.fit(sp.csr_matrix(X)).x_scale, scaling.x_scale)
