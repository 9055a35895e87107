"""Multilayer perceptrons that select their input features (and neurons) by D-Gating."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..groups import AxisGroups
from ..nn.embeddings import PiecewiseLinearEncoding, quantile_edges
from ..nn.mlp import ACTIVATIONS, MLP, compact_mlp
from ..sparsifiers import ZERO_TOL, get_sparsifier
from ._base import BaseDGated, column_norms
from ._contract import Traits
from ._docs import fill
from ._linear_member import LinearMember
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["DGatedMLPClassifier", "DGatedMLPRegressor"]


#: Training rows on which the encoded columns are standardized (the first ones: the
#: training rows come in the user's order, a sample of them is enough for two moments).
_STANDARDIZE_ROWS = 100_000


class _DGatedMLP(LinearMember, BaseDGated):
    """The MLP family: first-layer input-feature groups, optionally hidden neurons."""

    # the networks' short grid, nine lams over the same range as the base's sixteen
    # (a second capacity control, the linear member, takes the searches' time beside
    # them); the folds fit every lam: the two passes (cv_stride=2) chose denser MLPs
    # than every lam does
    _traits = Traits(
        standardize_inputs=True,
        standardize_targets=True,
        ridge_downstream=True,
        default_grid={"n_lams": 9, "lam_min_ratio": 0.02},
    )

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "sparsifier": [str, type],
        "sparsifier_params": [dict, None],
        "hidden_layer_sizes": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "linear_skip": ["boolean"],
        "embedding": [StrOptions({"piecewise-linear"}), None],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "n_members": [Interval(Integral, 1, None, closed="left")],
        "groups": [None, Integral, "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "sparsity": [StrOptions({"features", "weights"})],
        "gate_inputs": ["boolean"],
        "gate_hidden": ["boolean"],
    }

    def __init__(
        self,
        lam=0.1,
        *,
        D=2,
        sparsifier="dgating",
        sparsifier_params=None,
        hidden_layer_sizes=(100,),
        activation="relu",
        dropout=0.0,
        linear_skip=False,
        embedding=None,
        n_bins=16,
        n_members=1,
        groups=None,
        group_weights=None,
        sparsity="features",
        gate_inputs=True,
        gate_hidden=False,
        optimizer="sgd",
        lr=0.1,
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
    ):
        self.lam = lam
        self.D = D
        self.sparsifier = sparsifier
        self.sparsifier_params = sparsifier_params
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.dropout = dropout
        self.linear_skip = linear_skip
        self.embedding = embedding
        self.n_bins = n_bins
        self.n_members = n_members
        self.groups = groups
        self.group_weights = group_weights
        self.sparsity = sparsity
        self.gate_inputs = gate_inputs
        self.gate_hidden = gate_hidden
        self.optimizer = optimizer
        self.lr = lr
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

    def _plan_module(self, X, targets):
        # the bins of a fresh fit, at the training data's quantiles (in its units)
        self._edges = quantile_edges(X, self.n_bins) if self.embedding else None

    def _build_module(self, n_features, n_outputs):
        sizes = tuple(np.atleast_1d(np.asarray(self.hidden_layer_sizes, dtype=int)))
        if any(s < 1 for s in sizes):
            raise ValueError(f"hidden_layer_sizes must be positive, got {self.hidden_layer_sizes}.")
        if self.n_members > 1 and not sizes:
            raise ValueError("n_members > 1 needs at least one hidden layer.")
        if self.n_members > 1 and (self.sparsity == "weights" or self.gate_hidden):
            raise ValueError(
                "n_members > 1 shares the gated input layer between the members; it does "
                "not combine with sparsity='weights' or gate_hidden=True."
            )
        encoding = PiecewiseLinearEncoding(self._edges) if self.embedding else None
        return MLP(
            n_features,
            sizes,
            n_outputs,
            self.activation,
            self.dropout,
            self.linear_skip,
            encoding=encoding,
            n_members=self.n_members,
        )

    def _init_module(self, module, dataset, targets):
        if module.encoding is None:
            return
        if dataset.scale is not None:  # the bins into training units
            shift, scale = np.asarray(dataset.shift), np.asarray(dataset.scale)
            module.encoding.rescale_(-shift / scale, 1.0 / scale)
        module.encoding.standardize_(dataset.rows(slice(0, _STANDARDIZE_ROWS)))

    def _gate_module(self, module, init):
        if self.sparsity == "weights":
            return self._gate_weights(module, init)
        if not (self.gate_inputs or self.gate_hidden):
            raise ValueError("gate_inputs=False and gate_hidden=False leave nothing to sparsify.")
        if self.gate_hidden and len(module.linears) < 2:
            raise ValueError("gate_hidden=True needs at least one hidden layer.")
        # "in": one group per column: per input feature, per hidden neuron (outgoing weights)
        if self.gate_inputs:  # one group per feature, or per group of features
            labels, rho = self._penalty_groups(module.n_features)
            if module.encoding is not None:  # a feature's encoded columns: its group
                labels = np.asarray(labels)[module.encoding.feature.numpy()]
            groups = AxisGroups(1, labels)
            self._sparsify(module.linears[0], "weight", groups, init, "input features", rho)
        if self.gate_hidden:
            for layer in module.linears[1:]:
                self._sparsify(layer, "weight", "in", init, "hidden neurons")

    def _gate_weights(self, module, init):
        """Every weight its own group in every layer (deep weight factorization), the
        fresh D-gated factors drawn with its variance-matched init."""
        if self.groups is not None:
            raise ValueError("groups apply to sparsity='features'; sparsity='weights' has none.")
        if init == "identity" and "dwf" in get_sparsifier(self.sparsifier).inits:
            init = "dwf"
        for layer in module.linears:
            self._sparsify(layer, "weight", "element", init, "weights")

    def _ridge(self, module):
        # an ensemble's objective is the mean of its members': so is their ridge
        ridge = super()._ridge(module)
        if ridge is not None and module.n_members > 1:
            for name in ridge:
                if name.startswith("members."):
                    ridge[name] = ridge[name] / module.n_members
        return ridge

    def _optimizer(self, module, ridge):
        # a member's weights see 1/n_members of the loss's gradient (the loss is the
        # members' mean): SGD steps them n_members times as far, as a lone network's
        optimizer, options = super()._optimizer(module, ridge)
        k = module.n_members
        if k == 1 or not issubclass(optimizer, torch.optim.SGD):
            return optimizer, options
        groups = options.get("param_groups", [])
        named = {name for name, _ in groups}
        per_member = [
            name
            for name, _ in module.named_parameters()
            if name.startswith("members.") or name == "member_bias"
        ]
        scaled = [
            (name, {**o, "lr": o["lr"] * k}) if name in per_member and "lr" in o else (name, o)
            for name, o in groups
        ]
        rest = [(name, {"lr": self.lr * k}) for name in per_member if name not in named]
        return optimizer, {**options, "param_groups": scaled + rest}

    def _feature_importances(self, module):
        norms = column_norms(module.linears[0].weight)
        if module.encoding is None:
            return norms
        feature = module.encoding.feature.numpy()  # the norm of a feature's columns
        return np.sqrt(np.bincount(feature, norms**2, minlength=module.n_features))

    def _member_penalty_matches(self):
        # the linear member is the MLP without hidden units: its first-layer groups
        # are the input features' (not every weight's), gated by D-Gating
        return super()._member_penalty_matches() and (
            self.sparsity == "features" and self.gate_inputs
        )

    @torch.no_grad()
    def _rescale_inputs(self, module, shift, scale):
        if module.encoding is not None:  # the bins move with the units
            module.encoding.rescale_(shift, scale)
            return
        layer = module.linears[0]
        weight = layer.weight.double() / torch.as_tensor(scale)
        bias = layer.bias.double() - weight @ torch.as_tensor(shift)
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)

    @torch.no_grad()
    def _rescale_outputs(self, module, shift, scale):
        scale = torch.as_tensor(scale)
        # the last layer, shared or the members' (weight (members, outputs, inputs))
        layer = module.members[-1] if module.n_members > 1 else module.linears[-1]
        layer.weight.copy_(layer.weight.double() * scale[:, None])
        layer.bias.copy_(layer.bias.double() * scale + torch.as_tensor(shift))
        if module.skip:  # the skip path's rows of the first layer are outputs too
            first, k = module.linears[0], module.n_outputs
            first.weight[-k:] = first.weight[-k:].double() * scale[:, None]
            first.bias[-k:] = first.bias[-k:].double() * scale

    def _after_fit(self, X, y, sample_weight=None):
        layers = [*self.module_.linears, *getattr(self.module_, "members", [])]
        self.n_nonzero_weights_ = int(sum(int(torch.count_nonzero(x.weight)) for x in layers))
        # a neuron lives while a weight leaving it (in any member) is non-zero
        self.n_neurons_ = np.array(
            [
                int((x.weight.abs().reshape(-1, x.weight.shape[-1]).sum(dim=0) > 0).sum())
                for x in layers[1:]
            ]
        )

    def compact(self):
        """A smaller plain torch module without removed inputs and dead neurons.

        Returns
        -------
        module : torch.nn.Module
            Takes ``X[:, selected_features_]`` (as a float tensor) and returns the same
            raw outputs (regression values or logits) as the fitted model on ``X``.
        """
        check_is_fitted(self, "module_")
        return compact_mlp(self.module_, self.selected_features_)

    def _inference_module(self):
        return self.compact(), self.selected_features_, (self.n_features_in_,)


_MLP_DOC = fill(
    """

    Parameters
    ----------
    lam : float, default=0.1
        Penalty strength on ``sum_j ||w_j||^(2/D)``, ``w_j`` the first-layer weights
        leaving input feature ``j`` (and hidden neurons' outgoing weights with
        ``gate_hidden=True``). The loss is the mean over samples plus ``lam * penalty``
        plus the ridge ``lam * (0.1 / D) * ||V||^2`` on the ungated weights ``V`` after
        the gated layer (which gives the objective a minimizer: ReLU is positively
        homogeneous), on standardized features (and targets), so ``lam`` means the same
        in any units. The default removes pure-noise columns of small tables at the
        default ``D``; choose it along ``regularization_path`` or with
        ``SparsePathCV``.
    D : int, default=2
        Gating depth >= 2: 2 is the group lasso on the first layer's columns; 3 and 4
        give the sparser non-convex penalties ``||w_j||^(2/3)`` and ``||w_j||^(1/2)``.
        At 3, the lam that kept the hidden layer from overfitting also removed the
        weak effects a lasso keeps (the real-tables panel of the benchmarks), hence
        2; pass 3 for sparser models.
    $sparsifier
    $sparsifier_params
    hidden_layer_sizes : tuple of int, default=(100,)
        Widths of the hidden layers (scikit-learn's MLP default).
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
    dropout : float, default=0.0
        Dropout on hidden activations.
    linear_skip : bool, default=False
        Add a linear path from the inputs to the outputs, in the first layer's groups: a
        feature's group holds its hidden-layer weights and its skip weights (LassoNet's
        idea of a feature that must enter linearly to enter at all, reached here by one
        group instead of a constraint).
    embedding : {"piecewise-linear"} or None, default=None
        Encode each input feature by its place in its ``n_bins`` quantile bins before
        the first layer (:class:`~sksparse_nn.nn.PiecewiseLinearEncoding`, the encoding
        of *On Embeddings for Numerical Features in Tabular Deep Learning*): one hidden
        layer then fits sharp or non-monotone effects of a feature. A feature's group
        holds the first-layer weights of all its bins, so selection stays by feature.
    n_bins : int, default=16
        Most bins per feature with ``embedding``: a feature of at most ``n_bins + 1``
        distinct values has them as edges (a binary feature one bin: itself).
    n_members : int, default=1
        Members of an efficient ensemble (the idea of *TabM*): one forward pass computes
        them all. They share the gated first layer, so they use the same features;
        each has its own biases on the first layer's outputs and its own later layers,
        each is fitted to the targets (the loss is the members' mean), and predictions
        are the mean of the members' outputs (logits for classifiers).
    $groups
    $group_weights
    sparsity : {"features", "weights"}, default="features"
        ``"features"``: groups are input features (and hidden neurons with
        ``gate_hidden``). ``"weights"``: every weight of every layer is its own group
        (unstructured sparsity; with D-Gating the factors start from the
        variance-matched init of *Deep Weight Factorization*); ``n_nonzero_weights_``
        counts what is left.
    gate_inputs : bool, default=True
        Penalize each input feature's first-layer weights (feature selection). ``False``
        keeps every feature, e.g. to prune only hidden neurons.
    gate_hidden : bool, default=False
        Also gate each hidden neuron (its outgoing weights): removes neurons for
        structured compression, see ``compact()``.
    optimizer : {"sgd", "adam", "adamw", "lbfgs"} or torch optimizer class, default="sgd"
        SGD with Nesterov momentum 0.9: plain gradient steps shrink unused groups
        geometrically to exact zero.
    lr : float, default=0.1
        Initial learning rate, on standardized inputs (and targets; sparse inputs are
        centred batch by batch), so independent of the units of the data. The D-Gating
        factors' step is capped at ``0.5 / (lam * 2 / D)`` so that no ``lam`` makes SGD
        diverge; a diverging fit raises
        :class:`~sksparse_nn.exceptions.TrainingDivergedError`.
    max_epochs : int or None, default=None
        ``None``: at most the larger of 100 epochs and 4000 optimizer steps. Unused groups
        shrink by a factor of about ``1 - 2 lr lam / D`` per step, so exact zeros need
        steps, not epochs: small data sets get more epochs.
        $max_epochs_warning
    batch_size : int or None, default=64
    $lr_schedule
    $tol
    zero_tol : float, default=float32 eps
        Groups whose norm ends below it are set to exactly 0 (numerical dust only).
    $common_parameters

    Attributes
    ----------
    selected_features_ : ndarray of int
        Sorted indices of the input features the network uses.
    feature_importances_ : ndarray of shape (n_features,)
        Norm of each feature's first-layer weights (on standardized features); exactly
        0 for removed features.
        ``SelectFromModel(est, threshold=1e-300)`` keeps exactly ``selected_features_``.
    n_neurons_ : ndarray of int
        Number of live neurons in each hidden layer.
    n_nonzero_weights_ : int
        Number of non-zero weights of all layers (biases not counted).
    module_ : MLP
        The fitted torch module (plain weights, exact zeros).
    $group_norms_
    $sparsity_gap_
    $history_
    $n_iter_
    $n_features_in_
"""
)


class DGatedMLPClassifier(ClassifierTaskMixin, _DGatedMLP):
    __doc__ = (
        """MLP classifier whose input features are selected by D-Gating during training.

    Cross-entropy (logistic for two classes) plus ``lam`` times the D-Gating penalty on
    the first layer, trained by SGD on standardized features: features the network does
    not need end with exactly zero weights.
    """
        + _MLP_DOC
        + """    classes_ : ndarray of shape (n_classes,)

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn import DGatedMLPClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(),
    ...                     DGatedMLPClassifier(lam=0.01, max_epochs=20, random_state=0))
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    """
    )


class DGatedMLPRegressor(RegressorTaskMixin, _DGatedMLP):
    __doc__ = (
        """MLP regressor whose input features are selected by D-Gating during training.

    Half mean squared error plus ``lam`` times the D-Gating penalty on the first layer,
    trained by SGD on standardized features and targets: features the network does not
    need end with exactly zero weights.
    """
        + _MLP_DOC
        + """
    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn import DGatedMLPRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = make_pipeline(StandardScaler(),
    ...                     DGatedMLPRegressor(lam=0.1, max_epochs=20, random_state=0))
    >>> _ = reg.fit(X, y)
    """
    )
