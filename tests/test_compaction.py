"""Compaction: smaller models with the same outputs, and their parameter / FLOP counts."""

import numpy as np
import pytest
import torch
from torch import nn

from sksparse_nn.compaction import (
    compact_attention,
    compact_sequential,
    count_flops,
    count_parameters,
)

pytestmark = pytest.mark.usefixtures("float64_default")  # exact equality up to float64


def _cnn():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Sequential(nn.Conv2d(8, 6, 3), nn.ReLU()),  # nested blocks are flattened
        nn.Flatten(),
        nn.Linear(6 * 2 * 2, 10),
        nn.ReLU(),
        nn.Linear(10, 3),
    )
    with torch.no_grad():
        bn = model[1]
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return model.eval()


def test_conv_bn_chain_drops_dead_filters_and_neurons_exactly():
    model = _cnn()
    with torch.no_grad():
        model[0].weight[[1, 4]] = 0  # no incoming weights: constants, folded forward
        model[4][0].weight[:, 6] = 0  # filter 6 of conv 1 is never read
        model[4][0].weight[2] = 0  # constant filter, read by the Linear after Flatten
        model[6].weight[3] = 0  # neuron 3: constant, folded into the last bias
        model[8].weight[:, 5] = 0  # neuron 5 is never read
    x = torch.randn(7, 3, 8, 8)
    small, report = compact_sequential(model, x)
    assert report.kept_units == {
        "0": [0, 2, 3, 5, 7],
        "4.0": [0, 1, 3, 4, 5],
        "6": [0, 1, 2, 4, 6, 7, 8, 9],
        "8": [0, 1, 2],
    }
    # float64 sums in another order: rounding only
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)
    assert report.params_after == count_parameters(small) < report.params_before
    assert report.flops_after < report.flops_before


@pytest.mark.parametrize("bias, kept", [(0.7, True), (-0.7, False)])
def test_constant_channel_before_a_zero_padded_conv(bias, kept):
    """Behind padding a constant channel is not constant at the border: it may only go
    when its constant is exactly 0 (ReLU of a negative bias)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 1, 3, padding=1)).eval()
    with torch.no_grad():
        model[0].weight[1] = 0
        model[0].bias[1] = bias
    x = torch.randn(4, 1, 7, 7)
    small, report = compact_sequential(model, x)
    assert (1 in report.kept_units["0"]) == kept
    torch.testing.assert_close(small(x), model(x), rtol=1e-12, atol=1e-12)


def test_counts_on_hand_computable_models():
    mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    assert count_parameters(mlp) == 4 * 3 + 3 + 3 * 2 + 2
    assert count_flops(mlp, torch.randn(5, 4)) == 2 * (4 * 3 + 3 * 2)
    conv = nn.Sequential(nn.Conv2d(1, 2, 3))  # 5x5 -> 3x3
    assert count_flops(conv, torch.randn(2, 1, 5, 5)) == 2 * (1 * 3 * 3) * 2 * (3 * 3)


def test_first_layer_inputs_can_be_dropped():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 1)).eval()
    with torch.no_grad():
        model[0].weight[:, [0, 3]] = 0
    x = torch.randn(6, 5)
    small, report = compact_sequential(model, x, drop_inputs=True)
    assert report.kept_inputs == [1, 2, 4]
    torch.testing.assert_close(small(x[:, report.kept_inputs]), model(x))


def test_attention_heads_are_removed_and_flops_follow():
    torch.manual_seed(0)
    E, h = 16, 4
    d = E // h
    mha = nn.MultiheadAttention(E, h, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight[2 * E + d : 2 * E + 2 * d] = 0  # head 1: value rows zero
        mha.in_proj_bias[2 * E + d : 2 * E + 2 * d] = 0.3  # ... its constant output
        mha.out_proj.weight[:, 3 * d :] = 0  # head 3 is never read
    q = torch.randn(3, 5, E)
    small = compact_attention(mha)
    assert small.n_heads == 2
    torch.testing.assert_close(small(q, q, q)[0], mha(q, q, q)[0], rtol=1e-12, atol=1e-12)
    L = S = 5
    full = 4 * L * S * E + 2 * E * E * (2 * L + 2 * S)
    half = 4 * L * S * (E // 2) + 2 * E * (E // 2) * (2 * L + 2 * S)
    assert count_flops(mha, (q, q, q)) == full and count_flops(small, (q, q, q)) == half
    with pytest.raises(ValueError, match="Head 0 is live"):
        compact_attention(mha, keep_heads=[2])


def test_attention_without_live_heads_still_runs_and_is_counted():
    torch.manual_seed(0)
    E, h = 8, 2
    mha = nn.MultiheadAttention(E, h, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight[2 * E :] = 0  # every head's value rows: constants only
    q = torch.randn(3, 5, E)
    small = compact_attention(mha)
    assert small.n_heads == 0
    torch.testing.assert_close(small(q, q, q)[0], mha(q, q, q)[0], rtol=1e-12, atol=1e-12)
    assert count_flops(small, (q, q, q)) == 0  # the output is its bias


def test_unsupported_models_are_refused():
    with pytest.raises(ValueError, match="needs an nn.Sequential"):
        compact_sequential(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(ValueError, match="grouped convolutions"):
        compact_sequential(nn.Sequential(nn.Conv2d(2, 2, 1, groups=2)), torch.randn(1, 2, 3, 3))


def test_estimator_compact_keeps_predictions():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from sksparse_nn import DGatedNeuralNetClassifier

    rng = np.random.RandomState(0)
    X = rng.randn(300, 3, 6, 6).astype(np.float32)
    y = (X[:, 0].mean(axis=(1, 2)) > 0).astype(int)
    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 2),
    )
    clf = DGatedNeuralNetClassifier(cnn, gates={"0.weight": "out"}, lam=0.05, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    small, report = clf.compact(return_report=True)
    n_live = int((clf.tensor_group_norms_["0.weight"] > 0).sum())
    assert len(report.kept_units["0"]) == n_live < 8
    with torch.no_grad():
        logits = small(torch.as_tensor(X)).double().numpy()
    # float32 model, outputs of order 1: rounding of the reordered sums
    np.testing.assert_allclose(logits, clf.decision_function(X).reshape(len(X), -1), atol=1e-5)


def test_a_layer_without_live_units_keeps_one_and_still_runs():
    model = _cnn()
    with torch.no_grad():
        model[0].weight.zero_()  # every filter of the first conv emits a constant
        model[6].weight.zero_()  # and no neuron of the first Linear feeds the last one
    x = torch.randn(5, 3, 8, 8)
    small, report = compact_sequential(model, x)
    assert report.kept_units["0"] == [0] and report.kept_units["6"] == [0]
    torch.testing.assert_close(small(x), model(x), rtol=0, atol=1e-12)
