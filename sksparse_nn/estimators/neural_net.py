"""Any PyTorch module as a scikit-learn estimator, with the tensors it names sparsified."""

from __future__ import annotations

import copy
import inspect
from dataclasses import replace
from numbers import Real

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ..sparsifiers import ZERO_TOL, sparsified_tensors
from ..training import bounded_scale
from ..utils.columns import column_moments, column_range
from ._base import BaseDGated
from ._contract import Traits
from ._declared_gates import (
    compact_user_module,
    declared_lambda_max,
    gate_declared,
    leader_norms,
    split_norms,
    tie_leaders,
    tied_ridge,
)
from ._docs import fill
from ._shipping import without_unread_inputs
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["DGatedNeuralNetClassifier", "DGatedNeuralNetRegressor"]

_MODULE_PREFIX = "module__"
#: Rows of the gradient that estimates ``lambda_max``.
_LAM_MAX_ROWS = 2048


class Standardized(torch.nn.Module):
    """``module((x - in_shift) / in_scale) * out_scale + out_shift``, 1-d outputs as columns.

    The estimators train a user's module on standardized inputs (per feature, or per
    channel of images and sequences: axis 1) and, for regression, standardized targets;
    the four buffers hold these maps, so the wrapped module (``.module``, the user's,
    unchanged in structure) sees standardized data and the wrapper the user's units.
    """

    def __init__(self, module):
        super().__init__()
        self.module = module
        for name, value in (("in_shift", 0.0), ("in_scale", 1.0)):
            self.register_buffer(name, torch.tensor(value))
        for name, value in (("out_shift", 0.0), ("out_scale", 1.0)):
            self.register_buffer(name, torch.tensor(value))

    def forward(self, x):
        out = self.module((x - self.in_shift) / self.in_scale)
        # shape[0], not len(): a traced graph (torch.onnx) keeps the batch axis free
        return out.reshape(out.shape[0], -1) * self.out_scale + self.out_shift


def _input_scaling(X):
    """Mean and scale (standard deviation, 1 where constant) of the inputs in float64:
    per feature (2-d X, dense or sparse) or per channel (axis 1 of n-d X), shaped to
    broadcast against ``X``."""
    if X.ndim == 2:
        mean, var = column_moments(X)  # sparse: O(nnz), no copy
        low, high = column_range(X)
    else:
        axes = tuple(a for a in range(X.ndim) if a != 1)
        mean = X.mean(axis=axes, dtype=np.float64)
        var = X.var(axis=axes, dtype=np.float64)
        low, high = X.min(axis=axes), X.max(axis=axes)
    shape = (-1,) + (1,) * (X.ndim - 2)
    return mean.reshape(shape), bounded_scale(mean, var, low, high).reshape(shape)


class _DGatedNeuralNet(BaseDGated):
    """A user's module with declared gates (see the public classes)."""

    # inputs are standardized in float64 before training (per feature or channel) and
    # the map is folded into the Standardized wrapper's buffers afterwards
    _traits = Traits(
        X_validation={"accept_sparse": "csr", "allow_nd": True}, standardize_inputs=True
    )

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "module": [type, torch.nn.Module],
        "gates": [dict, str, list],
        "sparsifier": [str, type],
        "sparsifier_params": [dict, None],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        module,
        *,
        gates,
        lam=1e-2,
        D=3,
        sparsifier="dgating",
        sparsifier_params=None,
        optimizer="sgd",
        lr=0.05,
        weight_decay=0.0,
        max_epochs=None,
        batch_size=64,
        lr_schedule="cosine",
        tol=None,
        zero_tol=ZERO_TOL,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        settle="support",
        warm_start=False,
        random_state=None,
        device="cpu",
        n_threads=None,
        verbose=0,
        **kwargs,
    ):
        self.module = module
        self.gates = gates
        self.lam = lam
        self.D = D
        self.sparsifier = sparsifier
        self.sparsifier_params = sparsifier_params
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr_schedule = lr_schedule
        self.tol = tol
        self.zero_tol = zero_tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.settle = settle
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads
        self.verbose = verbose
        for key, value in kwargs.items():  # module__* are parameters; others fail in fit
            if key.startswith(_MODULE_PREFIX):
                setattr(self, key, value)
        self._unexpected = sorted(k for k in kwargs if not k.startswith(_MODULE_PREFIX))

    # ------------------------------------------------ module__* parameters
    def _module_kwargs(self):
        n = len(_MODULE_PREFIX)
        return {k[n:]: v for k, v in vars(self).items() if k.startswith(_MODULE_PREFIX)}

    def get_params(self, deep=True):
        params = super().get_params(deep=False)
        params.update({_MODULE_PREFIX + k: v for k, v in self._module_kwargs().items()})
        return params

    def set_params(self, **params):
        """Set parameters, ``module__*`` ones included (errors surface in ``fit``)."""
        valid = set(super().get_params(deep=False))
        for key in list(params):
            if key.startswith(_MODULE_PREFIX):
                setattr(self, key, params.pop(key))
            elif key.split("__")[0] not in valid:
                params.pop(key)
                self._unexpected = sorted({*getattr(self, "_unexpected", []), key})
        return super().set_params(**params) if params else self

    # ----------------------------------------------------------- base hooks
    def _validate_params(self):
        if getattr(self, "_unexpected", None):
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword argument(s) "
                f"{self._unexpected} (only '{_MODULE_PREFIX}*' arguments go to the module)."
            )
        super()._validate_params()

    def _build_module(self, n_features, n_outputs):
        kwargs = self._module_kwargs()
        if isinstance(self.module, torch.nn.Module):
            if kwargs:
                raise ValueError(
                    f"{sorted(_MODULE_PREFIX + k for k in kwargs)} need `module` to be a "
                    "class; got an instance (copied as it is)."
                )
            user = copy.deepcopy(self.module)
        else:
            # sizes the data decide, for module classes that ask for them by these names
            accepted = inspect.signature(self.module).parameters
            for key, value in (("n_features", n_features), ("n_outputs", n_outputs)):
                if key in accepted and key not in kwargs:
                    kwargs[key] = value
            try:
                inspect.signature(self.module).bind(**kwargs)
            except TypeError as exc:
                raise ValueError(
                    f"module__* parameters do not fit {self.module!r}: {exc}"
                ) from None
            user = self.module(**kwargs)
        return Standardized(user)

    def _init_module(self, module, dataset, targets):
        """Check that the module runs on the (standardized) data and returns what the
        task needs; remember the shape of a sample."""
        self._sample_shape_ = tuple(dataset.X.shape[1:])
        with torch.no_grad():
            try:
                out = module(dataset.rows(slice(0, 2)))
            except Exception as exc:  # the user's module on the user's data
                raise ValueError(
                    f"The module failed on a batch of X with shape "
                    f"{tuple(dataset.X.shape[1:])} per sample: {type(exc).__name__}: {exc}"
                ) from exc
        self._check_output_width(out.shape[1])

    def _gate_module(self, module, init):
        gate_declared(self, module, init)
        self._gated_ = [
            (q.partition(".")[2], s.n_groups)
            for q, _, _, s in sparsified_tensors(module)
            if not s.tied
        ]

    def _ridge(self, module):
        return tied_ridge(self, module)

    def _collapse(self, module, zero_tol):
        # one entry per group: the tensors that own their gates (a tie's others share them)
        leaders = tie_leaders(module)
        return leader_norms(leaders, *super()._collapse(module, zero_tol))

    def _feature_importances(self, module):
        return None  # the declared groups are the model's own units, not input features

    def _after_fit(self, X, y, sample_weight=None):
        # group norms of every tensor that owns its gates, in the module's order
        names, counts = zip(*self._gated_, strict=True)
        self.tensor_group_norms_ = split_norms(names, counts, self.group_norms_)
        self.selected_components_ = np.flatnonzero(self.group_norms_ > 0)
        layers = self.__dict__.pop("_channel_layers", None)
        if layers is not None:
            self.channel_group_layers_ = layers
        elif hasattr(self, "channel_group_layers_"):
            del self.channel_group_layers_

    def compact(self, return_report=False):
        """A smaller copy of the fitted model without its removable units (same outputs).

        The module's data flow is traced with ``torch.fx``: channel groups whose
        filters, biases and batch-norm parameters are all zero are removed everywhere
        they appear (:func:`~sksparse_nn.channels.compact_channels`: residual branches,
        depthwise filters, batch-norm statistics, the readers' input slices); then (see
        :func:`~sksparse_nn.compaction.compact_module`) wherever a ``Linear`` /
        ``Conv2d`` feeds another through per-channel operations (activations, batch norm,
        pooling, flatten, a ``torch.cat`` of branches), neurons and filters whose
        outgoing weights are zero, or whose incoming weights are zero (their constant
        output goes into the next layer's bias), are removed; attention heads of
        ``nn.MultiheadAttention`` likewise. The module keeps its class and ``forward``.

        Parameters
        ----------
        return_report : bool, default=False
            Also return the :class:`~sksparse_nn.compaction.CompactionReport` (parameters
            and FLOPs before and after, kept units per layer).

        Returns
        -------
        module : Standardized
            Takes and returns the user's units, like ``module_``.
        report : CompactionReport
            Only with ``return_report=True``.
        """
        check_is_fitted(self, "module_")
        user = self.module_.module
        dtype = next(user.parameters()).dtype
        example = torch.zeros((2, *self._sample_shape_), dtype=dtype)
        small, report = compact_user_module(user, example)
        out = copy.deepcopy(self.module_)
        out.module = small
        return (out.eval(), report) if return_report else out.eval()

    def _inference_module(self):
        # the compacted model without the inputs its first layer never reads
        out, report = self.compact(return_report=True)
        return without_unread_inputs(out, report, self._sample_shape_)

    def _fit_scaling(self, X, targets):
        scaling = super()._fit_scaling(None, targets)
        if X is not None:
            scaling.x_shift, scaling.x_scale = _input_scaling(X)
        return scaling

    def _rescale_inputs(self, module, shift, scale):
        # module((x - a) / b) at (x - shift) / scale: a' = shift + scale a, b' = scale b
        dtype = module.in_scale.dtype
        shape = (1, *np.shape(shift))  # against a batch
        scale = torch.as_tensor(scale, dtype=dtype).reshape(shape)
        shift = torch.as_tensor(shift, dtype=dtype).reshape(shape)
        module.in_shift = shift + scale * module.in_shift
        module.in_scale = scale * module.in_scale

    def _rescale_outputs(self, module, shift, scale):
        dtype = module.out_scale.dtype
        scale, shift = torch.as_tensor(scale, dtype=dtype), torch.as_tensor(shift, dtype=dtype)
        module.out_scale = module.out_scale * scale
        module.out_shift = module.out_shift * scale + shift

    # ----------------------------------------------------------------- paths
    def lambda_max(self, X, y):
        """Top of the default lam grid: the largest gradient norm of a declared group at
        the freshly initialized module.

        For ``D = 2`` a group at zero whose data gradient has norm ``g`` stays at zero for
        ``lam >= g``; for a network this is read at the initialization, a heuristic top
        (paths extend their grid upward until every group is zero).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        lam_max : float
        """
        top = declared_lambda_max(clone(self), X, y, _LAM_MAX_ROWS)
        if not top > 0:
            raise ValueError("Cannot build a lam grid: no declared group has a gradient.")
        return top


class DGatedNeuralNetRegressor(RegressorTaskMixin, _DGatedNeuralNet):
    _traits = replace(_DGatedNeuralNet._traits, standardize_targets=True)

    def _check_output_width(self, width):
        if width != self.n_outputs_:
            raise ValueError(
                f"The module returns {width} values per sample; y has {self.n_outputs_} output(s)."
            )


class DGatedNeuralNetClassifier(ClassifierTaskMixin, _DGatedNeuralNet):
    def _check_output_width(self, width):
        k = len(self.classes_)
        allowed = (1, 2) if k == 2 else (k,)
        if width not in allowed:
            raise ValueError(
                f"The module returns {width} logits per sample; {k} classes need "
                f"{' or '.join(map(str, allowed))}."
            )
        self._n_logits = width

    def _criterion(self):
        if getattr(self, "_n_logits", None) == 2:
            from ._tasks import _CrossEntropy

            return _CrossEntropy()
        return super()._criterion()

    def _constant_output(self, targets, n_outputs):
        width = getattr(self, "_n_logits", n_outputs)
        return super()._constant_output(targets, width)


_GATES_DOC = fill(
    """

    Parameters
    ----------
    module : torch.nn.Module class or instance
        The model. A class is instantiated with the ``module__*`` parameters at every
        fit, plus ``n_features`` (``X.shape[1]``: features, or channels of images) and
        ``n_outputs`` (targets; logits: the number of classes, 1 for two) when its
        ``__init__`` takes arguments of these names and they are not given; an instance
        is copied (the original is never trained). It takes a float32
        batch of X (any shape after the first axis: tabular, images ``(n, C, H, W)``,
        sequences) and returns the outputs (regression: one column per target;
        classification: one logit per class, or one or two for two classes).
    gates : dict, "channels" or list of str
        What to sparsify: parameter name (as in ``module.named_parameters()``) to group
        structure (see :mod:`sksparse_nn.groups`), e.g. ``{"features.0.weight": "out"}``
        (convolution filters: the bias and a batch norm right after the convolution
        join each filter's group), ``{"0.weight": "in"}`` (input features of a first
        Linear), ``{"attn.in_proj_weight": AxisGroups(0, head_labels)}`` (attention
        heads). ``"channels"`` (or ``{"channels": "all"}``): every convolution's output
        channels and every hidden ``Linear`` layer's units, each group holding every
        slice coupled to the channel (found by tracing the module with ``torch.fx``:
        batch norms, residual additions, concatenations, depthwise convolutions; see
        :func:`~sksparse_nn.channels.channel_groups`; a ``Linear`` whose units the trace
        cannot follow, such as one over a sequence, is left out). A list of module name
        prefixes (or ``{"channels": ["layer3"]}``): the channels of the layers under
        them.
    lam : float, default=1e-2
        Penalty strength; the loss is the mean over samples (regression: of half the
        squared error on standardized targets) plus ``lam * penalty``.
    $D
    $sparsifier
    $sparsifier_params
    optimizer : {"sgd", "adam", "adamw", "lbfgs"} or torch optimizer class, default="sgd"
    lr : float, default=0.05
    weight_decay : float, default=0.0
        L2 (the optimizer's ``weight_decay``) on the ungated parameters whose names end
        in ``weight``: without it a ReLU network can evade the penalty by shrinking a
        gated layer while the next one grows (the D-Gating paper's structured-sparsity
        experiments train with it). With groups that span several tensors (channel
        groups, a filter gate with its batch norm) and ``weight_decay=0`` the ungated
        weights of two or more dimensions get the downstream ridge
        ``lam * 0.1 / D * ||V||^2`` instead (a batch norm makes the filters' scale free).
    max_epochs : int or None, default=None
        ``None``: at most the larger of 100 epochs and 4000 optimizer steps.
        $max_epochs_warning
    batch_size : int or None, default=64
    $lr_schedule
    $tol
    zero_tol : float, default=float32 eps
    $common_parameters
    **kwargs
        ``module__<name>``: arguments of the module class.

    Attributes
    ----------
    module_ : Standardized
        The fitted model in the user's units (``module_.module`` is the user's module,
        with plain weights and exact zeros, which sees standardized inputs: per feature,
        or per channel for n-d X).
    tensor_group_norms_ : dict of str to ndarray
        The group norms of every gated tensor that owns its gates (exactly 0 for removed
        groups); a group spanning several tensors is listed once, under its first
        tensor, with its norm over all of them.
    channel_group_layers_ : dict of str to list of list of str
        With channel groups declared: for each tensor of ``tensor_group_norms_`` that
        leads channel groups, the layers each of its groups joins (several behind a
        residual addition; see :func:`~sksparse_nn.channels.channel_groups`).
    selected_components_ : ndarray of int
        Indices of the live groups in ``group_norms_`` (what paths count).
    $group_norms_
    $sparsity_gap_
    $history_
    $n_iter_
    $n_features_in_
"""
)


DGatedNeuralNetRegressor.__doc__ = (
    """Any torch module as a regressor, with the named tensors' groups sparsified.

    Trained by SGD on standardized inputs and targets: half the squared error plus
    ``lam`` times the penalty on the groups ``gates`` declares. Groups the data do not
    need end exactly at zero; :meth:`compact` removes the units they leave unused.
    """
    + _GATES_DOC
    + """
    Examples
    --------
    >>> import numpy as np, torch
    >>> from sksparse_nn import DGatedNeuralNetRegressor
    >>> X = np.random.RandomState(0).randn(200, 6)
    >>> y = X[:, 0] - 2 * X[:, 1]
    >>> net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    >>> reg = DGatedNeuralNetRegressor(net, gates={"0.weight": "in"}, lam=0.05,
    ...                                max_epochs=60, random_state=0).fit(X, y)
    >>> reg.tensor_group_norms_["0.weight"].shape
    (6,)
    """
)
DGatedNeuralNetClassifier.__doc__ = (
    """Any torch module as a classifier, with the named tensors' groups sparsified.

    Trained by SGD on standardized inputs: cross-entropy (logistic for one logit) plus
    ``lam`` times the penalty on the groups ``gates`` declares. Groups the data do not
    need end exactly at zero; :meth:`compact` removes the units they leave unused.
    """
    + _GATES_DOC
    + """    classes_ : ndarray of shape (n_classes,)

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sksparse_nn import DGatedNeuralNetClassifier
    >>> X = np.random.RandomState(0).randn(200, 1, 8, 8).astype(np.float32)  # images
    >>> y = (X[:, 0, :4].mean(axis=(1, 2)) > 0).astype(int)
    >>> cnn = torch.nn.Sequential(
    ...     torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    >>> clf = DGatedNeuralNetClassifier(cnn, gates={"0.weight": "out"}, max_epochs=20,
    ...                                 random_state=0).fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    """
)
