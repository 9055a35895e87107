"""The engine's one entry point: train a sparsified module as a family declared it.

:class:`GradientTrainer` builds a :class:`~.net.PenalizedNet` from the estimator's
parameters and its family's declarations (criterion, optimizer and step caps, ridge,
callbacks, early stopping, the automatic epoch budget), adds the guards and the stopping
plan, trains, and returns a :class:`Trained`. A family never touches the net: it
answers the hooks this module calls (see ``BaseDGated``'s hook table) or, for a family
with an exact solver of its own, returns a subclass of :class:`GradientTrainer` from
``_trainer()`` (the linear models' block steps), which may finish a fit itself.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import torch

from ..exceptions import TrainingDivergedError
from ..sparsifiers import penalty_curvatures, sparsified_tensors
from ..utils.convergence import warn_convergence
from .callbacks import make_callbacks
from .data import BatchIterator, RandomSplit
from .guards import ConvergenceMonitor, DivergenceGuard
from .pruning import DropInTransitAtEnd
from .schedule import LRPlan, StopWhenSettled

__all__ = ["GradientTrainer", "Trained", "epoch_budget", "step_size_groups"]

#: Optimizer steps of the learning-rate warm-up of a warm start: a path point starts at
#: the previous lam's minimum, which that fit's final anneal reached at a vanishing rate
#: and can be too sharp for the full rate.
WARMUP_STEPS = 50
#: Optimizer steps over which a fit with the automatic budget must look settled
#: (support, group norms, objective) before it anneals and stops.
SETTLE_STEPS = 100
#: Optimizer steps of the warm-up after a warm start's restart (see StopWhenSettled).
RESTART_RAMP_STEPS = 500
#: Optimizer steps a cold fit with the automatic budget trains before it may look
#: settled (StopWhenSettled's ``earliest``; at most a quarter of the cap): from a random
#: init, training can rest on an early plateau for hundreds of steps.
COLD_MIN_STEPS = 1000
#: A fit that diverges is trained once more from its start at this share of its rate
#: (every parameter group's): a tenth is past the edge of stability of a step that
#: overshot on the data's largest curvature, and still a usable rate.
BACKOFF = 0.1


class Trained(NamedTuple):
    """What a trainer hands back: the trained (still sparsified) module, the epochs'
    history (a skorch ``History``) and the fit's callbacks by name."""

    module: torch.nn.Module
    history: object
    callbacks: dict
    #: The share of the estimator's ``lr`` the fit trained at (:data:`BACKOFF` after a
    #: retry): where the next warm start of a path begins.
    lr_scale: float = 1.0


def _epochs_for(steps, steps_per_epoch, max_epochs):
    """Whole epochs covering ``steps`` optimizer steps, at most a tenth of ``max_epochs``
    (and at least one)."""
    return max(1, min(-(-steps // steps_per_epoch), max_epochs // 10))


def epoch_budget(estimator, n_samples, batch_size):
    """The estimator's ``max_epochs``, or for ``None`` at least its traits'
    ``auto_min_epochs`` epochs and ``auto_min_steps`` optimizer steps on ``n_samples``
    rows (unused groups shrink by a factor per step, so exact zeros need a number of
    steps: small data sets get more epochs)."""
    if estimator.max_epochs is not None:
        return estimator.max_epochs
    traits = estimator._traits
    steps_per_epoch = -(-n_samples // batch_size)
    return max(traits.auto_min_epochs, -(-traits.auto_min_steps // steps_per_epoch))


def step_size_groups(module, optimizer, lam, lr, ridge=None, weight_decay=0.0):
    """Optimizer parameter groups (skorch's ``(pattern, options)`` pairs): SGD step
    sizes of the penalty's factors (and of the weights under ``ridge``) capped at
    ``0.5 / (lam * curvature)``, and ``weight_decay`` on the other weights.

    An SGD step with Nesterov momentum 0.9 is stable only while ``lr * lam * curvature``
    stays below about 1.36; with the cap any lam contracts unused groups by about half
    per step instead of blowing up. Adaptive optimizers normalize their steps and are
    left alone.
    """
    groups = []
    sgd = isinstance(optimizer, type) and issubclass(optimizer, torch.optim.SGD)
    if sgd and lam > 0:
        curvatures = [(name, c) for name, _, c in penalty_curvatures(module)]
        # the ridge's weights: curvature 2 c of lam * c * ||V||^2
        curvatures += [
            (name, 2.0 * float(torch.as_tensor(c).max())) for name, c in (ridge or {}).items()
        ]
        for name, curvature in curvatures:
            cap = 0.5 / (lam * curvature) if curvature > 0 else np.inf
            if cap < lr:
                groups.append((name, {"lr": cap}))
    # L2 on the ungated weights only (skorch gives a parameter to the first pattern it
    # matches; the factors' names end in "original" / "gates"; biases are left alone)
    if weight_decay:
        groups.append(("*weight", {"weight_decay": weight_decay}))
    return groups


class GradientTrainer:
    """Trains a sparsified module by gradient steps on a :class:`~.net.PenalizedNet`.

    Reads the estimator's training parameters (``lam``, ``lr``, ``optimizer``,
    ``batch_size``, ``max_epochs``, ``lr_schedule``, ``tol``, ``zero_tol``,
    ``validation_fraction``, ``device``, ``verbose``) and calls its declared hooks
    ``_criterion``, ``_ridge``, ``_optimizer``, ``_early_stopper``,
    ``_training_callbacks`` and ``_weight_scale``; its traits ``auto_min_steps``,
    ``auto_min_epochs``, ``hold_cold_rate``, ``net_class`` and ``fused_step``; and the state
    ``_warm_rate_scale`` the base keeps between fits (where a warm start's rate begins).

    Subclasses (a family's exact solver) may run before the gradient steps and pass
    ``net_options`` (skorch keyword arguments) and ``callbacks`` to :meth:`train`.
    """

    def train(
        self,
        estimator,
        module,
        dataset,
        *,
        seed,
        warm,
        baseline,
        describe,
        weight_scale,
        net_options=None,
        callbacks=(),
    ):
        """Train ``module`` on ``dataset``; a :class:`Trained`.

        ``seed`` seeds the validation split; ``warm`` says the module is a previous fit
        (a warm start); ``baseline()`` and ``describe(epoch, loss)`` are the divergence
        guard's yardstick and message; ``weight_scale()`` the unit of ``zero_tol``.

        A fit that diverges is trained again from its start at :data:`BACKOFF` times its
        learning rates, and says so through ``warn_convergence`` (a path reports it
        with its points); :class:`TrainingDivergedError` only when that diverges too.
        """
        start = copy.deepcopy(module.state_dict())
        options = dict(
            seed=seed,
            warm=warm,
            baseline=baseline,
            describe=describe,
            weight_scale=weight_scale,
            net_options=net_options,
            callbacks=callbacks,
        )
        try:
            return self._train_at(estimator, module, dataset, 1.0, **options)
        except TrainingDivergedError as exc:
            first = exc
        module.load_state_dict(start)
        try:
            trained = self._train_at(estimator, module, dataset, BACKOFF, **options)
        except TrainingDivergedError as exc:
            raise TrainingDivergedError(
                f"{first} A retry from the start at lr={estimator.lr * BACKOFF:g} diverged "
                f"too (epoch {exc.epoch}).",
                lam=first.lam,
                epoch=first.epoch,
            ) from first
        warn_convergence(
            f"{type(estimator).__name__}: training diverged at lam={estimator.lam:g} with "
            f"lr={estimator.lr:g} (epoch {first.epoch}) and was trained again from its "
            f"start at lr={estimator.lr * BACKOFF:g}, which converged. Set a lower lr to "
            "save the failed attempt.",
            stacklevel=3,
        )
        return trained

    def _train_at(
        self,
        estimator,
        module,
        dataset,
        lr_scale,
        *,
        seed,
        warm,
        baseline,
        describe,
        weight_scale,
        net_options,
        callbacks,
    ):
        """One training run at ``lr_scale`` times the estimator's learning rates."""
        net = self.make_net(estimator, module, dataset, seed, net_options, callbacks, lr_scale)
        # the divergence guard judges an epoch before the stopping rules act on it (an
        # exploded loss is an error, not a warm start to restart)
        net.callbacks.append(("divergence", DivergenceGuard(baseline, describe)))
        self.plan_stopping(estimator, net, len(dataset), warm, weight_scale)
        try:
            net.fit(dataset, None)
        except FloatingPointError as exc:  # raised inside a module's forward
            if isinstance(exc, TrainingDivergedError):
                raise
            epoch = len(net.history)
            message = describe(epoch, float("nan"))
            raise TrainingDivergedError(
                f"{message} ({exc})", lam=estimator.lam, epoch=epoch
            ) from exc
        return Trained(net.module_, net.history, dict(net.callbacks_), lr_scale)

    def make_net(self, est, module, dataset, seed, net_options=None, callbacks=(), lr_scale=1.0):
        """The skorch net of one fit (not yet trained), at ``lr_scale`` times the
        estimator's learning rates (a parameter group's stability cap stays a cap)."""
        n = len(dataset)
        batch_size = n if est.batch_size is None else min(est.batch_size, n)
        max_epochs = epoch_budget(est, n, batch_size)
        ridge = est._ridge(module)
        optimizer, options = est._optimizer(module, ridge)
        lr = est.lr * lr_scale
        if lr_scale != 1.0 and "param_groups" in options:
            options = dict(options)
            options["param_groups"] = [
                (name, {**group, "lr": min(group["lr"], lr)} if "lr" in group else group)
                for name, group in options["param_groups"]
            ]
        all_callbacks = make_callbacks(
            lr_plan=LRPlan(max_epochs, est.lr_schedule), tol=est.tol, verbose=est.verbose
        )
        stopper = est._early_stopper()
        train_split = None
        if stopper is not None:
            train_split = RandomSplit(est.validation_fraction, seed)
            all_callbacks.append(("early_stopping", stopper))
        all_callbacks.append(("convergence", ConvergenceMonitor(max_epochs)))
        all_callbacks += [*est._training_callbacks(module), *callbacks]
        kwargs = dict(
            criterion=est._criterion(),
            lam=est.lam,
            ridge=ridge,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            iterator_train=BatchIterator,
            iterator_train__shuffle=batch_size < n,
            iterator_valid=BatchIterator,
            train_split=train_split,
            callbacks=all_callbacks,
            # skorch's PrintLog formats a table row every epoch even when nothing is
            # printed; progress is the ProgressBar's job
            callbacks__print_log=None,
            device=est.device,
            verbose=0,
            **{f"optimizer__{k}": v for k, v in options.items()},
        )
        if est._traits.fused_step is not None:  # the family's one-call step
            kwargs["fused_step"] = est._traits.fused_step
        kwargs.update(net_options or {})
        return est._traits.net_class(module, **kwargs)

    def plan_stopping(self, est, net, n_samples, warm, weight_scale):
        """When ``net`` stops: a learning-rate warm-up for warm starts; with the
        automatic budget (``max_epochs=None``) the rule that ends a settled fit early
        (and drops groups in transit as it goes), with a fixed one the drop of the groups
        the budget leaves in transit (:class:`~.pruning.DropInTransitAtEnd`)."""
        plan = dict(net.callbacks)["lr_schedule"]
        steps_per_epoch = -(-n_samples // net.batch_size)
        if warm and net.optimizer is not torch.optim.LBFGS:  # a line search needs none
            plan.warmup = _epochs_for(WARMUP_STEPS, steps_per_epoch, plan.max_epochs)
            # at the rate the previous fit ended stable at (halved by its restarts): the
            # next point of a path is a similar problem, which the full rate would break
            lr, scale = getattr(est, "_warm_rate_scale", (None, 1.0))
            plan.scale = scale if lr == est.lr else 1.0
        if est.max_epochs is not None and plan.max_epochs > 0:
            zero_tol = est.zero_tol * weight_scale()
            net.callbacks.append(("drop_at_end", DropInTransitAtEnd(plan.max_epochs, zero_tol)))
        if est.max_epochs is None and plan.max_epochs > 0:
            window = _epochs_for(SETTLE_STEPS, steps_per_epoch, plan.max_epochs)
            if plan.schedule == "cosine" and (warm or est._traits.hold_cold_rate):
                # the full rate until the settled rule anneals; a cosine over the cap's
                # last quarter when it never does
                plan.hold = plan.max_epochs - max(window, plan.max_epochs // 4)
            zero_tol = est.zero_tol * weight_scale()
            nonconvex = any(s.nonconvex for *_, s in sparsified_tensors(net.module))
            # after a loss spike: an anneal over a quarter of the cap (the loss recovers)
            recover = max(window, plan.max_epochs // 4)
            # a warm start whose loss rises far above its start goes back to it at half
            # the rate, warmed up to again gently (a line search needs none)
            restore = warm and net.optimizer is not torch.optim.LBFGS
            ramp = _epochs_for(RESTART_RAMP_STEPS, steps_per_epoch, plan.max_epochs)
            cold = min(-(-COLD_MIN_STEPS // steps_per_epoch), plan.max_epochs // 4)
            settled = StopWhenSettled(
                plan,
                window,
                zero_tol,
                window,
                nonconvex,
                recover=recover,
                restore=restore,
                ramp=ramp,
                earliest=0 if warm else cold,
                # families without the parameter wait for their groups
                watch_transit=getattr(est, "settle", "support") == "support",
            )
            net.callbacks.append(("settled", settled))
