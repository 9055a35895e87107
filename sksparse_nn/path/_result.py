"""The result of a path: :class:`RegularizationPath`, its arrays, summary, table and plot."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RegularizationPath:
    """The fits of one estimator along a lam grid (ascending lam: dense to sparse).

    Attributes
    ----------
    lams : ndarray of shape (n_lams,)
    n_selected : ndarray of int of shape (n_lams,)
        Number of selected features at each lam (of components, for estimators with
        ``selected_components_`` such as :class:`~sksparse_nn.DGatedAutoencoder`; of
        variables, for :meth:`sksparse_nn.compose.VariableModel.regularization_path`).
    selected : list of ndarray
        ``selected_features_`` (or ``selected_components_``) at each lam.
    n_terms : ndarray of int of shape (n_lams,) or None
        Number of kept additive terms at each lam (``selected_terms_``: main effects
        and interactions of the NAMs); ``None`` for estimators without terms.
    group_norms : ndarray of shape (n_lams, n_groups)
        ``group_norms_`` at each lam: the norm of every penalized group (input features
        for the networks, feature groups for linear models, trees for NODE).
    importances : ndarray of shape (n_lams, n_features)
        ``feature_importances_`` at each lam (exactly 0 for removed features).
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
    cv_scores : ndarray of shape (n_folds_finished, n_lams) or None
        Validation score of every CV fold whose path finished (with ``cv``): all folds,
        unless the computation was interrupted (then ``completed`` is False and
        ``len(cv_scores)`` says how many folds finished). A fold whose training diverged
        scores NaN from that lam on; every fold scores NaN at the lams the folds skipped
        (``cv_stride`` > 1: most networks' default), which are never chosen.
    cv_failed : ndarray of bool of shape (n_folds_finished, n_lams) or None
        The fold points whose training diverged.
    cv_mean, cv_se : ndarray of shape (n_lams,) or None
        Mean over the finished folds and its standard error ``std / sqrt(n_folds)``.
    best_lam_ : float or None
        The lam with the best mean CV score, among lams whose full-data fit exists and
        that every fold scored; where that fit did not converge (see ``converged``),
        the best converged lam within one standard error of it instead, if any.
        ``None`` when the computation was interrupted or no lam qualifies.
    lam_1se_ : float or None
        The largest (sparsest) such lam whose mean CV score is within one standard error
        of the best (the largest converged lam of that band, if any converged).
    completed : bool
        False when the computation was interrupted (Ctrl-C): the points finished so far
        are kept (never a partial one), CV scores come from the folds that finished, and
        ``best_lam_`` / ``lam_1se_`` are left ``None`` (never chosen from part of the
        work).
    failed : ndarray of bool of shape (n_lams,)
        Points whose training diverged (:class:`~sksparse_nn.TrainingDivergedError`):
        NaN scores and norms, nothing selected (``n_selected`` 0). A path stops at its
        first failed point (a default grid stops growing).
    converged : ndarray of bool of shape (n_lams,)
        Points whose full-data fit did not warn that it had not converged (a
        ConvergenceWarning of the package's estimators): for the networks and
        NODE, training ended with a clean sparsity gap (no group half-way to zero).
        ``best_lam_`` and ``lam_1se_`` prefer these within one standard error of the
        best mean CV score, so the chosen model has exact zeros and a clear gap
        whenever one as good exists.
    n_below : int
        Lams a cross-validated default grid added below its densest lam, because the
        folds chose it (see ``cv`` of :func:`~sksparse_nn.regularization_path`); 0
        when the choice was inside the grid, without ``cv`` and for a grid given in
        ``lams``.
    extension_limit : str or None
        Why that extension stopped with the choice still at the densest lam (a warning
        says so too): ``"floor"`` (1e-4 of the grid's largest lam), ``"points"`` (as
        many lams added as the grid has) or ``"diverged"``; None when the choice left
        the dense end (or nothing was extended).
    selection_unit : str
        What ``selected`` counts: ``"features"``, ``"components"`` (the autoencoder) or
        ``"variables"`` (a :class:`~sksparse_nn.compose.VariableModel`); plots label
        their axes with it.
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
    cv_scores: np.ndarray | None = None
    cv_failed: np.ndarray | None = None
    cv_mean: np.ndarray | None = None
    cv_se: np.ndarray | None = None
    best_lam_: float | None = None
    lam_1se_: float | None = None
    completed: bool = True
    failed: np.ndarray | None = None
    converged: np.ndarray | None = None
    importances: np.ndarray | None = None
    selection_unit: str = "features"
    n_terms: np.ndarray | None = None
    n_below: int = 0
    extension_limit: str | None = None

    def __len__(self):
        return len(self.lams)

    def __repr__(self):
        """A summary (the arrays are attributes): grid, selection sizes, choices."""
        n = len(self.lams)
        parts = [f"{n} lams" + (f" from {self.lams[0]:.3g} to {self.lams[-1]:.3g}" if n else "")]
        if n:
            parts.append(f"{self.selection_unit} selected {[int(k) for k in self.n_selected]}")
            if self.n_terms is not None:
                parts.append(f"terms {[int(k) for k in self.n_terms]}")
        if self.D is not None:
            parts.append(f"D={self.D}")
        if self.cv_scores is not None:
            parts.append(f"cv folds={len(self.cv_scores)}")
        for name in ("best_lam_", "lam_1se_"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name):.4g}")
        if not self.completed:
            parts.append("completed=False")
        return f"RegularizationPath({', '.join(parts)})"

    def index_of(self, lam):
        """Position of the grid's lam closest to ``lam`` (on a log scale)."""
        if not len(self.lams):
            raise ValueError("This path has no points (it was interrupted before its first fit).")
        if lam is None or not np.isfinite(lam) or not lam > 0:
            raise ValueError(f"lam must be a positive number, got {lam!r}.")
        return int(np.argmin(np.abs(np.log(self.lams) - np.log(lam))))

    def selected_at(self, lam):
        """Selected features (names where known) of the full-data fit at ``lam``."""
        chosen = self.selected[self.index_of(lam)]
        return self.feature_names[chosen] if self.feature_names is not None else chosen

    def to_frame(self):
        """One row per lam: lam, n_selected, objective, scores and whether the fit
        converged (pandas DataFrame)."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "lam": self.lams,
                "n_selected": self.n_selected,
                "train_objective": self.train_objective,
                "train_score": self.train_score,
            }
        )
        if self.n_terms is not None:
            frame.insert(2, "n_terms", self.n_terms)
        if self.val_score is not None:
            frame["val_score"] = self.val_score
        if self.cv_mean is not None:
            frame["cv_mean"], frame["cv_se"] = self.cv_mean, self.cv_se
        if self.converged is not None:
            frame["converged"] = self.converged
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
        kind : {"norms", "score", "cv"}, default="norms"
            ``"norms"``: every group norm against lam (log-log; dropped groups fall to
            zero and sit on the bottom line). ``"score"``: train and validation score with
            the number of selected features on a second axis. ``"cv"``: mean CV score
            with its standard-error band, selected features, ``best_lam_`` and
            ``lam_1se_``.

        Returns
        -------
        ax : matplotlib Axes
        """
        from ..plotting import plot_cv_path, plot_path

        if kind == "cv":
            return plot_cv_path(self, ax=ax)
        return plot_path(self, ax=ax, kind=kind)
