"""What a path scores its points by when the user names no scorer."""

from __future__ import annotations

from sklearn.base import is_classifier
from sklearn.metrics import log_loss

__all__ = ["default_scorer", "log_loss_score"]


def log_loss_score(estimator, X, y):
    """Minus the log-loss of ``estimator``'s class probabilities on ``(X, y)``.

    The estimator's own classes are the labels, so rows missing a class (a small
    validation fold) are scored too.
    """
    proba = estimator.predict_proba(X)
    return -log_loss(y, proba, labels=estimator.classes_)


def default_scorer(estimator):
    """The scorer of a path's validation and CV scores when ``scoring=None``.

    Classifiers with probabilities: :func:`log_loss_score`. The log-loss is a proper
    scoring rule and moves smoothly with lam, where accuracy moves in steps of one row:
    on real tables accuracy's folds tie across many lams, its standard errors are wide,
    and the lam it chooses keeps too little (an average test AUC of 0.803 against 0.821
    for the log-loss, sparse linear models on five tables, benchmarks/real_tables.py).
    Other estimators: ``None``, their ``score`` (R^2 for regressors, the
    reconstruction score of the autoencoder).
    """
    if is_classifier(estimator) and hasattr(estimator, "predict_proba"):
        return log_loss_score
    return None
