"""The base every family derives from: validation, the fit's orchestration, exact zeros.

An estimator is ``(task mixin) + (family) + BaseDGated``. The family answers the hooks of
the contract (:data:`~sksparse_nn.estimators._contract.HOOKS`: which module to build,
which of its tensors to sparsify, what its training needs); the task mixin encodes
targets and decodes predictions; ``sksparse_nn.training`` builds and trains the net.
No family knows how a sparsifier is parametrized: it attaches one with
:meth:`BaseDGated._sparsify` and the base reads :func:`~sksparse_nn.sparsifiers.group_norms`
and :func:`~sksparse_nn.sparsifiers.support`.
"""

from __future__ import annotations

import copy
import functools
from abc import ABCMeta, abstractmethod
from numbers import Integral, Real

import numpy as np
import torch
from sklearn import get_config
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..exceptions import TrainingDivergedError
from ..groups import held_penalty_groups
from ..sparsifiers import (
    DEFAULT_METHOD,
    collapse,
    get_sparsifier,
    group_norms,
    penalty,
    sparsifier_names,
    sparsify,
    support,
)
from ..training import (
    ArrayDataset,
    EarlyStopping,
    GradientTrainer,
    Scaling,
    as_numpy,
    check_device,
    data_scale,
    resolve_optimizer,
    seeded,
    step_size_groups,
    thread_policy,
    warn_first_epoch_restored,
    warn_not_converged,
)
from ..utils.validation import (
    check_range,
    check_sample_weight,
    check_warm_start_targets,
    value_limit,
)
from ._contract import Traits, with_hook_table
from ._docs import fill
from ._paths import PathProtocol
from ._shipping import ShippingMixin

__all__ = ["BaseDGated", "column_norms"]


def column_norms(weight):
    """Euclidean norm of each column of a ``(n_out, n_features)`` weight (float64)."""
    return np.linalg.norm(as_numpy(weight), axis=0)


@with_hook_table
class BaseDGated(PathProtocol, ShippingMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the sparse estimators (not for direct use): the family contract.

    A family sets ``_traits`` (a :class:`~sksparse_nn.estimators.Traits`), defines
    ``__init__`` (storing its parameters only) and overrides only these hooks; the fit
    itself (validation, scaling, seeding, training through ``sksparse_nn.training``,
    exact zeros, fitted attributes) is the base's (``tests/test_contract_table.py``).

    $hook_table
    """

    _traits = Traits()

    _parameter_constraints = {
        "lam": [Interval(Real, 0, None, closed="left")],
        "D": [Interval(Integral, 2, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "optimizer": [StrOptions({"sgd", "adam", "adamw", "lbfgs"}), type],
        "lr_schedule": [StrOptions({"cosine", "constant"})],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "zero_tol": [Interval(Real, 0, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "settle": [StrOptions({"support", "objective"})],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
    }

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit the model at ``lam``; groups the data do not need end exactly at zero.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. pandas feature names are kept; sparse rows are densified
            one batch at a time.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.

        $fit_returns
        """
        return self._fit(X, y, warm_module=self._warm_module())

    fit.__doc__ = fill(fit.__doc__)

    def _validate_params(self):
        """scikit-learn's parameter checks, then a usable device and a lam the training
        dtype holds (a path runs these once, before any work)."""
        super()._validate_params()
        check_device(self.device, type(self).__name__)
        lam_limit = float(np.finfo(self._numpy_dtype).max)
        if getattr(self, "lam", 0.0) > lam_limit:
            raise ValueError(
                f"{type(self).__name__}: lam={self.lam:g} is beyond the range of the "
                f"{self._dtype_name()} arithmetic it trains in (about {lam_limit:.3g}); "
                "every group is exactly zero long before such a lam."
            )

    def _warm_module(self):
        """The previous fit's module when ``warm_start`` (the start of the next fit)."""
        return getattr(self, "module_", None) if self.warm_start else None

    def _fit(self, X, y, warm_module=None, sample_weight=None):
        """Fit, starting from the (collapsed) ``warm_module`` when given: path warm starts."""
        if not get_config()["skip_parameter_validation"]:  # a path checked them once
            self._validate_params()
        X, y = validate_data(
            self,
            X,
            y,
            **self._traits.X_validation,
            dtype=(np.float64, np.float32),
            order="C",  # row-major whatever the input (pandas is column-major): the same
            # model from the same numbers, bit for bit
            reset=warm_module is None,  # a warm start keeps the features (checked here)
            ensure_all_finite=False,  # check_range: NaN / inf with the range, one pass less
            **self._target_validation,
        )
        limit, dtype_name = value_limit(self._numpy_dtype, X.shape[0]), self._dtype_name()
        name = type(self).__name__
        check_range(X, limit, "X", dtype_name, name)
        if np.issubdtype(y.dtype, np.floating):
            check_range(y, limit, "y", dtype_name, name)
        if warm_module is not None:
            check_warm_start_targets(self, y, is_classifier(self))
        sample_weight = check_sample_weight(sample_weight, X)
        targets, n_outputs = self._fit_targets(y)
        self.n_outputs_ = n_outputs
        scaling = self._fit_scaling(X, targets)
        _, targets = scaling.transform(None, targets)
        if targets.dtype.is_floating_point:
            targets = targets.to(self._traits.dtype)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        dtype = self._traits.dtype
        rows = X.shape[0] if self.batch_size is None else min(self.batch_size, X.shape[0])
        with thread_policy(self.n_threads, rows * X.shape[1]):
            with seeded(seed, self.device):
                dataset = ArrayDataset(
                    X,
                    targets,
                    dtype,
                    self.device,
                    shift=scaling.x_shift,
                    scale=scaling.x_scale,
                    weight=sample_weight,
                    sparse_rows=self._traits.sparse_batches,
                )
                if warm_module is not None:
                    module, init = copy.deepcopy(warm_module), "balanced"
                    scaling.unfold(self, module)
                    module = module.to(dtype=dtype)
                else:
                    self._plan_module(X, targets)
                    module = self._build_module(X.shape[1], n_outputs).to(dtype=dtype)
                    init = self._traits.fresh_init
                    self._init_module(module, dataset, targets)
                self._gate_module(module, init)
                trained = self._trainer().train(
                    self,
                    module,
                    dataset,
                    seed=seed,
                    warm=warm_module is not None,
                    baseline=functools.partial(self._baseline_loss, targets, n_outputs, module),
                    describe=self._divergence_message(X, y),
                    weight_scale=functools.partial(self._weight_scale, X, y),
                )
            self._finish_fit(trained, X, y, scaling, sample_weight)
        if warm_module is None:  # a warm start's first epoch is the previous fit's model
            warn_first_epoch_restored(self, trained.callbacks.get("early_stopping"))
        return self

    def _finish_fit(self, trained, X, y, scaling, sample_weight=None):
        """Fitted attributes from the trained module: exact zeros, gap, importances."""
        self.history_ = trained.history
        self.n_iter_ = len(trained.history)
        plan = trained.callbacks.get("lr_schedule")
        # the share of lr this fit ended stable at: where a warm start begins (the engine)
        self._warm_rate_scale = (self.lr, getattr(plan, "scale_", 1.0) * trained.lr_scale)
        module = trained.module.to("cpu")
        zero_tol = self.zero_tol * self._weight_scale(X, y)
        raw, keep = self._collapse(module, zero_tol)
        if not all(np.all(np.isfinite(v)) for v in raw.values()):  # belt and braces
            raise TrainingDivergedError(
                self._divergence_message(X, y)(self.n_iter_, float("nan")), lam=self.lam
            )
        self.module_ = module.eval()
        dead = np.concatenate([v[~keep[k]] for k, v in raw.items()] + [[0.0]])
        live = np.concatenate([v[keep[k]] for k, v in raw.items()] + [[np.inf]])
        self.sparsity_gap_ = (float(dead.max()), float(live.min()))
        # group norms in the units the penalty saw, every gated tensor in module order,
        # groups that collapse at exactly zero
        norms = [np.where(keep[k], v, 0.0) for k, v in raw.items()]
        self.group_norms_ = norms[0] if len(norms) == 1 else np.concatenate(norms or [[]])
        importances = self._feature_importances(self.module_)
        if importances is not None:  # families that select input features
            self.feature_importances_ = importances
            self.selected_features_ = np.flatnonzero(importances)
        if scaling.needs_float64():  # float32 weights cannot hold the user's offsets
            self.module_.double()
        scaling.fold(self, self.module_)  # the fitted module takes the user's units
        self._after_fit(X, y, sample_weight)
        monitor = trained.callbacks.get("convergence")
        if monitor is not None and self.n_iter_ >= monitor.max_epochs:
            losses = trained.history[:, "train_loss"]
            warn_not_converged(self, monitor.diagnose(losses, raw, zero_tol), monitor.max_epochs)
        return self

    # ------------------------------------------------------- fit helpers
    @property
    def _numpy_dtype(self):
        return np.float32 if self._traits.dtype == torch.float32 else np.float64

    def _dtype_name(self):
        return np.dtype(self._numpy_dtype).name

    def _fit_scaling(self, X, targets):
        """The standardization the family trains in (identity unless it opts in)."""
        inputs = X if self._traits.standardize_inputs else None
        floating = self._traits.standardize_targets and targets.dtype.is_floating_point
        return Scaling.fit(inputs, targets if floating else None)

    def _divergence_message(self, X, y):
        """A callable ``(epoch, loss) -> str`` explaining a diverged fit (reads the data's
        scale only then)."""
        name, lam, lr, optimizer = type(self).__name__, self.lam, self.lr, self.optimizer
        standardized = self._traits.standardize_inputs

        def describe(epoch, loss):
            scale = data_scale(X, y)
            advice = (
                "Lower lr (and check for extreme outliers in X)"
                if standardized
                else "Standardize X (e.g. StandardScaler in a Pipeline) and lower lr"
            )
            return (
                f"{name}: training diverged at epoch {epoch} (training loss {loss:.3g}) with "
                f"lr={lr}, lam={lam}, optimizer={optimizer!r}; data scale: {scale}. "
                f"{advice}; large lam is safe with the default SGD."
            )

        return describe

    # ----------------------------------------------------- training hooks
    def _trainer(self):
        """The trainer: the engine's :class:`~sksparse_nn.training.GradientTrainer` (an
        exact solver's subclass may finish a fit before any gradient step)."""
        return GradientTrainer()

    def _optimizer(self, module, ridge):
        """``(optimizer class, options)``: the ``optimizer`` parameter's class with
        parameter groups (skorch ``(pattern, options)`` pairs) capping the penalty
        factors' SGD steps by their curvature and carrying ``weight_decay``."""
        optimizer, options = resolve_optimizer(self.optimizer)
        options = dict(options)
        groups = step_size_groups(
            module, optimizer, self.lam, self.lr, ridge, getattr(self, "weight_decay", 0.0)
        )
        if groups:
            options["param_groups"] = groups
        return optimizer, options

    def _early_stopper(self):
        """The held-out stopping callback (``None``: train on all rows)."""
        if not self.early_stopping:
            return None
        return EarlyStopping(patience=self.n_iter_no_change)

    def _training_callbacks(self, module):
        """Further ``(name, skorch callback)`` pairs a family's fits need (default: none)."""
        return []

    def _ridge(self, module):
        """``{parameter name: c}``: the L2 term ``lam * c * ||V||^2`` (``c`` a number or
        per-entry weights) on the ungated weights of a family with ``ridge_downstream``
        (parameters of two or more dimensions no sparsifier owns; biases, a member's
        too, are free),
        ``c = kappa / D``, ``kappa = ridge_scale``: a fraction of the L2 each D-Gating
        factor carries.

        Without it the objective has no minimizer: dividing a gated group's weights by
        ``s`` and multiplying the weights it feeds by ``s`` keeps a ReLU network's
        function and lowers the penalty by ``s^(2/D)``, so training drifts. With it,
        every stationary point has ``sum_j rho_j ||w_j||^(2/D) = kappa ||V||^2`` (no
        linear skip; in a NAM, per term).
        """
        if not self._traits.ridge_downstream or not self._sparsifier_class().downstream_ridge:
            return None
        return {
            name: self._traits.ridge_scale / self.D
            for name, param in module.named_parameters()
            if param.dim() >= 2
            and "parametrizations" not in name.split(".")
            and not name.endswith("bias")
        }

    # ---------------------------------------------------------- inference
    def _forward(self, X):
        """Raw module output on X as CPU float64 numpy, evaluated in batches."""
        check_is_fitted(self, "module_")
        X = validate_data(
            self,
            X,
            **self._traits.X_validation,
            dtype=(np.float64, np.float32),
            order="C",
            reset=False,
        )
        return self._module_output(X)

    def _module_output(self, X, method=None):
        """Output of the module (or of its method ``method``) on validated X, in batches,
        as CPU float64 numpy, computed by a float64 copy (``inference_dtype``): float32
        products round differently per batch size, so a row's prediction would depend
        on the rows predicted with it."""
        module, dtype = self.module_, self._traits.dtype
        if self._traits.inference_dtype is not None and self._traits.inference_dtype != dtype:
            module, dtype = (
                copy.deepcopy(module).to(self._traits.inference_dtype),
                self._traits.inference_dtype,
            )
        call = module if method is None else getattr(module, method)
        dataset = ArrayDataset(X, None, dtype=dtype)
        with torch.no_grad():
            outs = [
                call(dataset.rows(slice(i, i + self._traits.predict_batch)))
                for i in range(0, len(dataset), self._traits.predict_batch)
            ]
        return as_numpy(torch.cat(outs))

    # ---------------------------------------------------------- sparsifier
    def _sparsifier_class(self):
        """The estimator's sparsifier: its ``sparsifier`` parameter's method, else the
        package's default (D-Gating)."""
        return get_sparsifier(getattr(self, "sparsifier", DEFAULT_METHOD))

    def _sparsify(self, module, name, groups, init, units, group_weights=None):
        """Make the ``groups`` of ``module.<name>`` removable by the estimator's sparsifier.

        ``units`` names the groups ("input features", "hidden neurons"): methods that
        mask groups in a fixed order apply to interchangeable units only. The method's
        ``estimator_options`` (D-Gating's ``D``) and ``sparsifier_params`` go to it.
        """
        method = self._sparsifier_class()
        if method.ordered and "feature" in units:
            others = [repr(n) for n in sparsifier_names() if not get_sparsifier(n).ordered]
            raise ValueError(
                f"sparsifier={method.method!r} masks groups in a fixed order, which suits "
                f"interchangeable units such as hidden neurons but cannot choose {units}. "
                "Use it on hidden neurons only (e.g. gate_inputs=False, gate_hidden=True "
                f"for the MLPs), or choose {', '.join(others[:-1])} or {others[-1]} to "
                "select features."
            )
        options = dict(getattr(self, "sparsifier_params", None) or {})
        for option in method.estimator_options:  # e.g. D-Gating's D
            options.setdefault(option, getattr(self, option))
        try:
            sparsify(
                module,
                name,
                method=method,
                groups=groups,
                init=init,
                group_weights=group_weights,
                **options,
            )
        except TypeError as exc:  # an option the method does not take
            raise ValueError(
                f"sparsifier_params={getattr(self, 'sparsifier_params', None)!r} do not fit "
                f"sparsifier={method.method!r}: {exc}"
            ) from None

    # -------------------------------------------------------------- hooks
    def _penalty_groups(self, n_features):
        """(label per input feature, weight per group) from ``groups`` / ``group_weights``
        where the family has them, else each feature alone, weight 1: read-only, one copy
        while they hold (:func:`~sksparse_nn.groups.held_penalty_groups`)."""
        spec = (getattr(self, "groups", None), getattr(self, "group_weights", None))
        held = getattr(self, "_penalty_groups_held", None)
        self._penalty_groups_held = held_penalty_groups(*spec, n_features, held)
        return self._penalty_groups_held[1]

    def _collapse(self, module, zero_tol):
        """Remove the trained module's sparsifiers in place; ``(norms, keep)``: per gated
        tensor, its group norms before the collapse and the groups that survive it (norm
        at least ``zero_tol``; the others end at exactly 0)."""
        raw = {k: as_numpy(v) for k, v in group_norms(module).items()}
        keep = {k: as_numpy(v).astype(bool) for k, v in support(module, zero_tol).items()}
        collapse(module, zero_tol=zero_tol)
        return raw, keep

    def _feature_importances(self, module):
        """Norm of each input feature's weights (:func:`column_norms`), exactly 0 for
        removed features; ``None`` (default): groups are not input features."""
        return None

    @abstractmethod
    def _build_module(self, n_features, n_outputs):
        """The plain torch module of a fresh fit (required)."""

    @abstractmethod
    def _gate_module(self, module, init):
        """Sparsify the module's groups with :meth:`_sparsify` (required); ``init`` is
        ``_traits.fresh_init`` for a fresh module, ``"balanced"`` for a warm start."""

    # ------------------------------------------------- task hooks (task mixins)
    #: ``validate_data`` keywords for y.
    _target_validation = {}

    @abstractmethod
    def _fit_targets(self, y):
        """``(targets tensor, n_outputs)`` from the validated y."""

    @abstractmethod
    def _criterion(self):
        """The data loss: ``criterion(output, targets[, sample_weight])``, a mean."""

    @abstractmethod
    def _constant_output(self, targets, n_outputs):
        """The output of the best constant model (the divergence guard's yardstick)."""

    def _path_targets(self, y):
        """Targets in the squared-error form :meth:`lambda_max` uses."""
        raise NotImplementedError

    def _plan_module(self, X, targets):
        """A fresh module's data-dependent structure from validated X, scaled targets."""

    def _init_module(self, module, dataset, targets):
        """Data-dependent initialization of a freshly built module (default: none);
        ``dataset.rows(index)`` gives rows in training units, ``targets`` are encoded."""

    def _weight_scale(self, X, y):
        """Typical size of a gated group's weights, the unit of ``zero_tol``: 1 in
        standardized units; families training in the user's units (linear) override it."""
        return 1.0

    def _rescale_inputs(self, module, shift, scale):
        """Change ``module`` in place so that it maps ``x`` to what it mapped
        ``(x - shift) / scale`` to (families with ``standardize_inputs``)."""
        raise NotImplementedError

    def _rescale_outputs(self, module, shift, scale):
        """Change ``module`` in place so that its outputs become ``out * scale + shift``
        (families with ``standardize_targets``)."""
        raise NotImplementedError

    def _baseline_loss(self, targets, n_outputs, module):
        """The yardstick of an exploded fit: the best constant model's objective plus the
        starting point's penalty (training only lowers both)."""
        with torch.no_grad():
            constant = self._constant_output(targets, n_outputs)
            data = float(self._criterion()(constant, targets))
            return data + self.lam * float(penalty(module))

    def _after_fit(self, X, y, sample_weight=None):
        """Set family-specific fitted attributes (e.g. ``coef_``); ``sample_weight`` is the
        normalized weights of the fit (mean 1) or None."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags
