"""The shared scikit-learn estimator base: validation, the skorch fit, exact zeros.

Every estimator is ``(model family mixin) + (task mixin) + BaseDGated``. The family says
which torch module to build and which of its tensors to D-gate (``_build_module``,
``_gate_module``); the task mixin says how targets are encoded and predictions decoded.
Neither knows how gating is parametrized: they call :func:`sksparse_nn.gating.dgate` and
read :func:`sksparse_nn.gating.group_norms`.
"""

from __future__ import annotations

import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data
from skorch.callbacks import EarlyStopping

from ..gating import collapse, group_norms
from ..path import lambda_max, regularization_path
from ._training import (
    ArrayDataset,
    BatchIterator,
    PenalizedNet,
    as_numpy,
    make_callbacks,
    resolve_optimizer,
)

__all__ = ["BaseDGated", "ClassifierTaskMixin", "RegressorTaskMixin"]

_PREDICT_BATCH = 8192
_AUTO_MIN_STEPS = 4000


class BaseDGated(BaseEstimator):
    """Base class of the D-gated estimators (not for direct use).

    Subclasses define ``__init__`` (storing parameters only) and the hooks
    ``_build_module(n_features, n_outputs)``, ``_gate_module(module, init)`` and
    ``_criterion()``; they may override ``_input_weight(module)`` and
    ``_after_fit(X, y)``.
    """

    #: dtype of training. Linear models train in float64 (they are checked against exact
    #: solvers); networks in float32.
    _torch_dtype = torch.float32
    #: How a freshly built module is gated: "identity" (gates 1, the papers' choice for
    #: networks) or "balanced" (factors already at the stationarity condition).
    _fresh_init = "identity"

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
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": ["verbose"],
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

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        warm = getattr(self, "module_", None) if self.warm_start else None
        return self._fit(X, y, warm_module=warm)

    def _fit(self, X, y, warm_module=None):
        """Fit, starting from the (collapsed) ``warm_module`` when given: path warm starts."""
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse="csr",
            dtype=(np.float64, np.float32),
            **self._target_validation,
        )
        targets, n_outputs = self._encode_targets(y)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        dtype = self._torch_dtype
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if warm_module is not None:
                module, init = copy.deepcopy(warm_module), "balanced"
            else:
                module, init = self._build_module(X.shape[1], n_outputs), self._fresh_init
                self._init_module(module, X, targets)
            module = module.to(dtype=dtype)
            self._gate_module(module, init)
            dataset = ArrayDataset(X, targets, dtype=dtype, device=self.device)
            net = self._make_net(module, dataset, seed)
            net.fit(dataset, None)
        self.history_ = net.history
        self.n_iter_ = len(net.history)
        module = net.module_.to("cpu")
        raw = {k: as_numpy(v) for k, v in group_norms(module).items()}
        collapse(module, zero_tol=self.zero_tol)
        self.module_ = module.eval()
        dead = np.concatenate([v[v < self.zero_tol] for v in raw.values()] + [[0.0]])
        live = np.concatenate([v[v >= self.zero_tol] for v in raw.values()] + [[np.inf]])
        self.sparsity_gap_ = (float(dead.max()), float(live.min()))
        self.feature_importances_ = self._feature_importances(self.module_)
        self.selected_features_ = np.flatnonzero(self.feature_importances_)
        self._after_fit(X, y)
        return self

    def _make_net(self, module, dataset, seed):
        optimizer, opt_kwargs = resolve_optimizer(self.optimizer)
        batch_size = len(dataset) if self.batch_size is None else min(self.batch_size, len(dataset))
        max_epochs = self._max_epochs(len(dataset), batch_size)
        callbacks = make_callbacks(
            lr_schedule=self.lr_schedule,
            max_epochs=max_epochs,
            tol=self.tol,
            verbose=self.verbose,
        )
        train_split = None
        if self.early_stopping:
            train_split = _RandomSplit(self.validation_fraction, seed)
            callbacks.append(
                (
                    "early_stopping",
                    EarlyStopping(patience=self.n_iter_no_change, load_best=True, sink=_silent),
                )
            )
        return PenalizedNet(
            module,
            criterion=self._criterion(),
            lam=self.lam,
            optimizer=optimizer,
            lr=self.lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            iterator_train=BatchIterator,
            iterator_train__shuffle=batch_size < len(dataset),
            iterator_valid=BatchIterator,
            train_split=train_split,
            callbacks=callbacks,
            device=self.device,
            verbose=0,
            **{f"optimizer__{k}": v for k, v in opt_kwargs.items()},
        )

    def _max_epochs(self, n_samples, batch_size):
        """``max_epochs``, or for ``None`` at least 100 epochs and 4000 optimizer steps.

        Unused groups shrink geometrically at a rate proportional to ``lam * lr`` per
        step, so exact zeros need a number of steps rather than of epochs: small data
        sets get more epochs.
        """
        if self.max_epochs is not None:
            return self.max_epochs
        steps_per_epoch = -(-n_samples // batch_size)
        return max(100, -(-_AUTO_MIN_STEPS // steps_per_epoch))

    # ---------------------------------------------------------- inference
    def _forward(self, X):
        """Raw module output on X as CPU float64 numpy, evaluated in batches."""
        check_is_fitted(self, "module_")
        X = validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        return self._module_output(X)

    def _module_output(self, X):
        """Module output on already validated X (no feature-name checks)."""
        dataset = ArrayDataset(X, None, dtype=self._torch_dtype)
        with torch.no_grad():
            outs = [
                self.module_(dataset.rows(slice(i, i + _PREDICT_BATCH)))
                for i in range(0, len(dataset), _PREDICT_BATCH)
            ]
        return as_numpy(torch.cat(outs))

    # --------------------------------------------------------------- paths
    def regularization_path(
        self,
        X,
        y,
        *,
        lams=None,
        n_lams=30,
        lam_min_ratio=1e-3,
        X_val=None,
        y_val=None,
        cv=None,
        scoring=None,
        n_jobs=None,
        verbose=0,
        keep_estimators=False,
    ):
        """Fit along a lam grid with warm starts from dense to sparse (optionally with CV).

        See :func:`sksparse_nn.path.regularization_path`; this estimator is not modified.

        Returns
        -------
        path : RegularizationPath
        """
        return regularization_path(
            self,
            X,
            y,
            lams=lams,
            n_lams=n_lams,
            lam_min_ratio=lam_min_ratio,
            X_val=X_val,
            y_val=y_val,
            cv=cv,
            scoring=scoring,
            n_jobs=n_jobs,
            verbose=verbose,
            keep_estimators=keep_estimators,
        )

    def _default_lambda_max(self, X, y):
        """Top of the default lam grid: where the D=2 penalty zeroes every group."""
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        labels, rho = self._penalty_groups(X.shape[1])
        return lambda_max(X, self._path_targets(np.asarray(y)), labels, rho)

    def _path_group_norms(self):
        """One norm per penalized group, recorded along paths."""
        return self.feature_importances_

    # -------------------------------------------------------------- hooks
    def _penalty_groups(self, n_features):
        """(label per input feature, weight per group): each feature alone by default."""
        return np.arange(n_features), np.ones(n_features)

    def _input_weight(self, module):
        """The (n_out, n_features) weight whose columns belong to the input features."""
        raise NotImplementedError

    def _feature_importances(self, module):
        """Norm of each input feature's weights: exactly 0 for removed features."""
        return np.linalg.norm(as_numpy(self._input_weight(module)), axis=0)

    def _init_module(self, module, X, targets):
        """Data-dependent initialization of a freshly built module (default: none)."""

    def _after_fit(self, X, y):
        """Set family-specific fitted attributes (e.g. ``coef_``)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags


class _RandomSplit:
    """Hold out a random fraction of the training data for early stopping."""

    def __init__(self, fraction, seed):
        self.fraction, self.seed = fraction, seed

    def __call__(self, dataset, y=None, **kwargs):
        n = len(dataset)
        n_valid = max(1, int(round(self.fraction * n)))
        order = np.random.RandomState(self.seed).permutation(n)
        return dataset.subset(order[n_valid:]), dataset.subset(order[:n_valid])


def _silent(*args, **kwargs):
    pass


class _HalfSquaredError(torch.nn.Module):
    """``1/(2n) sum_i ||y_i - f(x_i)||^2``: the convention of scikit-learn's Lasso."""

    def forward(self, y_pred, y_true):
        return 0.5 * (y_pred - y_true).pow(2).sum(dim=1).mean()


class RegressorTaskMixin(RegressorMixin):
    """Regression: float targets, 1-D or multi-output, squared error."""

    _target_validation = {"y_numeric": True, "multi_output": True}

    def _encode_targets(self, y):
        self._y_1d = y.ndim == 1
        targets = y.reshape(len(y), -1).astype(np.float64)
        return torch.as_tensor(targets, dtype=self._torch_dtype), targets.shape[1]

    def _criterion(self):
        return _HalfSquaredError()

    def _path_targets(self, y):
        return np.asarray(y, dtype=np.float64).reshape(len(y), -1)

    def predict(self, X):
        """Predicted targets, shape (n_samples,) or (n_samples, n_outputs)."""
        out = self._forward(X)
        return out[:, 0] if self._y_1d else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class _BinaryLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = torch.nn.BCEWithLogitsLoss()

    def forward(self, y_pred, y_true):
        return self.loss(y_pred[:, 0], y_true.to(y_pred.dtype))


class ClassifierTaskMixin(ClassifierMixin):
    """Classification: labels of any type, logistic (binary) or softmax cross-entropy."""

    _target_validation = {}

    def _encode_targets(self, y):
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                f"The training data contain only one class ({self.classes_[0]!r}); "
                "at least 2 are needed."
            )
        codes = torch.as_tensor(encoder.transform(y), dtype=torch.int64)
        return codes, (1 if len(self.classes_) == 2 else len(self.classes_))

    def _criterion(self):
        return _BinaryLoss() if len(self.classes_) == 2 else torch.nn.CrossEntropyLoss()

    def _path_targets(self, y):
        classes, index = np.unique(y, return_inverse=True)
        onehot = np.eye(len(classes))[index]
        return onehot[:, 1:] if len(classes) == 2 else onehot  # binary: one logit

    def decision_function(self, X):
        """Logits: shape (n_samples,) for two classes, else (n_samples, n_classes)."""
        out = self._forward(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes), rows summing to 1."""
        logits = self._forward(X)
        if logits.shape[1] == 1:
            p = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            return np.column_stack([1.0 - p, p])
        logits = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        return np.log(np.clip(self.predict_proba(X), 1e-300, None))

    def predict(self, X):
        """Predicted class labels."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
