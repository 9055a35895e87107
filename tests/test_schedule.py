"""When training stops: the learning-rate plan and the "settled" rule of the automatic budget.

A fit with ``max_epochs=None`` has a cap (long enough for a cold start) and stops once its
support is stable, no selected group is on its way to zero and the objective has stopped
falling; warm starts (path points) begin with a learning-rate warm-up.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from skorch.callbacks import Callback

from sksparse_nn import DGatedMLPClassifier, DGatedMLPRegressor, DGatedNAMRegressor
from sksparse_nn.training import LRPlan, epoch_budget
from sksparse_nn.training.signals import in_transit, still_falling


class _PlanSpy(Callback):
    """Records an attribute of the fit's learning-rate plan when training begins (after
    the engine planned the stopping)."""

    def __init__(self, seen, attribute):
        self.seen, self.attribute = seen, attribute

    def on_train_begin(self, net, **kwargs):
        self.seen.append(getattr(dict(net.callbacks_)["lr_schedule"], self.attribute))


def test_plan_warms_up_decays_by_cosine_and_anneals_on_request():
    plan = LRPlan(max_epochs=100, schedule="cosine", warmup=4).initialize()
    assert [plan.factor(e) for e in range(4)] == [0.2, 0.4, 0.6, 0.8]
    assert plan.factor(50) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))
    assert not plan.annealed(60)
    f0 = plan.factor(60)
    plan.anneal(60, 10)
    assert plan.factor(60) == f0  # continuous where the anneal starts
    assert plan.factor(65) == pytest.approx(f0 * 0.5)
    assert plan.factor(70) == 0.0 and plan.annealed(69) and not plan.annealed(68)
    plan.anneal(65, 3)  # a second request changes nothing
    assert plan.factor(70) == 0.0
    constant = LRPlan(max_epochs=10, schedule="constant").initialize()
    assert {constant.factor(e) for e in range(10)} == {1.0}


def test_plan_sets_each_parameter_groups_rate_from_its_own_base():
    # the gate factors may have their own, capped step size: the factor multiplies each
    plan = LRPlan(max_epochs=4, schedule="cosine", warmup=1).initialize()

    class Net:
        optimizer_ = torch.optim.SGD(
            [{"params": [torch.zeros(1)], "lr": 0.1}, {"params": [torch.zeros(1)], "lr": 0.01}]
        )
        history = [{}]

    net = Net()
    plan.on_train_begin(net)
    plan.on_epoch_begin(net)
    assert [g["lr"] for g in net.optimizer_.param_groups] == [0.05, 0.005]


def test_a_rising_loss_is_no_plateau():
    from sksparse_nn.training.signals import on_plateau

    flat = np.r_[np.linspace(1.0, 0.5, 50), np.full(50, 0.5)]
    assert on_plateau(flat, 10)
    rising = np.r_[np.linspace(1.0, 0.5, 50), np.linspace(0.5, 0.7, 50)]
    assert not on_plateau(rising, 10) and not still_falling(rising, 10)[0]


def test_transit_and_falling_rules():
    # halved over the window, or tiny and still shrinking: in transit; zeros never are
    norms, before = np.array([1.0, 0.4, 1e-5, 0.0, 0.95]), np.array([1.0, 1.0, 2e-5, 1e-3, 1.0])
    assert in_transit(norms, before, 1e-7).tolist() == [False, True, True, False, False]
    flat = np.r_[np.linspace(1.0, 0.5, 50), np.full(50, 0.5)]
    assert not still_falling(flat, 10)[0]
    assert still_falling(np.linspace(1.0, 0.5, 100), 10)[0]


def _diabetes_with_noise(n_noise=10):
    X, y = load_diabetes(return_X_y=True)
    rng = np.random.RandomState(0)
    noise = rng.permutation(X.ravel())[: X.shape[0] * n_noise].reshape(X.shape[0], n_noise)
    return np.hstack([X, noise]), y


@pytest.mark.parametrize(
    "estimator",
    [
        DGatedMLPRegressor(D=3, hidden_layer_sizes=(16,), random_state=0),
        DGatedNAMRegressor(D=3, hidden_layer_sizes=(8,), random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
def test_automatic_budget_stops_once_settled_with_a_clean_gap(estimator):
    X, y = _diabetes_with_noise()
    lam = 0.3 * estimator.lambda_max(X, y)  # a few features survive
    est = clone(estimator).set_params(lam=lam).fit(X, y)
    cap = epoch_budget(est, X.shape[0], min(est.batch_size or X.shape[0], X.shape[0]))
    assert est.n_iter_ < cap  # it stopped before the cap ...
    dead, live = est.sparsity_gap_
    assert 0 < len(est.selected_features_) < X.shape[1]
    # ... with a clean gap: nothing selected is "in transit" (TINY = 1e-3 of the largest)
    assert live > 1e-3 * est.group_norms_.max() and dead < est.zero_tol
    # an explicit max_epochs is a fixed count
    fixed = clone(estimator).set_params(lam=lam, max_epochs=7).fit(X, y)
    assert fixed.n_iter_ == 7


def test_groups_still_shrinking_keep_training_going(monkeypatch):
    # the same fit with a tiny constant step: groups shrink slowly all along, so the
    # settled rule must not fire; where they cannot be dropped (the objective would
    # rise), the fit runs to its cap and says so
    X, y = _diabetes_with_noise()
    est = DGatedMLPRegressor(
        D=3, hidden_layer_sizes=(16,), lr=1e-3, lr_schedule="constant", random_state=0
    )
    est.set_params(lam=0.3 * est.lambda_max(X, y))
    cap = epoch_budget(est, X.shape[0], est.batch_size)
    with monkeypatch.context() as patch:
        _no_drops(patch)
        with pytest.warns(Warning, match="max_epochs"):
            est.fit(X, y)
    assert est.n_iter_ == cap
    # dropped at once where the objective allows: settled before the cap, clean gap
    est.fit(X, y)
    dead, live = est.sparsity_gap_
    assert est.n_iter_ < cap and dead < est.zero_tol and live > 1e-3 * est.group_norms_.max()


def test_warm_started_points_survive_a_sharp_previous_minimum():
    # the default MLP on 442 rows with 10 noise columns, 200 epochs per point (a cosine
    # over the fit, annealed to ~0 at its end): without the warm-up, the 3rd point of
    # this path diverged in its first epoch (lr=0.1 straight from the previous point's
    # sharp minimum); the automatic budget's path diverged likewise at its 4th point
    X, y = _diabetes_with_noise()
    est = DGatedMLPRegressor(D=3, max_epochs=200, random_state=0)
    lams = np.geomspace(est.lambda_max(X, y) * 1e-3, est.lambda_max(X, y), 30)[:3]
    path = est.regularization_path(X, y, lams=lams)
    assert not path.failed.any()
    assert np.isfinite(path.train_score).all()


def test_warm_start_fit_uses_the_warm_up():
    X, y = _diabetes_with_noise()
    est = DGatedMLPClassifier(D=3, hidden_layer_sizes=(8,), max_epochs=40, random_state=0)
    yc = (y > np.median(y)).astype(int)
    est.fit(X, yc)
    seen = []
    est._training_callbacks = lambda module: [("spy", _PlanSpy(seen, "warmup"))]
    est.fit(X, yc)  # not warm: no warm-up
    est.set_params(warm_start=True).fit(X, yc)
    assert seen[0] == 0 and seen[1] >= 1


class _FakeNet:
    """Just what the callbacks read: a skorch History and a module (norms patched in)."""

    def __init__(self):
        from skorch.history import History

        self.history, self.module_ = History(), None


def _drive(
    monkeypatch,
    norms_per_epoch,
    loss=1.0,
    window=3,
    anneal=4,
    cap=100,
    hold=0,
    recover=None,
    earliest=0,
    watch_transit=True,
):
    """Run StopWhenSettled over given group norms; returns (stopped epoch, callback, plan)."""
    from sksparse_nn.training import StopTraining
    from sksparse_nn.training import schedule as _schedule

    plan = LRPlan(cap, "cosine", hold=hold).initialize()
    rule = _schedule.StopWhenSettled(
        plan,
        window,
        1e-7,
        anneal,
        nonconvex=True,
        recover=recover,
        earliest=earliest,
        watch_transit=watch_transit,
    ).initialize()
    net, current = _FakeNet(), {}
    monkeypatch.setattr(_schedule, "group_norms", lambda module: current)
    plan.factors_ = []  # the factor of every epoch, as the plan had it then
    for epoch, norms in enumerate(norms_per_epoch):
        plan.factors_.append(plan.factor(epoch))
        net.history.new_epoch()
        net.history.record("train_loss", loss if np.isscalar(loss) else loss[epoch])
        current.clear()
        current["w"] = torch.tensor(norms, dtype=torch.float64)
        try:
            rule.on_epoch_end(net)
        except StopTraining:
            return epoch, rule, plan
    return None, rule, plan


def test_settled_rule_anneals_then_stops(monkeypatch):
    steady = [[1.0, 0.5, 0.0]] * 20
    stopped, rule, plan = _drive(monkeypatch, steady)
    # settled once two windows have passed (epoch 5), then a 4-epoch anneal
    assert stopped == 9 and rule.resumed_ == 0 and plan.factor(10) == 0.0


def test_settled_rule_waits_for_its_earliest_epoch(monkeypatch):
    # the same steady fit, but not to be judged before epoch 12 (a cold start's plateau)
    steady = [[1.0, 0.5, 0.0]] * 30
    stopped, rule, plan = _drive(monkeypatch, steady, earliest=12)
    assert stopped == 11 + 4 and plan.factor(11) > 0.0


def test_a_cold_fit_trains_its_minimum_steps_before_it_may_stop():
    """The automatic budget's cold fits train at least COLD_MIN_STEPS steps (a quarter
    of the cap at most); a warm start is judged from its warm-up on."""
    from sksparse_nn.training import engine

    X, y = _diabetes_with_noise()
    est = DGatedMLPRegressor(D=3, hidden_layer_sizes=(8,), batch_size=64, random_state=0)
    est.set_params(lam=0.3 * est.lambda_max(X, y)).fit(X, y)
    steps_per_epoch = -(-X.shape[0] // 64)
    earliest = -(-engine.COLD_MIN_STEPS // steps_per_epoch)
    assert earliest <= epoch_budget(est, X.shape[0], 64) // 4
    assert est.n_iter_ >= earliest
    warm = clone(est).set_params(warm_start=True)
    warm.fit(X, y)
    warm.fit(X, y)  # settled at its own previous minimum: well before a cold fit's floor
    assert warm.n_iter_ < earliest


def test_settled_rule_resumes_when_a_group_collapses_during_the_anneal(monkeypatch):
    # settled at epoch 5; in the anneal the second group halves: back to the full rate
    norms = [[1.0, 0.5, 0.0]] * 7 + [[1.0, 0.2, 0.0]] + [[1.0, 0.0, 0.0]] * 20
    stopped, rule, plan = _drive(monkeypatch, norms)
    assert rule.resumed_ == 1
    # annealing from epoch 6, cancelled at the end of epoch 7, ramped back up over 4
    # epochs to the plan's own cosine (where the new support settles and anneals again)
    f = plan.factors_
    assert f[7] < f[6] == pytest.approx(plan._scheduled(6))
    assert f[8] < plan._scheduled(8) and f[12] == pytest.approx(plan._scheduled(12))
    assert stopped is not None and stopped > 12  # settled again on the new support


def test_tiny_groups_of_a_nonconvex_fit_never_look_settled(monkeypatch):
    # a group at 1e-5 of the largest, not moving: for D > 2 it is still on its way to 0
    norms = [[1.0, 1e-5, 0.0]] * 30
    stopped, rule, _ = _drive(monkeypatch, norms, cap=30)
    assert stopped is None  # ran to the cap ...
    assert rule.settled_ is None and rule.resumed_ == 0  # ... never looking settled


def _noisy_norms(n_epochs, rate, seed=0, n_groups=20, sd=0.1):
    """Group norms with epoch-to-epoch mini-batch noise (log-normal, ``sd``) around a
    level that falls by ``rate`` per epoch, plus one dead group."""
    rng = np.random.default_rng(seed)
    level = np.exp(-rate * np.arange(n_epochs))[:, None] * np.linspace(0.5, 2.0, n_groups)
    norms = level * np.exp(sd * rng.standard_normal((n_epochs, n_groups)))
    return np.column_stack([norms, np.zeros(n_epochs)]).tolist()


def test_groups_jittering_at_equilibrium_look_settled(monkeypatch):
    # 20 live groups moving ~10% from epoch to epoch around fixed levels (what SGD does
    # on small data): comparing single epochs, one of them nearly always "shrank" by
    # more than 5% and the fit never settled; window means with a noise allowance do
    stopped, rule, _ = _drive(monkeypatch, _noisy_norms(60, rate=0.0), window=8, cap=60)
    assert stopped is not None and stopped < 2 * 8 + 8 + 10


def test_groups_shrinking_under_noise_do_not_look_settled(monkeypatch):
    # the same noise, but every live group falls 3% per epoch (~22% per window): on its
    # way to zero, not settled
    stopped, rule, _ = _drive(monkeypatch, _noisy_norms(60, rate=0.03), window=8, cap=60)
    assert stopped is None and rule.settled_ is None


def test_groups_in_transit_do_not_hold_a_fit_that_is_only_scored(monkeypatch):
    # the groups of the test above, on their way to zero under noise, with a flat
    # objective and a steady support: a fit that is only scored (settle="objective")
    # anneals after its first two windows and stops
    norms = _noisy_norms(60, rate=0.03)
    stopped, rule, _ = _drive(monkeypatch, norms, window=8, anneal=4, watch_transit=False)
    assert stopped == 2 * 8 + 4 - 1 and rule.resumed_ == 0
    # the objective still falling keeps it going
    falling = np.exp(-0.05 * np.arange(60))
    stopped, rule, _ = _drive(
        monkeypatch, _noisy_norms(60, 0.0), loss=falling, window=8, cap=60, watch_transit=False
    )
    assert stopped is None and rule.settled_ is None


def test_plan_holds_the_rate_then_decays_over_the_rest_of_theepoch_budget():
    plan = LRPlan(100, "cosine", warmup=5, hold=60).initialize()
    assert plan.factor(0) == pytest.approx(1 / 6)
    assert plan.factor(10) == plan.factor(59) == plan.factor(60) == 1.0
    assert plan.factor(80) == pytest.approx(0.5)
    assert plan.factor(99) < 0.01
    # without hold: the cosine over the whole cap (half the rate at mid-cap)
    assert LRPlan(100, "cosine").initialize().factor(50) == pytest.approx(0.5)


@pytest.mark.parametrize("family", [DGatedMLPRegressor, DGatedNAMRegressor])
def test_with_the_automatic_budget_warm_starts_hold_their_rate(family):
    # a warm path point keeps the full rate until the settled rule anneals (groups on
    # their way to zero shrink at a rate proportional to it); a cold fit decays over
    # the cap, unless its family holds it too (the NAM); an explicit max_epochs keeps
    # the plain cosine
    X, y = _diabetes_with_noise()
    holds = []
    for params in ({}, {"max_epochs": 30}):
        est = family(D=3, hidden_layer_sizes=(8,), random_state=0, **params)
        est._training_callbacks = lambda module: [("spy", _PlanSpy(holds, "hold"))]
        est.set_params(lam=0.3 * est.lambda_max(X, y)).fit(X, y)
        est.set_params(warm_start=True).fit(X, y)
    cold, warm, cold_fixed, warm_fixed = holds
    assert cold_fixed == 0 and warm_fixed == 0
    cap = epoch_budget(family(), X.shape[0], est.batch_size)
    assert 0 < warm < cap
    assert cold == (warm if family._traits.hold_cold_rate else 0)
    assert family._traits.hold_cold_rate == (family is DGatedNAMRegressor)


@pytest.mark.parametrize(
    "spike, hold, earliest, fires",
    [
        (False, 50, 0, False),
        (True, 50, 0, True),
        (True, 0, 0, False),
        (True, 50, 32, False),  # a cold fit's jump before its earliest epoch
        (True, 50, 20, True),  # ... and after it (checked from epoch 20 + 8 + 1 on)
    ],
)
def test_a_loss_spike_halves_the_held_rate_and_anneals_to_a_stop(
    monkeypatch, spike, hold, earliest, fires
):
    """A held rate at the edge of stability shows as a jump of the training loss far
    above its recent level (a warm path point went 0.085 -> 0.14 -> 0.75 -> 11 -> 1e22
    at lr 0.1); while the plan holds its rate the rule then halves it at once and
    anneals. Mini-batch noise of +-25% around a level must not look like a spike; a
    plain cosine (hold 0) is left alone, and so is a cold fit before ``earliest`` (from
    a random init its early losses may jump)."""
    rng = np.random.default_rng(0)
    losses = 0.07 * np.exp(0.25 * rng.uniform(-1, 1, size=60))
    if spike:
        losses[30:] = [0.75, 11.0, 4.4] + [0.1] * 27
    # norms that never settle (every live group falls 10% an epoch): only a spike stops
    norms = [[np.exp(-0.1 * k), 0.0] for k in range(60)]
    stopped, rule, plan = _drive(
        monkeypatch, norms, loss=losses.tolist(), window=8, cap=60, hold=hold, earliest=earliest
    )
    if not fires:
        assert stopped is None and not rule.spiked_
        return
    assert rule.spiked_
    f = plan.factors_
    assert f[31] == pytest.approx(0.5 * plan._scheduled(31))  # halved the epoch after
    # annealed to zero over the next rule.anneal epochs, then stopped
    assert stopped == 31 + rule.anneal - 1 and plan.factor(31 + rule.anneal) == 0.0


@pytest.mark.parametrize("recovered", [True, False])
def test_after_a_spike_the_anneal_lets_the_loss_recover_or_warns(monkeypatch, recovered):
    """The anneal after a spike runs over ``recover`` epochs (a quarter of the cap in a
    fit), not the settled rule's short anneal: a CNN stopped two epochs after such a jump
    kept its jumped loss (test accuracy 0.49). A loss still far above its level before the
    jump when the anneal ends is a ConvergenceWarning, not a silent model."""
    from sksparse_nn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(1)
    losses = 0.07 * np.exp(0.25 * rng.uniform(-1, 1, size=60))
    tail = [0.08] * 27 if recovered else [1.5] * 27
    losses[30:] = [0.75, 2.0, 1.8] + tail
    norms = [[np.exp(-0.1 * k), 0.0] for k in range(60)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stopped, rule, plan = _drive(
            monkeypatch, norms, loss=losses.tolist(), window=8, cap=60, hold=50, recover=15
        )
    assert rule.spiked_ and stopped == 31 + 15 - 1  # the recovery anneal, then the stop
    assert plan.factor(31 + 15) == 0.0
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    if recovered:
        assert not convergence
    else:
        assert len(convergence) == 1
        message = str(convergence[0].message)
        assert "epoch 31" in message and "Lower lr" in message


class _WarmNet(_FakeNet):
    """A fake net with a real module and optimizer, whose training objective at the start
    is ``start`` (what the rule compares the epochs' losses with)."""

    def __init__(self, start):
        super().__init__()
        torch.manual_seed(0)
        self.module_ = torch.nn.Linear(3, 2)
        self.optimizer_ = torch.optim.SGD(self.module_.parameters(), lr=0.1, momentum=0.9)
        self.start = start

    def training_objective(self, dataset):
        return self.start

    def step(self):
        """An optimizer step that moves the weights and fills the momentum buffers."""
        self.optimizer_.zero_grad()
        self.module_(torch.ones(4, 3)).pow(2).sum().backward()
        self.optimizer_.step()


def test_a_warm_start_whose_loss_rises_goes_back_to_its_start_at_half_the_rate(monkeypatch):
    """A warm start's loss over SPIKE times its starting objective (a CNN path point at
    its stability edge: 0.5 -> chance level, every filter removed): the module returns to
    the start, the momentum is dropped, the base rates halve and warm up again, up to
    RESTARTS times; after that the fit goes on (and a spike anneals to a stop)."""
    from sksparse_nn.training import schedule as _schedule

    monkeypatch.setattr(_schedule, "group_norms", lambda module: {"w": torch.ones(2)})
    plan = LRPlan(100, "cosine", warmup=2, hold=75).initialize()
    net = _WarmNet(start=0.5)
    plan.on_train_begin(net)
    rule = _schedule.StopWhenSettled(plan, 3, 1e-7, 4, restore=True, ramp=4)
    rule.on_train_begin(net, X="the training data")
    start = {k: v.clone() for k, v in net.module_.state_dict().items()}
    losses = [0.5, 0.6, 1.6, 0.5, 0.4, 1.7, 0.5, 0.45, 1.8, 0.4]
    restarted = []
    for epoch, loss in enumerate(losses):
        plan.on_epoch_begin(net)
        net.step()
        net.history.new_epoch()
        net.history.record("train_loss", loss)
        before = rule.restarts_
        rule.on_epoch_end(net)
        if rule.restarts_ > before:
            restarted.append(epoch)
            state = net.module_.state_dict()
            assert all(torch.equal(state[k], start[k]) for k in start)  # back at the start
            assert not net.optimizer_.state  # no stale momentum
    assert restarted == [2, 5]  # 1.6 and 1.7 > 3 x 0.5; 1.8 comes after RESTARTS = 2
    assert _schedule.RESTARTS == 2 and rule.origin_ == 6
    assert plan.base_ == pytest.approx([0.025])  # halved twice
    assert plan.scale_ == 0.25  # what the next warm start begins at (see below)
    # each restart warms up again over ``ramp`` epochs: from low up to the held rate
    ramp = [plan.factor(e) for e in range(6, 11)]
    assert ramp == sorted(ramp) and ramp[0] < 0.25 and ramp[3] < ramp[4] == pytest.approx(1.0)
    # and the spike and settled rules watch only from the ramp's end
    assert rule._warmup() == 4 and not rule._spike([0.4] * 12 + [5.0])


def test_cold_fits_and_fits_that_stay_near_their_start_never_restart(monkeypatch):
    from sksparse_nn.training import schedule as _schedule

    monkeypatch.setattr(_schedule, "group_norms", lambda module: {"w": torch.ones(2)})
    for restore, losses in [(False, [0.5, 5.0, 4.0]), (True, [0.5, 1.2, 0.9, 1.4, 0.6])]:
        plan = LRPlan(100, "cosine", warmup=1, hold=75).initialize()
        net = _WarmNet(start=0.5)
        plan.on_train_begin(net)
        rule = _schedule.StopWhenSettled(plan, 3, 1e-7, 4, restore=restore)
        rule.on_train_begin(net, X="the training data")
        for loss in losses:
            net.history.new_epoch()
            net.history.record("train_loss", loss)
            rule.on_epoch_end(net)
        assert rule.restarts_ == 0 and plan.base_ == [0.1]


def _no_drops(monkeypatch):
    """No drop of groups in transit, by the automatic budget's rule or at the end of a
    fixed budget (each measures the training objective)."""
    from sksparse_nn.training import pruning, schedule

    monkeypatch.setattr(schedule, "drop_if_no_worse", lambda net, data, drop: False)
    monkeypatch.setattr(pruning, "drop_smallest_first", lambda net, data, order, tries: 0)


def test_a_warm_start_measures_the_objective_it_starts_from(monkeypatch):
    """The yardstick of the restarts: the training objective of the warm start's module on
    the whole data. From a fit that ended with its rate annealed to zero, at the same lam,
    that is the last epoch's mean training loss up to the last steps' movement; cold fits
    never measure it."""
    from sksparse_nn.training import PenalizedNet

    seen = []
    measure = PenalizedNet.training_objective

    def spy(self, dataset):
        seen.append(measure(self, dataset))
        return seen[-1]

    monkeypatch.setattr(PenalizedNet, "training_objective", spy)
    _no_drops(monkeypatch)  # drops of groups in transit measure it too
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = DGatedMLPRegressor(lam=0.01, hidden_layer_sizes=(8,), random_state=0).fit(X, y)
    assert not seen
    last = est.history_[-1, "train_loss"]
    est.set_params(warm_start=True).fit(X, y)
    assert len(seen) == 1 and seen[0] == pytest.approx(last, rel=1e-2)


def test_measuring_the_start_leaves_batchnorm_statistics_and_mode_alone(monkeypatch):
    """The start's objective is measured in training mode (as the epochs' losses are),
    which would update BatchNorm's running statistics: they are put back, as is the
    module's mode."""
    from sksparse_nn import DGatedNeuralNetRegressor
    from sksparse_nn.training import PenalizedNet

    checked = []
    measure = PenalizedNet.training_objective

    def spy(self, dataset):
        before = [b.clone() for b in self.module_.buffers()]
        mode = self.module_.training
        value = measure(self, dataset)
        after = list(self.module_.buffers())
        same = all(torch.equal(b, a) for b, a in zip(before, after, strict=True))
        checked.append((len(before) > 0, same, self.module_.training == mode))
        return value

    monkeypatch.setattr(PenalizedNet, "training_objective", spy)
    _no_drops(monkeypatch)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(96, 4))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=96)
    module = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
    )
    est = DGatedNeuralNetRegressor(module, gates={"0.weight": "out"}, lam=0.01, random_state=0)
    est.set_params(max_epochs=5).fit(X, y)
    est.set_params(max_epochs=None, warm_start=True).fit(X, y)
    assert checked == [(True, True, True)]


def test_a_warm_start_begins_at_the_rate_its_predecessor_ended_at(monkeypatch):
    """A warm start that went back to its start at half the rate (twice: a quarter)
    hands that share of the rate on: the next warm start (the next point of a path, a
    similar problem) begins there instead of breaking at the full rate again (default
    MLP path on wine: 27 restarts in 19 points); a cold fit, or a warm start with a new
    lr, begins at the full rate."""
    from sksparse_nn.training import schedule as _schedule

    scales = []
    begin = LRPlan.on_train_begin

    def spy(self, net, **kwargs):
        begin(self, net, **kwargs)
        scales.append(self.scale)
        rates = [group["lr"] for group in net.optimizer_.param_groups]
        assert self.base_ == pytest.approx([self.scale * rate for rate in rates])

    monkeypatch.setattr(LRPlan, "on_train_begin", spy)
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = DGatedMLPRegressor(lam=0.01, hidden_layer_sizes=(8,), random_state=0, warm_start=True)
    est.fit(X, y)  # cold
    with monkeypatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch.setattr(_schedule, "SPIKE", 0.0)  # every epoch "rises": restarts, twice
        est.set_params(lam=0.02).fit(X, y)
    est.set_params(lam=0.03).fit(X, y)
    est.set_params(lr=0.5 * est.lr).fit(X, y)  # a new lr is the user's: taken whole
    est.set_params(warm_start=False).fit(X, y)
    assert scales == [1.0, 1.0, 0.25, 1.0, 1.0]


def test_the_settled_rule_reads_one_epoch_of_history_per_epoch(monkeypatch):
    """The rule keeps the training losses itself: reading skorch's whole column every
    epoch made it quadratic in the epochs (a default NAM path on 112 rows spent ~8% of
    its time there). It must still see every loss, in epoch order, also after epochs of
    an earlier call on the same net."""
    from skorch.history import History

    reads = []

    class SpyHistory(History):
        def __getitem__(self, index):
            reads.append(index)
            return super().__getitem__(index)

    from sksparse_nn.training import schedule as _schedule

    plan = LRPlan(100, "cosine").initialize()
    rule = _schedule.StopWhenSettled(plan, 3, 1e-7, 4, nonconvex=True)
    net = _FakeNet()
    net.history = SpyHistory()
    for loss in (5.0, 4.0):  # an earlier call's epochs
        net.history.new_epoch()
        net.history.record("train_loss", loss)
    rule.on_train_begin(net)
    monkeypatch.setattr(_schedule, "group_norms", lambda module: {"w": torch.ones(2)})
    losses = [3.0, 2.0, 1.5, 1.4, 1.4, 1.41, 1.39, 1.4]
    for loss in losses:
        net.history.new_epoch()
        net.history.record("train_loss", loss)
        reads.clear()
        rule.on_epoch_end(net)
        # only the newest epoch's entry (row -1), never a slice of all rows
        assert reads and all(isinstance(i, tuple) and i[0] == -1 for i in reads), reads
    assert rule.losses_ == [5.0, 4.0, *losses]


def _ar1(rng, n_epochs, n_columns, rho):
    """Stationary AR(1) noise of unit variance and lag-1 correlation ``rho``."""
    x = np.empty((n_epochs, n_columns))
    x[0] = rng.standard_normal(n_columns)
    innovations = rng.standard_normal((n_epochs, n_columns)) * np.sqrt(1 - rho**2)
    for t in range(1, n_epochs):
        x[t] = rho * x[t - 1] + innovations[t]
    return x


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_noise_bound_holds_for_autocorrelated_epochs(rho):
    """Two windows of stationary noise differ by more than the bound (``NOISE`` = 2
    standard errors) in about 4.6% of cases when the bound knows the noise's
    autocorrelation (a normal's two-sided tail at 2; the bound's own estimate from 68
    values adds a little: up to 10% allowed); read as independent epochs, AR(1) noise of
    correlation 0.8 exceeds it in about half of the cases, and a settled group looked
    shrinking."""
    from sksparse_nn.training.signals import _noise

    width = 34
    x = _ar1(np.random.default_rng(0), 2 * width, 4000, rho)
    difference = np.abs(x[:width].mean(axis=0) - x[width:].mean(axis=0))
    exceeded = np.mean(difference > _noise(x, width))
    assert 0.02 < exceeded < 0.10


def test_noise_bound_does_not_hide_a_steady_decline():
    """A group on its way to zero falls steadily: a decline of three standard errors of
    the window means' difference under correlated noise (rho 0.8) must stand out in most
    cases (a normal's P(Z > 3 - 2) = 84%; >= 75% allowed), and a noise-free decline in
    every case, however slow."""
    from sksparse_nn.training.signals import _noise

    width, rho = 34, 0.8
    n = 2 * width
    x = _ar1(np.random.default_rng(1), n, 4000, rho)
    sd_difference = np.sqrt(2 / width * (1 + rho) / (1 - rho))
    falling = x - (3 * sd_difference / width) * np.arange(n)[:, None]
    drop = falling[:width].mean(axis=0) - falling[width:].mean(axis=0)
    assert np.mean(drop > _noise(falling, width)) >= 0.75
    slow = -1e-6 * np.arange(n)[:, None] * np.ones((1, 3))
    assert np.all(slow[:width].mean(axis=0) - slow[width:].mean(axis=0) > _noise(slow, width))
