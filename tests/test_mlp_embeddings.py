"""The MLP's piecewise-linear embeddings and efficient ensemble: exact selection by
feature, the members' mean, and a compact module that predicts what the model does."""

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone

from sksparse_nn import DGatedMLPClassifier, DGatedMLPRegressor
from sksparse_nn.nn import MLP, PiecewiseLinearEncoding, quantile_edges

EPS32 = float(np.finfo(np.float32).eps)
FAST = {"D": 3, "hidden_layer_sizes": (16,), "max_epochs": 40, "batch_size": 32, "random_state": 0}
VARIANTS = {
    "embedding": {"embedding": "piecewise-linear", "n_bins": 8},
    "ensemble": {"n_members": 4},
    "both": {"embedding": "piecewise-linear", "n_bins": 8, "n_members": 4},
}


@pytest.fixture(scope="module")
def problem():
    """Features 0-2 carry a non-linear signal, 3-7 are noise; a binary column (3)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 8))
    X[:, 3] = rng.integers(0, 2, size=400)
    y = np.sin(2 * X[:, 0]) + 2 * np.abs(X[:, 1]) + X[:, 2] + 0.1 * rng.normal(size=400)
    X.setflags(write=False)
    return X, y


# ------------------------------------------------------------------ the encoding
def test_encoding_is_continuous_and_spans_the_identity():
    x = np.linspace(-3, 3, 601)[:, None]
    edges = quantile_edges(np.random.default_rng(0).normal(size=(200, 1)), 6)
    encoding = PiecewiseLinearEncoding(edges)
    z = encoding(torch.as_tensor(x)).numpy()
    assert z.shape == (601, len(edges[0]) - 1)
    # a linear layer with the bins' widths as weights gives x back: x itself is a
    # piecewise-linear function of these knots (exact up to float64 rounding)
    np.testing.assert_allclose(z @ np.diff(edges[0]) + edges[0][0], x[:, 0], atol=1e-12)
    inner = (z >= 0) & (z <= 1)
    assert inner[:, 1:-1].all()  # the middle bins are clipped to [0, 1]


def test_edges_fewer_for_few_distinct_values():
    X = np.column_stack([np.arange(50.0), np.arange(50) % 2, np.full(50, 3.0)])
    edges = quantile_edges(X, 8)
    assert [len(e) - 1 for e in edges] == [8, 1, 1]  # a binary, a constant column: one bin
    assert all(np.all(np.diff(e) > 0) for e in edges)


def test_rescaled_encoding_encodes_the_new_units_alike():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 3))
    encoding = PiecewiseLinearEncoding(quantile_edges(X, 5)).standardize_(torch.as_tensor(X))
    shift, scale = np.array([1.0, -2.0, 0.5]), np.array([2.0, 0.5, 3.0])
    before = encoding(torch.as_tensor(X)).numpy()
    encoding.rescale_(shift, scale)  # now it maps x to what it mapped (x - shift) / scale to
    after = encoding(torch.as_tensor(X * scale + shift)).numpy()
    np.testing.assert_allclose(after, before, atol=1e-12)
    # standardized: centred columns, and the variances of a feature's columns sum to 1
    variances = np.bincount(encoding.feature.numpy(), before.var(axis=0))
    np.testing.assert_allclose(before.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(variances, 1.0, rtol=1e-12)


def test_ensemble_returns_members_in_training_and_their_mean_in_evaluation():
    torch.manual_seed(0)
    module = MLP(5, (8,), 2, n_members=3).double()
    x = torch.randn(7, 5, dtype=torch.float64)
    members = module.train()(x)
    assert members.shape == (7, 3, 2)
    torch.testing.assert_close(module.eval()(x), members.mean(dim=1))


# ------------------------------------------------------------------ the estimator
@pytest.mark.parametrize("variant", VARIANTS)
def test_noise_features_end_exactly_zero_with_a_gap(problem, variant):
    X, y = problem
    est = DGatedMLPRegressor(lam=0.05, **FAST, **VARIANTS[variant]).fit(X, y)
    np.testing.assert_array_equal(est.selected_features_, [0, 1, 2])
    zero, live = est.sparsity_gap_  # before the threshold zero_tol (float32 eps):
    # dropped groups reached zero in training, the live ones are far above it
    assert zero < 1e-2 * est.zero_tol and live > 1e3 * est.zero_tol
    # a feature's importance is the norm of all its first-layer columns (its group)
    first = est.module_.linears[0].weight.detach().double().numpy()
    encoding = est.module_.encoding
    feature = np.arange(8) if encoding is None else encoding.feature.numpy()
    per_feature = np.sqrt(np.bincount(feature, np.linalg.norm(first, axis=0) ** 2))
    assert np.all(per_feature[3:] == 0.0)
    assert np.all(est.feature_importances_[3:] == 0.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_compact_module_predicts_like_the_model(problem, variant):
    X, y = problem
    est = DGatedMLPClassifier(lam=0.05, **FAST, **VARIANTS[variant]).fit(X, y > np.median(y))
    small = est.compact()
    assert small.n_features == est.selected_features_.size
    with torch.no_grad():
        dtype = next(small.parameters()).dtype
        logits = small(torch.as_tensor(X[:, est.selected_features_], dtype=dtype))
    full = est.decision_function(X)
    # float32 weights: the compact module sums fewer terms in another order, a few
    # eps32 of the logits' scale
    np.testing.assert_allclose(
        logits.numpy()[:, 0], full, rtol=0, atol=100 * EPS32 * np.abs(full).max()
    )


def test_pandas_input_unchanged_and_clone_keeps_options(problem):
    X, y = problem
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(8)])
    before = frame.copy()
    est = DGatedMLPRegressor(lam=0.05, **FAST, **VARIANTS["both"])
    est.fit(frame, y)
    pd.testing.assert_frame_equal(frame, before)
    assert clone(est).get_params() == est.get_params()
    assert list(est.feature_names_in_) == list(frame.columns)


def test_members_step_as_far_as_a_lone_network():
    # the loss is the members' mean, so each member's weights get 1/k of its gradient:
    # plain SGD steps them k times as far (and every member's ridge is 1/k of a net's)
    est = DGatedMLPRegressor(n_members=4, lam=0.1, D=3)
    module = est._build_module(5, 1)
    est._gate_module(module, "identity")
    ridge = est._ridge(module)
    _, options = est._optimizer(module, ridge)
    rates = dict(options["param_groups"])
    assert rates["member_bias"]["lr"] == pytest.approx(4 * est.lr)
    assert rates["members.0.weight"]["lr"] == pytest.approx(4 * est.lr)
    lone = DGatedMLPRegressor(lam=0.1, D=3)
    lone_module = lone._build_module(5, 1)
    lone._gate_module(lone_module, "identity")
    assert ridge["members.0.weight"] == pytest.approx(
        lone._ridge(lone_module)["linears.1.weight"] / 4
    )
    assert "member_bias" not in ridge and "members.0.bias" not in ridge  # biases are free


@pytest.mark.parametrize(
    "options", [{"n_members": 2, "gate_hidden": True}, {"n_members": 2, "sparsity": "weights"}]
)
def test_ensemble_refuses_what_it_cannot_share(problem, options):
    X, y = problem
    with pytest.raises(ValueError, match="n_members > 1"):
        DGatedMLPRegressor(**FAST, **options).fit(X, y)


def test_onnx_graph_predicts_what_the_model_does(problem):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from sksparse_nn.export import to_onnx

    X, y = problem
    est = DGatedMLPClassifier(lam=0.05, **FAST, **VARIANTS["both"]).fit(X, y > np.median(y))
    session = ort.InferenceSession(
        to_onnx(est).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    # rows beyond the training range: the outer bins' unclipped sides are exported too
    X_new = 3.0 * np.random.default_rng(1).normal(size=(50, 8))
    labels, proba = session.run(None, {session.get_inputs()[0].name: X_new.astype(np.float32)})
    # float32 graph: about a hundred roundings of the probabilities' size
    np.testing.assert_allclose(proba, est.predict_proba(X_new), rtol=0, atol=100 * EPS32)
