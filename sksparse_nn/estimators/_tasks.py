"""The task mixins: targets, loss and prediction of regression and classification."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import expit, log_softmax, softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets

from ..training import weighted_mean

__all__ = ["ClassifierTaskMixin", "RegressorTaskMixin", "member_mean", "task_loss"]


class _HalfSquaredError(torch.nn.Module):
    """``1/(2n) sum_i ||y_i - f(x_i)||^2``: the convention of scikit-learn's Lasso."""

    def forward(self, y_pred, y_true, sample_weight=None):
        return weighted_mean(0.5 * (y_pred - y_true).pow(2).sum(dim=1), sample_weight)


class _MemberMean(torch.nn.Module):
    """The mean of a criterion over an ensemble's members: outputs of shape
    ``(n, n_members, n_outputs)`` are scored member by member against the same targets
    (each member is fitted, as in *TabM*); ``(n, n_outputs)`` as the criterion does."""

    def __init__(self, criterion):
        super().__init__()
        self.criterion = criterion

    def forward(self, y_pred, y_true, sample_weight=None):
        if y_pred.dim() < 3:
            return self.criterion(y_pred, y_true, sample_weight)
        n_members = y_pred.shape[1]
        if sample_weight is not None:
            sample_weight = sample_weight.repeat_interleave(n_members)
        return self.criterion(
            y_pred.reshape(-1, y_pred.shape[-1]),
            y_true.repeat_interleave(n_members, dim=0),
            sample_weight,
        )


def task_loss(criterion):
    """The task's own loss of a criterion :func:`member_mean` wrapped (else itself)."""
    return criterion.criterion if isinstance(criterion, _MemberMean) else criterion


def member_mean(criterion):
    """``criterion`` that also takes an ensemble's per-member outputs (their mean loss):
    the tasks' criteria, so that any family's module may return them in training."""
    return _MemberMean(criterion)


class RegressorTaskMixin(RegressorMixin):
    """Regression: float targets, 1-D or multi-output, squared error."""

    _target_validation = {"y_numeric": True, "multi_output": True}

    def _fit_targets(self, y):
        """Encoded targets and the number of outputs; sets the target's fitted state."""
        self._y_1d = y.ndim == 1
        targets = y.reshape(len(y), -1).astype(np.float64)
        return torch.as_tensor(targets, dtype=torch.float64), targets.shape[1]

    def _constant_output(self, targets, n_outputs):
        return targets.mean(dim=0, keepdim=True).expand(len(targets), -1)

    def _criterion(self):
        return member_mean(_HalfSquaredError())

    def _path_targets(self, y):
        return np.asarray(y, dtype=np.float64).reshape(len(y), -1)

    def predict(self, X):
        """Predicted targets, shape (n_samples,) or (n_samples, n_outputs)."""
        out = self._forward(X)
        return out[:, 0] if self._y_1d else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class _BinaryLoss(torch.nn.Module):
    """Mean logistic loss of one logit per sample."""

    def forward(self, y_pred, y_true, sample_weight=None):
        per_sample = torch.nn.functional.binary_cross_entropy_with_logits(
            y_pred[:, 0], y_true.to(y_pred.dtype), reduction="none"
        )
        return weighted_mean(per_sample, sample_weight)


class _CrossEntropy(torch.nn.Module):
    """Mean softmax cross-entropy of class codes."""

    def forward(self, y_pred, y_true, sample_weight=None):
        per_sample = torch.nn.functional.cross_entropy(y_pred, y_true, reduction="none")
        return weighted_mean(per_sample, sample_weight)


class ClassifierTaskMixin(ClassifierMixin):
    """Classification: labels of any type, logistic (binary) or softmax cross-entropy."""

    _target_validation = {}

    def _fit_targets(self, y):
        """Class codes and the number of logits; sets ``classes_``."""
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                f"The training data contain only one class ({self.classes_[0]!r}); "
                "at least 2 are needed."
            )
        codes = torch.as_tensor(encoder.transform(y), dtype=torch.int64)
        return codes, (1 if len(self.classes_) == 2 else len(self.classes_))

    def _criterion(self):
        return member_mean(_BinaryLoss() if len(self.classes_) == 2 else _CrossEntropy())

    def _constant_output(self, targets, n_outputs):
        counts = torch.bincount(targets, minlength=len(self.classes_)).double()
        log_prior = (counts.clamp_min(0.5) / counts.sum()).log()
        logits = (log_prior[1:] - log_prior[:1]) if n_outputs == 1 else log_prior
        return logits.to(self._traits.dtype).expand(len(targets), -1)

    def _path_targets(self, y):
        classes, index = np.unique(y, return_inverse=True)
        onehot = np.eye(len(classes))[index]
        return onehot[:, 1:] if len(classes) == 2 else onehot  # binary: one logit

    def decision_function(self, X):
        """Logits: shape (n_samples,) for two classes, else (n_samples, n_classes)."""
        out = self._forward(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes), rows summing to 1."""
        logits = self._forward(X)
        if logits.shape[1] == 1:  # overflow-free logistic function
            return np.column_stack([expit(-logits[:, 0]), expit(logits[:, 0])])
        return softmax(logits, axis=1)

    def predict_log_proba(self, X):
        """Log class probabilities, computed without taking the log of a rounded 0."""
        logits = self._forward(X)
        if logits.shape[1] == 1:
            z = logits[:, 0]
            return np.column_stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)])
        return log_softmax(logits, axis=1)

    def predict(self, X):
        """Predicted class labels."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
