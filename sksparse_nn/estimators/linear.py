r"""Group-sparse linear models trained by D-Gating.

``SparseLinearRegressor`` minimizes

.. math::

    \frac{1}{2n}\|y - Xw - b\|_2^2 + \lambda \sum_j \rho_j \|w_j\|_2^{2/D}

(at ``D=2`` the group lasso, the objective of :class:`~sksparse_nn.GroupLassoRegressor`;
``D=3, 4`` the sparser non-convex penalties no proximal library offers).
``SparseLinearClassifier`` replaces the squared error by the mean logistic loss; a group
then spans its features' coefficients across all classes.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import is_regressor
from sklearn.utils._param_validation import StrOptions

from ..groups import AxisGroups, norms_by_label, penalty_value
from ..solvers import (
    GatedGroupNorm,
    LeastSquares,
    Logistic,
    Multinomial,
    gated_fit,
    uses_working_sets,
)
from ..sparsifiers import ZERO_TOL, dgate
from ..training import as_numpy
from ..utils.columns import column_moments
from ._base import BaseDGated, column_norms
from ._contract import Traits
from ._docs import fill
from ._linear_training import _LinearTraining
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["SparseLinearClassifier", "SparseLinearRegressor"]

# Widest problem on which the classifier runs exact block steps at D > 2 (they run on
# the live groups, all of them from a dense start: each proximal-Newton step costs a
# curvature matrix of the live features). At D = 2 they run on working sets grown from
# zero, whose cost follows the active set: no limit (nor for the regressor).
_LOGISTIC_BLOCK_STEPS_MAX_FEATURES = 2000
# Most block steps before L-BFGS takes over.
_BLOCK_STEPS_MAX = 100


class _SparseLinearModel(_LinearTraining, BaseDGated):
    """The linear model family: one ``nn.Linear``, groups of input features gated."""

    # float64: small problems, compared against exact solvers; nn.Linear takes torch
    # sparse batches; the ridge start is split into balanced factors; cheap exact
    # points: the usual lasso grid, down to the nearly unpenalized end; sparse X is kept
    # as CSC when given so (the block steps read it by columns: no copy)
    _traits = Traits(
        X_validation={"accept_sparse": ("csr", "csc")},
        dtype=torch.float64,
        sparse_batches=True,
        fresh_init="balanced",
        default_grid={"n_lams": 30, "lam_min_ratio": 1e-3},
    )
    _block_steps = False  # exact block steps before L-BFGS (squared error only)
    _block_steps_max_features = None  # widest data the block steps run on (None: any)

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "groups": [None, Integral, "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "fit_intercept": ["boolean"],
        "positive": ["boolean"],
    }

    def __init__(
        self,
        lam=1e-2,
        *,
        D=2,
        groups=None,
        group_weights=None,
        fit_intercept=True,
        positive=False,
        optimizer="lbfgs",
        lr=1.0,
        max_epochs=200,
        batch_size=None,
        lr_schedule="constant",
        tol=1e-12,
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
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
        self.positive = positive
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

    def fit(self, X, y, sample_weight=None):
        """Fit the model at ``lam``; groups the data do not need end exactly at zero.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (sparse input is never densified: the block steps work on its
            columns, gradient steps on torch sparse batches). Beyond 100 features the
            working sets read CSC in place and copy CSR to CSC once per data set
            (kept along a warm-started path).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (class labels for the classifier).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples, rescaled to sum to ``n_samples`` as in
            scikit-learn's Lasso: the loss becomes ``sum_i s_i loss_i / n``, so an
            integer weight equals repeating the row and a zero weight equals dropping it,
            and ``lam`` keeps its scale.

        $fit_returns
        """
        return self._fit(X, y, warm_module=self._warm_module(), sample_weight=sample_weight)

    fit.__doc__ = fill(fit.__doc__)

    def _build_module(self, n_features, n_outputs):
        return torch.nn.Linear(n_features, n_outputs, bias=self.fit_intercept)

    def path_order(self):
        """``"descending"`` at ``D = 2`` (convex: sparse to dense, the working sets grow
        from the empty model as the reference solver's path does), else ``"ascending"``."""
        return "descending" if self.D == 2 else "ascending"

    def _gate_module(self, module, init):
        """Gate the penalized groups; at ``D = 2`` with block steps the gates wait for
        the block steps (``_run_block_steps``), which usually certify the solution: a
        certified fit never trains, and its plain weight is the solution (no gating,
        balancing and collapse round trip)."""
        if self._certifies():
            return
        labels, rho = self._penalty_groups(module.in_features)
        self._gate(module, init, labels, rho)

    def _gate(self, module, init, labels, rho):
        if not np.any(labels >= 0):  # nothing penalized: plain (logistic) least squares
            return
        dgate(
            module, "weight", groups=AxisGroups(1, labels), D=self.D, init=init, group_weights=rho
        )

    def _gated_norm(self, datafit, labels, rho):
        """The block steps' penalty: the gated group norm of ``labels`` / ``rho`` at
        this ``lam`` and ``D`` on ``datafit``'s rows (the features held ``>= 0`` with
        ``positive``, an intercept row free)."""
        positive = datafit.positive_rows(self.positive)
        return GatedGroupNorm(datafit.row_labels(labels), rho, self.lam, self.D, positive)

    def _feature_importances(self, module):
        return column_norms(module.weight)

    def _inference_module(self):
        """A ``Linear`` on the live columns (the scores ``X[:, live] W^T + b``)."""
        weight = self.module_.weight.detach()
        live = np.flatnonzero(as_numpy(weight.abs().sum(dim=0) > 0))
        bias = self.module_.bias
        layer = torch.nn.Linear(live.size, weight.shape[0], bias=bias is not None)
        layer = layer.to(weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(weight[:, torch.as_tensor(live)])
            if bias is not None:
                layer.bias.copy_(bias)
        return layer.eval(), live, (self.n_features_in_,)

    def _weight_scale(self, X, y):
        """``std(y) / std(X)`` (medians over columns): the size of coefficients in the
        user's units, so that ``zero_tol`` removes only numerical dust whatever the
        units of X (a model fitted to ``X * 1e9`` keeps its coefficients of ~1e-9).
        The median over X's columns is kept along a path (see ``_data_memo``)."""
        memo = getattr(self, "_fit_memo", None)
        x_std = None if memo is None else memo.x_std
        if x_std is None:
            _, var = column_moments(X)
            x_std = float(np.median(np.sqrt(var[var > 0]))) if np.any(var > 0) else 0.0
            if memo is not None:
                memo.x_std = x_std
        if not x_std > 0:
            return 1.0
        y_std = 1.0
        if np.issubdtype(np.asarray(y).dtype, np.floating) and is_regressor(self):
            y_std = float(np.median(np.std(np.asarray(y).reshape(len(y), -1), axis=0)))
        return (y_std if y_std > 0 else 1.0) / x_std

    def _after_fit(self, X, y, sample_weight=None):
        labels, rho = self._penalty_groups(X.shape[1])
        self.group_labels_ = labels
        weight = as_numpy(self.module_.weight)
        bias = as_numpy(self.module_.bias) if self.fit_intercept else np.zeros(weight.shape[0])
        self.group_norms_ = norms_by_label(weight.T, labels, rho.size)
        self.selected_groups_ = np.flatnonzero(self.group_norms_)
        self.coef_, self.intercept_ = self._coef_shape(weight, bias)
        penalty = penalty_value(self.group_norms_, rho, self.D)
        self.objective_ = self._data_loss(self._module_output(X), y, sample_weight)
        self.objective_ += self.lam * penalty

    def _module_output(self, X, method=None):
        """The scores ``X W^T + b`` in float64 by one product with ``X`` (sparse ``X``
        stays sparse; the module's batched forward would densify it batch by batch),
        with dense ``X`` restricted to the live columns when they are fewer than a
        quarter of them (a sparse model: their copy costs less than the full product)."""
        if method is not None:
            return super()._module_output(X, method)
        weight = as_numpy(self.module_.weight).astype(np.float64)
        live = np.flatnonzero(np.any(weight != 0.0, axis=0))
        if sp.issparse(X) or 4 * live.size >= X.shape[1]:
            scores = np.asarray(X @ weight.T).reshape(X.shape[0], -1)
        else:  # a sparse model: the product with its live columns only
            scores = X[:, live] @ weight[:, live].T
        if self.module_.bias is not None:
            scores = scores + as_numpy(self.module_.bias).astype(np.float64)
        return scores


class SparseLinearRegressor(RegressorTaskMixin, _SparseLinearModel):
    r"""Group-sparse least squares with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Trained by D-Gating: each group's coefficients are a vector times ``D-1`` scalar gates
    with plain L2 on all factors. From its start (a ridge solution, or the previous point
    of a path) a fit takes exact block steps: with the gates fixed the problem is a ridge
    problem in the vectors, solved exactly, then the factors are re-balanced (on wide
    data, ``p > n`` or more than 4000 features, on working sets of groups grown from zero
    at ``D = 2``; skipped with early stopping). A ``D = 2`` fit they certify ends there;
    otherwise full-batch L-BFGS in float64 finishes the D-gated problem. Groups the data
    do not need reach exact zero; the final ``zero_tol`` threshold only removes numerical
    dust (``sparsity_gap_`` shows it).

    Parameters
    ----------
    lam : float, default=1e-2
        Penalty strength; at ``D=2`` the same as ``GroupLassoRegressor(lam=...)`` and, for
        singleton groups and 1-d ``y``, scikit-learn's ``Lasso(alpha=...)``. In units of
        the data's correlations (every group is zero from ``lambda_max(X, y)`` on): the
        default keeps a sparse model of standardized X and y; in other units choose it
        along ``regularization_path``. A 2-d ``y`` is one multi-task group lasso (a
        feature's coefficients across outputs form one group, as ``MultiTaskLasso``); for
        independent columns use ``sklearn.multioutput.MultiOutputRegressor``.
    D : int, default=2
        Gating depth >= 2: 2 is the group lasso (convex: one solution, a smooth
        cross-validation curve, the exact solver's certified stop); 3 and 4 give the
        sparser non-convex penalties ``||w_j||^(2/3)`` and ``||w_j||^(1/2)``, which
        keep fewer features at a given accuracy but leave less shrinkage to tell lams
        apart, so a cross-validated search can land near the unpenalized end where the
        data cannot support it. The linear model a network's search compares with
        (its ``linear_member()``) takes the network's.
    $groups
    $group_weights
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (the intercept stays free), as
        ``Lasso(positive=True)`` (at ``D = 2`` the non-negative group lasso): the block
        steps solve the constrained problem exactly, gradient steps after them are
        projected. The classifier accepts it for binary problems only.
    optimizer : {"lbfgs", "sgd", "adam", "adamw"} or torch optimizer class, default="lbfgs"
        Optimizer after the block steps; from their end L-BFGS usually needs a handful of
        closure evaluations.
    lr : float, default=1.0
        Learning rate (L-BFGS with a Wolfe line search uses 1).
    max_epochs : int, default=200
        Maximum number of optimizer steps over the data.
        $max_epochs_warning
    batch_size : int or None, default=None
        ``None`` trains on the full batch.
    lr_schedule : {"constant", "cosine"}, default="constant"
    tol : float or None, default=1e-12
        Stop when an epoch lowers the objective by less than ``tol`` (relative); L-BFGS
        also ends an epoch early when one of its iterations does.
    zero_tol : float, default=float32 eps (1.2e-7)
        Groups with a smaller norm after training, in units of ``std(y) / std(X)``
        (medians over columns; classifiers: ``1 / std(X)``), are set to exactly 0:
        numerical dust only, whatever the units of X (see ``sparsity_gap_``).
    $common_parameters

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    selected_features_ : ndarray of int
        Sorted indices of features with a non-zero coefficient.
    selected_groups_ : ndarray of int
        Indices of the non-zero groups.
    $group_norms_
    group_labels_ : ndarray of shape (n_features,)
        Group of each feature (-1: unpenalized).
    feature_importances_ : ndarray of shape (n_features,)
        ``|coef_|`` (norm over outputs); exactly 0 outside the support.
    objective_ : float
        The non-smooth objective at the final (thresholded) coefficients.
    $sparsity_gap_
    $n_iter_
    $history_
    $n_features_in_

    Examples
    --------
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> est = SparseLinearRegressor(lam=0.3, D=3, groups=5).fit(data.X, data.y)
    >>> est.selected_groups_  # doctest: +SKIP
    """

    __doc__ = fill(__doc__)

    _block_steps = True

    def _block_solve(self, X, targets, labels, rho, weight, bias, sample_weight=None):
        """Gated least squares: a :class:`~sksparse_nn.solvers.GatedFit`."""
        memo = self._data_memo(X, sample_weight) if uses_working_sets(X) else None
        datafit = LeastSquares(
            X, targets.cpu().double().numpy(), self.fit_intercept, sample_weight
        )
        fit = gated_fit(
            datafit, self._gated_norm(datafit, labels, rho), weight,
            max_steps=_BLOCK_STEPS_MAX, memo=memo,
        )  # fmt: skip
        self._n_block_steps = fit.n_steps
        return fit

    def _coef_shape(self, weight, bias):
        if self._y_1d:
            return weight[0], float(bias[0])
        return weight, bias

    def _data_loss(self, scores, y, sample_weight=None):
        resid = y.reshape(len(y), -1) - scores
        return 0.5 * float(np.average((resid**2).sum(axis=1), weights=sample_weight))


class SparseLinearClassifier(ClassifierTaskMixin, _SparseLinearModel):
    r"""Group-sparse logistic regression with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Mean log-loss: one logit for binary problems, a softmax over ``n_classes`` logits
    otherwise; a group spans its features' coefficients across all classes, so a feature
    is used for every class or removed. Parameters, training and attributes are those of
    :class:`SparseLinearRegressor`, the block steps being proximal-Newton steps: at
    ``D = 2`` on any data (beyond 100 features on working sets grown from zero by the KKT
    violations of the full gradient), a fit they certify (relative KKT violation at most
    1e-8, the reference solver's default) ending there; at ``D > 2`` on up to 2000
    features.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    selected_features_, selected_groups_, group_norms_, group_labels_,
    feature_importances_, objective_, sparsity_gap_, n_iter_, history_

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn import SparseLinearClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = make_pipeline(StandardScaler(), SparseLinearClassifier(lam=0.02, D=3))
    >>> model.fit(X, y).score(X, y) > 0.9
    True
    """

    _block_steps = True
    _block_steps_max_features = _LOGISTIC_BLOCK_STEPS_MAX_FEATURES

    def _block_solve(self, X, targets, labels, rho, weight, bias, sample_weight=None):
        """Gated logistic: a :class:`~sksparse_nn.solvers.GatedFit`."""
        # zero_tol's column scale, X by columns, along a path
        memo = self._data_memo(X, sample_weight) if uses_working_sets(X) else None
        codes = targets.cpu().numpy()
        if weight.shape[1] == 1:
            datafit = Logistic(X, codes, self.fit_intercept, sample_weight)
        else:
            datafit = Multinomial(X, codes, weight.shape[1], self.fit_intercept, sample_weight)
        fit = gated_fit(
            datafit, self._gated_norm(datafit, labels, rho), weight, bias,
            max_steps=_BLOCK_STEPS_MAX, memo=memo,
        )  # fmt: skip
        self._n_block_steps = fit.n_steps
        return fit

    def _coef_shape(self, weight, bias):
        return weight, bias

    def _data_loss(self, logits, y, sample_weight=None):
        index = np.searchsorted(self.classes_, y)
        if logits.shape[1] == 1:  # binary: log(1 + exp(-s * z)) with s = +-1
            sign = np.where(index == 1, 1.0, -1.0)
            per_sample = np.logaddexp(0.0, -sign * logits[:, 0])
        else:
            log_norm = np.logaddexp.reduce(logits, axis=1)
            per_sample = log_norm - logits[np.arange(len(y)), index]
        return float(np.average(per_sample, weights=sample_weight))
