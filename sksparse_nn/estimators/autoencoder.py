"""An autoencoder transformer that learns its own number of components."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.metrics import r2_score
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..nn.autoencoder import Autoencoder, compact_autoencoder
from ..nn.mlp import ACTIVATIONS
from ..path import regularization_path
from ..sparsifiers import ZERO_TOL
from ..training import resolve_optimizer, weighted_mean
from ._base import BaseDGated, column_norms
from ._contract import Traits
from ._docs import fill

__all__ = ["DGatedAutoencoder"]

#: The largest lam at which a unit of the linear D = 2 autoencoder can still pay for its
#: penalty, in units of ``s``, the share of the standardized data's variance along its top
#: principal direction: a unit along it with encoder/decoder norms ``a``, ``b`` (``t = ab``)
#: lowers the loss by ``s (t - t^2 / 2)`` at the cost ``lam sqrt(a^2 + b^2) >= lam
#: sqrt(2 t)``, positive for some ``t`` iff ``lam < s max_u (u - u^3 / 2) / sqrt(2) =
#: 0.385 s``. The grid's top is a little above it.
_LAM_MAX_FACTOR = 0.5

#: Optimizer steps of the unpenalized pre-training of a fresh fit (see ``_init_module``).
_PRETRAIN_STEPS = 500


class _HalfMeanSquaredError(torch.nn.Module):
    """``1/(2 n p) sum_i ||x_i - x_hat_i||^2``: averaged over features too, so that the
    loss's curvature (and a stable learning rate) does not grow with their number."""

    def forward(self, y_pred, y_true, sample_weight=None):
        return weighted_mean(0.5 * (y_pred - y_true).pow(2).mean(dim=1), sample_weight)



class _Encoder(torch.nn.Module):
    """The encoding half of an autoencoder module (what ``transform`` computes)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.encode(x)

class DGatedAutoencoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseDGated):
    """Autoencoder whose bottleneck units are removed by D-Gating: a self-sizing PCA.

    Encoder ``x -> MLP -> z`` (``n_components`` linear units), decoder ``z -> MLP ->
    x_hat`` (the encoder's widths reversed), trained on the half squared reconstruction
    error of the standardized features plus ``lam`` times the sparsifier's penalty on the
    bottleneck units, one group per unit (its encoder row, bias and decoder column
    together), by SGD after a short unpenalized pre-training. Units the data do not need
    end exactly at zero, so ``n_components_`` is learned: :meth:`transform` returns the
    codes of the live units only. With ``hidden_layer_sizes=()`` the model is linear
    (PCA's model with a penalty choosing the dimension).

    Parameters
    ----------
    lam : float, default=0.02
        Penalty strength on the bottleneck units. The loss is half the squared
        reconstruction error of the standardized features, averaged over features and
        rows, so a unit pays for itself when it explains a large enough share of the
        total variance: ``lam`` sets a share of variance, not a dimension. The default
        keeps the dimension of low-dimensional data; choose it along
        :meth:`regularization_path` (scored by the reconstruction's R^2).
    $D
    $sparsifier
    $sparsifier_params
    n_components : int, default=32
        Width of the bottleneck, an upper bound on the learned dimension (capped at the
        number of features).
    hidden_layer_sizes : tuple of int, default=(64,)
        Hidden widths of the encoder (the decoder mirrors them); ``()`` for a linear
        autoencoder.
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
    optimizer : {"sgd", "adam", "adamw", "lbfgs"} or torch optimizer class, default="sgd"
    lr : float, default=0.05
    max_epochs : int or None, default=None
        ``None``: at most the larger of 100 epochs and 4000 optimizer steps.
        $max_epochs_warning
    batch_size : int or None, default=64
    $lr_schedule
    $tol
    zero_tol : float, default=float32 eps
    $common_parameters

    Attributes
    ----------
    n_components_ : int
        Number of live bottleneck units (the learned dimension).
    selected_components_ : ndarray of int
        Indices of the live units among the ``n_components`` (the columns of
        :meth:`transform` come in this order).
    feature_importances_ : ndarray of shape (n_features,)
        Norm of each feature's encoder weights.
    selected_features_ : ndarray of int
        Features with non-zero encoder weights (all of them, unless a unit-free input;
        none when no bottleneck unit is left).
    module_ : Autoencoder
        The fitted torch module (user units in and out, exact zeros).
    $group_norms_
    $sparsity_gap_
    $history_
    $n_iter_
    $n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> from sksparse_nn import DGatedAutoencoder
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(400, 2) @ rng.randn(2, 8) + 0.02 * rng.randn(400, 8)  # dimension 2
    >>> ae = DGatedAutoencoder(hidden_layer_sizes=(), n_components=6, lam=0.02,
    ...                        random_state=0).fit(X)
    >>> ae.n_components_
    2
    >>> ae.transform(X).shape
    (400, 2)
    """

    # the pre-trained weights, split at the method's preferred point
    # the reconstruction error falls all the way to lam = 0: CV folds always choose the
    # grid's densest lam, and going on below it would only double a search
    _traits = Traits(
        standardize_inputs=True,
        standardize_targets=True,
        fresh_init="balanced",
        default_grid={"n_lams": 16, "lam_min_ratio": 0.02, "cv_stride": 2, "extend_below": False},
    )
    _target_validation = {"y_numeric": True, "multi_output": True}

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "sparsifier": [str, type],
        "sparsifier_params": [dict, None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "lr": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        lam=0.02,
        *,
        D=3,
        sparsifier="dgating",
        sparsifier_params=None,
        n_components=32,
        hidden_layer_sizes=(64,),
        activation="relu",
        optimizer="sgd",
        lr=0.05,
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
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
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

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None):
        """Fit the autoencoder; bottleneck units the data do not need end at zero.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense data (pandas feature names are kept).
        y : None
            Ignored.

        Returns
        -------
        self : DGatedAutoencoder
        """
        if sp.issparse(X):
            raise TypeError(
                "Sparse data was passed for X, but dense data is required: "
                "DGatedAutoencoder reconstructs every entry. Convert it with X.toarray() "
                "or reduce it with TruncatedSVD first."
            )
        targets = check_array(X, dtype=(np.float64, np.float32), copy=True)
        return self._fit(X, targets, warm_module=self._warm_module())

    def _fit_targets(self, y):
        return torch.as_tensor(np.asarray(y, dtype=np.float64)), y.shape[1]

    def _constant_output(self, targets, n_outputs):
        return targets.mean(dim=0, keepdim=True).expand(len(targets), -1)

    def _criterion(self):
        return _HalfMeanSquaredError()

    def _build_module(self, n_features, n_outputs):
        sizes = tuple(np.atleast_1d(np.asarray(self.hidden_layer_sizes, dtype=int)))
        if any(s < 1 for s in sizes):
            raise ValueError(f"hidden_layer_sizes must be positive, got {self.hidden_layer_sizes}.")
        k = min(self.n_components, n_features)
        return Autoencoder(n_features, sizes, k, self.activation)

    @torch.no_grad()
    def _init_module(self, module, dataset, targets):
        """A short unpenalized pre-training of a fresh module: its units carry the data
        before the penalty acts.

        Started cold, the penalty shrinks the bottleneck's small random units faster than
        the still poor reconstruction makes them grow, and a removed unit never returns
        (zero is a stationary point of every sparsifier's parametrization). Pre-training
        (``_PRETRAIN_STEPS`` steps of the chosen optimizer at ``lr``, the same batches)
        does for a fit what the path's dense first point does for the points after it.
        """
        optimizer, kwargs = resolve_optimizer(self.optimizer)
        if optimizer is torch.optim.LBFGS or _PRETRAIN_STEPS == 0:
            return
        params = [p for p in module.parameters() if p.requires_grad]
        opt = optimizer(params, lr=self.lr, **kwargs)
        n = len(targets)
        batch = n if self.batch_size is None else min(self.batch_size, n)
        criterion = self._criterion()
        steps = 0
        while steps < _PRETRAIN_STEPS:
            order = torch.randperm(n, device=targets.device)
            for start in range(0, n, batch):
                index = order[start : start + batch]
                with torch.enable_grad():
                    opt.zero_grad()
                    loss = criterion(module(dataset.rows(index)), targets[index])
                    loss.backward()
                if not torch.isfinite(loss):  # the penalized fit reports divergence
                    return
                opt.step()
                steps += 1
                if steps == _PRETRAIN_STEPS:
                    return

    def _gate_module(self, module, init):
        # one group per bottleneck unit: row j of `units` (encoder row, bias, decoder column)
        self._sparsify(module.bottleneck, "units", "out", init, "bottleneck units")

    def _feature_importances(self, module):
        """Encoder weight norms of each feature; all 0 when no bottleneck unit is left
        (the model then reads no feature: its output is constant)."""
        importances = column_norms(self._encoder_weight(module))
        if not bool(module.bottleneck.units.detach().abs().sum() > 0):
            importances = np.zeros_like(importances)
        return importances

    def _encoder_weight(self, module):
        if len(module.encoder):
            return module.encoder[0].weight
        return module.bottleneck.units[:, : module.bottleneck.n_in]

    @torch.no_grad()
    def _rescale_inputs(self, module, shift, scale):
        scale, shift = torch.as_tensor(scale), torch.as_tensor(shift)
        if len(module.encoder):
            layer = module.encoder[0]
            weight = layer.weight.double() / scale
            layer.bias.copy_(layer.bias.double() - weight @ shift)
            layer.weight.copy_(weight)
            return
        units, m = module.bottleneck.units, module.bottleneck.n_in
        weight = units[:, :m].double() / scale
        units[:, m].copy_(units[:, m].double() - weight @ shift)
        units[:, :m].copy_(weight)

    @torch.no_grad()
    def _rescale_outputs(self, module, shift, scale):
        scale, shift = torch.as_tensor(scale), torch.as_tensor(shift)
        if len(module.decoder):
            layer = module.decoder[-1]
            layer.weight.copy_(layer.weight.double() * scale[:, None])
            layer.bias.copy_(layer.bias.double() * scale + shift)
            return
        units, m = module.bottleneck.units, module.bottleneck.n_in
        units[:, m + 1 :].copy_(units[:, m + 1 :].double() * scale)
        module.out_bias.copy_(module.out_bias.double() * scale + shift)

    def _after_fit(self, X, y, sample_weight=None):
        live = self.module_.bottleneck.units.detach().abs().sum(dim=1) > 0
        self.selected_components_ = np.flatnonzero(live.numpy())
        self.n_components_ = int(self.selected_components_.size)

    # ------------------------------------------------------------- transform
    @property
    def _n_features_out(self):
        return self.n_components_

    def _check_X(self, X):
        check_is_fitted(self, "module_")
        return validate_data(self, X, dtype=(np.float64, np.float32), order="C", reset=False)

    def transform(self, X):
        """Codes of the live bottleneck units, shape ``(n_samples, n_components_)``."""
        X = self._check_X(X)
        codes = self._module_output(X, "encode")
        return codes[:, self.selected_components_]

    def inverse_transform(self, X):
        """Reconstruction in the input space from codes of shape
        ``(n_samples, n_components_)``."""
        check_is_fitted(self, "module_")
        # a model without live units has codes of width 0 (transform's output)
        Z = check_array(X, dtype=(np.float64, np.float32), ensure_min_features=0)
        if Z.shape[1] != self.n_components_:
            raise ValueError(
                f"inverse_transform takes {self.n_components_} codes per row (the live "
                f"units), got {Z.shape[1]}."
            )
        full = np.zeros((Z.shape[0], self.module_.n_components))
        full[:, self.selected_components_] = Z
        return self._module_output(full, "decode")

    def score(self, X, y=None):
        """R^2 of the reconstruction, averaged over features (1 is perfect).

        The score of paths, cross-validation and ``GridSearchCV``.
        """
        X = self._check_X(X)
        reconstruction = self._module_output(X)
        return float(r2_score(X, reconstruction, multioutput="uniform_average"))

    def compact(self):
        """The fitted module with only the live bottleneck units (same reconstructions)."""
        check_is_fitted(self, "module_")
        return compact_autoencoder(self.module_, self.selected_components_)

    def _inference_module(self):
        """The compacted encoder: codes of the live units (``transform``)."""
        n = self.n_features_in_
        return _Encoder(self.compact()), np.arange(n), (n,)

    # ----------------------------------------------------------------- paths
    def regularization_path(self, X, y=None, **kwargs):
        """The path over lam (see :func:`sksparse_nn.regularization_path`); points select
        bottleneck units (``n_selected`` is the learned dimension) and score the
        reconstruction."""
        return regularization_path(self, X, y, **kwargs)

    def lambda_max(self, X, y=None):
        """Top of the default lam grid: half the share of the standardized data's variance
        along its top principal direction (above 0.385 times it no unit of a linear D = 2
        autoencoder pays for itself)."""
        X = check_array(X, dtype=np.float64)
        std = X.std(axis=0)
        Xs = (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0)
        share = np.linalg.svd(Xs, compute_uv=False)[0] ** 2 / Xs.size
        return float(_LAM_MAX_FACTOR * max(share, np.finfo(float).tiny))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.target_tags.required = False
        return tags


DGatedAutoencoder.__doc__ = fill(DGatedAutoencoder.__doc__)
