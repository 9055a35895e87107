"""NODERegressor / NODEClassifier: tree-level D-Gating, exact zeros, compaction, checks."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from sksparse_nn.estimators.node import NODEClassifier, NODERegressor
from sksparse_nn.gating import gated_tensors
from sksparse_nn.nn.node import NODE, compact_node, entmax15, entmoid15
from sksparse_nn.training import ArrayDataset, epoch_budget
from sksparse_nn.training import early_stopping as node_module

SMALL = {"num_trees": 8, "depth": 3, "max_epochs": 10, "random_state": 0}


@pytest.fixture(scope="module")
def regression_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = 3.0 + np.sin(2 * X[:, 0]) + (X[:, 1] > 0) + 0.1 * rng.normal(size=400)
    return X, y


@pytest.fixture(scope="module")
def sparse_fit(regression_problem):
    X, y = regression_problem
    return NODERegressor(
        lam=1e-2,
        D=3,
        num_trees=32,
        depth=3,
        num_layers=1,
        max_epochs=30,
        batch_size=32,
        random_state=0,
    ).fit(X, y)


# ------------------------------------------------------------------ plain torch parts
def _entmax15_exact(x, dim=-1):
    """Reference 1.5-entmax along ``dim`` by sorting (independent of the ``entmax`` package).

    ``p_i = [x_i / 2 - tau]_+^2`` with ``tau`` chosen so that ``sum_i p_i = 1``: for each
    candidate support of the ``k`` largest scores, ``tau`` solves a quadratic; the support
    is the largest ``k`` whose ``tau`` lies below its ``k``-th score. Differentiable by
    autograd (the support is locally constant).
    """
    z = x / 2
    z = z - z.amax(dim=dim, keepdim=True)
    ordered = torch.sort(z, dim=dim, descending=True).values
    shape = [1] * z.dim()
    shape[dim] = -1
    k = torch.arange(1, z.shape[dim] + 1, device=x.device, dtype=x.dtype).view(shape)
    mean = ordered.cumsum(dim) / k
    mean_sq = (ordered * ordered).cumsum(dim) / k
    tau = mean - ((1 - k * (mean_sq - mean * mean)) / k).clamp_min(0).sqrt()
    support = (tau <= ordered).sum(dim=dim, keepdim=True)
    return (z - tau.gather(dim, support - 1)).clamp_min(0).pow(2)


@pytest.mark.numerics
def test_entmoid15_is_two_class_entmax15_and_entmax_has_exact_zeros():
    x = torch.linspace(-3, 3, 61, dtype=torch.float64)
    pairs = torch.stack((x, torch.zeros_like(x)), dim=-1)
    # float64, closed forms of the same function: a few eps64 (values in [0, 1])
    np.testing.assert_allclose(entmoid15(x), entmax15(pairs, dim=-1)[:, 0], atol=1e-12)
    assert entmoid15(torch.tensor(-2.5)) == 0 and entmoid15(torch.tensor(2.5)) == 1  # clipped
    logits = torch.randn(50, 11, dtype=torch.float64)
    p = entmax15(logits, dim=-1)
    np.testing.assert_allclose(p.sum(dim=-1), 1.0, atol=1e-12)  # float64 sum of 11 terms
    assert (p == 0).any()
    # the sort-based reference solves for the threshold differently: float64, ~1e-15
    np.testing.assert_allclose(_entmax15_exact(logits, dim=-1), p, atol=1e-10)


@pytest.mark.numerics
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_entmax15_gradient_is_the_references(dim):
    torch.manual_seed(0)
    logits = (3 * torch.randn(7, 9, 5, dtype=torch.float64)).requires_grad_()
    weights = torch.randn(7, 9, 5, dtype=torch.float64)
    p = entmax15(logits, dim=dim)
    reference = _entmax15_exact(logits, dim=dim)
    assert (p == 0).any() and (p.sum(dim=dim) - 1).abs().max() < 1e-12  # sparse, sums to 1
    np.testing.assert_allclose(p.detach(), reference.detach(), atol=1e-12)
    (grad,) = torch.autograd.grad((p * weights).sum(), logits)
    (expected,) = torch.autograd.grad((reference * weights).sum(), logits)
    # float64 closed form against autograd through the same solution: a few eps64
    np.testing.assert_allclose(grad, expected, atol=1e-12)
    assert torch.equal(entmax15(torch.randn(3, 1)), torch.ones(3, 1))  # a single choice


@pytest.mark.numerics
def test_forward_matches_the_leaf_weight_definition():
    torch.manual_seed(0)
    node = NODE(4, 2, num_trees=5, depth=5, tree_dim=3).double()
    x = torch.randn(7, 4, dtype=torch.float64)
    node.data_init(x)
    layer = node.layers[0]
    leaves = layer.leaf_weights(x)
    # float64: products of 5 probabilities summed over 32 leaves, a few eps64
    np.testing.assert_allclose(leaves.sum(dim=-1).detach(), 1.0, atol=1e-12)
    expected = torch.einsum("ntl,tcl->ntc", leaves, layer.response)
    np.testing.assert_allclose(layer(x).detach(), expected.detach(), atol=1e-12)
    splits = (layer.split_values(x) - layer.thresholds) * torch.exp(-layer.log_temperatures)
    # data-aware init: logits start in [-1, 1] (float64 rounding of the quantile scaling)
    assert splits.abs().max() <= 1 + 1e-9


def _reference_tree_outputs(layer, x):
    """The layer's outputs written out leaf by leaf with plain autograd (no custom
    functions, no factorization): the reference for values and gradients."""
    weights = entmax15(layer.choice_logits, dim=-1)  # (T, depth, F)
    values = torch.einsum("nf,tkf->ntk", x, weights)
    z = ((values - layer.thresholds) * torch.exp(-layer.log_temperatures)).clamp(-2, 2)
    right = (z + torch.sqrt(8 - z * z)) ** 2 / 16
    leaves = []
    for leaf in range(2**layer.depth):
        weight = torch.ones_like(right[..., 0])
        for k in range(layer.depth):
            bit = (leaf >> (layer.depth - 1 - k)) & 1
            weight = weight * (right[..., k] if bit else 1 - right[..., k])
        leaves.append(weight)
    return torch.einsum("ntl,tcl->ntc", torch.stack(leaves, dim=-1), layer.response)


@pytest.mark.numerics
@pytest.mark.parametrize("depth", [1, 4, 5])
def test_forward_and_gradients_match_the_leaf_by_leaf_definition(depth):
    torch.manual_seed(0)
    node = NODE(4, 2, num_trees=6, depth=depth, tree_dim=3).double()
    x = torch.randn(9, 4, dtype=torch.float64)
    node.data_init(x)
    layer = node.layers[0]
    with torch.no_grad():  # spread the logits past +-2: saturated answers too
        layer.log_temperatures -= 1.0
    weights = torch.randn(9, 6, 3, dtype=torch.float64)
    params = [layer.choice_logits, layer.thresholds, layer.log_temperatures, layer.response]
    got = layer(x)
    expected = _reference_tree_outputs(layer, x)
    # float64, the same function evaluated in a different order: a few eps64
    np.testing.assert_allclose(got.detach(), expected.detach(), atol=1e-12)
    grads = torch.autograd.grad((got * weights).sum(), params)
    reference = torch.autograd.grad((expected * weights).sum(), params)
    for g, r in zip(grads, reference, strict=True):
        np.testing.assert_allclose(g, r, atol=1e-10)  # sums of ~100 float64 products


@pytest.mark.parametrize("dense", [True, False])
def test_forward_takes_any_row_count_and_layout(dense):
    torch.manual_seed(0)
    node = NODE(5, 2, num_trees=[4, 3], depth=3, dense=dense)
    x = torch.randn(6, 5)
    assert node(torch.zeros(0, 5)).shape == (0, 2)
    # a column-major view of the same rows gives the same outputs. The layers read the
    # input transposed, so the two layouts reach the first product (dot products of 5
    # terms, |x| <~ 3) as differently transposed BLAS operands, which another BLAS may
    # serve with another kernel: rounding of <= 2 * 5 eps32 * 3 ~ 4e-6 in the tested
    # values, damped by the soft splits (slope <= 0.36) and the tree averages (outputs
    # <~ 0.2 here); a wrong layout would change them by their own size
    np.testing.assert_allclose(
        node(x.T.contiguous().T).detach(), node(x).detach(), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize("function", [entmoid15, entmax15])
def test_entmoid15_and_entmax15_have_first_derivatives_only(function):
    x = torch.tensor([0.5, 0.1, -0.3], dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    (g,) = torch.autograd.grad((function(x) * weights).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):  # no second derivative through them
        g.sum().backward()


def _count_torch_calls(module, x):
    calls = []

    class Count(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Count():
        module(x)
    return len(calls)


def test_forward_is_vectorized_over_trees():
    """The number of torch operations in a forward pass does not grow with the trees."""
    x = torch.randn(16, 5)
    counts = [
        _count_torch_calls(NODE(5, 1, num_trees=t, depth=6).data_init(x), x) for t in (4, 512)
    ]
    assert counts[0] == counts[1]


@pytest.mark.numerics
@pytest.mark.parametrize("dense", [True, False])
def test_compact_node_drops_zero_trees_without_changing_outputs(dense):
    torch.manual_seed(0)
    node = NODE(6, 2, num_trees=[7, 5], depth=3, tree_dim=3, dense=dense)
    x = torch.randn(64, 6)
    node.data_init(x)
    with torch.no_grad():
        node.layers[0].response[[1, 4]] = 0
        node.layers[1].response[[0, 2, 3]] = 0
        expected = node(x)
    small = compact_node(node)
    assert small.num_trees == (5, 2)
    # float32: the same trees summed without the zero ones, another order: ~eps32 * |out|
    # (|out| <~ 1 here)
    np.testing.assert_allclose(small(x).detach(), expected, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- estimators
@pytest.mark.numerics
def test_gating_changes_nothing_at_initialization(regression_problem):
    X, y = regression_problem
    est = NODERegressor(lam=0.0, num_trees=16, depth=4, random_state=0)
    targets, n_outputs = est._fit_targets(y)
    torch.manual_seed(0)
    plain = est._build_module(X.shape[1], n_outputs)
    est._init_module(plain, ArrayDataset(X, None, dtype=torch.float32), targets)
    gated = copy.deepcopy(plain)
    est._gate_module(gated, "identity")
    assert len(list(gated_tensors(gated))) == len(plain.layers)  # one per layer
    x = torch.as_tensor(X, dtype=torch.float32)
    with torch.no_grad():
        # identity gates multiply by exactly 1.0: bitwise the same weights and outputs
        np.testing.assert_array_equal(gated(x), plain(x))


def test_large_lam_switches_every_tree_off_exactly(regression_problem):
    X, y = regression_problem
    est = NODERegressor(
        lam=1.0, D=3, num_trees=16, depth=3, max_epochs=20, batch_size=32, random_state=0
    )
    est.fit(X, y)
    assert est.n_active_trees_ == 0 and est.active_trees_.size == 0
    assert est.sparsity_gap_[0] < 1e-12  # dead before thresholding, far below zero_tol=1.2e-7
    assert all(torch.all(layer.response == 0) for layer in est.module_.layers)
    assert est.selected_features_.size == 0
    assert np.all(est.feature_importances_ == 0)
    pred = est.predict(X)
    assert np.ptp(pred) == 0  # a constant: only the bias is left (exact zeros elsewhere) ...
    # ... near the mean: an optimization tolerance (the bias is trained by 20 epochs of
    # Adam), not a rounding one
    np.testing.assert_allclose(pred, y.mean(), atol=1e-2 * y.std())
    assert est.compact().num_trees == (0, 0)  # both (default) layers empty


def test_a_lam_too_large_for_the_data_gives_the_empty_model():
    # the penalty shrinks every tree alike while the validation loss rises: early
    # stopping on the validation loss restored the first, untrained epoch (every tree
    # kept, R^2 near 0); on the validation objective training goes on until every tree
    # is dead, the model a lam above lam_max should give (as Lasso's all-zero one)
    from sklearn.datasets import make_regression

    X, y = make_regression(200, 5, n_informative=3, noise=1.0, random_state=0)
    est = NODERegressor(lam=0.3, early_stopping=True, random_state=0).fit(X, y)
    assert est.n_active_trees_ == 0 and not est.tree_norms_.any()
    assert est.selected_features_.size == 0
    np.testing.assert_allclose(est.predict(X), est.predict(X[:1]).item(), rtol=1e-6)


def test_a_warm_start_that_keeps_its_first_epoch_does_not_warn(monkeypatch):
    # a warm start's first epoch is the previous fit's trained model one epoch on (a path
    # point whose larger lam the validation loss did not want), not a barely trained one
    from sklearn.datasets import make_regression

    from sksparse_nn.estimators import _base

    X, y = make_regression(200, 5, n_informative=3, noise=1.0, random_state=0)
    calls = []
    monkeypatch.setattr(_base, "warn_first_epoch_restored", lambda *args: calls.append(args))
    est = NODERegressor(lam=1e-3, num_trees=8, depth=3, max_epochs=3, early_stopping=True)
    est.fit(X, y)
    assert len(calls) == 1  # a cold fit is checked
    est.set_params(warm_start=True, lam=1e-2).fit(X, y)
    assert len(calls) == 1  # a warm start is not


def test_active_trees_are_the_nonzero_ones(sparse_fit, regression_problem):
    X, y = regression_problem
    est = sparse_fit
    assert 0 < est.n_active_trees_ < 32  # (the gap, every estimator: tests/test_contract.py)
    norms = est.module_.layers[0].response.detach().flatten(start_dim=1).norm(dim=1).numpy()
    np.testing.assert_array_equal(np.flatnonzero(norms), est.active_trees_)
    assert est.score(X, y) > 0.8


@pytest.mark.numerics
def test_feature_choices_have_exact_zeros_and_define_the_selection(sparse_fit):
    est = sparse_fit
    layer = est.module_.layers[0]
    weights = layer.choice_weights().detach().numpy()
    assert (weights == 0).any()  # entmax: exact zeros
    # float32 entmax over 6 features: its threshold tau is solved to ~eps32 * |logits|
    # (<~ 10), which moves the sum of the 6 weights by up to 2 sqrt(6) |d tau| ~ 6e-6
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-5)
    used = (weights[est.active_trees_] > 0).any(axis=(0, 1))
    np.testing.assert_array_equal(np.flatnonzero(used), est.selected_features_)
    assert np.all(est.feature_importances_[~used] == 0)
    assert np.all(est.feature_importances_[used] > 0)
    np.testing.assert_allclose(est.feature_importances_.sum(), 1.0, rtol=1e-12)  # float64


def test_classifier_probabilities_and_string_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    codes = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    labels = np.array(["low", "mid", "high"])[codes]
    frame = pd.DataFrame(X, columns=list("abcd"))
    clf = NODEClassifier(lam=1e-3, **{**SMALL, "max_epochs": 20}).fit(frame, labels)
    np.testing.assert_array_equal(clf.classes_, ["high", "low", "mid"])
    assert list(clf.feature_names_in_) == list("abcd")
    proba = clf.predict_proba(frame)
    assert proba.shape == (300, 3)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)  # float64 softmax
    assert set(clf.predict(frame)) <= set(labels)
    assert clf.score(frame, labels) > 0.7
    binary = NODEClassifier(**SMALL).fit(X, np.where(codes > 0, "yes", "no"))
    assert binary.decision_function(X).shape == (300,)
    np.testing.assert_allclose(binary.predict_proba(X).sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.numerics
def test_regressor_is_invariant_to_the_units_of_y(regression_problem):
    X, y = regression_problem
    a = NODERegressor(lam=3e-3, **SMALL).fit(X, y)
    b = NODERegressor(lam=3e-3, **SMALL).fit(X, 1000.0 * y)
    # the loss is measured in units of std(y), so the two float32 trainings differ only by
    # rounding (1000 y and y round differently, eps32 = 1.2e-7 relative); Adam's steps are
    # scale-free, so this stays at ~eps32 * (growth over 130 steps): 1e-5 relative
    np.testing.assert_allclose(b.predict(X), 1000.0 * a.predict(X), rtol=1e-5)
    np.testing.assert_array_equal(a.active_trees_, b.active_trees_)


@pytest.mark.numerics
def test_multi_layer_dense_node_compacts_exactly(regression_problem):
    X, y = regression_problem
    est = NODERegressor(
        lam=3e-3, num_trees=6, depth=2, tree_dim=2, num_layers=2, max_epochs=15, random_state=0
    ).fit(X, y)
    assert est.tree_norms_.shape == (12,)
    small = est.compact()
    assert sum(small.num_trees) == est.n_active_trees_
    x = torch.as_tensor(X[:, est.selected_features_], dtype=torch.float32)
    with torch.no_grad():
        # float32, fewer trees summed in another order: a few eps32 of |out| (~4 here)
        np.testing.assert_allclose(small(x).numpy()[:, 0], est.predict(X), atol=1e-5, rtol=1e-6)


def test_bad_parameters_raise():
    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20.0)
    with pytest.raises(ValueError, match="tree_dim"):
        NODERegressor(tree_dim=1, **SMALL).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="lbfgs"):
        NODERegressor(optimizer="lbfgs", **SMALL).fit(X, y)


# ------------------------------------------------------------ defaults: init, stopping
def test_data_init_puts_thresholds_inside_the_data_range():
    torch.manual_seed(0)
    x = torch.randn(200, 5) * torch.tensor([1.0, 10.0, 100.0, 0.1, 1.0]) + 50.0
    node = NODE(5, 1, num_trees=[8, 6], depth=4).data_init(x)
    inputs = x
    for layer in node.layers:  # the second layer on the first's outputs (dense inputs)
        with torch.no_grad():
            values = layer.split_values(inputs)  # (n, T, depth)
            assert torch.all(values.amin(0) <= layer.thresholds)
            assert torch.all(layer.thresholds <= values.amax(0))
            # temperature: the largest |v - threshold| (temperature_quantile=1)
            spread = (values - layer.thresholds).abs().amax(0)
            np.testing.assert_allclose(layer.log_temperatures.exp(), spread, rtol=1e-5)
            inputs = torch.cat((inputs, layer(inputs).flatten(start_dim=1)), dim=1)
    one_row = NODE(5, 1, num_trees=4, depth=3).data_init(x[:1])
    # no spread in one row: unit temperatures (not 1e-6, a step that diverged on 1 sample)
    assert torch.all(one_row.layers[0].log_temperatures == 0)


def test_early_stopping_is_on_with_the_automatic_budget_only(regression_problem):
    X, y = regression_problem
    params = {"num_trees": 8, "depth": 3, "batch_size": 64, "random_state": 0}
    given = NODERegressor(max_epochs=5, **params).fit(X, y)
    assert given.n_iter_ == 5 and "valid_loss" not in given.history_[-1]
    auto = NODERegressor(lam=0.0, **params).fit(X, y)
    assert "valid_loss" in auto.history_[-1]
    assert auto.n_iter_ < epoch_budget(auto, len(y), 64)  # stopped by the validation loss


def _fit_recording_thresholds(monkeypatch, est, X, y):
    """Fit ``est`` and return the first layer's thresholds after every epoch (float64)."""
    from skorch.callbacks import Callback

    seen = []

    class Record(Callback):
        def on_epoch_end(self, net, **kwargs):
            seen.append(net.module_.layers[0].thresholds.detach().double().numpy().copy())

    # after early stopping: sees its epoch
    monkeypatch.setattr(NODERegressor, "_training_callbacks", lambda self, m: [("r", Record())])
    est.fit(X, y)
    return np.array(seen)


@pytest.mark.parametrize("lam", [0.0, 1e-2])
def test_early_stopping_restores_the_average_of_the_best_epochs(
    monkeypatch, regression_problem, lam
):
    X, y = regression_problem
    est = NODERegressor(lam=lam, num_trees=16, depth=3, batch_size=64, random_state=0)
    thresholds = _fit_recording_thresholds(monkeypatch, est, X, y)  # max_epochs=None: on
    losses = est.history_[:, "valid_loss"]
    patience, window = est.n_iter_no_change, node_module._AVERAGE_EPOCHS
    assert patience < est.n_iter_ < epoch_budget(est, len(y), 64)
    restored = est.module_.layers[0].thresholds.detach().double().numpy()
    # the restored weights are the mean of the epochs ending at a best one (the best of
    # all for lam=0; with lam > 0 the best of the last support, whose window may be
    # shorter): float32 averages of float32 weights, a few eps32 relative
    # lam=0 judges each epoch by the mean validation loss of the window ending there
    losses = np.asarray(losses)
    smoothed = [losses[max(0, e - window + 1) : e + 1].mean() for e in range(len(losses))]
    ends = [int(np.argmin(smoothed))] if lam == 0 else range(len(losses))
    objective = np.asarray(est.history_[:, "valid_objective"]) if lam > 0 else None
    matches = [
        (end, k)
        for end in ends
        for k in range(1, window + 1)
        if k <= end + 1
        and np.allclose(
            restored, thresholds[end - k + 1 : end + 1].mean(axis=0), rtol=1e-5, atol=1e-6
        )
    ]
    assert matches, "the restored thresholds are no average of consecutive epochs"
    end, k = matches[0]
    if lam == 0:
        assert smoothed[end] == min(smoothed[end:])  # no later window was better
    else:  # the restored window's mean objective is within the slack of the best window's
        windows = [objective[max(0, e - window + 1) : e + 1].mean() for e in range(len(objective))]
        restored_mean = objective[end - k + 1 : end + 1].mean()
        assert restored_mean <= node_module._within_slack(min(windows))
    if lam == 0:
        assert k == window  # a full window: the best epoch is not among the first ones
        assert est.n_iter_ - 1 - end == patience  # stopped patience epochs after it
    if lam > 0:  # a sparse model with a clean gap, not one with trees half-way to zero
        dead, live = est.sparsity_gap_
        assert 0 < est.n_active_trees_ < 32
        assert dead < 1e-2 * est.zero_tol
        assert live > 1e-3 * est.tree_norms_.max() and live > 1e3 * est.zero_tol


@pytest.mark.parametrize("smooth, restored, stopped", [(True, 5.0, 10), (False, 1.0, 6)])
def test_dense_early_stopping_judges_the_window_it_would_restore(
    monkeypatch, smooth, restored, stopped
):
    """One lucky epoch (2) against a steady better window (4-6): judged by the mean of
    the window it averages, the stopper restores the steady one."""
    losses = [1.2, 1.2, 0.6, 1.2, 0.8, 0.8, 0.8] + [1.0] * 10
    stopper = node_module.AveragingEarlyStopping(4, window=3, smooth=smooth).initialize()
    stop, _ = _drive_stopper(monkeypatch, stopper, lambda k: [1.0], losses.__getitem__, 17)
    assert stop == stopped
    assert stopper.best_state_["weight"].item() == pytest.approx(restored)  # epochs' mean


def test_a_clean_window_is_judged_by_its_own_epochs_only(monkeypatch):
    """An epoch with a tree in transit is neither averaged nor judged: its (lucky)
    validation loss does not count towards the clean epochs' window around it."""
    zero_tol = 1e-7

    def norms_at(k):  # tree 1 dead, except in transit at epoch 10
        return [1.0, 1e-5 if k == 10 else 0.0]

    def loss_at(k):
        return 0.1 if k == 10 else 1.0

    stopper = node_module.CleanEarlyStopping(20, zero_tol).initialize()
    _drive_stopper(monkeypatch, stopper, norms_at, loss_at, 20)
    assert _restored_epoch(stopper) == 0  # every clean window judged 1.0: the first


def test_early_stopping_does_not_restore_an_untrained_model_at_small_lam():
    """At a small lam unused trees shrink so slowly that the only epochs with a clean
    sparsity gap are the first, nearly untrained ones. The restored model must then be
    the best epoch overall (not the best clean one), and training must stop once the
    validation loss stalls instead of running the whole automatic budget."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=500, noise=1.0, random_state=0)
    est = NODERegressor(lam=3e-4, random_state=0).fit(X, y)
    valid = np.asarray(est.history_[:, "valid_loss"], dtype=float)
    assert est.n_iter_ < epoch_budget(est, len(X), est.batch_size)
    # the restored model fits like the best validation epochs, not like epoch 1-3
    # (friedman1's noise sd 1 against a target sd ~5: R^2 of a good fit is ~0.95)
    assert est.score(X, y) > 0.85
    assert valid.min() < 0.5 * valid[:3].min()


def _drive_stopper(
    monkeypatch, stopper, norms_at, loss_at, epochs, max_epochs=None, lam=0.0, penalty_at=None
):
    """Run ``stopper`` (a CleanEarlyStopping) over ``epochs`` epochs of a stand-in net
    whose tree norms at epoch ``k`` are ``norms_at(k)``, validation loss ``loss_at(k)``
    and penalty ``penalty_at(k)`` (0 if None; the net's ``lam`` is ``lam``); the module's
    one weight holds the epoch number, so that a restored state tells its epoch. Returns
    the epoch at which it stopped training (or None) and the net."""
    from skorch.history import History

    from sksparse_nn.training import StopTraining

    net = type("Net", (), {"max_epochs": max_epochs, "lam": lam})()
    net.module_, net.history = torch.nn.Linear(1, 1, bias=False), History()
    epoch = {"k": 0}
    monkeypatch.setattr(
        node_module,
        "group_norms",
        lambda module: {"trees": torch.as_tensor(norms_at(epoch["k"]), dtype=torch.float64)},
    )
    monkeypatch.setattr(
        node_module,
        "induced_penalty",
        lambda module: torch.tensor(0.0 if penalty_at is None else penalty_at(epoch["k"])),
    )
    for k in range(epochs):
        epoch["k"] = k
        with torch.no_grad():
            net.module_.weight.fill_(k)
        net.history.new_epoch()
        net.history.record("valid_loss", loss_at(k))
        try:
            stopper.on_epoch_end(net)
        except StopTraining:
            return k, net
    return None, net


def _restored_epoch(stopper):
    return int(stopper.best_state_["weight"].item())


def _stalls_after_epoch_0(k):
    """Validation loss: epoch 0 the best, every later one a little worse (within the
    slack of the clean-epoch rule)."""
    return 0.51 if k else 0.5


def test_early_stopping_waits_while_trees_are_still_dying(monkeypatch):
    """The stall rule (no epoch improved the validation loss for a while) must not end a
    sparse fit while unused trees are still shrinking: the loss stops improving while
    they die, and stopping then restored trees half-way to zero (seen on red wine at the
    default lam: 126 trees kept, smallest 2e-7, largest removed 1e-7). Once the dying
    tree is dust, the stall ends training."""
    patience, zero_tol = 5, 1e-7
    stopper = node_module.CleanEarlyStopping(patience, zero_tol).initialize()
    # tree 0 stays at 1; tree 1 starts in transit (below TINY of the largest, above
    # dust: no epoch is clean) and loses 20% an epoch
    start = 0.5 * node_module.TINY
    stopped_at, _ = _drive_stopper(
        monkeypatch, stopper, lambda k: [1.0, start * 0.8**k], _stalls_after_epoch_0, 400
    )
    assert stopped_at is not None, "a stalled fit with nothing left dying must stop"
    dust = node_module._DUST * zero_tol
    # not while tree 1 was visibly shrinking (old rule: after 3 * patience = 15 epochs)
    assert start * 0.8**stopped_at < dust
    # and not long after it became dust: within the shrinking rule's two windows
    dead_since = int(np.ceil(np.log(dust / start) / np.log(0.8)))
    assert stopped_at <= dead_since + 2 * patience


@pytest.mark.parametrize(
    "max_epochs, pace, waits", [(100, 0.97, False), (10_000, 0.97, True), (10_000, 1.0, False)]
)
def test_early_stopping_does_not_wait_for_a_gap_that_cannot_be_clean_in_time(
    monkeypatch, max_epochs, pace, waits
):
    """The stall rule waits for trees in transit only if, at their pace, all of them get
    below dust before the cap: at a small lam unused trees lose a few % an epoch (or
    nothing) and need far more epochs than the budget has, and waiting for them made
    the dense end of a default NODE path on 800 rows train ~490 epochs per point while
    its validation loss rose from 0.42 to 0.70, for a model still in transit."""
    patience, zero_tol = 5, 1e-7
    stopper = node_module.CleanEarlyStopping(patience, zero_tol).initialize()
    start = 0.5 * node_module.TINY  # at 3% an epoch: dust after ~450 epochs
    stopped_at, _ = _drive_stopper(
        monkeypatch,
        stopper,
        lambda k: [1.0, start * pace**k],
        _stalls_after_epoch_0,
        max_epochs,
        max_epochs,
    )
    assert stopped_at is not None
    if waits:
        dust_at = int(np.ceil(np.log(node_module._DUST * zero_tol / start) / np.log(pace)))
        assert dust_at <= stopped_at <= dust_at + 2 * patience
    else:  # stops at the stall
        assert stopped_at <= node_module._STALL_FACTOR * patience + 1


@pytest.mark.parametrize("arriving", [True, False])
def test_early_stopping_waits_while_many_trees_arrive_at_zero(monkeypatch, arriving):
    """Many trees in transit at once, each norm too noisy to extrapolate: the stall rule
    waits while trees keep arriving below dust (seen: lam 0.01 on 800 rows of white
    wine, 119 trees in transit at the stall, one tree left clean 20 epochs later) and
    not when none does (the dense end of a path: the same trees in transit for
    hundreds of epochs)."""
    patience, zero_tol, n = 5, 1e-7, 40
    stopper = node_module.CleanEarlyStopping(patience, zero_tol).initialize()
    rng = np.random.default_rng(0)
    dust = node_module._DUST * zero_tol

    def norms_at(k):
        # tree 0 live; trees 1..n in transit, noisy; with `arriving`, one more below
        # dust every epoch from epoch 5
        noisy = 1e-5 * np.exp(rng.normal(0, 1.0, n))
        if arriving:
            noisy[: max(0, k - 5)] = 0.1 * dust
        return np.r_[1.0, noisy]

    stopped_at, _ = _drive_stopper(
        monkeypatch, stopper, norms_at, _stalls_after_epoch_0, 1000, 10_000
    )
    assert stopped_at is not None
    if arriving:  # waits until the last one is dust and the gap clean, then stalls
        assert stopped_at >= 5 + n
    else:
        assert stopped_at <= node_module._STALL_FACTOR * patience + 1


def test_a_stalled_fit_keeps_its_first_clean_epoch(monkeypatch):
    """The epoch at which the last tree in transit reaches dust is clean and counts: a
    stalled fit then gives that support its patience and restores its best epoch (seen:
    lam 0.01 on white wine stopped at its first clean epoch, one tree, and restored an
    epoch with 119 trees in transit because the stop came before the epoch was counted
    as clean; and a support stopped at its first epoch validated worse than the dense
    epochs before it for want of training: red wine's default fits kept 126 / 46 trees
    in transit instead of 6 / 9 clean)."""
    patience, zero_tol = 5, 1e-7
    stopper = node_module.CleanEarlyStopping(patience, zero_tol, window=1).initialize()
    start = 0.5 * node_module.TINY
    stopped_at, net = _drive_stopper(
        monkeypatch, stopper, lambda k: [1.0, start * 0.5**k], _stalls_after_epoch_0, 1000, 1000
    )
    stopper.on_train_end(net)
    first_clean = int(np.ceil(np.log(node_module._DUST * zero_tol / start) / np.log(0.5)))
    assert first_clean > node_module._STALL_FACTOR * patience  # clean after the stall
    assert stopped_at == first_clean + patience  # the new support's patience
    assert _restored_epoch(stopper) == first_clean


@pytest.mark.parametrize("clean_loss, restored", [(0.47, 8), (0.8, 4)])
def test_the_validation_loss_decides_between_a_clean_sparser_model_and_an_earlier_epoch(
    monkeypatch, clean_loss, restored
):
    """The validation loss is often best early, before the penalty has removed trees.
    The best clean epoch with the final (fewer) live trees is restored when it validates
    within the slack of the best epoch overall; when it validates clearly worse, the best
    epoch is (the sparser model is a worse one: seen on standardized wine data with
    noise columns, 24 trees at test RMSE 0.98 sd against 0.86 for the best epoch)."""
    patience, zero_tol = 3, 1e-7
    stopper = node_module.CleanEarlyStopping(patience, zero_tol, window=1).initialize()
    dead = 1e-3 * zero_tol  # below dust

    def norms_at(k):
        # epochs 0-4: both trees live, the best validation losses (to 0.46); 5-7: tree 1
        # in transit; from 8: tree 1 dead (clean) at a validation loss clean_loss
        return [1.0, 1.0 if k < 5 else 1e-5 if k < 8 else dead]

    _, net = _drive_stopper(
        monkeypatch,
        stopper,
        norms_at,
        lambda k: 0.5 - 0.01 * k if k < 5 else clean_loss + 1e-3 * k,
        200,
    )
    stopper.on_train_end(net)
    assert _restored_epoch(stopper) == restored


@pytest.mark.parametrize("lam, restored", [(0.0, 0), (0.1, 20)])
def test_a_sparse_fit_stops_on_its_validation_objective(monkeypatch, lam, restored):
    """With ``lam > 0`` early stopping watches the validation objective (the validation
    loss plus ``lam`` times the penalty), not the loss alone: a warm-started path point
    whose validation loss is best at its first epoch (the previous point's model, still
    overfitting) restored that epoch at every lam, so the path kept the same 83-116
    trees from 0.1 to 385 times lam_max on 800 rows of white wine. Here the loss creeps
    up by 1e-3 an epoch while the penalty falls by 2e-2: with lam 0.1 the objective
    improves until epoch 20, where the penalty stops falling."""
    patience, zero_tol = 5, 1e-7
    stopper = node_module.CleanEarlyStopping(patience, zero_tol, window=1).initialize()
    _, net = _drive_stopper(
        monkeypatch,
        stopper,
        lambda k: [1.0, 0.5],  # both trees live: every epoch clean
        lambda k: 0.5 + 1e-3 * k,
        200,
        lam=lam,
        penalty_at=lambda k: 1.0 - 2e-2 * min(k, 20),
    )
    stopper.on_train_end(net)
    assert _restored_epoch(stopper) == restored
    objective = net.history[:, "valid_objective"]
    np.testing.assert_allclose(
        objective, [0.5 + 1e-3 * k + lam * (1.0 - 2e-2 * min(k, 20)) for k in range(len(objective))]
    )


def test_a_stalled_fit_does_not_wait_for_a_clean_epoch_it_would_not_restore(monkeypatch):
    """Trees still arriving at zero keep a stalled fit going only while a clean epoch
    could be restored: once the last ``patience`` epochs all validate beyond the slack
    of the best one, the best epoch is restored whatever comes, so training stops (the
    wait cost a default NODE path on 800 rows of white wine half its epochs)."""
    patience, zero_tol, n = 5, 1e-7, 40
    stopper = node_module.CleanEarlyStopping(patience, zero_tol).initialize()
    dust = node_module._DUST * zero_tol

    def norms_at(k):  # tree 0 live, one more of the others below dust every epoch
        noisy = np.full(n, 1e-5)
        noisy[: max(0, k - 5)] = 0.1 * dust
        return np.r_[1.0, noisy]

    def overfitting(k):  # best at epoch 0, then 2% worse every epoch
        return 0.5 * (1.0 + 0.02 * k)

    stopped_at, _ = _drive_stopper(monkeypatch, stopper, norms_at, overfitting, 1000, 10_000)
    # trees keep arriving until epoch 5 + n, but once every epoch of the stall window
    # (the last 3 * patience) is judged beyond the slack of the best (epoch 0), training
    # stops; an epoch is judged by the mean over the window of epochs it would average
    average = node_module._AVERAGE_EPOCHS
    judged = [
        np.mean([overfitting(i) for i in range(max(0, k - average + 1), k + 1)])
        for k in range(5 + n)
    ]
    stall = node_module._STALL_FACTOR * patience
    limit = node_module._within_slack(judged[0])
    expected = next(k for k in range(stall, 5 + n) if min(judged[k - stall + 1 : k + 1]) > limit)
    assert stopped_at == expected < 5 + n


def test_a_restored_model_whose_trees_all_shrank_together_warns():
    """Every kept tree far below the largest tree of training (all shrinking alike at a
    lam too large, stopped before they died) is a nearly constant model: said, with
    what to change, not passed silently as "3 trees kept"."""
    import warnings

    from skorch.history import History

    from sksparse_nn.exceptions import ConvergenceWarning

    est = NODERegressor(lam=0.5)
    est.tree_norms_ = np.array([3e-6, 2e-6, 1e-6, 0.0])
    est.n_active_trees_, est.sparsity_gap_ = 3, (1e-12, 1e-6)
    est.history_ = History()
    for largest in (4.0, 0.5, 3e-6):
        est.history_.new_epoch()
        est.history_.record("largest_tree", largest)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est._warn_trees_in_transit()
    (said,) = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert "shrank towards zero together" in str(said.message)
    assert "lam=0.5" in str(said.message) and "Lower lam" in str(said.message)


@pytest.mark.parametrize("smallest, warns", [(1e-5, True), (0.1, False)])
def test_a_restored_model_with_trees_in_transit_warns(smallest, warns):
    """Early stopping may have to restore an epoch whose smallest kept tree is still on
    its way to zero (below TINY of the largest): that is said, not silent."""
    import warnings

    from sksparse_nn.exceptions import ConvergenceWarning

    est = NODERegressor()  # lam > 0, early stopping on (max_epochs=None)
    est.tree_norms_ = np.array([1.0, 0.5, smallest, 0.0])
    est.n_active_trees_, est.sparsity_gap_ = 3, (1e-12, smallest)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est._warn_trees_in_transit()
    said = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert bool(said) == warns
    if warns:
        assert "3 trees are kept" in str(said[0].message) and "raise lam" in str(said[0].message)


@pytest.mark.parametrize("Estimator", [NODERegressor, NODEClassifier])
def test_node_regressor_paths_start_from_the_dense_ensemble(
    regression_problem, monkeypatch, Estimator
):
    # NODERegressor.path_start() is 0: a path first fits the dense model (lam=0, not a
    # point) and warm-starts its first point from it, on all the data and on every
    # fold; the classifier's first point is a cold fit (the base protocol's None)
    from sksparse_nn import regularization_path

    X, y = regression_problem
    y = y if Estimator is NODERegressor else (y > np.median(y)).astype(int)
    seen = []
    fit = Estimator.fit

    def spy(self, X, y):
        seen.append((self.lam, self.warm_start))
        return fit(self, X, y)

    monkeypatch.setattr(Estimator, "fit", spy)
    params = {**SMALL, "num_trees": 4, "max_epochs": 2}
    path = regularization_path(Estimator(**params), X[:100], y[:100], lams=[1e-3, 1e-2], cv=2)
    start = [(0.0, False), (1e-3, True)] if Estimator is NODERegressor else [(1e-3, False)]
    assert seen == 3 * [*start, (1e-2, True)]
    np.testing.assert_array_equal(path.lams, [1e-3, 1e-2])
