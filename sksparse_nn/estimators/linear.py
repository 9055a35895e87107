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
from sklearn.utils._param_validation import StrOptions

from ..gating import ZERO_TOL, dgate
from ..groups import AxisGroups
from ..solvers import _check_groups, _resolve_group_weights
from ._base import BaseDGated, ClassifierTaskMixin, RegressorTaskMixin
from ._training import as_numpy

__all__ = ["SparseLinearClassifier", "SparseLinearRegressor"]

_RIDGE_INIT_MAX_FEATURES = 4000


class _SparseLinearModel(BaseDGated):
    """The linear model family: one ``nn.Linear``, groups of input features gated."""

    _torch_dtype = torch.float64  # small problems, compared against exact solvers
    _fresh_init = "balanced"  # the ridge start, split into balanced factors

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "groups": [None, Integral, "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self,
        lam=1.0,
        *,
        D=3,
        groups=None,
        group_weights=None,
        fit_intercept=True,
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
        warm_start=False,
        random_state=None,
        device="cpu",
        verbose=0,
    ):
        self.lam = lam
        self.D = D
        self.groups = groups
        self.group_weights = group_weights
        self.fit_intercept = fit_intercept
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
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _build_module(self, n_features, n_outputs):
        return torch.nn.Linear(n_features, n_outputs, bias=self.fit_intercept)

    def _init_module(self, module, X, targets):
        """Start from the ridge solution at ``alpha = lam``: dense, at the right scale.

        For D > 2 zero is a trap, so a fit starts dense and lets the penalty remove groups
        (the same reason paths run from dense to sparse). Classifiers regress the one-hot
        (binary: 0/1) targets. Skipped for very wide data, which keeps the default init.
        """
        p = X.shape[1]
        if p > _RIDGE_INIT_MAX_FEATURES:
            return
        Y = targets.double().numpy() if targets.dtype.is_floating_point else None
        if Y is None:  # class codes
            codes = targets.numpy()
            Y = np.eye(module.out_features + (module.out_features == 1))[codes]
            Y = Y[:, 1:] if module.out_features == 1 else Y
        n = X.shape[0]
        x_mean = np.asarray(X.mean(axis=0)).ravel() if self.fit_intercept else np.zeros(p)
        y_mean = Y.mean(axis=0) if self.fit_intercept else np.zeros(Y.shape[1])
        gram = np.asarray((X.T @ X).todense() if sp.issparse(X) else X.T @ X) / n
        gram -= np.outer(x_mean, x_mean)
        rhs = np.asarray(X.T @ Y) / n - np.outer(x_mean, y_mean)
        alpha = self.lam + 1e-6 * max(np.trace(gram) / p, 1e-12)
        W = np.linalg.solve(gram + alpha * np.eye(p), rhs)  # (p, n_outputs)
        with torch.no_grad():
            module.weight.copy_(torch.as_tensor(W.T))
            if self.fit_intercept:
                module.bias.copy_(torch.as_tensor(y_mean - x_mean @ W))

    def _penalty_groups(self, n_features):
        labels = _check_groups(self.groups, n_features)
        return labels, _resolve_group_weights(self.group_weights, labels)

    def _gate_module(self, module, init):
        labels, rho = self._penalty_groups(module.in_features)
        dgate(
            module, "weight", groups=AxisGroups(1, labels), D=self.D, init=init, group_weights=rho
        )

    def _input_weight(self, module):
        return module.weight

    def _path_group_norms(self):
        return self.group_norms_

    def _after_fit(self, X, y):
        labels, rho = self._penalty_groups(X.shape[1])
        self.group_labels_ = labels
        weight = as_numpy(self.module_.weight)
        bias = as_numpy(self.module_.bias) if self.fit_intercept else np.zeros(weight.shape[0])
        sq = np.bincount(
            labels[labels >= 0], weights=(weight[:, labels >= 0] ** 2).sum(0), minlength=rho.size
        )
        self.group_norms_ = np.sqrt(sq)
        self.selected_groups_ = np.flatnonzero(self.group_norms_)
        self.coef_, self.intercept_ = self._coef_shape(weight, bias)
        penalty = float(rho @ self.group_norms_ ** (2.0 / self.D))
        self.objective_ = self._data_loss(X, y) + self.lam * penalty


class SparseLinearRegressor(RegressorTaskMixin, _SparseLinearModel):
    r"""Group-sparse least squares with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Trained by D-Gating: each group's coefficients are a vector times ``D-1`` scalar gates
    with plain L2 on all factors, optimized by full-batch L-BFGS in float64 (closure steps
    through skorch). Groups the data do not need reach exact zero during training; the
    final ``zero_tol`` threshold only removes numerical dust (``sparsity_gap_`` shows it).

    Parameters
    ----------
    lam : float, default=1.0
        Penalty strength; at ``D=2`` the same as ``GroupLassoRegressor(lam=...)`` and
        scikit-learn's ``Lasso(alpha=...)`` for singleton groups.
    D : int, default=3
        Gating depth >= 2: ``2`` group lasso, ``3`` penalty ``||w_j||^(2/3)``, ``4``
        ``||w_j||^(1/2)``.
    groups : None, int, list of index lists or array of labels, default=None
        ``None``: each feature alone; ``k``: consecutive groups of ``k`` features; lists
        of feature indices (features in no list are unpenalized); or one integer label per
        feature (``-1`` = unpenalized).
    group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
        ``rho_j``: ones, square root of group sizes, or explicit non-negative weights.
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    optimizer : {"lbfgs", "sgd", "adam", "adamw"} or torch optimizer class, default="lbfgs"
        L-BFGS converges in a few dozen full-batch steps on this smooth problem.
    lr : float, default=1.0
        Learning rate (L-BFGS with a Wolfe line search uses 1).
    max_epochs : int, default=200
        Maximum number of optimizer steps over the data.
    batch_size : int or None, default=None
        ``None`` trains on the full batch.
    lr_schedule : {"constant", "cosine"}, default="constant"
    tol : float or None, default=1e-12
        Stop when an epoch lowers the objective by less than ``tol`` (relative).
    zero_tol : float, default=float32 eps (1.2e-7)
        Groups with a smaller norm after training are set to exactly 0 (numerical dust:
        dropped groups typically end far below it, see ``sparsity_gap_``).
    early_stopping, validation_fraction, n_iter_no_change
        Hold out a fraction for early stopping on the validation loss (best weights
        restored).
    warm_start : bool, default=False
        Start from the previous solution (re-split into balanced factors).
    random_state : int, RandomState or None, default=None
        Seeds the initialization (torch's global RNG is left untouched).
    device : str, default="cpu"
    verbose : int, default=0
        Show a progress bar when > 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_outputs, n_features)
    intercept_ : float or ndarray of shape (n_outputs,)
    selected_features_ : ndarray of int
        Sorted indices of features with a non-zero coefficient.
    selected_groups_ : ndarray of int
        Indices of the non-zero groups.
    group_norms_ : ndarray of shape (n_groups,)
    group_labels_ : ndarray of shape (n_features,)
        Group of each feature (-1: unpenalized).
    feature_importances_ : ndarray of shape (n_features,)
        ``|coef_|`` (norm over outputs); exactly 0 outside the support.
    objective_ : float
        The non-smooth objective at the final (thresholded) coefficients.
    sparsity_gap_ : tuple of float
        (largest group norm set to zero, smallest group norm kept) before thresholding.
    n_iter_ : int
        Number of epochs run.
    history_ : skorch.History
    n_features_in_, feature_names_in_

    Examples
    --------
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.datasets import make_group_regression
    >>> data = make_group_regression(random_state=0)
    >>> est = SparseLinearRegressor(lam=0.3, D=3, groups=5).fit(data.X, data.y)
    >>> est.selected_groups_  # doctest: +SKIP
    """

    def _coef_shape(self, weight, bias):
        if self._y_1d:
            return weight[0], float(bias[0])
        return weight, bias

    def _data_loss(self, X, y):
        resid = y.reshape(len(y), -1) - self._module_output(X)
        return 0.5 * float((resid**2).sum(axis=1).mean())


class SparseLinearClassifier(ClassifierTaskMixin, _SparseLinearModel):
    r"""Group-sparse logistic regression with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Binary problems use one logit (logistic loss), multiclass problems a softmax over
    ``n_classes`` logits; a group spans its features' coefficients across all classes, so
    a feature is either used for every class or removed. The loss is the mean log-loss.
    Parameters, training and attributes are those of :class:`SparseLinearRegressor`.

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

    def _coef_shape(self, weight, bias):
        return weight, bias

    def _data_loss(self, X, y):
        logits = self._module_output(X)
        index = np.searchsorted(self.classes_, y)
        if logits.shape[1] == 1:  # binary: log(1 + exp(-s * z)) with s = +-1
            sign = np.where(index == 1, 1.0, -1.0)
            return float(np.mean(np.logaddexp(0.0, -sign * logits[:, 0])))
        log_norm = np.logaddexp.reduce(logits, axis=1)
        return float(np.mean(log_norm - logits[np.arange(len(y)), index]))
