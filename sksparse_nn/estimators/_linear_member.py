"""The sparse linear model as a member of a network family: what
:class:`~sksparse_nn.SparsePathCV` searches beside the network."""

from __future__ import annotations

from sklearn.base import is_classifier

from .linear import SparseLinearClassifier, SparseLinearRegressor

__all__ = ["LinearMember"]


class LinearMember:
    """Mixin of the families whose models reduce to the sparse linear model when their
    non-linear part is zero (an MLP without hidden units, a NAM whose shape functions
    are straight lines): ``linear_member()`` of the path protocol.

    A family narrows ``_member_penalty_matches`` where some of its settings put another
    penalty on the features than the member's.
    """

    def linear_member(self):
        """The sparse linear model this network contains, or None.

        A :class:`~sksparse_nn.SparseLinearClassifier` or
        :class:`~sksparse_nn.SparseLinearRegressor` with this model's ``D``,
        ``groups``, ``group_weights`` and ``random_state``: its penalty on a feature
        is the one this model puts on the feature's group.
        :class:`~sksparse_nn.SparsePathCV` searches both on the same folds and keeps
        the member unless the network's CV score is better. None when this model's
        settings put another penalty on the features (another sparsifier than
        D-Gating, features not gated).

        Returns
        -------
        estimator : SparseLinearClassifier, SparseLinearRegressor or None
            Unfitted.
        """
        if not self._member_penalty_matches():
            return None
        member = SparseLinearClassifier if is_classifier(self) else SparseLinearRegressor
        return member(
            D=self.D,
            groups=self.groups,
            group_weights=self.group_weights,
            random_state=self.random_state,
            n_threads=self.n_threads,
        )

    def _member_penalty_matches(self):
        """Whether this model's penalty is D-Gating on input-feature groups (the
        member's)."""
        return self.sparsifier == "dgating"
