r"""Neural oblivious decision ensembles (NODE) whose trees are removed by D-Gating.

One group per tree: its leaf responses ``response[t]``, shape ``(tree_dim, 2**depth)``.
A tree's output is a leaf-weighted sum of them, so a tree whose group is exactly zero
outputs 0 for every input, and its feature choices, thresholds and temperatures no
longer matter (they are not gated); ``module_`` keeps dead trees at zero and
:meth:`compact` drops them. The penalty ``lam * sum_t ||s * response_t||^(2/D)``, with
``s = 1 / num_trees`` the ensemble average, acts on each tree's contribution to the
prediction, so ``lam`` means the same for any number of trees.
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted

from ..groups import AxisGroups
from ..nn.node import NODE, compact_node
from ..sparsifiers import ZERO_TOL, dgate, penalty_curvatures
from ..training import (
    TINY,
    ArrayDataset,
    AveragingEarlyStopping,
    CleanEarlyStopping,
    FactorSGD,
    as_numpy,
    seeded,
)
from ..utils.columns import column_moments
from ..utils.convergence import warn_convergence
from ._base import BaseDGated
from ._contract import Traits
from ._docs import fill
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["NODEClassifier", "NODERegressor"]

#: Rows used for the data-aware initialization of thresholds and temperatures.
_INIT_ROWS = 2048

#: Largest |mean| / std of a column of X that NODE trains on as given: float32 still
#: resolves the column to about an eighth of its spread (eps32 * 1e6 = 0.12).
_FLOAT32_OFFSET_LIMIT = 1e6


class _NODEFamily(BaseDGated):
    """The NODE family: one D-Gating group per tree (its leaf responses)."""

    #: The automatic budget (``max_epochs=None``): at least 100 epochs and 2000 steps, a
    #: cap that early stopping usually ends well before. The classifier's default path
    #: grid stops at 0.1 lam_max: below it unused trees shrink too slowly to reach zero.
    _traits = Traits(  # rows per forward pass: trees x leaves activations per row
        predict_batch=2048, auto_min_steps=2000, default_grid={"n_lams": 10, "lam_min_ratio": 0.1}
    )
    #: (trees per layer, layers) of ``num_trees=None`` / ``num_layers=None``
    _default_trees = (128, 1)

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "num_trees": [Interval(Integral, 1, None, closed="left"), None],
        "depth": [Interval(Integral, 1, None, closed="left")],
        "tree_dim": [Interval(Integral, 1, None, closed="left"), None],
        "num_layers": [Interval(Integral, 1, None, closed="left"), None],
        "dense": ["boolean"],
        "response_lr": [Interval(Real, 0, None, closed="neither"), None],
        "early_stopping": ["boolean", StrOptions({"auto"})],
    }

    def __init__(
        self,
        lam=3e-3,
        *,
        D=3,
        num_trees=None,
        depth=6,
        tree_dim=None,
        num_layers=None,
        dense=True,
        optimizer="adam",
        lr=3e-2,
        response_lr=0.3,
        max_epochs=None,
        batch_size=256,
        lr_schedule="cosine",
        tol=None,
        zero_tol=ZERO_TOL,
        early_stopping="auto",
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
        self.num_trees = num_trees
        self.depth = depth
        self.tree_dim = tree_dim
        self.num_layers = num_layers
        self.dense = dense
        self.optimizer = optimizer
        self.lr = lr
        self.response_lr = response_lr
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

    # ------------------------------------------------------------ hooks
    def _fit_scaling(self, X, targets):
        """The targets' standardization (regressor); the trees read X as given, in float32,
        so a column whose offset float32 cannot resolve at its spread is refused."""
        if X is not None:
            mean, var = column_moments(X)
            std = np.sqrt(var)
            ratio = np.abs(mean) / np.where(std > 0, std, np.inf)
            if ratio.size and ratio.max() > _FLOAT32_OFFSET_LIMIT:
                j = int(np.argmax(ratio))
                raise ValueError(
                    f"{type(self).__name__}: column {j} of X has values around "
                    f"{mean[j]:.4g} with a spread of {std[j]:.3g}: the trees read X in "
                    "float32, whose rounding at that magnitude "
                    f"({abs(mean[j]) * np.finfo(np.float32).eps:.2g}) wipes out the spread. "
                    "Center or standardize X first (e.g. StandardScaler in a Pipeline)."
                )
        return super()._fit_scaling(X, targets)

    def _build_module(self, n_features, n_outputs):
        if self.tree_dim is not None and self.tree_dim < n_outputs:
            raise ValueError(
                f"tree_dim={self.tree_dim} is smaller than the number of outputs "
                f"({n_outputs}); use tree_dim=None or at least {n_outputs}."
            )
        return NODE(
            n_features,
            n_outputs,
            num_trees=self._default_trees[0] if self.num_trees is None else self.num_trees,
            depth=self.depth,
            tree_dim=self.tree_dim,
            num_layers=self._default_trees[1] if self.num_layers is None else self.num_layers,
            dense=self.dense,
        )

    def _init_module(self, module, dataset, targets):
        """Data-aware thresholds/temperatures on a random subsample; bias at the base rate."""
        n = len(dataset)
        rows = torch.randperm(n)[: min(n, _INIT_ROWS)].sort().values
        module.data_init(dataset.rows(rows).to(module.bias.dtype))
        with torch.no_grad():
            module.bias.copy_(self._initial_bias(targets).to(module.bias.dtype))

    def _gate_module(self, module, init):
        # one group per tree (axis 0 of response); the weight s^(2/D) puts the penalty on
        # each tree's contribution s * response to the output
        scale = float(module.output_scale)
        for layer in module.layers:
            rho = np.full(layer.num_trees, scale ** (2.0 / self.D))
            dgate(layer, "response", groups=AxisGroups(0), D=self.D, init=init, group_weights=rho)

    def _early_stopping(self):
        """Whether this fit stops early: ``"auto"`` means with the automatic budget."""
        if self.early_stopping == "auto":
            return self.max_epochs is None
        return bool(self.early_stopping)

    def _early_stopper(self):
        """The ``early_stopping`` callback: with lam > 0 it restores only clean sparse models."""
        if not self._early_stopping():
            return None
        if self.lam > 0:
            return CleanEarlyStopping(self.n_iter_no_change, self.zero_tol)
        return AveragingEarlyStopping(self.n_iter_no_change, smooth=True)

    def _optimizer(self, module, ridge):
        """The leaf responses' factors by plain SGD (exact zeros) inside the chosen
        optimizer (:class:`~sksparse_nn.training.FactorSGD`), unless ``response_lr=None``."""
        optimizer, options = super()._optimizer(module, ridge)
        if self.response_lr is None:
            return optimizer, options
        if optimizer is torch.optim.LBFGS:
            raise ValueError(
                "optimizer='lbfgs' cannot train the responses with their own SGD; "
                "set response_lr=None or use another optimizer."
            )
        # response_lr in units of the output, capped at 0.5 / curvature: the penalty alone
        # shrinks a factor by lr * lam * curvature a step; beyond ~1.3 Nesterov oscillates
        factors = list(penalty_curvatures(module))
        sgd_lr = self.response_lr / float(module.output_scale)
        curvature = self.lam * max((c for _, _, c in factors), default=0.0)
        if curvature > 0:
            sgd_lr = min(sgd_lr, 0.5 / curvature)
        groups = [
            # trust units: a row of omega per tree, each gate alone
            (name, {"sgd": True, "lr": sgd_lr, "trust_dim": 0 if k % 2 == 0 else None})
            for k, (name, _, _) in enumerate(factors)
        ]
        return FactorSGD, {**options, "inner": optimizer, "param_groups": groups}

    def lambda_max(self, X, y):
        """Top of the default lam grid: the D=2 lam that keeps every tree at zero.

        With the tree internals fixed at their data-aware initialization, ``c_t = 0``
        (all contributions zero) is optimal for the group penalty ``lam sum_t ||c_t||``
        exactly when ``lam >= max_t ||dL/dc_t||``; training moves the internals, so this
        is an estimate (paths extend the grid until no tree is left).
        """
        X = check_array(X, accept_sparse="csr", dtype=np.float64)
        probe = clone(self)  # target encoding sets fitted state: not on this estimator
        targets, n_outputs = probe._fit_targets(np.asarray(y))
        scaling = probe._fit_scaling(X, targets)  # the targets a fit trains on
        _, targets = scaling.transform(None, targets)
        if targets.dtype.is_floating_point:
            targets = targets.to(torch.float32)
        dataset = ArrayDataset(X, None, dtype=torch.float32)
        with seeded(0):
            module = probe._build_module(X.shape[1], n_outputs)
            probe._init_module(module, dataset, targets)
        with torch.no_grad():
            for layer in module.layers:
                layer.response.zero_()
        loss = probe._criterion()(module(dataset.rows(slice(None))), targets)
        grads = torch.autograd.grad(loss, [layer.response for layer in module.layers])
        norms = torch.cat([g.flatten(start_dim=1).norm(dim=1) for g in grads])
        return float(norms.max()) / float(module.output_scale)

    def _tree_norms(self, module):
        """Norm of every tree's responses, layers concatenated (0 for removed trees)."""
        return np.concatenate(
            [
                np.linalg.norm(as_numpy(layer.response).reshape(layer.num_trees, -1), axis=1)
                for layer in module.layers
            ]
        )

    def _feature_importances(self, module):
        """Response norm times feature-choice weight, summed over live trees and levels,
        normalized to sum to 1; exactly 0 for features no live tree can choose (entmax)."""
        n = module.n_features
        total = np.zeros(n)
        # with dense connections every layer reads the input features (its first n
        # columns); without them only the first layer does
        for layer in module.layers if module.dense else module.layers[:1]:
            norms = np.linalg.norm(as_numpy(layer.response).reshape(layer.num_trees, -1), axis=1)
            choice = as_numpy(layer.choice_weights())[:, :, :n]  # (T, depth, n_features)
            total += np.einsum("t,tdf->f", norms, choice)
        mass = total.sum()
        return total / mass if mass > 0 else total

    def _after_fit(self, X, y, sample_weight=None):
        self.tree_norms_ = self._tree_norms(self.module_)
        self.active_trees_ = np.flatnonzero(self.tree_norms_)
        self.n_active_trees_ = int(self.active_trees_.size)
        self._warn_trees_in_transit()

    def _warn_trees_in_transit(self):
        """A ConvergenceWarning when early stopping restored a sparse model with a kept
        tree below ``TINY`` of the largest (on its way to zero): the validation objective
        stopped improving before unused trees died."""
        if not (self.lam > 0 and self._early_stopping() and self.n_active_trees_):
            return
        dead, live = self.sparsity_gap_
        largest = float(self.tree_norms_.max())
        try:  # the largest tree of any epoch (recorded by CleanEarlyStopping)
            trained = max(self.history_[:, "largest_tree"])
        except (AttributeError, KeyError):
            trained = largest
        if live >= TINY * max(largest, trained):  # every kept tree is a real part of it
            return
        if largest < TINY * trained:  # the whole model on its way out
            warn_convergence(
                f"{type(self).__name__}: every tree shrank towards zero together (the "
                f"largest of the {self.n_active_trees_} kept is at {largest:.2g}, "
                f"{largest / trained:.2g} of the largest tree in training): lam={self.lam:g} "
                "is above what the data support, and the model is nearly constant. "
                "Lower lam.",
                stacklevel=4,
            )
            return
        warn_convergence(
            f"{type(self).__name__}: early stopping ended training while trees were still "
            f"shrinking towards zero: {self.n_active_trees_} trees are kept, the smallest "
            f"at {live:.2g} ({live / largest:.2g} of the largest; the largest removed "
            f"{dead:.2g}), and the smallest of them may be on their way out. The "
            "validation objective stopped improving first (small data, or a small lam). For "
            "a clean sparse model raise lam, or set early_stopping=False with max_epochs.",
            stacklevel=4,
        )

    def compact(self):
        """A plain NODE holding only the live trees (and reading only the selected features).

        Returns
        -------
        module : sksparse_nn.nn.node.NODE
            Takes ``X[:, selected_features_]`` (a float tensor) and returns the same raw
            outputs (regression values or logits) as the fitted model on ``X`` (the sum
            over the remaining trees keeps the full model's ``1 / num_trees`` scale).
        """
        check_is_fitted(self, "module_")
        return compact_node(self.module_, self.selected_features_)

    def _inference_module(self):
        return self.compact(), self.selected_features_, (self.n_features_in_,)


_NODE_DOC = fill(
    """

    Parameters
    ----------
    lam : float, default=3e-3
        Strength of the tree penalty ``sum_t ||s * response_t||^(2/D)``, ``s = 1 /
        num_trees`` (it acts on each tree's contribution to the output, so ``lam`` means
        the same for any number of trees). The default keeps a few trees on tables of
        thousands of rows; on small data early stopping may end while unused trees still
        shrink (a ``ConvergenceWarning`` says so): raise ``lam`` there. D=2 needs a
        larger ``lam`` than D=3. ``lam=0`` trains a plain NODE.
    $D
    num_trees : int or None, default=None
        Trees per layer; ``None``: 64 for regression, 128 for classification.
    depth : int, default=6
        Depth of each oblivious tree (``2**depth`` leaves).
    tree_dim : int or None, default=None
        Output length of each tree; ``None`` means the number of outputs. Larger values
        give later layers more to read (with ``num_layers > 1``).
    num_layers : int or None, default=None
        ``None``: 2 for regression (a second layer reading the first's outputs predicts
        better at the same cost), 1 for classification (where it does not help).
    dense : bool, default=True
        Each layer reads the input and all earlier layers' outputs, and every layer's
        trees feed the prediction (as in NODE); ``False`` stacks layers plainly.
    optimizer : {"adam", "adamw", "sgd"} or torch optimizer class, default="adam"
        Optimizer of the feature choices, thresholds, temperatures and bias (NODE trains
        with Adam).
    lr : float, default=3e-2
        Its initial learning rate.
    response_lr : float or None, default=0.3
        Step of the D-gated leaf responses, trained by plain SGD with Nesterov momentum
        0.9, in units of the output (``response_lr / s``): plain gradient steps shrink
        unused trees geometrically to exact zero, Adam's do not. ``None``: ``optimizer``.
    max_epochs : int or None, default=None
        ``None``: at least 100 epochs and at least 2000 optimizer steps, as a cap;
        early stopping (on by default) or the "settled" rule ends a fit before it.
        $max_epochs_warning
    batch_size : int or None, default=256
    $lr_schedule
        NODE applies it to both learning rates.
    $tol
    zero_tol : float, default=float32 eps
        Trees whose response norm ends below it are set to exactly 0.
    early_stopping : bool or "auto", default="auto"
        Hold out ``validation_fraction`` of the rows, stop after ``n_iter_no_change``
        epochs without improvement and restore the average of the best epoch and the (up
        to) 4 before it (``training.AveragingEarlyStopping``); with
        ``lam > 0`` judged on the validation objective, restoring only epochs with a
        clean sparsity gap (``training.CleanEarlyStopping``).
        ``"auto"``: on with ``max_epochs=None``, where NODE would overfit small data.
    $validation_fraction
    $n_iter_no_change
    $settle
    $warm_start
    $random_state
    $device
    $n_threads
    $verbose

    Attributes
    ----------
    active_trees_ : ndarray of int
        Indices of the trees with non-zero responses (layers concatenated, layer-major).
    n_active_trees_ : int
    tree_norms_ : ndarray of shape (num_layers * num_trees,)
        Norm of each tree's responses; exactly 0 for removed trees.
    selected_features_ : ndarray of int
        Features that some active tree can still choose (entmax gives exact zeros in
        the choice weights). NODE's groups are trees, not features, so it has no
        ``groups``: to select a table's variables use the MLP, NAM or linear models,
        e.g. through :class:`sksparse_nn.compose.VariableModel`.
    feature_importances_ : ndarray of shape (n_features,)
        Sum over active trees and levels of response norm times choice weight,
        normalized to sum to 1; exactly 0 for features no active tree can choose.
    module_ : sksparse_nn.nn.node.NODE
        The fitted torch module (plain parameters, removed trees exactly zero).
    $group_norms_
    $sparsity_gap_
    $history_
    $n_iter_
    $n_features_in_
"""
)


class NODERegressor(RegressorTaskMixin, _NODEFamily):
    _default_trees = (64, 2)
    #: The default path grid: 7 lams from 0.25 lam_max, starting from the dense ensemble
    #: (:meth:`path_start`): faster than a cold grid and keeps better trees. The
    #: classifier keeps the cold grid, where a dense start left trees in transit.
    _traits = replace(
        _NODEFamily._traits,
        standardize_targets=True,
        default_grid={"n_lams": 7, "lam_min_ratio": 0.25},
    )

    __doc__ = (
        """NODE regressor whose trees are removed by D-Gating during training.

    Neural oblivious decision ensembles (Popov, Morozov and Babenko, *Neural Oblivious
    Decision Ensembles for Deep Learning on Tabular Data*, ICLR 2020) with one D-Gating
    group per tree, trained on the half squared error in units of each target's standard
    deviation (so ``lam`` and the learning rates do not depend on the scale of ``y``)
    plus ``lam`` times the tree penalty: Adam for the trees' internals, SGD for the leaf
    responses, early stopping on held-out rows.
    """
        + _NODE_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn.estimators.node import NODERegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5))
    >>> y = np.sin(2 * X[:, 0]) + (X[:, 1] > 0)
    >>> reg = NODERegressor(lam=1e-2, num_trees=32, depth=3, max_epochs=30,
    ...                     batch_size=32, random_state=0).fit(X, y)
    >>> reg.n_active_trees_ < 32
    True
    >>> small = reg.compact()  # a NODE with only the active trees
    """
    )

    @torch.no_grad()
    def _rescale_outputs(self, module, shift, scale):
        dtype = module.target_scale.dtype
        scale = torch.as_tensor(scale, dtype=dtype)
        module.target_mean.copy_(module.target_mean * scale + torch.as_tensor(shift, dtype=dtype))
        module.target_scale.mul_(scale)

    def _initial_bias(self, targets):
        return torch.zeros(targets.shape[1], dtype=torch.float64)

    def path_start(self):
        """Paths start from the dense ensemble (lam=0; path protocol, see
        :func:`~sksparse_nn.regularization_path`): from the trained ensemble the first
        point removes unused trees faster, and keeps better ones, than a cold fit.

        Returns
        -------
        lam : float
            0.0
        """
        return 0.0


class NODEClassifier(ClassifierTaskMixin, _NODEFamily):
    __doc__ = (
        """NODE classifier whose trees are removed by D-Gating during training.

    Cross-entropy (logistic for two classes) plus ``lam`` times the tree penalty, trained
    the same way as :class:`NODERegressor`; the bias starts at the log class priors.
    """
        + _NODE_DOC
        + """    classes_ : ndarray of shape (n_classes,)

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn.estimators.node import NODEClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = NODEClassifier(lam=1e-3, num_trees=16, depth=3, max_epochs=10,
    ...                      random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """
    )

    def _initial_bias(self, targets):
        counts = torch.bincount(targets, minlength=len(self.classes_)).to(torch.float64)
        prior = (counts + 1.0) / (counts.sum() + len(self.classes_))
        log_prior = prior.log()
        if len(self.classes_) == 2:
            return (log_prior[1] - log_prior[0]).reshape(1)
        return log_prior - log_prior.mean()
