"""Exceptions and warnings of sksparse_nn (the package's own failure signals)."""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning

__all__ = ["ConvergenceWarning", "TrainingDivergedError"]


class TrainingDivergedError(FloatingPointError, ValueError):
    """Training produced a non-finite loss or non-finite weights.

    Raised by ``fit`` instead of returning a model with NaN weights. It is a
    ``ValueError`` (scikit-learn's convention for a fit that cannot succeed on the given
    data and parameters, so ``GridSearchCV(error_score=np.nan)`` records the candidate as
    failed) and a ``FloatingPointError`` (what went wrong). The message names the
    learning rate, ``lam`` and the scale of the data, with advice.

    Attributes
    ----------
    lam : float or None
        The penalty strength of the failed fit (paths report it per point).
    epoch : int or None
        The epoch at which the non-finite value appeared.
    """

    def __init__(self, message, *, lam=None, epoch=None):
        super().__init__(message)
        self.lam = lam
        self.epoch = epoch
