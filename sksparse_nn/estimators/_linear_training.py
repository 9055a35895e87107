"""What the linear family adds to training: the ridge start, the exact block steps (which
may certify a fit before any gradient step) with their trainer, the data memo of warm
starts, and the projection of ``positive=True``.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import is_classifier, is_regressor
from skorch.callbacks import Callback
from skorch.history import History

from ..groups import norms_by_label
from ..solvers import (
    KKT_TOL,
    DataMemo,
    centered_moments,
    curvature_operator,
    data_key,
    is_wide,
    same_key,
    uses_working_sets,
)
from ..sparsifiers import gated_tensors, set_weight
from ..training import GradientTrainer, Trained, as_numpy
from ..utils.convergence import warn_convergence

#: Widest data (features) that get the ridge start; wider data keep the default init.
_RIDGE_INIT_MAX_FEATURES = 4000
#: Relative KKT violation of a zero group beyond which L-BFGS may revive it (D = 2).
_REVIVE_MARGIN = 1e-9


def _is_gated(module):
    """Whether the module's weight is D-gated (certified D = 2 fits never gate it)."""
    return any(True for _ in gated_tensors(module))


def _weights(dataset):
    """The dataset's sample weights (mean 1) as float64 numpy, or None."""
    return None if dataset.weight is None else as_numpy(dataset.weight)


class _ProjectNonNegative(Callback):
    """``positive=True``: after every optimizer step, negative coefficients are set to
    zero (a projected gradient step; the factors are re-balanced)."""

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        module = net.module_
        with torch.no_grad():
            weight = module.weight
            if not bool((weight < 0).any()):
                return
            if _is_gated(module):
                set_weight(module, "weight", weight.clamp(min=0.0))
            else:
                weight.clamp_(min=0.0)


class _BlockStepTrainer(GradientTrainer):
    """The linear family's trainer: exact block steps from the module's start (see
    ``sksparse_nn.solvers.gated_least_squares_fit``), then the engine's gradient steps
    (L-BFGS finishes the smooth D-gated problem), unless the block steps certified the
    solution (relative KKT violation below ``KKT_TOL``): such a fit ends there, with no
    epoch trained.

    L-BFGS stops when one of its iterations lowers the objective by less than ``tol``
    (relative to the block steps' objective), not only at the end of an epoch.
    """

    def train(self, est, module, dataset, **kwargs):
        if est.positive and module.out_features > 1 and is_classifier(est):
            raise ValueError(
                "positive=True is supported for binary problems only: multinomial "
                f"coefficients ({module.out_features} classes) are defined up to a "
                "constant per feature and cannot all be made non-negative."
            )
        objective, certified = None, False
        est._fit_memo = None  # set by the block steps on working sets (_data_memo)
        if est._runs_block_steps(dataset.given) and est._penalizes(module):
            objective, certified = est._run_block_steps(module, dataset)
        if certified:  # nothing left to train (nor gates, see _gate_module)
            return Trained(module, History(), {})
        options, callbacks = {}, []
        # Nothing left for gradient steps after the constrained block steps with L-BFGS,
        # whose projected steps would only undo their work.
        if est.positive and objective is not None and est.optimizer == "lbfgs":
            options["max_epochs"] = 0
            if est.D == 2:  # convex: the steps should have certified the solution
                warn_convergence(
                    f"{type(est).__name__}(positive=True, D=2): the block steps stopped "
                    f"before the KKT conditions held to the relative tolerance {KKT_TOL:g} "
                    "(their working sets stalled), and no gradient training follows "
                    "under the constraint: the coefficients are a feasible point near "
                    "the solution, not the certified solution.",
                    stacklevel=4,
                )
        if objective is not None and est.optimizer == "lbfgs" and est.tol is not None:
            options["optimizer__tolerance_change"] = est.tol * abs(objective)
        if est.positive:
            callbacks.append(("nonnegative", _ProjectNonNegative()))
        return super().train(
            est, module, dataset, net_options=options, callbacks=callbacks, **kwargs
        )


class _LinearTraining:
    """The linear family's start and block steps (a mixin of ``_SparseLinearModel``): the
    ridge start, the certificate that zero is the solution, the block steps with their
    trainer and collapse, and the data memo of warm starts. The family supplies
    ``_gate`` and, per task, ``_block_solve``."""

    def _init_module(self, module, dataset, targets):
        """Start from a ridge solution: dense, at the right scale.

        ``alpha = lam * s^(2/D - 2)`` makes ``alpha ||w||^2`` match ``lam ||w||^(2/D)`` at
        the coefficients' typical size ``s`` (``_weight_scale``), the same start in any
        units. At D > 2 zero is a trap, so a fit starts dense and lets the penalty remove
        groups. Classifiers regress the one-hot (binary: 0/1) targets. Very wide data
        keep the default init.
        """
        X = dataset.given if dataset.sparse else dataset.X.cpu().numpy()
        p = X.shape[1]
        if self._working_sets(X) and self.D == 2:
            # the convex problem's working sets grow from zero, as the reference solver's
            with torch.no_grad():
                module.weight.zero_()
            return
        if p > _RIDGE_INIT_MAX_FEATURES:
            return
        Y = targets.double().numpy() if targets.dtype.is_floating_point else None
        if Y is None:  # class codes
            codes = targets.numpy()
            Y = np.eye(module.out_features + (module.out_features == 1))[codes]
            Y = Y[:, 1:] if module.out_features == 1 else Y
        wide, weight = is_wide(X), _weights(dataset)
        gram, rhs, x_mean, y_mean, const = centered_moments(
            X, Y, self.fit_intercept, with_gram=not wide, sample_weight=weight
        )
        if self._zero_start(rhs, y_mean, const, p):
            with torch.no_grad():  # the exact answer, which the block steps certify
                module.weight.zero_()
                if self.fit_intercept:
                    module.bias.copy_(torch.as_tensor(y_mean))
            return
        curv = curvature_operator(X, x_mean, np.full(p, -1), wide, gram, weight)
        size = self._weight_scale(X, Y if is_regressor(self) else np.zeros(0))
        alpha = self.lam * size ** (2.0 / self.D - 2.0) + 1e-6 * curv.mean_diagonal
        alpha = max(alpha, np.finfo(np.float64).tiny)
        W = curv.scaled_solve(np.ones(p, dtype=bool), np.ones(p), rhs, np.full(p, alpha))
        if self.positive:
            W = np.maximum(W, 0.0)
        with torch.no_grad():
            module.weight.copy_(torch.as_tensor(W.T))
            if self.fit_intercept:
                module.bias.copy_(torch.as_tensor(y_mean - x_mean @ W))

    def _zero_is_optimal(self, gradient, loss0, n_features):
        """Whether zero coefficients are the global minimum at ``lam``, from the data
        term's gradient at zero (``(n_features, n_outputs)``, with the intercept at its
        optimum) and its value there, ``loss0``.

        ``D = 2``: ``lam >= lambda_max = max_j ||g_j|| / rho_j`` (the KKT conditions of
        zero). ``D > 2``: the data term is convex, so any ``w`` gains at most
        ``min(G ||w||, loss0)`` (``G = ||g||``) while the penalty costs at least
        ``lam rho_min ||w||^(2/D)``; both meet at ``||w|| = loss0 / G``, so zero is the
        global minimum once ``lam rho_min >= G^(2/D) loss0^(1 - 2/D)``. Not decided
        (False) with unpenalized features or sign constraints.
        """
        labels, rho = self._penalty_groups(n_features)
        if self.positive or np.any(labels < 0) or not np.all(rho > 0):
            return False
        norms = norms_by_label(np.asarray(gradient, dtype=np.float64), labels, rho.size)
        if self.D == 2:
            return bool(self.lam >= np.max(norms / rho, initial=0.0))
        power = 2.0 / self.D
        gain = float(np.sqrt(np.sum(norms**2))) ** power * max(loss0, 0.0) ** (1.0 - power)
        return bool(self.lam * rho.min(initial=np.inf) >= gain)

    def _zero_start(self, rhs, y_mean, const, n_features):
        """Whether a cold fit starts at zero because zero is the solution (see
        ``_zero_is_optimal``), judged from the ridge start's moments: ``rhs`` (centred
        ``X^T y / n``; for classifiers with an intercept, the log-loss gradient at the
        intercept-only model) and the loss there (``const``). Not for classifiers without
        an intercept. A ridge start at a huge lam would overflow the block steps."""
        if is_classifier(self):
            if not self.fit_intercept:
                return False
            p = np.asarray(y_mean, dtype=np.float64).ravel()
            p = np.append(p, 1.0 - p[0]) if p.size == 1 else p
            const = float(-np.sum(p[p > 0] * np.log(p[p > 0])))
        return self._zero_is_optimal(rhs, const, n_features)

    def _data_memo(self, X, sample_weight):
        """This fit's :class:`~sksparse_nn.solvers.DataMemo`: the previous fit's when this
        one is a warm start on the same data (a path, recognized by
        :func:`~sksparse_nn.solvers.data_key`), else a new one. Only warm starts keep
        the memo (see ``__getstate__``). Fits on working sets ask for it: their
        statistics are passes over a large design.
        """
        key = data_key(X, self.fit_intercept, sample_weight)
        kept = getattr(self, "_kept_data", None)
        if not (self.warm_start and kept is not None and same_key(kept[0], key)):
            kept = (key, DataMemo())
        self._kept_data = kept if self.warm_start else None
        self._fit_memo = kept[1]
        return kept[1]

    def __getstate__(self):
        """The state without the data memo of warm starts (copies and pickles stay the
        size of the model)."""
        state = dict(super().__getstate__())  # a copy: the default is __dict__ itself
        state.pop("_kept_data", None)
        state.pop("_fit_memo", None)
        return state

    def _trainer(self):
        return _BlockStepTrainer()

    def _runs_block_steps(self, X):
        """Whether a fit on ``X`` starts with exact block steps (at D = 2 on any data;
        ``_block_steps_max_features`` limits the D > 2 steps)."""
        limit = None if self.D == 2 else self._block_steps_max_features
        return (
            self._block_steps and not self.early_stopping and (limit is None or X.shape[1] <= limit)
        )

    def _working_sets(self, X):
        """Whether the block steps on ``X`` run on working sets."""
        return self._runs_block_steps(X) and uses_working_sets(X)

    @torch.no_grad()
    def _run_block_steps(self, module, dataset):
        """Exact block steps from the module's start; write the result as balanced factors.

        Groups at zero get zero factors (a stationary point L-BFGS need not move away
        from), except at D = 2 those whose KKT condition is violated, which can grow.
        """
        X = dataset.given if dataset.sparse else dataset.X.cpu().numpy()
        labels, rho = self._penalty_groups(X.shape[1])
        weight = module.weight.detach().cpu().numpy()  # float64 (the family's dtype):
        weight = weight.astype(np.float64, copy=False).T  # the module's memory, no copy
        weight.flags.writeable = False  # the start, read only by the solve
        bias = as_numpy(module.bias) if self.fit_intercept else None
        fit = self._block_solve(X, dataset.y, labels, rho, weight, bias, _weights(dataset))
        W, b, objective, gradient, norms, certified = fit[:6]
        if np.shares_memory(W, weight):  # the start itself (the solve left it): a copy
            W = W.copy()
        if self.fit_intercept:
            module.bias.copy_(torch.as_tensor(b, dtype=module.bias.dtype))
        if not certified and not np.any(W):  # zero, certified if it is the global minimum
            certified = self._zero_is_optimal(-gradient, objective, X.shape[1])
        gated = _is_gated(module)
        if certified and not gated:  # the solution itself: nothing will train the factors
            module.weight.copy_(torch.as_tensor(W.T, dtype=module.weight.dtype))
            return objective, certified
        if not gated:  # gradient training follows after all
            self._gate(module, "balanced", labels, rho)
        revive = None
        if self.D == 2:
            if self.positive:  # only a positive gradient can grow a coefficient from 0
                gradient = np.maximum(gradient, 0.0)
            grad_norms = norms_by_label(gradient, labels, rho.size)
            # strictly violated only: at equality (lam = lam_max) zero is the solution,
            # and gates of 1 would let L-BFGS creep away from it
            violated = grad_norms > self.lam * rho * (1.0 + _REVIVE_MARGIN)
            revive = torch.as_tensor((norms == 0) & violated)
        set_weight(module, "weight", torch.as_tensor(W.T), revive=revive)
        return objective, certified

    def _penalizes(self, module):
        """Whether any group of ``module``'s input features is penalized."""
        return bool(np.any(self._penalty_groups(module.in_features)[0] >= 0))

    def _certifies(self):
        """Whether fits end with block steps that can certify the solution (``D = 2``)."""
        return self.D == 2 and self._block_steps and not self.early_stopping

    def _collapse(self, module, zero_tol):
        """A certified fit's plain weight: its group norms, groups below ``zero_tol`` set
        to 0 (what collapsing its balanced factors gives); trained fits: the base's."""
        labels, rho = self._penalty_groups(module.in_features)
        if _is_gated(module) or not np.any(labels >= 0):
            return super()._collapse(module, zero_tol)
        weight = module.weight
        norms = norms_by_label(as_numpy(weight).T, labels, rho.size)
        keep = norms >= zero_tol
        with torch.no_grad():
            dead = np.flatnonzero((labels >= 0) & ~keep[np.maximum(labels, 0)])
            weight[:, torch.as_tensor(dead)] = 0.0
        return {"weight": norms}, {"weight": keep}
