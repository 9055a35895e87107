"""The end-of-training check of :class:`DivergenceGuard`: a fit that ends far above
its best epoch broke down on the way and says so (ConvergenceWarning); ordinary fits,
and noise around a near-zero loss, stay silent."""

import warnings

import numpy as np
import pytest
import torch
from skorch.history import History
from torch import nn

from sksparse_nn.estimators._guards import BROKE_DOWN, DivergenceGuard, PenaltyAwareClipping
from sksparse_nn.estimators._training import PenalizedNet
from sksparse_nn.exceptions import ConvergenceWarning
from sksparse_nn.gating import dgate, gate_factors


class _Net:
    def __init__(self, losses, skip_last=False):
        self.history = History()
        for k, loss in enumerate(losses):
            self.history.new_epoch()
            if not (skip_last and k == len(losses) - 1):
                self.history.record("train_loss", loss)


def _end_of_training(losses, baseline, **net):
    guard = DivergenceGuard(baseline, describe=lambda epoch, loss: "")
    guard.on_train_begin(None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        guard.on_train_end(_Net(losses, **net))
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_a_cold_fit_that_collapses_after_learning_warns():
    # the README's CNN with the automatic budget: 1.19 (chance is 1.10) down to 0.2, then
    # loss spikes and every filter dead at 1.10 again: the end is below the first epoch,
    # but 5.5 times the best one
    losses = [1.19, 0.6, 0.3, 0.2, 4.2, 0.5, 0.26, 6.3, 4.2, 1.19, 1.1, 1.1]
    caught = _end_of_training(losses, baseline=1.1)
    assert len(caught) == 1
    assert "times its best epoch's (0.2, epoch 4)" in str(caught[0].message)


def test_a_fit_that_climbs_to_chance_level_warns():
    # a warm CNN point: 0.5 at the start, then up to the constant model's 3.0, where it
    # stays (every filter dead); no epoch jumps by SPIKE, nothing is infinite
    losses = [0.5, 0.6, 0.9, 1.4, 2.1, 2.8, 3.0, 3.0]
    caught = _end_of_training(losses, baseline=3.0)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "broke down" in message and "Lower lr" in message and "8 epochs" in message


@pytest.mark.parametrize(
    "losses, baseline",
    [
        ([3.0, 1.2, 0.6, 0.4, 0.35], 3.0),  # an ordinary fit
        ([0.5, 0.7, 0.45, 0.52], 3.0),  # noise around a warm start's level
        ([1e-4, 3e-4, 2e-4, 4e-4], 0.7),  # tripled, but noise around a near-zero loss
        ([0.5], 3.0),  # one epoch: nothing to compare
    ],
    ids=["ordinary", "noise", "near-zero", "one-epoch"],
)
def test_fits_that_end_near_their_best_stay_silent(losses, baseline):
    best = min(losses)
    assert losses[-1] <= BROKE_DOWN * best or losses[-1] - best < 0.1 * baseline
    assert not _end_of_training(losses, baseline)


def test_an_epoch_cut_short_is_not_an_error():
    # Ctrl-C in the last epoch: its row has no training loss
    assert not _end_of_training([0.5, 0.4, 0.3], baseline=3.0, skip_last=True)


# -- PenaltyAwareClipping -------------------------------------------------------------


def _clipping_case(max_norm, lam=0.5):
    """A small gated net after one training step (data + penalty + ridge gradients), its
    clipping callback, and the gradients and pull as written out here."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).double()
    dgate(module[0], "weight", groups="in", D=3, init="balanced")
    net = PenalizedNet(
        module, criterion=nn.MSELoss, lam=lam, ridge={"2.weight": 0.05},
        optimizer=torch.optim.SGD, lr=0.0, max_epochs=1, batch_size=16,
        train_split=None, verbose=0,
    ).initialize()  # fmt: skip
    X, y = torch.randn(16, 3, dtype=torch.float64), 5 * torch.randn(16, 1, dtype=torch.float64)
    net.optimizer_.zero_grad()
    net.train_step_single((X, y))
    clip = PenaltyAwareClipping(max_norm)
    clip.on_train_begin(net)
    params = [p for _, p in net.get_all_learnable_params()]
    grads = [p.grad.clone() for p in params]
    total = float(np.sqrt(sum(float((g**2).sum()) for g in grads)))
    pulls = [lam * c * float(p.detach().norm()) for _, p, c in gate_factors(module)]
    pulls.append(2 * lam * 0.05 * float(module[2].weight.detach().norm()))
    return net, clip, params, grads, total, float(np.sqrt(np.sum(np.square(pulls))))


def test_clipping_bounds_the_gradient_at_max_norm_plus_the_penalty_pull():
    _, _, _, _, total, pull = _clipping_case(1.0)
    assert total > 2 * pull > 0  # the case separates the three regimes below
    for max_norm, clipped in [
        (0.5 * (total - pull), True),  # beyond max_norm + pull: scaled down to it
        (total - 0.5 * pull, False),  # beyond max_norm, within max_norm + pull: kept
        (2 * total, False),  # within max_norm
    ]:
        net, clip, params, grads, total, pull = _clipping_case(max_norm)
        clip.on_grad_computed(net, named_parameters=None)
        coef = (max_norm + pull) / (total + 1e-6) if clipped else 1.0
        for p, g in zip(params, grads, strict=True):
            torch.testing.assert_close(p.grad, coef * g, rtol=1e-6, atol=0)  # float32 norm


def test_a_training_step_trains_modules_left_in_evaluation_mode():
    # skorch's step sets training mode on every batch; this net's only when the module or
    # the criterion is not in it (after the validation, a prediction)
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1)).double()
    net = PenalizedNet(
        module, criterion=nn.MSELoss, optimizer=torch.optim.SGD, lr=0.0, max_epochs=1,
        batch_size=16, train_split=None, verbose=0,
    ).initialize()  # fmt: skip
    X, y = torch.randn(16, 3, dtype=torch.float64), torch.randn(16, 1, dtype=torch.float64)
    for left in [net.module_, net.criterion_, net.module_[1]]:  # the tree, its part, the loss
        net.module_.train(), net.criterion_.train()
        left.eval()
        stepped = net.train_step_single((X, y))
        assert all(m.training for m in [*net.module_.modules(), net.criterion_])
        # dropout was on: the step's predictions are not the evaluation-mode ones
        if left is not net.criterion_:
            assert not torch.allclose(stepped["y_pred"], module.eval()(X))
