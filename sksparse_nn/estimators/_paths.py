"""The path protocol every family offers: what :func:`~sksparse_nn.regularization_path`
and :class:`~sksparse_nn.SparsePathCV` ask of an estimator besides ``fit``."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_array

from ..path import regularization_path
from ..solvers import lambda_max
from ..training import Scaling
from ..utils.validation import check_sample_weight

__all__ = ["PathProtocol"]


class PathProtocol:
    """The path protocol's methods with the defaults of a network family (a mixin of
    :class:`~sksparse_nn.estimators.BaseDGated`, which supplies ``_traits``,
    ``_penalty_groups`` and the task's ``_path_targets``)."""

    def regularization_path(self, X, y, **kwargs):
        """Fit along a lam grid with warm starts from dense to sparse (optionally with CV).

        ``regularization_path(self, X, y, **kwargs)`` of
        :func:`sksparse_nn.regularization_path`, whose keywords (``lams``,
        ``n_lams``, ``lam_min_ratio``, ``X_val``, ``y_val``, ``cv``, ``cv_stride``,
        ``cv_rule``, ``scoring``, ``n_jobs``, ``verbose``, ``keep_estimators``,
        ``checkpoint``) it takes; this
        estimator is not modified.

        Returns
        -------
        path : RegularizationPath
        """
        return regularization_path(self, X, y, **kwargs)

    def lambda_max(self, X, y, sample_weight=None):
        """Top of the default lam grid: where the D=2 penalty zeroes every group.

        Part of the path protocol (see :func:`~sksparse_nn.regularization_path`): the
        lam of the D = 2 (group-lasso) model of this family's penalized groups, in the
        units the penalty sees, computed by :func:`sksparse_nn.solvers.lambda_max`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            The weights the fits will get (rescaled to mean 1, as a fit does): the top
            of the weighted problem. The standardization a family trains in is not
            weighted (neither is the fit's).

        Returns
        -------
        lam_max : float
        """
        sparse = self._traits.X_validation.get("accept_sparse", "csr")  # as the fits take it
        X = check_array(X, accept_sparse=sparse, dtype=np.float64)
        sample_weight = check_sample_weight(sample_weight, X)
        targets = torch.as_tensor(np.array(self._path_targets(np.asarray(y)), dtype=np.float64))
        scaling = Scaling.fit(
            X if self._traits.standardize_inputs else None,
            targets if self._traits.standardize_targets and is_regressor(self) else None,
        )
        X, targets = scaling.transform(X, targets)
        labels, rho = self._penalty_groups(X.shape[1])
        fit_intercept = getattr(self, "fit_intercept", True)
        targets = targets.numpy()
        if is_classifier(self) and not fit_intercept:
            # the log-loss gradient at zero logits: probabilities 1/2 (one logit) or 1/K
            targets = targets - (0.5 if targets.shape[1] == 1 else 1.0 / targets.shape[1])
        # the squared-error form on the (centered) targets; for classifiers it equals
        # lambda_max(..., loss="log_loss") on the class labels when no feature is
        # unpenalized
        return lambda_max(
            X, targets, labels, rho, fit_intercept=fit_intercept, sample_weight=sample_weight
        )

    def default_grid(self):
        """Size and depth of the default lam grid of this family's paths.

        Part of the path protocol: ``regularization_path`` and ``SparsePathCV`` use these
        where ``n_lams`` / ``lam_min_ratio`` are ``None``. Every point of a network's path
        trains a model, and its dense end (lam near 0) keeps every feature and overfits
        small data, so networks use a short grid that stops at ``lam_min_ratio *
        lam_max`` with ``lam_min_ratio`` far from 0, and their CV folds fit every
        ``cv_stride``-th lam first, then only the lams next to the chosen ones (see
        :func:`~sksparse_nn.regularization_path`).

        Returns
        -------
        grid : dict
            ``{"n_lams": int, "lam_min_ratio": float}``, and optionally
            ``"cv_stride": int`` (1 when absent) and ``"extend_below": bool`` (whether
            a CV search goes on below the grid when its folds choose the densest lam;
            True when absent).
        """
        return dict(self._traits.default_grid)

    def path_order(self):
        """The order in which a path fits its lams, each point warm-started from the last.

        Part of the path protocol. ``"ascending"`` (the default): dense to sparse, where
        a warm start from a denser model lets the penalty remove groups (at D > 2 zero is
        a trap a sparse start could not leave). Families whose problem is convex at this
        ``D`` may return ``"descending"``: the solution does not depend on the start, and
        working sets grown from the empty model cost what the active set costs.

        Returns
        -------
        order : {"ascending", "descending"}
        """
        return "ascending"

    def fold_params(self):
        """Parameters the CV folds' fits take instead of this estimator's own.

        Part of the path protocol (optional). A fold's models are only scored, never
        kept, so they need not wait for exact zeros: with ``{"settle": "objective"}``
        (and the automatic budget) a fold's fit ends once its objective is on a plateau
        and its support steady, without waiting for the groups still on their way to
        zero, which had taken most of a search's epochs. The full-data path, whose
        models are kept, fits as configured.

        Returns
        -------
        params : dict
            Passed to ``set_params`` of the folds' copies of the estimator (empty for
            a family without the ``settle`` parameter).
        """
        return {"settle": "objective"} if "settle" in self.get_params(deep=False) else {}

    def linear_member(self):
        """The sparse linear model this family contains, or None.

        Part of the path protocol (optional). A family whose models reduce to the
        sparse linear model when their non-linear part is zero returns that member,
        unfitted, with the same penalty on each feature;
        :class:`~sksparse_nn.SparsePathCV` searches both on the same folds and keeps
        the linear member where the data do not support the non-linear part
        (:class:`~sksparse_nn.estimators.LinearMember` implements it for the MLP
        and the NAM). None (the default): the family has no such member.

        Returns
        -------
        estimator : estimator or None
        """
        return None

    def path_start(self):
        """The lam of the model an ascending path starts from, or None.

        Part of the path protocol (optional). ``None`` (the default): the path's first
        point is a cold fit. A number: the path first fits at that lam, a start model
        it does not record, and warm-starts its first point from it; a family whose
        cold fits at a small lam are slow to remove what they do not need can start
        from its dense fit instead (see :class:`~sksparse_nn.NODERegressor`).

        Returns
        -------
        lam : float >= 0 or None
        """
        return None
