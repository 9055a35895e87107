"""Dropping groups in transit: zero is a resting point of a D-gated group, and a drop is
kept only when the training objective does not rise."""

import numpy as np
import pytest
import torch
from skorch.dataset import Dataset

from sksparse_nn.sparsifiers import (
    can_drop,
    drop_groups_,
    group_norms,
    sparsified_tensors,
    sparsify,
)
from sksparse_nn.training import PenalizedNet
from sksparse_nn.training.pruning import (
    DropInTransitAtEnd,
    drop_if_no_worse,
    drop_smallest_first,
    refresh_running_stats,
)


def _gated_layer(D=3, seed=0):
    torch.manual_seed(seed)
    layer = torch.nn.Linear(4, 3)
    sparsify(layer, "weight", method="dgating", groups="in", D=D)
    with torch.no_grad():  # gates away from 1, so that every factor matters
        layer.parametrizations.weight[0].gates.uniform_(0.5, 1.5)
    return layer


@pytest.mark.parametrize("D", [2, 3, 4])
def test_a_dropped_group_is_zero_in_every_factor_and_gets_no_gradient(D):
    layer = _gated_layer(D)
    drop = np.array([True, False, True, False])
    touched = drop_groups_(layer, {"weight": drop})
    gate = layer.parametrizations.weight[0]
    assert len(touched) == 2  # omega and the gates, each with its 0/1 mask
    assert torch.all(layer.weight[:, drop] == 0) and torch.all(layer.weight[:, ~drop] != 0)
    assert torch.all(gate.gates[:, drop] == 0)
    # any loss: the dropped groups' factors get an exact zero gradient (a resting point)
    x = torch.randn(8, 4)
    (layer(x).pow(3).sum() + layer(x).exp().mean()).backward()
    original = layer.parametrizations.weight.original
    assert torch.all(original.grad[:, drop] == 0) and torch.all(gate.gates.grad[:, drop] == 0)
    assert torch.any(original.grad[:, ~drop] != 0)


def test_methods_that_cannot_drop_leave_the_model_alone():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    sparsify(layer, "weight", method="l21", groups="in")  # a zero is no resting point
    before = layer.weight.detach().clone()
    assert not can_drop(layer) and can_drop(_gated_layer())
    assert drop_groups_(layer, {"weight": np.array([True, False, False, False])}) is None
    assert torch.equal(layer.weight, before)


@pytest.mark.parametrize("D", [2, 3])
def test_a_tie_drops_a_group_in_all_its_tensors(D):
    # named in one tensor of the tie only: the shared gates and every omega go to zero
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    sparsify(model[0], "weight", groups="out", D=D)
    sparsify(model[1], "weight", groups="in", tie=model[0].parametrizations.weight[0])
    names = [q for q, *_ in sparsified_tensors(model)]
    assert can_drop(model)
    drop = np.array([True, False, False])
    touched = drop_groups_(model, {names[1]: drop})
    assert len(touched) == 3  # both omegas and the shared gates
    assert torch.all(model[0].weight[drop] == 0) and torch.all(model[1].weight[:, drop] == 0)
    assert torch.all(model[0].weight[~drop] != 0)
    model(torch.randn(5, 4)).pow(2).sum().backward()
    for layer, axis in ((model[0], 0), (model[1], 1)):
        grad = layer.parametrizations.weight.original.grad
        assert torch.all(grad.index_select(axis, torch.tensor([0])) == 0)
    assert torch.all(model[0].parametrizations.weight[0].gates.grad[:, 0] == 0)


def _net(X, y, lam=0.05, callbacks=None):
    torch.manual_seed(0)
    module = torch.nn.Linear(X.shape[1], 1)
    sparsify(module, "weight", groups="in", D=3)
    net = PenalizedNet(
        module,
        criterion=torch.nn.MSELoss,
        lam=lam,
        optimizer=torch.optim.SGD,
        optimizer__momentum=0.9,
        lr=0.05,
        batch_size=16,
        max_epochs=10,
        train_split=None,
        callbacks=callbacks,
        callbacks__print_log=None,
    )
    data = Dataset(X, y)
    net.fit(data, None)  # momentum buffers in the optimizer's state
    return net, data


def test_a_drop_is_kept_only_when_the_objective_does_not_rise():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    X[:, 0] = 0.0  # a column the data term cannot see: its group is pure penalty
    y = (3.0 * X[:, 1:2]).astype(np.float32)
    net, data = _net(X, y)
    weight = net.module_.parametrizations.weight
    assert float(group_norms(net.module_)["weight"][0]) > 0  # still on its way
    before = net.training_objective(data)
    # the signal's group: dropping it raises the objective, nothing changes (bit for bit)
    state = {k: v.clone() for k, v in net.module_.state_dict().items()}
    assert not drop_if_no_worse(net, data, {"weight": np.array([False, True, False])})
    assert all(torch.equal(v, state[k]) for k, v in net.module_.state_dict().items())
    # the blind column's group: the objective falls by lam times its penalty; dropped
    assert drop_if_no_worse(net, data, {"weight": np.array([True, False, False])})
    assert net.training_objective(data) < before
    assert float(group_norms(net.module_)["weight"][0]) == 0.0
    for tensor in (weight.original, weight[0].gates):
        momentum = net.optimizer_.state[tensor]["momentum_buffer"]
        assert torch.all(momentum[..., 0] == 0)  # no step moves it off zero


def _blind_and_signal(seed=0):
    """Columns 0 and 2 the data term cannot see (their groups are pure penalty), 1 and
    3 the signal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    X[:, [0, 2]] = 0.0
    y = (1.5 * X[:, 1:2] + X[:, 3:4]).astype(np.float32)
    return X, y


def test_drop_smallest_first_keeps_the_longest_run_the_objective_allows():
    net, data = _net(*_blind_and_signal())
    norms = group_norms(net.module_)["weight"].clone()
    assert torch.all(norms > 0)  # the blind groups are still on their way
    before = net.training_objective(data)
    order = [("weight", 0), ("weight", 2), ("weight", 1), ("weight", 3)]
    # all four: refused (the signal); two: kept (pure penalty); three: refused
    assert drop_smallest_first(net, data, order) == 2
    after = group_norms(net.module_)["weight"]
    assert after[0] == 0 and after[2] == 0
    assert torch.equal(after[[1, 3]], norms[[1, 3]])  # refused drops leave no trace
    assert net.training_objective(data) < before
    # a run that starts with the signal is refused at every length: nothing changes
    net, data = _net(*_blind_and_signal())
    state = {k: v.clone() for k, v in net.module_.state_dict().items()}
    assert drop_smallest_first(net, data, [("weight", 1), ("weight", 0)]) == 0
    assert all(torch.equal(v, state[k]) for k, v in net.module_.state_dict().items())


def test_running_stats_are_the_mean_over_one_pass_after_a_refresh():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).eval()
    X = torch.randn(64, 3)
    net = PenalizedNet(
        module, criterion=torch.nn.MSELoss, batch_size=16, train_split=None
    ).initialize()
    refresh_running_stats(net, Dataset(X.numpy(), np.zeros((64, 4), np.float32)))
    bn = module[1]
    with torch.no_grad():
        batches = module[0](X).split(16)  # four batches of 16, in order
    mean = torch.stack([b.mean(0) for b in batches]).mean(0)
    var = torch.stack([b.var(0) for b in batches]).mean(0)  # unbiased per batch
    # float32 sums of 4 x 16 values: a few ulps
    torch.testing.assert_close(bn.running_mean, mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn.running_var, var, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 4
    assert bn.momentum == 0.1 and not module.training  # left as they were


def test_a_fixed_budget_ends_with_the_unneeded_groups_dropped():
    # snapshot three quarters in (epoch 7 of 10); at the end the blind groups, which
    # fell since, are dropped; the signal's, whose drop raises the objective, are kept
    callback = DropInTransitAtEnd(max_epochs=10, zero_tol=1e-7)
    net, data = _net(*_blind_and_signal(), callbacks=[("drop", callback)])
    norms = group_norms(net.module_)["weight"]
    assert norms[0] == 0 and norms[2] == 0 and torch.all(norms[[1, 3]] > 0)
    assert callback.dropped_["weight"].shape == (2,)
    assert np.all(callback.dropped_["weight"] < callback.live_min_)
    assert callback.live_min_ == pytest.approx(float(norms[[1, 3]].min()))
    # lam = 0, or a held-out split (whose rows no training decision may read): off
    for options in ({"lam": 0.0}, {"train_split": lambda ds, y=None: (ds, ds)}):
        net.set_params(**options)
        callback.on_train_begin(net, X=data)
        assert callback.data_ is None


def test_a_needed_group_is_kept_however_much_the_others_save():
    # ten blind columns (pure penalty, still on their way to zero) and a weak signal:
    # dropping all eleven lowers the objective (the blind groups' penalty pays for the
    # signal's fit), but the signal's own drop raises it; the run stops before it
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 12)).astype(np.float32)
    X[:, :10] = 0.0
    y = (0.2 * X[:, 10:11] + 2.0 * X[:, 11:12]).astype(np.float32)
    net, data = _net(X, y)
    order = [("weight", j) for j in range(11)]  # the candidates: all but the strong one
    masks = {"weight": np.arange(12) < 11}
    before = net.training_objective(data)
    state = {k: v.clone() for k, v in net.module_.state_dict().items()}
    drop_groups_(net.module_, masks)
    assert net.training_objective(data) < before  # the run's total would allow it
    net.module_.load_state_dict(state)
    assert drop_smallest_first(net, data, order) == 10
    norms = group_norms(net.module_)["weight"]
    assert torch.all(norms[:10] == 0) and torch.all(norms[10:] > 0)


def test_a_drop_the_fit_would_notice_is_not_made():
    # a weak signal whose group saves more penalty than its drop costs the data term:
    # the objective allows the drop, a data tolerance of 0 does not (the blind column's
    # drop leaves the data term exactly where it was, and goes at any tolerance)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    X[:, 0] = 0.0
    y = (0.05 * X[:, 1:2] + 2.0 * X[:, 2:3]).astype(np.float32)
    order = [("weight", 0), ("weight", 1)]
    net, data = _net(X, y)
    assert torch.all(group_norms(net.module_)["weight"] > 0)
    assert drop_smallest_first(net, data, order) == 2
    net, data = _net(X, y)
    data_before = net.training_terms(data)[0]
    assert drop_smallest_first(net, data, order, data_tolerance=0.0) == 1
    norms = group_norms(net.module_)["weight"]
    assert norms[0] == 0 and torch.all(norms[1:] > 0)
    assert net.training_terms(data)[0] == data_before  # the blind drop: no trace in the fit
