"""The end-of-training check of :class:`DivergenceGuard`: a fit that ends far above
its best epoch broke down on the way and says so (ConvergenceWarning); ordinary fits,
and noise around a near-zero loss, stay silent."""

import warnings

import pytest
from skorch.history import History

from sksparse_nn.estimators._guards import BROKE_DOWN, DivergenceGuard
from sksparse_nn.exceptions import ConvergenceWarning


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
