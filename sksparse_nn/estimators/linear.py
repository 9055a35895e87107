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
from sklearn.base import is_classifier, is_regressor
from sklearn.utils._param_validation import StrOptions

from ..groups import AxisGroups, norms_by_label, penalty_value
from ..sparsifiers import ZERO_TOL, dgate, set_weight
from ..training import as_numpy
from ..utils.columns import column_moments, column_squares
from ._base import BaseDGated, column_norms
from ._contract import Traits
from ._docs import fill
from ._gated_least_squares import (
    BLOCK_STEPS_TOL,
    KKT_TOL,
    GatedLeastSquares,
    centered_moments,
    curvature_operator,
    gram_cache,
    is_wide,
    row_scaled,
    uses_working_sets,
)
from ._gated_logistic import GatedLogisticProblem
from ._linear_training import _BlockStepTrainer, _DataMemo, _is_gated, _probe, _same_key, _weights
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["SparseLinearClassifier", "SparseLinearRegressor"]

_RIDGE_INIT_MAX_FEATURES = 4000
# Widest problem on which the classifier runs exact block steps at D > 2 (they run on
# the live groups, all of them from a dense start: each proximal-Newton step costs a
# curvature matrix of the live features). At D = 2 they run on working sets grown from
# zero, whose cost follows the active set: no limit (nor for the regressor).
_LOGISTIC_BLOCK_STEPS_MAX_FEATURES = 2000
# Most block steps before L-BFGS takes over.
_BLOCK_STEPS_MAX = 100
# Relative KKT violation of a zero group beyond which L-BFGS may revive it (D = 2).
_REVIVE_MARGIN = 1e-9


class _SparseLinearModel(BaseDGated):
    """The linear model family: one ``nn.Linear``, groups of input features gated."""

    # float64: small problems, compared against exact solvers; nn.Linear takes torch
    # sparse batches; the ridge start is split into balanced factors; cheap exact
    # points: the usual lasso grid, down to the nearly unpenalized end
    _traits = Traits(
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
        D=3,
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
            columns, gradient steps on torch sparse batches).
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

    def _init_module(self, module, dataset, targets):
        """Start from a ridge solution: dense, at the right scale.

        The ridge strength ``alpha = lam * s^(2/D - 2)`` makes ``alpha ||w||^2`` match
        ``lam ||w||^(2/D)`` at the coefficients' typical size ``s`` (``_weight_scale``):
        ``alpha = lam`` on standardized data or at ``D = 2``, and the same start in any
        units of X and y. For D > 2 zero is a trap, so a fit starts dense and lets the
        penalty remove groups (the same reason paths run from dense to sparse).
        Classifiers regress the one-hot (binary: 0/1) targets. Skipped for very wide
        data, which keeps the default init.
        """
        X = dataset.X if dataset.sparse else dataset.X.cpu().numpy()
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
        ``X^T y / n``; for classifiers with an intercept, that of the one-hot targets
        equals the log-loss gradient at the intercept-only model) and the loss there
        (``const``; classifiers: the log-loss of the class frequencies). Not for
        classifiers without an intercept (their gradient at zero logits differs). From a
        ridge start at a huge lam (1e40) the block steps overflowed into NaN."""
        if is_classifier(self):
            if not self.fit_intercept:
                return False
            p = np.asarray(y_mean, dtype=np.float64).ravel()
            p = np.append(p, 1.0 - p[0]) if p.size == 1 else p
            const = float(-np.sum(p[p > 0] * np.log(p[p > 0])))
        return self._zero_is_optimal(rhs, const, n_features)

    def path_order(self):
        """``"descending"`` at ``D = 2`` (convex: sparse to dense, the working sets grow
        from the empty model as the reference solver's path does), else ``"ascending"``."""
        return "descending" if self.D == 2 else "ascending"

    def _data_memo(self, X, sample_weight):
        """This fit's :class:`_DataMemo`: the previous fit's when this one is a warm
        start on the same data (a path), else a new one.

        The data are recognized by a probe, ``X^T v`` for a fixed random ``v`` (one
        product with the design), with the shape, the sample weights and
        ``fit_intercept``; only warm starts keep the memo (see ``__getstate__``). Asked
        for by fits on working sets, where the statistics are passes over a large
        design (sparse 2000 x 10000: ~2 ms a path point).
        """
        v = _probe(X.shape[0])
        key = (
            X.shape,
            self.fit_intercept,
            np.asarray(X.T @ v).ravel(),
            None if sample_weight is None else np.asarray(sample_weight),
        )
        kept = getattr(self, "_kept_data", None)
        if not (self.warm_start and kept is not None and _same_key(kept[0], key)):
            kept = (key, _DataMemo())
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
        X = dataset.X if dataset.sparse else dataset.X.cpu().numpy()
        labels, rho = self._penalty_groups(X.shape[1])
        weight = as_numpy(module.weight).T
        bias = as_numpy(module.bias) if self.fit_intercept else None
        W, b, objective, gradient, norms, certified = self._block_solve(
            X, dataset.y, labels, rho, weight, bias, _weights(dataset)
        )
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

    def _feature_importances(self, module):
        return column_norms(module.weight)

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
    with plain L2 on all factors. From the start (ridge at ``alpha = lam``, or the previous
    solution along a path) a fit first takes exact block steps on this smooth problem:
    with the gates fixed it is a ridge problem in the vectors, solved exactly, after which
    the factors are re-balanced (one solve per step, of the size of the live features;
    on wide data, ``p > n`` or more than 4000 features, on working sets of groups grown
    until every group meets the KKT conditions at ``D = 2``, started from zero, where the
    reference solver's proximal iterations finish a working set the steps approach
    slowly; skipped with early stopping). A ``D = 2`` fit they certify ends there;
    otherwise full-batch L-BFGS in float64 (closure steps through skorch) finishes the
    D-gated problem. Groups the data do not need reach exact
    zero during training; the final ``zero_tol`` threshold only removes numerical dust
    (``sparsity_gap_`` shows it).

    Parameters
    ----------
    lam : float, default=1e-2
        Penalty strength; at ``D=2`` the same as ``GroupLassoRegressor(lam=...)`` and,
        for singleton groups and 1-d ``y``, scikit-learn's ``Lasso(alpha=...)``. It is
        in the units of the data's correlations (``lambda_max(X, y)`` is where every
        group is zero): the default keeps a sparse model on standardized X (and y)
        (``Lasso``'s ``alpha=1.0`` empties a model of standardized data); in other
        units, choose it along ``regularization_path``. A 2-d
        ``y`` is fitted as one multi-task group lasso (a feature's coefficients across
        outputs form one group, as ``MultiTaskLasso``); to fit the columns independently,
        as ``Lasso`` does with 2-d ``y``, wrap the estimator in
        ``sklearn.multioutput.MultiOutputRegressor``.
    $D
    $groups
    $group_weights
    fit_intercept : bool, default=True
        Fit an unpenalized intercept.
    positive : bool, default=False
        Constrain every coefficient to be ``>= 0`` (the intercept stays free), as
        scikit-learn's ``Lasso(positive=True)``; at ``D = 2`` the model is then the
        non-negative group lasso. The block steps solve the constrained problem exactly
        (an active-set solve per step); gradient steps after them are projected onto
        the constraint. The classifier accepts it for binary problems only.
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
        numerical dust only, whatever the units of X (dropped groups typically end far
        below it, see ``sparsity_gap_``).
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
        """Gated least squares: ``(W, intercept, objective, gradient, norms, certified)``."""
        Y = targets.cpu().double().numpy()
        sets = uses_working_sets(X)
        memo = self._data_memo(X, sample_weight) if sets else None
        if sets:  # never form the p x p Gram matrix: products with the design
            _, rhs, x_mean, y_mean, const = memo.targets_moments(
                X, Y, self.fit_intercept, sample_weight
            )
            group = GatedLeastSquares.penalized_groups(labels, rho, self.lam)
            if memo.squares is None:
                Xs, _ = row_scaled(X, sample_weight)
                memo.squares = column_squares(Xs)
            gram = curvature_operator(
                X, x_mean, group, True, None, sample_weight, squares=memo.squares,
                by_columns=memo.by_columns(X) if sample_weight is None else None,
            )  # fmt: skip
        else:
            gram, rhs, x_mean, y_mean, const = centered_moments(
                X, Y, self.fit_intercept, sample_weight=sample_weight
            )
        nonneg = np.ones(X.shape[1], dtype=bool) if self.positive else None
        problem = GatedLeastSquares(
            gram, rhs, const, labels, rho, self.lam, self.D, nonneg,
            gradient=None if memo is None else memo.gradient,
        )  # fmt: skip
        if sets:  # working sets, their Gram blocks kept along a warm-started path
            if memo.gram is None:
                memo.gram = gram_cache(gram)
            cache = memo.gram
            cache.products = gram.products  # the blocks of this fit's design object
            W, objective, self._n_block_steps = problem.minimize_working_sets(
                weight, cache, _BLOCK_STEPS_MAX, BLOCK_STEPS_TOL, kkt_tol=KKT_TOL
            )
        else:
            W, objective, self._n_block_steps = problem.minimize(
                weight, _BLOCK_STEPS_MAX, BLOCK_STEPS_TOL, kkt_tol=KKT_TOL
            )
        intercept = y_mean - x_mean @ W
        certified = self.D == 2 and problem.relative_kkt(W) <= KKT_TOL
        gradient = -problem.gradient(W)
        if memo is not None:  # where a warm start from this solution begins
            memo.gradient = problem.last_gradient
        return W, intercept, objective, gradient, problem.norms(W), certified

    def _coef_shape(self, weight, bias):
        if self._y_1d:
            return weight[0], float(bias[0])
        return weight, bias

    def _data_loss(self, scores, y, sample_weight=None):
        resid = y.reshape(len(y), -1) - scores
        return 0.5 * float(np.average((resid**2).sum(axis=1), weights=sample_weight))


class SparseLinearClassifier(ClassifierTaskMixin, _SparseLinearModel):
    r"""Group-sparse logistic regression with the penalty :math:`\lambda\sum_j\rho_j\|w_j\|^{2/D}`.

    Binary problems use one logit (logistic loss), multiclass problems a softmax over
    ``n_classes`` logits; a group spans its features' coefficients across all classes, so
    a feature is either used for every class or removed. The loss is the mean log-loss.
    Parameters, training and attributes are those of :class:`SparseLinearRegressor`; the
    block steps are proximal-Newton steps whose quadratic models the regressor's steps
    minimize. At ``D = 2`` they run on any data, beyond 100 features on working sets of
    groups grown from zero by the KKT violations of the full gradient (their cost
    follows the active set, ``X`` is never copied whole), and a fit they certify (the
    reference solver's relative KKT rule at its default, 1e-8) ends there; at ``D > 2``
    they run on data of up to 2000 features.

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
        """Gated logistic: ``(W, intercept, objective, gradient, norms, certified)``."""
        by_columns = None
        if uses_working_sets(X):  # zero_tol's column scale, X by columns, along a path
            by_columns = self._data_memo(X, sample_weight).by_columns(X)
        problem = GatedLogisticProblem(
            X,
            targets.cpu().numpy(),
            weight.shape[1],
            labels,
            rho,
            self.lam,
            self.D,
            self.fit_intercept,
            sample_weight,
            positive=self.positive,
            by_columns=by_columns,
        )
        if bias is not None and problem.x_mean is not None:
            bias = bias + problem.x_mean @ weight  # the intercept of the centred columns
        start = weight if bias is None else np.vstack([weight, bias[None, :]])
        V, objective, self._n_block_steps = problem.minimize(
            problem.to_reduced(start), _BLOCK_STEPS_MAX, KKT_TOL, uses_working_sets(X)
        )
        W, p = problem.to_full(V), X.shape[1]
        gradient = -problem.gradient[:p]  # the descent direction, as the regressor's
        b = None
        if self.fit_intercept:
            b = W[p] if problem.x_mean is None else W[p] - problem.x_mean @ W[:p]
        certified = self.D == 2 and problem.kkt(V, problem.gradient) <= KKT_TOL
        return W[:p], b, objective, gradient, problem.shape.norms(V), certified

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
