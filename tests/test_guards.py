"""The end-of-training check of :class:`DivergenceGuard`: a fit that ends far above
its best epoch broke down on the way and says so (ConvergenceWarning); ordinary fits,
and noise around a near-zero loss, stay silent."""

import warnings

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback
from skorch.history import History
from torch import nn

from sksparse_nn.exceptions import ConvergenceWarning
from sksparse_nn.gating import dgate, gate_factors
from sksparse_nn.training import DivergenceGuard, PenalizedNet, PenaltyAwareClipping
from sksparse_nn.training.guards import BROKE_DOWN


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


def _clipping_case(max_norm, lam=0.5, nan=False):
    """A small float64 gated net after one training step (data + penalty + ridge
    gradients), its clipping callback, and the gradients and pull written out here."""
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
    params = [p for _, p in net.get_all_learnable_params()]
    if nan:
        params[-1].grad[0] = np.nan
    clip = PenaltyAwareClipping(max_norm)
    clip.on_train_begin(net)
    grads = [p.grad.clone() for p in params]
    total = float(np.sqrt(sum(float((g**2).sum()) for g in grads)))
    pulls = [lam * c * float(p.detach().norm()) for _, p, c in gate_factors(module)]
    pulls.append(2 * lam * 0.05 * float(module[2].weight.detach().norm()))
    return net, clip, params, grads, total, float(np.sqrt(np.sum(np.square(pulls))))


def _clipped(max_norm, **case):
    """The gradients after the clip, before it, and the case's total norm and pull."""
    net, clip, params, grads, total, pull = _clipping_case(max_norm, **case)
    clip.on_grad_computed(net, named_parameters=None)
    return [p.grad for p in params], grads, total, pull


@pytest.mark.parametrize("lam", [0.5, 0.0], ids=["penalty", "no-penalty"])
def test_clipping_bounds_the_gradient_at_max_norm_plus_the_penalty_pull(lam):
    _, _, _, _, total, pull = _clipping_case(1.0, lam=lam)
    assert total > 2 * pull and (pull > 1e-2 if lam else pull == 0)
    for max_norm, clipped in [
        (0.5 * (total - pull), True),  # far beyond max_norm + pull: scaled down to it
        (total - pull - 1e-3, True),  # just beyond max_norm + pull
        (total - pull + 1e-3, False),  # beyond max_norm (with a pull), within the sum
        (2 * total, False),  # within max_norm
    ]:
        after, before, total, pull = _clipped(max_norm, lam=lam)
        if not clipped:  # untouched, to the bit
            assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))
            continue
        coef = (max_norm + pull) / (total + 1e-6)
        assert coef < 1 - 1e-4
        for a, b in zip(after, before, strict=True):
            # norms in float64 either way; summation orders differ (hypot vs sqrt(sum))
            torch.testing.assert_close(a, coef * b, rtol=1e-12, atol=0)


def test_a_nan_gradient_is_not_clipped():
    # (the divergence guard reports the NaN loss; the clip must not turn it into zeros)
    after, before, _, _ = _clipped(1e-3, nan=True)
    for a, b in zip(after, before, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def test_a_training_step_trains_modules_left_in_evaluation_mode():
    # skorch's step sets training mode on every batch; this net's only when a module of
    # the net or the criterion is not in it (after the validation, a prediction)
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


class _AuxNet(PenalizedNet):
    """A net with a module of its own besides ``module_`` (skorch registers it)."""

    def initialize_module(self):
        super().initialize_module()
        self.aux_ = nn.Dropout(0.5)
        return self


class _Modes(Callback):
    """Records, after every training step, whether every module of the net was training."""

    def initialize(self):
        self.seen_ = []
        return self

    def on_grad_computed(self, net, named_parameters, **kwargs):
        modules = [*net.module_.modules(), net.criterion_, net.aux_]
        self.seen_.append(all(m.training for m in modules))


def test_every_training_step_of_a_fit_is_in_training_mode():
    # a fit whose validation (every epoch) and a callback leave modules in evaluation
    # mode: every step after them trains again, a net's own extra module included
    class _EvalAfterBatch(Callback):
        def on_batch_end(self, net, training, **kwargs):
            if training:
                net.aux_.eval()  # and skorch's validation sets the rest every epoch

    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1)).double()
    modes = _Modes()
    net = _AuxNet(
        module, criterion=nn.MSELoss, optimizer=torch.optim.SGD, lr=0.01, max_epochs=3,
        batch_size=16, verbose=0, callbacks=[("modes", modes), ("eval", _EvalAfterBatch())],
    )  # fmt: skip
    X, y = torch.randn(80, 3, dtype=torch.float64), torch.randn(80, 1, dtype=torch.float64)
    net.fit(X, y)  # skorch's default split: 16 validation rows, evaluated every epoch
    assert len(modes.seen_) == 3 * 4 and all(modes.seen_)


def test_a_diverged_fit_is_retried_once_at_a_tenth_of_the_rate():
    from sksparse_nn import DGatedMLPRegressor
    from sksparse_nn.exceptions import TrainingDivergedError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    # lr=1 overshoots (the first epoch's loss is not finite); lr=0.1 is the default
    est = DGatedMLPRegressor(lr=1.0, max_epochs=20, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"trained again from its start at lr=0.1"):
        est.fit(X, y)
    assert est.get_params()["lr"] == 1.0  # the user's parameter is left alone
    assert est._warm_rate_scale[1] <= 0.1  # a warm start goes on at the rate that worked
    assert est.score(X, y) > 0.9
    # a rate that diverges at a tenth too is an error that says both
    with pytest.raises(TrainingDivergedError, match=r"retry from the start at lr=1 diverged"):
        DGatedMLPRegressor(lr=10.0, max_epochs=20, random_state=0).fit(X, y)
