"""The path engine under failure: diverged points, bad arguments, empty paths, warnings."""

import threading
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError

from sksparse_nn import (
    DGatedMLPRegressor,
    SparseLinearRegressor,
    SparsePathCV,
    TrainingDivergedError,
    regularization_path,
)
from sksparse_nn.utils.convergence import warn_convergence


class _Ascending:
    """Test doubles of the engine's bookkeeping in its default order (dense to sparse);
    the D = 2 linear model they derive from runs its paths from the sparse end."""

    def path_order(self):
        return "ascending"


class _DivergesAbove(_Ascending, SparseLinearRegressor):
    """A linear model whose training "diverges" at lam >= ``limit`` (a test double for
    the path's bookkeeping; real divergence is tested on the estimators)."""

    def __init__(self, lam=1.0, *, limit=np.inf, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.limit = limit

    def fit(self, X, y, sample_weight=None):
        if self.lam >= self.limit:
            raise TrainingDivergedError(f"diverged at lam={self.lam}", lam=self.lam)
        return super().fit(X, y, sample_weight=sample_weight)


class _DivergesBelow(SparseLinearRegressor):
    """A D = 2 linear model (its path runs sparse to dense) whose training "diverges" at
    lam <= ``limit``."""

    def __init__(self, lam=1.0, *, limit=0.0, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.limit = limit

    def fit(self, X, y, sample_weight=None):
        if self.lam <= self.limit:
            raise TrainingDivergedError(f"diverged at lam={self.lam}", lam=self.lam)
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6))
    y = X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=60)
    return X, y


LAMS = [0.01, 0.03, 0.1, 0.3]


def test_a_diverged_point_is_recorded_as_failed_and_ends_the_path(data):
    X, y = data
    est = _DivergesAbove(limit=0.1)
    with pytest.warns(UserWarning, match="diverged at lam=0.1"):
        path = regularization_path(est, X, y, lams=LAMS, X_val=X, y_val=y)
    np.testing.assert_array_equal(path.lams, [0.01, 0.03, 0.1])  # stops at the failure
    np.testing.assert_array_equal(path.failed, [False, False, True])
    assert path.n_selected[-1] == 0 and path.selected[-1].size == 0
    assert np.all(np.isnan(path.group_norms[-1])) and np.isnan(path.val_score[-1])
    assert np.all(np.isfinite(path.group_norms[:-1]))
    assert path.completed  # nothing was interrupted


def test_a_descending_path_keeps_its_sparse_end_when_a_point_diverges(data):
    # the D = 2 linear models fit from the largest lam down: a failure ends the path
    # there, the points before it (the sparse end) are kept, in ascending lam order
    X, y = data
    assert SparseLinearRegressor(D=2).path_order() == "descending"
    with pytest.warns(UserWarning, match="diverged at lam=0.03"):
        path = regularization_path(_DivergesBelow(limit=0.03), X, y, lams=LAMS, cv=3)
    np.testing.assert_array_equal(path.lams, [0.03, 0.1, 0.3])
    np.testing.assert_array_equal(path.failed, [True, False, False])
    assert np.all(np.isfinite(path.group_norms[1:]))
    # the folds fail at 0.03 and never reach 0.01: NaN there, scores where they fitted
    assert np.all(np.isnan(path.cv_scores[:, :2])) and np.all(np.isfinite(path.cv_scores[:, 2:]))
    assert path.best_lam_ in (0.1, 0.3)


def test_a_descending_path_equals_the_ascending_one(data):
    # D = 2 is convex: the order of the warm starts does not change the points beyond
    # the certification tolerance (relative KKT 1e-8 of the scale: coefficients within
    # ~1e-6 on this well-conditioned design)
    X, y = data

    class Ascending(SparseLinearRegressor):
        def path_order(self):
            return "ascending"

    down = regularization_path(SparseLinearRegressor(D=2), X, y, lams=LAMS)
    up = regularization_path(Ascending(D=2), X, y, lams=LAMS)
    np.testing.assert_array_equal(down.lams, up.lams)
    np.testing.assert_allclose(down.coefs, up.coefs, rtol=0, atol=1e-6)
    # the same selections: every dropped group's gradient is <= 0.75 of its threshold
    # lam rho_j and every kept group >= 1.5e-4 here, far beyond that 1e-6
    assert [s.tolist() for s in down.selected] == [s.tolist() for s in up.selected]


def test_cv_never_chooses_a_failed_lam(data):
    X, y = data
    with pytest.warns(UserWarning, match="diverged"):
        path = regularization_path(_DivergesAbove(limit=0.3), X, y, lams=LAMS, cv=3)
    assert path.cv_scores.shape == (3, 4)  # folds fail at 0.3 too: NaN there
    assert np.all(np.isnan(path.cv_scores[:, -1]))
    assert path.best_lam_ in LAMS[:3] and path.lam_1se_ in LAMS[:3]


def test_sparse_path_cv_names_the_diverged_lam(data):
    X, y = data
    search = SparsePathCV(_DivergesAbove(limit=0.0), lams=LAMS, cv=2)
    with pytest.warns(UserWarning), pytest.raises(TrainingDivergedError, match="lam=0.01"):
        search.fit(X, y)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lams": []}, "at least one value"),
        ({"lams": [0.0, 0.1]}, "> 0"),
        ({"lams": [-1.0]}, "> 0"),
        ({"lams": [np.inf]}, "finite"),
        ({"lams": ["a"]}, "positive numbers"),
        ({"lam_min_ratio": 0.0}, "lam_min_ratio"),
        ({"lam_min_ratio": -0.1}, "lam_min_ratio"),
        ({"lam_min_ratio": 2.0}, "lam_min_ratio"),
        ({"n_lams": 0}, "n_lams"),
        ({"n_lams": 2.5}, "n_lams"),
    ],
)
def test_bad_path_arguments_raise_clear_errors(data, kwargs, message):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # e.g. log(0) in the grid lookup
        with pytest.raises(ValueError, match=message):
            regularization_path(SparseLinearRegressor(D=2), X, y, **kwargs)
    if "lams" in kwargs:
        with pytest.raises(ValueError, match=message):
            SparsePathCV(SparseLinearRegressor(D=2), lams=kwargs["lams"], cv=2).fit(X, y)


class _CountingMLP(DGatedMLPRegressor):
    fits = 0

    def _fit(self, X, y, warm_module=None, **kwargs):
        type(self).fits += 1
        return super()._fit(X, y, warm_module=warm_module, **kwargs)


@pytest.mark.parametrize(
    "params", [{"max_epochs": 0}, {"validation_fraction": 5.0}, {"batch_size": 0}]
)
def test_bad_estimator_parameters_raise_before_any_work(data, params):
    X, y = data
    _CountingMLP.fits = 0
    name = next(iter(params))
    with pytest.raises(InvalidParameterError, match=name):
        _CountingMLP(**params).regularization_path(X, y, lams=LAMS, cv=2, n_jobs=2)
    with pytest.raises(InvalidParameterError, match=name):
        regularization_path(_CountingMLP(**params), X, y)  # default grid: not even lam_max
    with pytest.raises(InvalidParameterError, match=name):
        SparsePathCV(_CountingMLP(**params), lams=LAMS, cv=2).fit(X, y)
    assert _CountingMLP.fits == 0


class _DivergesOnFolds(_Ascending, SparseLinearRegressor):
    """Diverges at lam >= ``limit`` on fewer than ``rows`` rows (the CV folds) only."""

    def __init__(self, lam=1.0, *, limit=np.inf, rows=60, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.limit, self.rows = limit, rows

    def _fit(self, X, y, warm_module=None, **kwargs):
        if self.lam >= self.limit and X.shape[0] < self.rows:
            raise TrainingDivergedError(f"fold diverged at lam={self.lam}", lam=self.lam)
        return super()._fit(X, y, warm_module=warm_module, **kwargs)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_diverged_fold_scores_nan_from_there_and_is_reported(data, n_jobs):
    X, y = data
    # n_jobs=2: worker processes, whose warnings never reach the caller: it reports them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = regularization_path(_DivergesOnFolds(limit=0.1), X, y, lams=LAMS, cv=3,
                                   n_jobs=n_jobs)  # fmt: skip
    assert [str(w.message).split(":")[0] for w in caught] == ["CV fold 1", "CV fold 2", "CV fold 3"]
    assert "lam=0.1" in str(caught[0].message)
    assert not path.failed.any() and len(path) == 4  # all the data: fine
    assert np.all(np.isnan(path.cv_scores[:, 2:])) and np.all(np.isfinite(path.cv_scores[:, :2]))
    np.testing.assert_array_equal(path.cv_failed, np.tile([False, False, True, False], (3, 1)))
    assert path.best_lam_ in LAMS[:2] and path.lam_1se_ in LAMS[:2]
    assert path.completed


def test_sparse_path_cv_names_a_fold_divergence(data):
    X, y = data
    search = SparsePathCV(_DivergesOnFolds(limit=0.0), lams=LAMS, cv=3)
    with pytest.warns(UserWarning, match="CV fold"):
        with pytest.raises(TrainingDivergedError, match=r"lam=0.01 \(in CV fold 1\)"):
            search.fit(X, y)


def test_a_default_grid_stops_growing_at_a_diverged_point(data):
    X, y = data
    est = _DivergesAbove(limit=0.0, D=3)
    with pytest.warns(UserWarning, match="diverged"):
        path = regularization_path(est, X, y, n_lams=3)  # would extend past lam_max
    assert len(path) == 1 and path.failed.tolist() == [True]


class _InterruptedWhileScoring(_Ascending, SparseLinearRegressor):
    """Ctrl-C after the third fit's training, while its point is being recorded."""

    def score(self, X, y, sample_weight=None):
        if self.lam >= 0.1:
            raise KeyboardInterrupt
        return super().score(X, y, sample_weight=sample_weight)


def test_an_interrupted_point_is_not_recorded_at_all(data):
    X, y = data
    with pytest.warns(UserWarning, match="interrupted"):
        path = regularization_path(
            _InterruptedWhileScoring(D=2), X, y, lams=LAMS, X_val=X, y_val=y,
            keep_estimators=True,
        )  # fmt: skip
    assert not path.completed and path.lams.tolist() == LAMS[:2]
    for values in (path.n_selected, path.selected, path.group_norms, path.coefs,
                   path.train_objective, path.train_score, path.val_score, path.estimators,
                   path.failed):  # fmt: skip
        assert len(values) == 2


class _FoldError(SparseLinearRegressor):
    def _fit(self, X, y, warm_module=None, **kwargs):
        if X.shape[0] < 60:
            raise RuntimeError("a fold broke")
        return super()._fit(X, y, warm_module=warm_module, **kwargs)


def test_an_error_in_a_parallel_fold_is_raised(data):
    X, y = data
    with parallel_config(backend="threading"), pytest.raises(RuntimeError, match="fold broke"):
        regularization_path(_FoldError(D=2), X, y, lams=LAMS, cv=2, n_jobs=2)


def test_an_empty_path_says_so(data):
    X, y = data
    with pytest.warns(UserWarning, match="diverged"):
        path = regularization_path(_DivergesAbove(limit=0.0), X, y, lams=[0.1])
    assert path.failed.tolist() == [True]
    path.lams, path.selected = path.lams[:0], []  # as after an interrupt before any point
    with pytest.raises(ValueError, match="no points"):
        path.selected_at(0.1)
    with pytest.raises(ValueError, match="positive"):
        regularization_path(SparseLinearRegressor(), X, y, lams=[0.1]).index_of(0.0)


def test_convergence_warnings_of_a_path_come_as_one(data):
    X, y = data
    est = DGatedMLPRegressor(hidden_layer_sizes=(8,), max_epochs=2, lr=1e-3, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.regularization_path(X, y, lams=LAMS, cv=2)
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1
    assert "Raise max_epochs" in str(convergence[0].message)


def test_a_path_reports_why_its_fits_did_not_converge(data, monkeypatch):
    # the path's one warning quotes what the fits said, not a cause of its own: a point
    # whose fit warned for another reason than the cap is not reported as "the cap"
    X, y = data
    reason = "early stopping ended training while groups were still shrinking"
    after_fit = DGatedMLPRegressor._after_fit

    def warning_after_fit(self, *args, **kwargs):
        after_fit(self, *args, **kwargs)
        if self.lam > 0.05:
            warn_convergence(reason, stacklevel=2)

    from sksparse_nn.estimators import _base

    monkeypatch.setattr(DGatedMLPRegressor, "_after_fit", warning_after_fit)
    monkeypatch.setattr(_base, "warn_not_converged", lambda *args: None)  # no cap warnings
    est = DGatedMLPRegressor(hidden_layer_sizes=(8,), max_epochs=3, lr=1e-3, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.regularization_path(X, y, lams=LAMS)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(messages) == 1
    assert "at 2 of the path's lams" in messages[0]
    assert f"The fit at lam=0.1 said: {reason}" in messages[0]
    assert "max_epochs" not in messages[0]


def test_a_path_that_ran_out_of_the_automatic_budget_does_not_advise_it(data, monkeypatch):
    # with max_epochs=None the advice is to go above the automatic cap, not to set
    # max_epochs=None (it already is)
    from sksparse_nn.training import engine

    X, y = data
    est = DGatedMLPRegressor(hidden_layer_sizes=(8,), lr=1e-3, random_state=0)
    monkeypatch.setattr(engine, "epoch_budget", lambda *args: 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.regularization_path(X, y, lams=LAMS)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    path_message = [m for m in messages if "of the path's lams" in m]
    assert len(path_message) == 1
    assert "reached max_epochs=2" in path_message[0]  # the fit's own reason, quoted
    assert "above the automatic budget" in path_message[0]
    assert "set max_epochs=None" not in path_message[0]


class _CountingLinear(_Ascending, SparseLinearRegressor):
    fits = []

    def fit(self, X, y, sample_weight=None):
        type(self).fits.append(self.lam)
        return super().fit(X, y, sample_weight=sample_weight)


def test_points_past_the_empty_model_are_recorded_without_a_fit(data):
    X, y = data
    lam_max = SparseLinearRegressor(D=2).lambda_max(X, y)
    lams = lam_max * np.array([0.1, 0.5, 1.5, 3.0, 10.0])  # empty from 1.5 lam_max on
    _CountingLinear.fits = []
    path = regularization_path(_CountingLinear(D=2), X, y, lams=lams, X_val=X, y_val=y,
                               keep_estimators=True)  # fmt: skip
    np.testing.assert_allclose(_CountingLinear.fits, lams[:3])  # the first empty one fitted
    assert path.n_selected.tolist()[2:] == [0, 0, 0] and len(path) == 5
    # the carried points are the empty model: the same as fitting there
    for k in (3, 4):
        fitted = SparseLinearRegressor(D=2, lam=lams[k]).fit(X, y)
        assert np.all(path.coefs[k] == 0) and np.all(fitted.coef_ == 0)
        np.testing.assert_allclose(path.intercepts[k], fitted.intercept_, rtol=1e-12)
        np.testing.assert_allclose(path.val_score[k], fitted.score(X, y), rtol=1e-12)
        assert path.estimators[k].lam == lams[k]
        np.testing.assert_allclose(path.estimators[k].predict(X), fitted.predict(X), rtol=1e-12)


def test_a_bad_path_order_is_named(data):
    # path_order() is an optional member of the path protocol: any value but the two
    # orders is an error of the estimator's author, named before any fit
    class Sideways(SparseLinearRegressor):
        def path_order(self):
            return "sideways"

    X, y = data
    with pytest.raises(ValueError, match='path_order\\(\\) must return "ascending"'):
        regularization_path(Sideways(D=2), X, y, lams=LAMS)


class _StartsAt(_Ascending, SparseLinearRegressor):
    """A linear model whose paths start from a fit at ``start`` (``path_start()``); it
    records every fit as ``(lam, warm_start)``, warns at the start's lam and "diverges"
    there with ``diverge_at_start``."""

    fits = []

    def __init__(self, lam=1.0, *, start=None, diverge_at_start=False, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.start = start
        self.diverge_at_start = diverge_at_start

    def path_start(self):
        return self.start

    def fit(self, X, y, sample_weight=None):
        type(self).fits.append((self.lam, self.warm_start))
        if self.start is not None and self.lam == self.start:
            if self.diverge_at_start:
                raise TrainingDivergedError("diverged at the start", lam=self.lam)
            warn_convergence("the start did not converge", stacklevel=2)
        return super().fit(X, y, sample_weight=sample_weight)


def test_a_path_warm_starts_its_first_point_from_the_estimators_start_model(data):
    # path_start() (optional, path protocol): one unrecorded fit at that lam, then the
    # grid from it; its ConvergenceWarning is not the path's. D = 2 is convex: the points
    # are those of a path without a start, to the certification tolerance (see above)
    X, y = data
    _StartsAt.fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        path = regularization_path(_StartsAt(start=0.001), X, y, lams=LAMS)
    assert _StartsAt.fits == [(0.001, False)] + [(lam, True) for lam in LAMS]
    np.testing.assert_array_equal(path.lams, LAMS)  # the start is not a point
    plain = regularization_path(_StartsAt(), X, y, lams=LAMS)
    np.testing.assert_allclose(path.coefs, plain.coefs, rtol=0, atol=1e-6)
    # every CV fold starts from its own start model (5 fits on each of 1 + 3 data sets)
    _StartsAt.fits = []
    regularization_path(_StartsAt(start=0.001), X, y, lams=LAMS, cv=3)
    assert len(_StartsAt.fits) == 4 * 5 and _StartsAt.fits.count((0.001, False)) == 4


def test_a_diverged_start_leaves_the_first_point_cold(data):
    X, y = data
    _StartsAt.fits = []
    path = regularization_path(_StartsAt(start=0.001, diverge_at_start=True), X, y, lams=LAMS)
    assert _StartsAt.fits[:2] == [(0.001, False), (LAMS[0], False)]
    assert not path.failed.any() and len(path) == len(LAMS)


@pytest.mark.parametrize("start", [-1.0, np.inf, np.nan, "0", True])
def test_a_bad_path_start_is_named(data, start):
    X, y = data
    _StartsAt.fits = []
    with pytest.raises(ValueError, match="path_start\\(\\) must return None or a finite lam"):
        regularization_path(_StartsAt(start=start), X, y, lams=LAMS)
    assert _StartsAt.fits == []  # before any fit


class _WarnsAt(_Ascending, SparseLinearRegressor):
    """A linear model whose fits at the lams in ``warn_at`` raise a ConvergenceWarning
    (a fit that ended with groups half-way to zero, say)."""

    def __init__(self, lam=1.0, *, warn_at=(), D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.warn_at = warn_at

    def fit(self, X, y, sample_weight=None):
        if any(np.isclose(self.lam, lam, rtol=1e-12) for lam in self.warn_at):
            warn_convergence("groups still shrinking", stacklevel=2)
        return super().fit(X, y, sample_weight=sample_weight)


class _FoldThreadWarns(_Ascending, SparseLinearRegressor):
    """A linear model during each of whose fits another thread raises a ConvergenceWarning
    (a CV fold of a thread-based joblib backend, running beside the full-data path); its
    paths may start from a fit at ``start``."""

    def __init__(self, lam=1.0, *, start=None, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.start = start

    def path_start(self):
        return self.start

    def fit(self, X, y, sample_weight=None):
        fold = threading.Thread(target=warn_convergence, args=("a fold's fit did not converge",))
        fold.start()
        fold.join()
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("start", [None, 0.0])
def test_another_threads_convergence_warning_is_not_the_paths(data, start):
    # the path records its own thread's ConvergenceWarnings per point; one raised by
    # another thread meanwhile is not this path's (its points converged), and it is
    # not lost either: it goes where it would have gone (here: the outer record), also
    # while the unrecorded start model is fitted
    X, y = data
    lams = LAMS[:3]
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        path = regularization_path(_FoldThreadWarns(start=start), X, y, lams=lams)
    assert path.converged.all()
    messages = [str(w.message) for w in outer if issubclass(w.category, ConvergenceWarning)]
    fits = len(lams) + (start is not None)
    assert messages == ["a fold's fit did not converge"] * fits


class _NotesThenDiverges(_Ascending, SparseLinearRegressor):
    """A linear model whose every fit raises a UserWarning, and that "diverges" after it
    at lam >= ``limit``."""

    def __init__(self, lam=1.0, *, limit=np.inf, D=2, warm_start=False):
        super().__init__(lam=lam, D=D, warm_start=warm_start)
        self.limit = limit

    def fit(self, X, y, sample_weight=None):
        warnings.warn("a note from the fit", UserWarning, stacklevel=2)
        if self.lam >= self.limit:
            raise TrainingDivergedError("diverged", lam=self.lam)
        return super().fit(X, y, sample_weight=sample_weight)


def test_a_fits_other_warnings_reach_the_user_even_when_it_diverges(data):
    # the path keeps a point's ConvergenceWarnings for its summary and passes every other
    # warning on, also the ones of the fit that then diverged
    X, y = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = regularization_path(_NotesThenDiverges(limit=0.1), X, y, lams=LAMS)
    assert path.failed.tolist() == [False, False, True]  # the path ends at the failure
    notes = [w for w in caught if str(w.message) == "a note from the fit"]
    assert len(notes) == 3  # the fits at 0.01, 0.03 and the diverged one at 0.1


def test_a_thread_backends_folds_report_through_the_paths_one_warning(data):
    # the folds of a thread-based joblib backend run their paths beside the full-data
    # path: each thread keeps what its own fits said, and the caller's one warning counts
    # them all (no per-fit warning from a fold thread, no fold's for a full-data point)
    X, y = data
    with warnings.catch_warnings(record=True) as caught, parallel_config(backend="threading"):
        warnings.simplefilter("always")
        path = regularization_path(_WarnsAt(warn_at=[0.1]), X, y, lams=LAMS, cv=2, n_jobs=2)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(messages) == 1
    assert "at 1 of the path's lams (of 12 fits)" in messages[0]  # 4 full + 2 x 4 folds
    assert path.converged.tolist() == [not np.isclose(lam, 0.1) for lam in path.lams]


def _clean_choice(mean, se, converged, rule):
    """The choice rule written out: the band within one SE of the best mean; in it,
    converged lams first (1-SE: the largest; best: the best)."""
    best = int(np.argmax(mean))
    band = mean >= mean[best] - se[best]
    clean = np.flatnonzero(band & converged)
    if rule == "best":
        return clean[np.argmax(mean[clean])] if clean.size else best
    if clean.size:
        return clean.max()
    return np.flatnonzero(band & (np.arange(len(mean)) >= best)).max()


@pytest.mark.parametrize("rule", ["1se", "best"])
def test_cv_prefers_converged_fits_within_one_standard_error(data, rule):
    # the chosen model is the full-data fit at that lam: one that did not converge (no
    # clean gap) gives way to a converged lam as good (within one SE of the best mean)
    X, y = data
    lams = np.geomspace(1e-3, 0.3, 8)
    plain = SparsePathCV(_WarnsAt(), lams=lams, cv=3, rule=rule).fit(X, y)
    path = plain.cv_path_
    assert path.converged.all()
    mean, se = path.cv_mean, path.cv_se
    k = path.index_of(plain.lam_)
    band = mean >= mean.max() - se[np.argmax(mean)]
    assert band.sum() >= 2  # a converged alternative exists in the band
    with pytest.warns(ConvergenceWarning):
        search = SparsePathCV(_WarnsAt(warn_at=[plain.lam_]), lams=lams, cv=3, rule=rule)
        search.fit(X, y)
    converged = search.cv_path_.converged
    assert not converged[k] and converged[np.arange(len(lams)) != k].all()
    assert search.cv_path_.to_frame()["converged"].tolist() == converged.tolist()
    np.testing.assert_allclose(search.cv_path_.cv_mean, mean)  # the same folds
    assert search.lam_ == lams[_clean_choice(mean, se, converged, rule)] != plain.lam_
    # a converged lam outside the band is not chosen: the plain choice stands
    worst = int(np.argmin(mean))
    assert not band[worst]
    with pytest.warns(ConvergenceWarning):
        others = np.delete(lams, worst)
        search = SparsePathCV(_WarnsAt(warn_at=others), lams=lams, cv=3, rule=rule).fit(X, y)
    assert search.cv_path_.converged.sum() == 1 and search.lam_ == plain.lam_
    # and with no converged lam at all the choice is the plain one
    with pytest.warns(ConvergenceWarning):
        every = SparsePathCV(_WarnsAt(warn_at=lams), lams=lams, cv=3, rule=rule).fit(X, y)
    assert not every.cv_path_.converged.any() and every.lam_ == plain.lam_


def test_a_default_grid_that_cannot_reach_the_empty_model_says_so(monkeypatch):
    # a non-convex (D = 3) path keeps live groups beyond lam_max, and the default grid
    # grows upward by a bounded number of points: when those run out, a warning says the
    # path stops short of the empty model (it used to end silently)
    from sklearn.datasets import make_regression

    from sksparse_nn import SparseLinearRegressor
    from sksparse_nn.path import _points

    X, y = make_regression(100, 8, n_informative=4, noise=1.0, random_state=0)
    est = SparseLinearRegressor(D=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the full extension reaches the empty model
        path = est.regularization_path(X, y, n_lams=3, lam_min_ratio=0.1)
    assert path.n_selected[-1] == 0 and path.n_selected[2] > 0
    monkeypatch.setattr(_points, "MAX_EXTRA_POINTS", 0)
    with pytest.warns(UserWarning, match="does not reach the empty model"):
        path = est.regularization_path(X, y, n_lams=3, lam_min_ratio=0.1)
    assert len(path.lams) == 3 and path.n_selected[-1] > 0


def test_the_upward_extension_grows_its_step_while_nothing_changes():
    # the extension looks for the empty end: a step that removed nothing is squared (at
    # most MAX_EXTENSION_STEP), a step that removed something keeps its size, and it
    # stops at the first empty point
    from sksparse_nn.path._points import MAX_EXTENSION_STEP, extended_grid

    selections = iter([[0, 1, 2], [0, 1], [0, 1], [0, 1], [0], [0], [0], [0], []])
    lams, points = [1.0, 2.0], []
    for lam in extended_grid(lams, True, points, max_extra=10):
        points.append({"lam": lam, "selected": np.array(next(selections))})
    steps = np.array(lams[1:]) / np.array(lams[:-1])
    # grid 1 -> 2 (removed one); first extension step 2x (it did not change [0 1]);
    # then 4x (no change), 16x capped to 10x (removed one: the step stays 10x) ...
    np.testing.assert_allclose(steps, [2.0, 2.0, 4.0, MAX_EXTENSION_STEP, 10.0, 10.0, 10.0, 10.0])
    assert len(points) == 9 and points[-1]["selected"].size == 0
    # a grid whose last step removed something starts with its own ratio
    lams, points = [1.0, 1.5], []
    selections = iter([[0, 1], [0], []])
    for lam in extended_grid(lams, True, points):
        points.append({"lam": lam, "selected": np.array(next(selections))})
    np.testing.assert_allclose(lams, [1.0, 1.5, 2.25])


def test_a_path_prints_as_a_summary():
    # the dataclass's default repr printed every array (pages of group norms)
    from sklearn.datasets import make_regression

    from sksparse_nn import SparseLinearRegressor

    X, y = make_regression(60, 300, n_informative=5, random_state=0)
    path = SparseLinearRegressor(D=2).regularization_path(X, y, n_lams=4)
    text = repr(path)
    assert text.startswith("RegularizationPath(4 lams from ") and len(text) < 300
    assert f"features selected {[int(k) for k in path.n_selected]}" in text
