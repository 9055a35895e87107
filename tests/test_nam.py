"""DGatedNAMRegressor / DGatedNAMClassifier: exact shape-function selection, additivity."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import make_classification

from sksparse_nn.datasets import make_additive_regression
from sksparse_nn.estimators.nam import DGatedNAMClassifier, DGatedNAMRegressor
from sksparse_nn.gating import dgate
from sksparse_nn.groups import AxisGroups
from sksparse_nn.nn.nam import NAM, compact_nam
from sksparse_nn.plotting import plot_shape_functions
from sksparse_nn.training import epoch_budget

FAST = {"hidden_layer_sizes": (16,), "batch_size": 64, "max_epochs": 150, "random_state": 0}
# Float32 modules: two evaluations of the same outputs that sum the same terms in another
# order (per-feature contributions vs the fused forward, compact vs full module) agree to
# ~n_terms * eps32 (1.2e-7) of the terms' scale: outputs here are <~ 10, so ~1e-6; the
# tests use F32_ATOL = 1e-5.
F32_ATOL = 1e-5
TINY = {"hidden_layer_sizes": (8,), "batch_size": 32, "max_epochs": 10, "random_state": 0}


@pytest.fixture(scope="module")
def additive():
    """5 informative shape functions (sin, cos, x^2, -x, -|x|) + 5 noise features."""
    data = make_additive_regression(
        n_samples=400, n_noise=5, noise=0.5, feature_distribution="normal",
        random_state=0, return_info=True,
    )  # fmt: skip
    return data.X, data.y


@pytest.fixture(scope="module")
def fitted(additive):
    X, y = additive
    # lam in the units of the standardized target (y has sd 2.2 here)
    # (at lam 0.04 the cos term, the weakest, is on its way out at 150 epochs)
    return DGatedNAMRegressor(lam=0.03, D=3, **FAST).fit(X, y)


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_classification(
        n_samples=300, n_features=6, n_informative=3, n_redundant=0, n_classes=3,
        n_clusters_per_class=1, random_state=0,
    )  # fmt: skip
    return X, y


@pytest.fixture(scope="module")
def fitted_multiclass(multiclass):
    X, y = multiclass
    return DGatedNAMClassifier(lam=0.02, D=3, **FAST).fit(X, y)


# ------------------------------------------------------------------ selection
@pytest.mark.numerics
def test_removed_shape_functions_are_zero_and_importances_are_their_spreads(fitted, additive):
    # (exact zeros in the module and the gap of every estimator: tests/test_contract.py)
    X, _ = additive
    np.testing.assert_array_equal(fitted.selected_features_, np.arange(5))
    contrib = fitted.contributions(X)
    assert np.all(contrib[:, 5:] == 0)  # identically zero, not merely constant
    assert torch.all(fitted.module_.centers[5:] == 0)
    assert np.all(fitted.feature_importances_[5:] == 0)
    assert np.all(fitted.feature_importances_[:5] > 0.1)
    # the fit's spreads vs a float64 std of float32 contributions re-evaluated after the fit:
    # float32 rounding of contributions of size ~3 around a spread > 0.1: ~1e-5 relative
    np.testing.assert_allclose(fitted.feature_importances_, contrib.std(axis=0), rtol=1e-4)
    np.testing.assert_array_equal(np.flatnonzero(fitted.feature_importances_), np.arange(5))
    assert fitted.score(X, additive[1]) > 0.85


def test_linear_feature_gets_a_decreasing_shape(fitted):
    x, f = fitted.shape_functions()[3]  # true shape: -x
    assert x.shape == f.shape == (100,)
    assert np.all(np.diff(x) > 0)
    assert np.corrcoef(x, f)[0, 1] < -0.99
    # monotone decreasing up to float32 rounding of f (eps32 |f| <~ 1e-7 ptp(f))
    assert np.all(np.diff(f) <= 1e-6 * np.ptp(f))
    np.testing.assert_allclose(x[[0, -1]], fitted.feature_ranges_[3])
    curves = fitted.shape_functions(grid=[-1.0, 0.0, 1.0])
    assert sorted(curves) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(curves[2][0], [-1.0, 0.0, 1.0])
    # x^2 is convex: the ends lie above the middle
    assert curves[2][1][0] > curves[2][1][1] < curves[2][1][2]


# ------------------------------------------------------------- additivity
@pytest.mark.numerics
def test_contributions_sum_to_the_prediction(fitted, additive):
    X, _ = additive
    contrib = fitted.contributions(X)
    assert contrib.shape == X.shape
    assert isinstance(fitted.intercept_, float)
    np.testing.assert_allclose(
        contrib.sum(axis=1) + fitted.intercept_, fitted.predict(X), rtol=0, atol=F32_ATOL
    )
    # centred on train: float32 contributions (<~ 3) minus a float32 centre, ~eps32 * 3
    np.testing.assert_allclose(contrib.mean(axis=0), 0.0, atol=F32_ATOL)


@pytest.mark.numerics
def test_multiclass_contributions(fitted_multiclass, multiclass):
    X, y = multiclass
    est = fitted_multiclass
    contrib = est.contributions(X)
    assert contrib.shape == (len(X), X.shape[1], 3)
    assert est.intercept_.shape == (3,)
    np.testing.assert_allclose(
        contrib.sum(axis=1) + est.intercept_, est.decision_function(X), rtol=0, atol=F32_ATOL
    )
    assert est.score(X, y) > 0.8
    removed = np.setdiff1d(np.arange(X.shape[1]), est.selected_features_)
    assert np.all(contrib[:, removed] == 0)
    curves = est.shape_functions(grid=7)
    assert all(f.shape == (7, 3) for _, f in curves.values())


def test_binary_classifier_with_string_labels(multiclass):
    X, y = multiclass
    labels = np.array(["no", "yes"])[(y == 0).astype(int)]
    est = DGatedNAMClassifier(lam=0.01, **FAST).fit(X, labels)
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    contrib = est.contributions(X)
    assert contrib.shape == X.shape
    np.testing.assert_allclose(
        contrib.sum(axis=1) + est.intercept_, est.decision_function(X), rtol=0, atol=F32_ATOL
    )
    assert est.score(X, labels) > 0.85


@pytest.mark.numerics
def test_compact_nam_holds_the_selected_subnetworks_or_the_intercept_alone(fitted):
    # (compact() predicts like the full model, every estimator: tests/test_contract.py)
    small = fitted.compact()
    assert isinstance(small, NAM) and small.n_features == 5
    empty = compact_nam(fitted.module_, [])  # nothing selected: the intercept alone
    with torch.no_grad():
        # the float32 intercept vs its float64 copy: a few eps32 (1.2e-7) relative
        out = empty(torch.zeros(3, 0)).numpy()
        np.testing.assert_allclose(out, fitted.intercept_, rtol=1e-6, atol=0)


# ------------------------------------------------------------ the module
def _autograd_nodes(output):
    seen, stack = set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(fn for fn, _ in node.next_functions)
    return len(seen)


def test_forward_has_no_loop_over_features():
    """The autograd graph (one node per tensor op) is the same size for 20 and 200 features."""
    sizes = {}
    for p in (20, 200):
        module = NAM(p, (8, 4), n_outputs=2)
        dgate(module, "first", groups=AxisGroups(0), D=3)
        sizes[p] = _autograd_nodes(module(torch.randn(5, p)).sum())
    assert sizes[20] == sizes[200] < 40


@pytest.mark.numerics
@pytest.mark.parametrize("chunk", [1, 8 * 16 * 3, 2**18])  # one term, 3 per chunk, all
@pytest.mark.parametrize("terms", [None, [[0, 1, 2], [3], [4, 5], [6], [7, 8, 9]]])
def test_chunked_forward_is_the_sum_of_the_shape_functions(monkeypatch, chunk, terms):
    """The one-hidden-layer forward, computed over chunks of features (or of terms of
    several columns), equals intercept plus the per-term outputs (float64: only
    summation order differs)."""
    import sksparse_nn.nn.nam as nam_module

    monkeypatch.setattr(nam_module, "_CHUNK_ELEMENTS", chunk)
    torch.manual_seed(0)
    module = NAM(10, (16,), n_outputs=2, terms=terms).double()
    with torch.no_grad():
        module.intercept.normal_()
    x = torch.randn(8, 10, dtype=torch.float64, requires_grad=True)
    expected = module.feature_outputs(x).sum(dim=0) + module.intercept
    out = module(x)
    torch.testing.assert_close(out, expected, rtol=1e-13, atol=1e-13)
    (grad,) = torch.autograd.grad(out.sum(), x)
    (grad_expected,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(grad, grad_expected, rtol=1e-13, atol=1e-13)


@pytest.mark.numerics
def test_zero_group_gives_an_exactly_zero_shape_function():
    torch.manual_seed(0)
    module = NAM(4, (8, 8), n_outputs=2, activation="gelu")
    with torch.no_grad():
        module.first[1].zero_()
    x = torch.randn(50, 4) * 100
    contrib = module.contributions(x)
    assert torch.all(contrib[:, 1] == 0)
    assert torch.all(contrib[:, [0, 2, 3]].abs().sum(dim=(0, 2)) > 0)
    before = module(x)
    module.center_(x)
    # float32 with inputs ~100: contributions of ~100 are shifted by their centre and the
    # intercept takes it back, ~eps32 * 100 * few ~ 1e-5 absolute
    torch.testing.assert_close(module(x), before, atol=1e-4, rtol=1e-5)
    assert torch.all(module.centers[1] == 0)
    torch.testing.assert_close(module.contributions(x).mean(dim=0), torch.zeros(4, 2), atol=1e-4,
                               rtol=0)  # fmt: skip


def test_warm_started_path_points_stay_additive_with_zero_removed_features(additive):
    X, y = additive
    est = DGatedNAMRegressor(D=3, **{**FAST, "max_epochs": 60})
    path = est.regularization_path(X, y, lams=[0.01, 0.1, 1.0], keep_estimators=True)
    assert path.n_selected[-1] < path.n_selected[0]
    for fit in path.estimators:
        contrib = fit.contributions(X)
        removed = np.setdiff1d(np.arange(X.shape[1]), fit.selected_features_)
        assert np.all(contrib[:, removed] == 0)
        np.testing.assert_allclose(
            contrib.sum(axis=1) + fit.intercept_, fit.predict(X), rtol=0, atol=F32_ATOL
        )


# ---------------------------------------------------------- integration
@pytest.mark.numerics
def test_pandas_names_plot_and_sparse_input(additive):
    import matplotlib.pyplot as plt

    X, y = additive
    frame = pd.DataFrame(X, columns=[f"col_{i}" for i in range(X.shape[1])])
    est = DGatedNAMRegressor(lam=0.05, **FAST).fit(frame, y)
    assert list(est.feature_names_in_) == list(frame.columns)
    axes = plot_shape_functions(est, frame)
    assert len(axes) == est.selected_features_.size
    assert [ax.get_title() for ax in axes] == [f"col_{j}" for j in est.selected_features_]
    axes = plot_shape_functions(est, features=["col_7", "col_0"])  # a removed one: flat 0
    assert [ax.get_title() for ax in axes] == ["col_7", "col_0"]
    plt.close("all")
    X_sparse = X.copy()
    X_sparse[np.abs(X_sparse) < 0.5] = 0.0
    dense = DGatedNAMRegressor(**TINY).fit(X_sparse, y)
    sparse = DGatedNAMRegressor(**TINY).fit(sp.csr_matrix(X_sparse), y)
    # float32 training on batches that agree up to float64 rounding of the standardization
    # statistics (rare 1-ulp ties after the cast): ~1e-6 of the outputs (<~ 10)
    np.testing.assert_allclose(sparse.predict(sp.csr_matrix(X_sparse)), dense.predict(X_sparse),
                               rtol=0, atol=F32_ATOL)  # fmt: skip
    np.testing.assert_allclose(sparse.contributions(X_sparse), dense.contributions(X_sparse),
                               rtol=0, atol=F32_ATOL)  # fmt: skip


def test_invalid_hidden_sizes_and_grid(fitted):
    X, y = np.random.default_rng(0).normal(size=(40, 5)), np.arange(40.0)
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        DGatedNAMRegressor(**{**TINY, "hidden_layer_sizes": ()}).fit(X, y)
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        DGatedNAMRegressor(**{**TINY, "hidden_layer_sizes": (4, 0)}).fit(X, y)
    with pytest.raises(ValueError, match="grid"):
        fitted.shape_functions(grid=1)


def test_a_cold_default_fit_at_a_small_lam_settles_with_a_clean_gap():
    # at a path's small end (1% of lam_max) unused shape functions shrink slowly: a cold
    # fit with the automatic budget must run until they are zero, not stop at its cap
    # with every group in transit (as a cap of 2000 steps did: 12 groups kept, the
    # smallest at 7e-4, and a ConvergenceWarning)
    import warnings

    from sksparse_nn.exceptions import ConvergenceWarning

    rng = np.random.RandomState(0)
    X = rng.randn(200, 12)
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + X[:, 2] + 0.5 * rng.randn(200)
    est = DGatedNAMRegressor(random_state=0)
    est.set_params(lam=0.01 * est.lambda_max(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(X, y)
    assert est.n_iter_ < epoch_budget(est, 200, est.batch_size)  # settled, not capped
    from sksparse_nn.training import TINY

    dead, live = est.sparsity_gap_
    assert 0 < len(est.selected_features_) < 12
    assert {0, 1, 2} <= set(est.selected_features_)
    # a clean gap by the settle rule's own terms: the removed groups were below zero_tol
    # when it was applied, and no kept group is in a slow tail (below TINY of the largest)
    assert dead < est.zero_tol
    assert live >= TINY * est.group_norms_.max()


def _tensor_path(module, monkeypatch):
    """The module with its compiled one-layer path switched off (the tensor version)."""
    monkeypatch.setattr(type(module), "_compiled_path", lambda self, x, first=None: False)
    return module


@pytest.mark.numerics
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_one_layer_forward_and_gradients_are_the_tensor_versions(
    dtype, n_outputs, monkeypatch
):
    # the compiled loops reassociate sums: an output or gradient entry that is a sum of
    # N terms may differ by the bound of floating-point summation, (N - 1) eps sum |term|
    torch.manual_seed(0)
    n, p, h, c = 40, 12, 16, n_outputs
    module = NAM(p, (h,), n_outputs=c).to(dtype)
    with torch.no_grad():
        module.intercept.normal_()
        module.first[3].zero_()  # a removed feature
    x = torch.randn(n, p, dtype=dtype)
    w = torch.rand(n, c, dtype=dtype)  # the loss sum_ic w_ic out_ic
    params = [module.first, module.out, module.intercept]
    assert module._compiled_path(x)
    out = module(x)
    grads = torch.autograd.grad((out * w).sum(), params)
    with pytest.MonkeyPatch.context() as mp:
        _tensor_path(module, mp)
        ref = module(x)
        ref_grads = torch.autograd.grad((ref * w).sum(), params)
    eps = torch.finfo(dtype).eps
    u, b = module.first.detach()[:, 0], module.first.detach()[:, 1]
    v = module.out.detach()  # (p, h, c)
    pre = x[:, :, None] * u + b  # (n, p, h)
    act, mask = torch.relu(pre), (pre > 0).to(dtype)
    wv = (w[:, None, None, :] * v.abs()).sum(-1)  # (n, p, h): sum_c w_ic |v_jkc|
    bounds = [
        p * h * eps * (act[..., None] * v).abs().sum(dim=(1, 2)),  # each output (n, c)
        c * n * eps * torch.stack(  # d/du, d/db per unit
            [(mask * x[:, :, None].abs() * wv).sum(0), (mask * wv).sum(0)], dim=1),
        n * eps * (act[..., None] * w[:, None, None, :]).sum(0),  # d/dv per unit and output
    ]  # fmt: skip
    assert torch.all((out - ref).abs() <= bounds[0] + eps * out.abs())
    for g, r, bound in zip(grads[:2], ref_grads[:2], bounds[1:], strict=True):
        assert torch.all((g - r).abs() <= bound + eps * r.abs())
    assert torch.equal(grads[2], ref_grads[2])
    # the removed feature contributes exactly 0, whatever its input
    x3 = torch.zeros(2, p, dtype=dtype)
    x3[1, 3] = 5.0
    with torch.no_grad():
        y = module(x3)
    assert torch.equal(y[0], y[1])


@pytest.mark.numerics
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_terms_forward_and_gradients_are_the_tensor_versions(
    dtype, n_outputs, monkeypatch
):
    # terms of several columns (a categorical's), padded to the widest: the compiled
    # loops reassociate sums of at most N = T h (m + 1) products, so an entry may differ
    # by N eps times the sum of its terms' magnitudes; the tensor path run on the
    # parameters' and inputs' absolute values gives that sum (an upper bound of it)
    torch.manual_seed(0)
    terms = [[0], [1, 2, 3], [4], [5, 6], [7, 8, 9, 10], [11]]
    n, p, h, c = 40, 12, 16, n_outputs
    module = NAM(p, (h,), n_outputs=c, terms=terms).to(dtype)
    with torch.no_grad():
        module.intercept.normal_()
        module.first[3].zero_()  # a removed term
    x = torch.randn(n, p, dtype=dtype)
    w = torch.rand(n, c, dtype=dtype)  # the loss sum_ic w_ic out_ic
    params = [module.first, module.out, module.intercept]
    assert module._compiled_path(x)
    out = module(x)
    grads = torch.autograd.grad((out * w).sum(), params)
    _tensor_path(module, monkeypatch)
    ref = module(x)
    ref_grads = torch.autograd.grad((ref * w).sum(), params)
    magnitude = NAM(p, (h,), n_outputs=c, terms=terms).to(dtype)
    with torch.no_grad():
        for mine, theirs in zip(magnitude.parameters(), module.parameters(), strict=True):
            mine.copy_(theirs.abs())
        magnitude.intercept.zero_()
    size = magnitude(x.abs())
    size_grads = torch.autograd.grad((size * w).sum(), list(magnitude.parameters())[:2])
    N = len(terms) * h * (module.width + 1) * n
    eps = torch.finfo(dtype).eps
    assert torch.all((out - ref).abs() <= N * eps * (size + ref.abs()))
    for g, r, bound in zip(grads[:2], ref_grads[:2], size_grads, strict=True):
        assert torch.all((g - r).abs() <= N * eps * (bound + r.abs()))
    assert torch.all(grads[0][:, :-1][~module.weight_mask()] == 0)  # padding rows
    assert torch.all(grads[0][3] == ref_grads[0][3])  # the removed term's own gradient
    assert torch.equal(grads[2], ref_grads[2])


@pytest.mark.parametrize("terms", [None, [[0, 1], [2], [3, 4, 5]]])
def test_compiled_path_trains_the_gates_as_the_tensor_path_does(terms, monkeypatch):
    # D-gated (the first layer a product of factors): the same gradients on the factors
    torch.manual_seed(1)
    module = NAM(6, (8,), terms=terms).double()
    dgate(module, "first", groups=AxisGroups(0), D=3)
    x = torch.randn(30, 6, dtype=torch.float64)
    grads = torch.autograd.grad(module(x).square().sum(), list(module.parameters()))
    _tensor_path(module, monkeypatch)
    ref = torch.autograd.grad(module(x).square().sum(), list(module.parameters()))
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_compiled_path_only_where_the_kernels_apply():
    x = torch.randn(5, 6)
    assert NAM(6, (8,))._compiled_path(x)
    assert NAM(6, (8,), n_outputs=3)._compiled_path(x)  # multiclass logits too
    assert not NAM(6, (8, 4))._compiled_path(x)  # two hidden layers
    assert not NAM(6, (8,), activation="tanh")._compiled_path(x)
    assert NAM(6, (8,), terms=[[0, 1], [2], [3], [4], [5]])._compiled_path(x)  # terms too
    assert not NAM(6, (8,))._compiled_path(x.double())  # dtypes differ
    assert not NAM(6, (8,))._compiled_path(x.requires_grad_())  # no input gradient
    dropped = NAM(6, (8,), dropout=0.2)
    assert not dropped._compiled_path(x.detach())  # random in training ...
    assert dropped.eval()._compiled_path(x.detach())  # ... not in evaluation


def test_compiled_path_propagates_nan_as_the_tensor_path(monkeypatch):
    # a NaN parameter must reach the loss (the divergence guard reads it), not vanish in
    # the ReLU or in reassociated sums
    torch.manual_seed(2)
    module = NAM(5, (8,))
    with torch.no_grad():
        module.out.fill_(0.5)
        module.first[2, 1, 3] = float("nan")
    x = torch.randn(7, 5)
    assert module._compiled_path(x)
    out = module(x)
    assert torch.isnan(out).all()
    grads = torch.autograd.grad(out.sum(), [module.first, module.out])
    _tensor_path(module, monkeypatch)
    ref = module(x)
    ref_grads = torch.autograd.grad(ref.sum(), [module.first, module.out])
    assert torch.isnan(ref).all()
    for g, r in zip(grads, ref_grads, strict=True):  # NaN where the tensor path has it
        assert torch.equal(torch.isnan(g), torch.isnan(r))
    assert torch.isnan(grads[1]).any()


def test_term_levels_are_the_distinct_rows_in_descending_order(monkeypatch):
    # _levels sorts columns (np.lexsort) instead of whole rows (np.unique(axis=0)): the
    # same rows, counts and order, an all-zero row last; the most frequent beyond the cap
    from sksparse_nn.estimators import _nam_inspection as inspection

    rng = np.random.default_rng(0)
    X = np.zeros((300, 5))
    X[np.arange(300), rng.integers(0, 4, 300)] = 1.0  # one-hot in columns 0-3
    X[:20, :4] = 0.0  # a reference level
    X[:, 4] = rng.integers(0, 3, 300)  # a numeric column beside them
    cols = np.array([0, 1, 2, 3, 4])
    reference, counts = np.unique(X[:, cols], axis=0, return_counts=True)
    levels = inspection._levels(X, cols)
    np.testing.assert_array_equal(levels, reference[::-1])
    np.testing.assert_array_equal(inspection._levels(sp.csr_matrix(X), cols), levels)
    assert not levels[-1, :4].any()
    monkeypatch.setattr(inspection, "_MAX_LEVELS", 5)  # 15 levels: the 5 most frequent
    kept = inspection._levels(X, cols)
    top = reference[::-1][np.sort(np.argsort(-counts[::-1], kind="stable")[:5])]
    np.testing.assert_array_equal(kept, top)
