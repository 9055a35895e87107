"""Regularization paths for every estimator: one warm-started fit per lam, dense to sparse.

For ``D > 2`` a group at exactly zero is a local minimum that never comes back, so paths
run from small lam (dense) to large lam (sparse), each fit starting from the previous
solution re-split into balanced factors. The engine only calls the estimator's private
``_fit(X, y, warm_module=...)`` and reads fitted attributes; it knows nothing of gating.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_array

__all__ = ["RegularizationPath", "lambda_max", "lambda_grid", "regularization_path"]


def lambda_max(X, targets, labels, rho, fit_intercept=True):
    """Smallest lam at which the D=2 (group-lasso) solution is all zero.

    ``max_j ||X_j^T R||_F / (n rho_j)`` over penalized groups, with ``R`` the centered
    targets (one column per output or class) and ``X`` centered when ``fit_intercept``.
    Unpenalized features are ignored (exact when there are none).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    targets : ndarray of shape (n_samples, n_columns)
    labels : ndarray of int of shape (n_features,)
        Group of each feature, -1 for none.
    rho : ndarray of shape (n_groups,)
    fit_intercept : bool, default=True

    Returns
    -------
    lam_max : float
    """
    R = np.asarray(targets, dtype=np.float64)
    if fit_intercept:
        R = R - R.mean(axis=0)  # centering R also centers X^T R
    grad = np.asarray(X.T @ R) / X.shape[0]  # (n_features, n_columns)
    grouped = labels >= 0
    sq = np.bincount(labels[grouped], weights=(grad[grouped] ** 2).sum(axis=1), minlength=rho.size)
    ok = rho > 0
    return float(np.max(np.sqrt(sq[ok]) / rho[ok])) if ok.any() else 0.0


def lambda_grid(lam_max, n_lams=30, lam_min_ratio=1e-3):
    """Log-spaced grid from ``lam_max * lam_min_ratio`` up to ``lam_max`` (ascending)."""
    if not lam_max > 0:
        raise ValueError(f"Cannot build a lam grid: lam_max={lam_max} (is y constant?).")
    return np.geomspace(lam_max * lam_min_ratio, lam_max, int(n_lams))


@dataclass
class RegularizationPath:
    """The fits of one estimator along a lam grid (ascending lam: dense to sparse).

    Attributes
    ----------
    lams : ndarray of shape (n_lams,)
    n_selected : ndarray of int of shape (n_lams,)
        Number of selected features at each lam.
    selected : list of ndarray
        ``selected_features_`` at each lam.
    group_norms : ndarray of shape (n_lams, n_groups)
        Norm of every penalized group (features, or feature groups for linear models).
    coefs : ndarray of shape (n_lams, ...) or None
        ``coef_`` at each lam for models that have one.
    intercepts : ndarray or None
    train_objective : ndarray of shape (n_lams,)
        Non-smooth training objective (NaN where the model does not report one).
    train_score : ndarray of shape (n_lams,)
        ``score`` on the training data.
    val_score : ndarray of shape (n_lams,) or None
        ``score`` on the validation data, when given.
    feature_names : ndarray of str or None
    D : int
    """

    lams: np.ndarray
    n_selected: np.ndarray
    selected: list
    group_norms: np.ndarray
    coefs: np.ndarray | None
    intercepts: np.ndarray | None
    train_objective: np.ndarray
    train_score: np.ndarray
    val_score: np.ndarray | None
    feature_names: np.ndarray | None = None
    D: int | None = None
    estimators: list = field(default_factory=list, repr=False)

    def __len__(self):
        return len(self.lams)

    def to_frame(self):
        """One row per lam: lam, n_selected, objective and scores (pandas DataFrame)."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "lam": self.lams,
                "n_selected": self.n_selected,
                "train_objective": self.train_objective,
                "train_score": self.train_score,
            }
        )
        if self.val_score is not None:
            frame["val_score"] = self.val_score
        names = self.feature_names
        frame["selected"] = [
            list(names[s]) if names is not None else s.tolist() for s in self.selected
        ]
        return frame

    def plot(self, ax=None, *, kind="norms"):
        """Plot the path (needs matplotlib, the ``plot`` extra).

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        kind : {"norms", "score"}, default="norms"
            ``"norms"``: every group norm against lam (log-log; dropped groups fall to
            zero and leave the plot at the bottom). ``"score"``: train and validation score
            with the number of selected features on a second axis.

        Returns
        -------
        ax : matplotlib Axes
        """
        from .plotting import plot_path

        return plot_path(self, ax=ax, kind=kind)


def _grid(lams, extend, selected, max_extra=20):
    """Yield the grid; a default grid grows (appending to ``lams``) until all is zero.

    lam_max zeroes the convex D=2 problem, but a warm-started non-convex fit (D > 2) can
    keep a local minimum with live groups beyond it, so default paths continue upward
    with the grid's own ratio until no feature is selected.
    """
    yield from list(lams)
    ratio = lams[-1] / lams[-2] if len(lams) > 1 else 2.0
    for _ in range(max_extra if extend else 0):
        if selected[-1].size == 0:
            return
        lams.append(lams[-1] * ratio)
        yield lams[-1]


def regularization_path(
    estimator,
    X,
    y,
    *,
    lams=None,
    n_lams=30,
    lam_min_ratio=1e-3,
    X_val=None,
    y_val=None,
    keep_estimators=False,
):
    """Fit ``estimator`` along a lam grid with warm starts from dense to sparse.

    Parameters
    ----------
    estimator : a D-gated estimator of this package (not modified; cloned)
    X, y : training data
    lams : array-like of float, default=None
        The grid; sorted ascending before fitting. ``None`` builds ``n_lams`` log-spaced
        values from ``lam_min_ratio * lam_max`` to ``lam_max``, where ``lam_max`` is the
        smallest lam with an all-zero group-lasso (D=2) solution; for D > 2 the grid is
        extended upward (same ratio) until no feature is selected.
    n_lams : int, default=30
    lam_min_ratio : float, default=1e-3
    X_val, y_val : validation data, default=None
    keep_estimators : bool, default=False
        Keep a fitted copy of the estimator at every lam in ``path.estimators``.

    Returns
    -------
    path : RegularizationPath
    """
    import copy

    est = clone(estimator)
    extend = lams is None
    if extend:
        lams = lambda_grid(est._default_lambda_max(X, y), n_lams, lam_min_ratio)
    lams = np.sort(check_array(np.asarray(lams, dtype=float), ensure_2d=False).ravel())
    if lams.size == 0 or np.any(lams < 0):
        raise ValueError("lams must be a non-empty array of non-negative values.")
    if (X_val is None) != (y_val is None):
        raise ValueError("Give both X_val and y_val, or neither.")

    records = {k: [] for k in ("selected", "norms", "coefs", "intercepts", "obj", "train", "val")}
    kept, warm, lams = [], None, list(lams)
    for lam in _grid(lams, extend, records["selected"]):
        est.set_params(lam=float(lam))
        est._fit(X, y, warm_module=warm)
        warm = est.module_
        records["selected"].append(est.selected_features_.copy())
        records["norms"].append(est._path_group_norms())
        records["coefs"].append(np.copy(getattr(est, "coef_", np.nan)))
        records["intercepts"].append(np.copy(getattr(est, "intercept_", np.nan)))
        records["obj"].append(getattr(est, "objective_", np.nan))
        records["train"].append(est.score(X, y))
        if X_val is not None:
            records["val"].append(est.score(X_val, y_val))
        if keep_estimators:
            kept.append(copy.deepcopy(est))
    has_coef = hasattr(est, "coef_")
    return RegularizationPath(
        lams=np.asarray(lams),
        n_selected=np.array([s.size for s in records["selected"]]),
        selected=records["selected"],
        group_norms=np.vstack(records["norms"]),
        coefs=np.stack(records["coefs"]) if has_coef else None,
        intercepts=np.stack(records["intercepts"]) if has_coef else None,
        train_objective=np.asarray(records["obj"], dtype=float),
        train_score=np.asarray(records["train"]),
        val_score=np.asarray(records["val"]) if X_val is not None else None,
        feature_names=getattr(est, "feature_names_in_", None),
        D=getattr(est, "D", None),
        estimators=kept,
    )
