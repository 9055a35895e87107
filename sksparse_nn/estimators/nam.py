r"""Sparse neural additive models: D-Gating removes whole shape functions during training.

The model is :math:`f(x) = \beta + \sum_j g_j(x_j)` with one small network per feature
(:class:`sksparse_nn.nn.nam.NAM`, evaluated as batched tensor products). The first layer
of each subnetwork, weights *and* biases, forms one group; the objective is

.. math::

    \frac{1}{n} \sum_i \ell(y_i, f(x_i)) + \lambda \sum_j \|\theta_j\|_2^{2/D}
    + \lambda \frac{\kappa}{D} \sum_j \|V_j\|_2^2,

written with D-Gating as a smooth penalty, :math:`V_j` the later weights of subnetwork
:math:`j` and :math:`\kappa = 0.1`: that small ridge gives the objective a minimizer
(ReLU being positively homogeneous, a subnetwork could otherwise shrink its first layer
and grow its later weights without end). A group at exactly zero gives
:math:`g_j \equiv 0` (later layers have no bias and :math:`\sigma(0) = 0`). After
training every shape function is centred on the training data, the shift going into
``intercept_``.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..groups import AxisGroups
from ..nn.mlp import ACTIVATIONS
from ..nn.nam import NAM, compact_nam
from ..sparsifiers import ZERO_TOL
from ..training import PenaltyAwareClipping, as_numpy
from ._base import BaseDGated, column_norms
from ._contract import Traits
from ._docs import fill
from ._linear_member import LinearMember
from ._nam_inspection import AdditiveInspection, _levels
from ._nam_interactions import InteractionTerms
from ._nam_step import nam_training_step
from ._tasks import ClassifierTaskMixin, RegressorTaskMixin

__all__ = ["DGatedNAMClassifier", "DGatedNAMRegressor"]


class _DGatedNAM(LinearMember, InteractionTerms, AdditiveInspection, BaseDGated):
    """The NAM family: one group per term = its first layer (weights + biases). A term is
    one feature, or with ``groups`` one group of features sharing one subnetwork;
    unpenalized features (label -1) are terms of their own, never gated. With
    ``interactions``, one more group per pair of terms (both its factor networks)."""

    #: The automatic budget's cap of 8000 steps: a cold fit at a path's smallest default
    #: lam needs thousands of steps to settle with a clean gap (warm starts and settled
    #: fits stop long before). Cold fits hold the full rate as warm starts do: under a
    #: cosine decay over the cap a feature that starts to leave late stalls in transit.
    _traits = Traits(
        standardize_inputs=True,
        standardize_targets=True,
        ridge_downstream=True,
        auto_min_steps=8000,
        hold_cold_rate=True,
        fused_step=nam_training_step,  # one compiled call per step (see _nam_step)
        # nine lams over the base's range, the folds every lam (as the MLP's)
        default_grid={"n_lams": 9, "lam_min_ratio": 0.02},
    )

    _parameter_constraints = {
        **BaseDGated._parameter_constraints,
        "sparsifier": [str, type],
        "sparsifier_params": [dict, None],
        "hidden_layer_sizes": ["array-like"],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "feature_dropout": [Interval(Real, 0, 1, closed="left")],
        "groups": [None, Integral, "array-like"],
        "group_weights": [None, StrOptions({"sqrt"}), "array-like"],
        "max_grad_norm": [Interval(Real, 0, None, closed="neither"), None],
        "interactions": [None, Interval(Integral, 0, None, closed="left")]
        + [StrOptions({"auto"}), list, tuple],
    }

    def __init__(
        self,
        lam=3e-2,
        *,
        D=3,
        sparsifier="dgating",
        sparsifier_params=None,
        hidden_layer_sizes=(64,),
        activation="relu",
        dropout=0.0,
        feature_dropout=0.0,
        groups=None,
        group_weights=None,
        interactions=None,
        optimizer="sgd",
        lr=0.05,
        max_epochs=None,
        batch_size=64,
        lr_schedule="cosine",
        max_grad_norm=10.0,
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
        self.feature_dropout = feature_dropout
        self.groups = groups
        self.group_weights = group_weights
        self.interactions = interactions
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr_schedule = lr_schedule
        self.max_grad_norm = max_grad_norm
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

    # ----------------------------------------------------------- base hooks
    def _build_module(self, n_features, n_outputs):
        sizes = tuple(np.atleast_1d(np.asarray(self.hidden_layer_sizes, dtype=int)))
        if len(sizes) == 0 or any(s < 1 for s in sizes):
            raise ValueError(
                "hidden_layer_sizes must hold at least one positive width, got "
                f"{self.hidden_layer_sizes}."
            )
        terms, _ = self._terms(n_features)
        return NAM(
            n_features,
            sizes,
            n_outputs,
            activation=self.activation,
            dropout=self.dropout,
            feature_dropout=self.feature_dropout,
            terms=None if self.groups is None else terms,
            pairs=self._pair_columns(terms),
        )

    def _terms(self, n_features):
        """(columns of each term, group label of each term: -1 for ungated ones).

        The groups in label order, then every unpenalized feature as a term of its own.
        """
        labels, _ = self._penalty_groups(n_features)
        n_groups = int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0
        terms = [np.flatnonzero(labels == g).tolist() for g in range(n_groups)]
        free = np.flatnonzero(labels < 0).tolist()
        return terms + [[j] for j in free], list(range(n_groups)) + [-1] * len(free)

    def _init_module(self, module, dataset, targets):
        """Put the hinges' kinks at data points and the intercept at the target's mean.

        Hinge ``k`` of every feature gets its kink at the feature's value in a random
        training row (``b = -u x``), so the basis covers the observed range in any units;
        the intercept starts at the mean target or the log class frequencies.
        """
        n, h1 = len(dataset), module.first.shape[2]
        rows = torch.randint(0, n, (h1,))
        with torch.no_grad():
            # (T, h1, m) columns of each term in the random rows: the kinks' positions
            x = dataset.rows(rows).to(module.first.dtype)
            for part in (module, module.interactions):
                if part is None:
                    continue
                m, points = part.width, part.gather(x)
                weights = part.first[:, :m]  # (T, m, h1)
                part.first[:, m].copy_(-(points.transpose(1, 2) * weights).sum(dim=1))
            if targets.dtype.is_floating_point:
                module.intercept.copy_(targets.double().mean(dim=0).to(module.intercept.dtype))
            else:
                freq = torch.bincount(targets, minlength=max(2, module.n_outputs)).double() / n
                freq = freq.clamp_min(1e-3)
                if module.n_outputs == 1:  # binary: one logit
                    module.intercept.fill_(float(torch.log(freq[1] / freq[0])))
                else:
                    module.intercept.copy_(torch.log(freq).to(module.intercept.dtype))

    def _ridge(self, module):
        """The base class's ridge on every term's later weights, but not an unpenalized
        feature's: its first layer is free, so a ridge after it would only push the
        term's scale into that layer (the drift the ridge ends for gated terms)."""
        ridge = super()._ridge(module)
        _, labels = self._terms(module.n_features)
        gated = np.asarray(labels) >= 0
        if not ridge or gated.all():
            return ridge
        mask = torch.as_tensor(gated, dtype=module.out.dtype).view(-1, 1, 1)
        return {n: c if n.startswith("interactions.") else c * mask for n, c in ridge.items()}

    def _gate_module(self, module, init):
        # a warm start hands over a centred module: fold the centres back into the
        # intercept so that a group at zero means a contribution of exactly 0 again
        with torch.no_grad():
            module.intercept.sub_(module.centers.sum(dim=0))
            module.centers.zero_()
        # one group per term: slice t of first (T, m + 1, h1); unpenalized terms ungated
        _, term_labels = self._terms(module.n_features)
        _, rho = self._penalty_groups(module.n_features)
        groups = AxisGroups(0, np.asarray(term_labels))
        self._sparsify(module, "first", groups, init, "input features", rho)
        self._gate_pairs(module, init)

    @torch.no_grad()
    def _rescale_inputs(self, module, shift, scale):
        for part in (module, module.interactions):  # the main terms, the pairs' sides
            if part is None:
                continue
            m = part.width
            first = part.first.double()  # first[:, :m] weights of the columns, [:, m] biases
            # per weight row of every term: its column's scale and shift (padding: 1 and 0)
            pad = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
            scales = torch.cat([torch.as_tensor(scale, dtype=torch.float64), pad[0]])[part.index]
            shifts = torch.cat([torch.as_tensor(shift, dtype=torch.float64), pad[1]])[part.index]
            weight = first[:, :m] / scales[:, :, None]
            bias = first[:, m] - (weight * shifts[:, :, None]).sum(dim=1)
            part.first.copy_(torch.cat([weight, bias[:, None]], dim=1))

    @torch.no_grad()
    def _rescale_outputs(self, module, shift, scale):
        scale = torch.as_tensor(scale)
        if module.interactions is not None:
            pairs = module.interactions
            pairs.weight.copy_(pairs.weight.double() * scale)
        module.out.copy_(module.out.double() * scale)
        module.centers.copy_(module.centers.double() * scale)
        module.intercept.copy_(module.intercept.double() * scale + torch.as_tensor(shift))

    def _training_callbacks(self, module):
        if self.max_grad_norm is None:
            return []
        # Safety net, rarely active: when a large lam has made the first layers small, the
        # later layers grow to compensate (ReLU is positively homogeneous) and the loss
        # gets stiff along the first layer; a single noisy SGD step can then blow up.
        return [("grad_clip", PenaltyAwareClipping(self.max_grad_norm))]

    def _feature_importances(self, module):
        norms = column_norms(self._term_weights(module))
        if module.interactions is None:
            return norms
        return np.sqrt(norms**2 + self._pair_feature_norms(module).numpy())

    def _term_weights(self, module):
        """First-layer weights and biases of each feature's term, one column per feature:
        shape ((m + 1) h1, p); the features of one term share its column."""
        per_term = module.first.detach().reshape(module.n_terms, -1)
        owner = torch.empty(module.n_features, dtype=torch.long)
        for t, cols in enumerate(module.terms):
            owner[cols] = t
        return per_term[owner].t()

    def _after_fit(self, X, y, sample_weight=None):
        # the group norms (base class) decided the selection; feature_importances_ become
        # the contribution spreads below
        module = self.module_
        n_main = module.n_terms
        pairs = module.interactions.pairs if module.interactions is not None else []
        self.terms_ = [np.asarray(cols, dtype=np.intp) for cols in module.terms] + [
            np.asarray(a + b, dtype=np.intp) for a, b in pairs
        ]
        self.interaction_pairs_ = np.array(getattr(self, "_pairs", []), dtype=np.intp).reshape(
            -1, 2
        )
        self.term_names_ = self._term_names(module.terms, self.interaction_pairs_)
        self._center_pairs(X)  # pure pairs: zero mean along each axis on the training data
        # Centre every shape function on the training data (mean over all rows); removed
        # terms average exact zeros (centre exactly 0); a shift keeps the spreads below
        contrib = self._contributions_array(X)  # (n, T + P, k)
        mean = contrib.mean(axis=0)[:n_main]  # (T, k)
        with torch.no_grad():
            shift = torch.as_tensor(mean, dtype=module.centers.dtype)
            module.centers.add_(shift)
            module.intercept.add_(torch.as_tensor(mean.sum(axis=0), dtype=module.intercept.dtype))
        term_spread = np.sqrt(contrib.var(axis=0).mean(axis=1))
        spread = np.zeros(X.shape[1])
        if pairs:  # a feature's spread over all the terms it enters
            for t, cols in enumerate(self.terms_):
                spread[cols] = np.hypot(spread[cols], term_spread[t])
        else:
            for t, cols in enumerate(self.terms_):
                spread[cols] = term_spread[t]
        selected = np.zeros(X.shape[1], dtype=bool)
        selected[self.selected_features_] = True
        # Selected features keep a positive importance even if constant on the training
        # data, so that np.flatnonzero(feature_importances_) == selected_features_.
        tiny = np.finfo(np.float64).tiny
        self.feature_importances_ = np.where(selected, np.maximum(spread, tiny), 0.0)
        if pairs:  # a term is selected when its own group is not zero
            main = (module.first.detach().reshape(n_main, -1) != 0).any(dim=1).numpy()
            live = np.concatenate([main, self._pair_live(module)])
            self.selected_terms_ = np.flatnonzero(live).astype(np.intp)
        else:
            self.selected_terms_ = np.array(
                [t for t, cols in enumerate(self.terms_) if selected[cols[0]]], dtype=np.intp
            )
        intercept = as_numpy(module.intercept)
        self.intercept_ = float(intercept[0]) if intercept.size == 1 else intercept
        lo = np.asarray(X.min(axis=0).todense() if hasattr(X, "todense") else X.min(axis=0))
        hi = np.asarray(X.max(axis=0).todense() if hasattr(X, "todense") else X.max(axis=0))
        self.feature_ranges_ = np.column_stack([lo.ravel(), hi.ravel()]).astype(np.float64)
        self.term_levels_ = {
            t: _levels(X, cols) for t, cols in enumerate(self.terms_[:n_main]) if cols.size > 1
        }

    def compact(self):
        """A smaller plain torch NAM holding only the selected terms' subnetworks.

        Returns
        -------
        module : sksparse_nn.nn.nam.NAM
            Takes ``X[:, selected_features_]`` (as a float32 tensor) and returns the same
            raw outputs (regression values or logits, shape ``(n, n_outputs)``) as the
            fitted model on ``X``.
        """
        check_is_fitted(self, "module_")
        return compact_nam(self.module_, self.selected_terms_)

    def _inference_module(self):
        terms = self.terms_
        columns = sorted({c for t in self.selected_terms_ for c in terms[t]})
        return self.compact(), columns, (self.n_features_in_,)


_NAM_DOC = fill(
    """

    Parameters
    ----------
    lam : float, default=3e-2
        Penalty strength on ``sum_j ||theta_j||^(2/D)``, ``theta_j`` being the first
        layer (weights and biases) of feature ``j``'s subnetwork; the loss is the mean
        over samples plus ``lam * penalty``, on standardized features (and targets), so
        ``lam`` means the same in any units. The default removes pure-noise columns of
        small tables; choose it along ``regularization_path`` or with ``SparsePathCV``.
    $D
    $sparsifier
    $sparsifier_params
    hidden_layer_sizes : tuple of int, default=(64,)
        Hidden widths of every feature's subnetwork. One hidden ReLU layer on a scalar
        input is a linear spline with 64 learnable knots, enough for a shape function
        of one variable, far cheaper than the NAM papers' (100, 100, 64) with batch norm,
        and stable under the plain SGD that exact zeros need.
    activation : {"relu", "tanh", "gelu", "silu", "elu"}, default="relu"
    dropout : float, default=0.0
        Dropout on hidden activations.
    feature_dropout : float, default=0.0
        Probability of dropping a whole term's contribution per sample in training.
    $groups
        Each group of features gets one subnetwork of all its columns (one additive
        term, e.g. a categorical's one-hot columns), kept or removed whole; an
        unpenalized feature (label -1) is a term of its own that is never removed.
    $group_weights
    interactions : None, int, "auto" or list of pairs, default=None
        Pairwise interaction terms (a sparse GA2M), each a small network of two main
        terms gated as one more group, so that the penalty keeps or removes it whole
        beside the main effects. ``None`` (default): main effects only, the plain NAM.
        A list of pairs of features (indices, or column names of a DataFrame; with
        ``groups``, a feature stands for its whole group, e.g. a categorical): exactly
        those candidates. An int ``k``: the ``k`` most significant pairs of a test of
        interaction on binned residuals of a binned additive fit (``n T^2`` operations
        for ``T`` terms; sample weights not read). ``"auto"``: the pairs significant at
        family-wise level 0.05 (Bonferroni), at most one per main term, none without
        evidence of an interaction (then the plain NAM: noise pairs overfit).
        Every pair is pure: it averages to zero along each of its axes over the training
        data, so it never holds a main effect and its contribution means one thing. A
        pair: 4 products of two factor networks (one hidden layer of the first width of
        ``hidden_layer_sizes``; ``dropout`` and ``feature_dropout`` act on mains only).
        With pairs, paths' default grid runs 5 lams deeper (21 lams down to
        ``0.005 lam_max``; see ``default_grid``).
    optimizer : {"sgd", "adam", "adamw", "lbfgs"} or torch optimizer class, default="sgd"
        SGD with Nesterov momentum 0.9: plain gradient steps shrink unused groups
        geometrically to exact zero (Adam's normalized steps do not).
    lr : float, default=0.05
        Initial learning rate, on standardized inputs (and targets), so independent of
        the units of the data. The D-Gating factors' step is capped at
        ``0.5 / (lam * 2 / D)`` so that no ``lam`` makes SGD diverge.
    max_epochs : int or None, default=None
        ``None``: at most the larger of 100 epochs and 8000 optimizer steps (unused groups
        shrink geometrically per step, so exact zeros need steps, not epochs).
        $max_epochs_warning
    batch_size : int or None, default=64
    $lr_schedule
        The NAM holds the full rate in fits from scratch too.
    max_grad_norm : float or None, default=10.0
        Clip the norm of each step's gradient to this value plus the norm of the
        penalty's own pull on the D-Gating factors (so a large ``lam`` still removes
        groups at full speed); ``None`` disables it. A safety net against rare divergent
        SGD steps, seldom active on standardized data.
    $tol
    zero_tol : float, default=float32 eps
        Groups whose norm ends below it are set to exactly 0 (numerical dust only).
    $common_parameters

    Attributes
    ----------
    selected_features_ : ndarray of int
        Sorted indices of the features whose shape function is not identically zero.
    feature_importances_ : ndarray of shape (n_features,)
        Standard deviation of each feature's contribution (its term's, with ``groups``)
        on the training data (root mean over outputs); exactly 0 for removed features
        and > 0 for selected ones.
    terms_ : list of ndarray of int
        The columns of each additive term: one feature each without ``groups``; else
        the groups in label order, then every unpenalized feature alone; then the
        columns of each interaction (its two sides').
    selected_terms_ : ndarray of int
        Indices into ``terms_`` of the terms that are not identically zero.
    term_names_ : ndarray of str
        The name of every term in the user's columns ("a", "[b, c]" for a group,
        "a x b" for an interaction); ``term_names_[selected_terms_]`` names the kept ones.
    interaction_pairs_ : ndarray of int of shape (n_pairs, 2)
        The main terms (indices into ``terms_``) of each interaction; interaction ``t``
        is term ``len(terms_) - n_pairs + t``.
    intercept_ : float or ndarray of shape (n_outputs,)
        Constant term; the contributions are centred on the training data.
    feature_ranges_ : ndarray of shape (n_features, 2)
        Observed (min, max) of every feature in the training data.
    module_ : sksparse_nn.nn.nam.NAM
        The fitted torch module (plain weights, exact zeros).
    $group_norms_
    $sparsity_gap_
    $history_
    $n_iter_
    $n_features_in_

    See Also
    --------
    sksparse_nn.plotting.plot_shape_functions : One panel per selected feature.
"""
)


class DGatedNAMRegressor(RegressorTaskMixin, _DGatedNAM):
    __doc__ = (
        """Neural additive regressor whose shape functions are selected by D-Gating.

    Half mean squared error plus ``lam`` times the D-Gating penalty on each feature's
    first layer, trained by SGD on standardized features and targets: features the
    model does not need get a shape function that is exactly zero.
    """
        + _NAM_DOC
        + """
    Examples
    --------
    >>> from sksparse_nn.datasets import make_additive_regression
    >>> from sksparse_nn.estimators.nam import DGatedNAMRegressor
    >>> X, y = make_additive_regression(n_samples=300, n_noise=3, random_state=0)
    >>> reg = DGatedNAMRegressor(lam=0.02, max_epochs=30, random_state=0).fit(X, y)
    >>> contrib = reg.contributions(X)   # (300, 8); sums to the prediction
    >>> bool(abs(contrib.sum(axis=1) + reg.intercept_ - reg.predict(X)).max() < 1e-4)
    True
    """
    )


class DGatedNAMClassifier(ClassifierTaskMixin, _DGatedNAM):
    __doc__ = (
        """Neural additive classifier whose shape functions are selected by D-Gating.

    Logistic (two classes) or softmax cross-entropy plus ``lam`` times the D-Gating
    penalty on each feature's first layer, trained by SGD on standardized features.
    With ``K > 2`` classes every subnetwork outputs ``K`` logits.
    """
        + _NAM_DOC
        + """    classes_ : ndarray of shape (n_classes,)

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sksparse_nn.estimators.nam import DGatedNAMClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(),
    ...                     DGatedNAMClassifier(lam=0.01, max_epochs=10, random_state=0))
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    """
    )
