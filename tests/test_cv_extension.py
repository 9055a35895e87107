"""A cross-validated default grid goes on below its densest lam while the folds choose it
(sksparse_nn/path/_extend.py)."""

import hashlib
import shutil

import numpy as np
import pytest
from joblib import parallel_backend
from sklearn.model_selection import KFold

from sksparse_nn import SparseLinearRegressor, SparsePathCV
from sksparse_nn.path import lambda_grid, regularization_path
from sksparse_nn.path._extend import MIN_LAM_RATIO, block_lams

CV = KFold(3, shuffle=True, random_state=0)
# Two computations of a fold's path that differ only in rounding (thread counts) stop at
# different points: L-BFGS ends a fit once an iteration lowers the objective by < tol =
# 1e-12 (relative; f <= ~1.6 here), and with curvature mu >= ~0.2 (40 rows, 12 features)
# it is then within sqrt(2 tol f / mu) ~ 4e-6 of its minimum in ||w||_2. Two fits: ~1e-5
# in coefficients; a held-out R^2 moves by at most ~2 RMS(d pred) / std(y) ~ 2e-5. As in
# test_cv.py, 1e-4 (absolute: R^2 can be ~0).
SCORE_ATOL = 1e-4


def _data(noise, coef, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, len(coef)))
    return X, X @ np.asarray(coef, dtype=float) + noise * rng.normal(size=len(X))


# every feature matters, small noise: the least penalty fits best, so the folds keep
# choosing the densest lam of any shallow grid
DENSE = _data(0.1, [1.0, -1.0, 0.5, 0.5, -0.5, 1.0])
# three of twelve features matter: the best lam lies a little below a grid down to 0.3
# lam_max, and above its floor
MIDDLE = _data(1.0, [1.0, -1.0, 0.5] + [0.0] * 9)
SHALLOW = {"n_lams": 3, "lam_min_ratio": 0.3, "cv": CV}
# the same features under twice the noise: the choice is inside the shallow grid already
NOISY = _data(2.0, [1.0, -1.0, 0.5] + [0.0] * 9)


def _rows(X):
    return hashlib.sha1(np.ascontiguousarray(X).tobytes()).hexdigest()


class RecordingRegressor(SparseLinearRegressor):
    """Logs every fit: cold (its lam), or warm and whether the model it starts from was
    fitted on the same rows (a fold's model never saw other rows than the fold's)."""

    log = []

    def fit(self, X, y, **kwargs):
        rows = _rows(X)
        if self.warm_start and hasattr(self, "rows_seen_"):
            self.log.append(("warm", self.rows_seen_ == rows))
        else:
            self.log.append(("cold", self.lam, rows))
        super().fit(X, y, **kwargs)
        self.rows_seen_ = rows
        return self


def test_the_grid_goes_on_below_only_while_the_folds_choose_its_end():
    X, y = MIDDLE
    est = SparseLinearRegressor()
    grid = lambda_grid(est.lambda_max(X, y), 3, 0.3)
    path = regularization_path(est, X, y, **SHALLOW)
    # one block of 2 cv_stride + 1 = 3 lams, whose choice left the dense end
    assert path.n_below == 3 and path.extension_limit is None
    assert path.lams[0] < path.best_lam_ < grid[0]
    np.testing.assert_allclose(path.lams[3:], grid, rtol=1e-12)
    # the grid's own log spacing continues below it
    np.testing.assert_allclose(np.diff(np.log(path.lams)), np.log(grid[1] / grid[0]), rtol=1e-9)
    assert np.isfinite(path.cv_scores).all()  # every fold scored every added lam
    # a grid given in lams is the grid
    given = regularization_path(est, X, y, lams=grid, cv=CV)
    assert given.best_lam_ == grid[0]  # (its choice is at its end)
    assert given.n_below == 0 and given.extension_limit is None
    np.testing.assert_array_equal(given.lams, grid)
    # a choice inside the grid: nothing added
    X, y = NOISY
    inside = regularization_path(est, X, y, **SHALLOW)
    assert inside.best_lam_ > inside.lams[0]
    assert inside.n_below == 0 and len(inside.lams) == 3


def test_the_extension_stops_after_as_many_lams_as_the_grid_has_and_says_so():
    X, y = DENSE
    with pytest.warns(UserWarning, match="extension stopped at as many lams as the grid"):
        path = regularization_path(SparseLinearRegressor(), X, y, **SHALLOW)
    assert path.n_below == 3 and path.extension_limit == "points"
    assert path.best_lam_ == path.lams[0]


def test_blocks_stop_at_the_floor():
    lams = np.geomspace(1e-3, 1.0, 4)  # spacing x10: the floor 1e-4 is one step below
    assert block_lams(lams, 3, MIN_LAM_RATIO * lams[-1], 10).tolist() == pytest.approx([1e-4])
    assert block_lams(lams, 3, 0.0, 2).tolist() == pytest.approx([1e-5, 1e-4])


def test_each_block_starts_cold_and_every_fold_warm_starts_from_its_own_models():
    X, y = DENSE
    RecordingRegressor.log = []
    # D = 3: an ascending path; cv_stride 2: the folds fit every other lam of a block
    # (5 lams) and the second pass fits next to the choice from the folds' kept models
    path = regularization_path(RecordingRegressor(), X, y, cv_stride=2, n_lams=6,
                               lam_min_ratio=0.6, cv=CV)  # fmt: skip
    assert path.n_below == 6  # blocks of 5 and 1
    log = RecordingRegressor.log
    assert all(same for kind, *rest in log if kind == "warm" for same in rest)
    cold = [(lam, rows) for kind, *rest in log if kind == "cold" for lam, rows in [rest]]
    # one cold fit per path (the full data, 3 folds) at the grid's end and at every block's
    assert len(cold) == 4 * 3
    ends = {lam for lam, _ in cold}
    assert min(ends) == pytest.approx(path.lams[0])
    assert all(np.isclose(path.lams, lam).any() for lam in ends)
    assert len({rows for _, rows in cold}) == 4  # each path's own rows
    # the choice is among lams every fold scored
    assert np.isfinite(path.cv_scores[:, path.index_of(path.best_lam_)]).all()


def test_folds_in_parallel_give_the_sequential_extension():
    X, y = MIDDLE
    est = SparseLinearRegressor()
    sequential = regularization_path(est, X, y, cv_stride=2, **SHALLOW)
    with parallel_backend("threading"):
        parallel = regularization_path(est, X, y, cv_stride=2, n_jobs=2, **SHALLOW)
    # the same blocks: the added lams are the grid's spacing continued, computed alike
    np.testing.assert_array_equal(parallel.lams, sequential.lams)
    # the parallel route sets cpu_count // 3 torch threads for its paths, the sequential
    # one keeps the caller's: the same fits up to rounding, which moves where each stops
    np.testing.assert_allclose(parallel.cv_scores, sequential.cv_scores, rtol=0, atol=SCORE_ATOL)
    # (the best mean leads the next by 0.03 R^2 here: far beyond SCORE_ATOL)
    assert parallel.best_lam_ == sequential.best_lam_ and parallel.n_below > 0


def test_a_resumed_checkpoint_gives_the_uninterrupted_extension(tmp_path):
    X, y = MIDDLE
    est = SparseLinearRegressor()
    first = regularization_path(est, X, y, cv_stride=2, checkpoint=tmp_path, **SHALLOW)
    assert first.n_below > 0 and (tmp_path / "full-below-0").is_dir()
    # a run killed inside the extension: one fold's block and the full-data block's
    # last points missing
    shutil.rmtree(tmp_path / "fold-1-below-0")
    for point in sorted((tmp_path / "full-below-0").glob("point-*.pkl"))[1:]:
        point.unlink()
    again = regularization_path(est, X, y, cv_stride=2, checkpoint=tmp_path, **SHALLOW)
    np.testing.assert_array_equal(again.lams, first.lams)
    np.testing.assert_array_equal(again.cv_scores, first.cv_scores)
    np.testing.assert_array_equal(again.n_selected, first.n_selected)
    assert again.best_lam_ == first.best_lam_


def test_sparse_path_cv_keeps_the_fit_below_the_grid():
    X, y = MIDDLE
    search = SparsePathCV(SparseLinearRegressor(), **SHALLOW).fit(X, y)
    path = search.cv_path_
    assert path.n_below > 0 and search.lam_ < path.lams[path.n_below]
    assert search.estimator_.lam == search.lam_


class _OnItsGrid(SparseLinearRegressor):
    def default_grid(self):
        return {**super().default_grid(), "extend_below": False}


def test_a_family_whose_score_always_improves_downward_keeps_its_grid():
    from sksparse_nn import DGatedAutoencoder

    X, y = MIDDLE  # the base estimator goes below this grid (first test)
    path = regularization_path(_OnItsGrid(), X, y, **SHALLOW)
    assert path.n_below == 0 and len(path.lams) == 3
    assert DGatedAutoencoder().default_grid()["extend_below"] is False  # reconstruction
