"""The regressor's block steps on wide data: working sets of groups, certified on all groups."""

import copy
import pickle

import numpy as np
import pytest

from sksparse_nn import SparseLinearRegressor
from sksparse_nn.solvers import KKT_TOL, lambda_max, solve_group_lasso

EPS = np.finfo(np.float64).eps
# wider than the old limit of the block steps (2000 features) and than n: working sets
N, P, SIZE = 60, 2500, 5
# the reference's tolerance in the comparisons: tighter than the estimator's KKT_TOL
REF_TOL = 1e-10


@pytest.fixture(scope="module")
def wide():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, P))
    y = X[:, :20] @ rng.normal(size=20) + 0.5 * rng.normal(size=N)
    return X, y, np.arange(P) // SIZE


@pytest.fixture
def cd_sets(monkeypatch):
    """The sizes of the working sets solved by coordinate descent on their columns."""
    from sksparse_nn.solvers._gated_least_squares import GatedLeastSquares

    sizes = []
    finish = GatedLeastSquares.coordinate_finish

    def spy(self, idx, W, abs_tol):
        sizes.append(idx.size)
        return finish(self, idx, W, abs_tol)

    monkeypatch.setattr(GatedLeastSquares, "coordinate_finish", spy)
    return sizes


def _group_norms(w, labels):
    return np.sqrt(np.bincount(labels, weights=w * w))


def _centred(X, y, fit_intercept):
    return (X - X.mean(0), y - y.mean()) if fit_intercept else (X, y)


@pytest.mark.numerics
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_wide_D2_meets_the_group_lasso_kkt_and_matches_the_reference(wide, fit_intercept):
    X, y, labels = wide
    rho = np.ones(labels.max() + 1)
    lam = 0.3 * lambda_max(X, y, labels, rho, fit_intercept=fit_intercept)
    est = SparseLinearRegressor(lam=lam, D=2, groups=SIZE, fit_intercept=fit_intercept)
    est.fit(X, y)
    assert est.n_iter_ == 0  # certified by the block steps: no gradient epoch

    # the KKT conditions written out, on every group
    Xc, yc = _centred(X, y, fit_intercept)
    grad = Xc.T @ (Xc @ est.coef_ - yc) / N
    scale = _group_norms(Xc.T @ yc / N, labels).max()
    norms = _group_norms(est.coef_, labels)
    viol = np.zeros(rho.size)
    for g in range(rho.size):
        block, w = grad[labels == g], est.coef_[labels == g]
        if norms[g] > 0:
            viol[g] = np.linalg.norm(block + lam * w / norms[g])
        else:
            viol[g] = max(np.linalg.norm(block) - lam, 0.0)
    # the estimator's stopping rule (KKT_TOL of the scale), plus the rounding of a
    # gradient recomputed in another order: a few thousand ulps of its size
    rounding = 1e4 * EPS * scale
    assert viol.max() <= KKT_TOL * scale + rounding
    assert 0 < (norms > 0).sum() < 0.1 * rho.size  # a sparse, non-trivial solution

    ref = solve_group_lasso(X, y, lam, labels, rho, tol=REF_TOL, fit_intercept=fit_intercept)
    assert ref.converged
    live = norms > 0
    np.testing.assert_array_equal(live, _group_norms(ref.coef, labels) > 0)
    # on the common support (fewer features than samples) the objective is strongly
    # convex with modulus mu, the smallest eigenvalue of X_S^T X_S / n; two points whose
    # KKT residuals (per group at most tol * scale) are r1, r2 lie within
    # (|r1| + |r2|) / mu of each other
    support = live[labels]
    mu = np.linalg.eigvalsh(Xc[:, support].T @ Xc[:, support] / N)[0]
    residual = np.sqrt(live.sum()) * ((KKT_TOL + REF_TOL) * scale + 2 * rounding)
    assert np.abs(est.coef_ - ref.coef).max() <= residual / mu
    assert est.intercept_ == pytest.approx(ref.intercept, abs=residual / mu * np.abs(X).max())


@pytest.mark.numerics
def test_wide_D3_reaches_a_stationary_point(wide):
    X, y, labels = wide
    D, q = 3, 2.0 / 3.0
    lam = 0.05 * lambda_max(X, y, labels, np.ones(labels.max() + 1))
    est = SparseLinearRegressor(lam=lam, D=D, groups=SIZE, random_state=0).fit(X, y)
    norms = _group_norms(est.coef_, labels)
    assert 0 < (norms > 0).sum() < 0.1 * norms.size
    # on the live groups the objective is smooth: its gradient
    # X_j^T (X w - y) / n + lam q ||w_j||^(q - 2) w_j vanishes at a stationary point
    # (zero groups are stationary for D > 2: the factors' gradient is zero there)
    Xc, yc = _centred(X, y, True)
    resid = Xc @ est.coef_ - yc
    grad = Xc.T @ resid / N
    live = norms[labels] > 0
    grad[live] += lam * q * norms[labels][live] ** (q - 2.0) * est.coef_[live]
    # the fit stops when a step lowers the objective f by less than tol * f (tol = 1e-12,
    # the default): a gradient step of size 1/L lowers it by |g|^2 / (2 L), so at the
    # stop |g| <= sqrt(2 L tol f), L the curvature on the support (data and penalty)
    f = est.objective_
    XS = Xc[:, live]
    L = np.linalg.eigvalsh(XS.T @ XS / N)[-1] + lam * q * (norms[norms > 0] ** (q - 2)).max()
    assert np.linalg.norm(grad[live]) <= np.sqrt(2 * L * 1e-12 * f)


def test_certified_fit_has_the_attributes_of_a_trained_fit(wide):
    X, y, labels = wide
    lam = 0.2 * lambda_max(X, y, labels, np.ones(labels.max() + 1))
    certified = SparseLinearRegressor(lam=lam, D=2, groups=SIZE).fit(X, y)
    trained = SparseLinearRegressor(lam=lam, D=3, groups=SIZE, random_state=0).fit(X, y)
    assert certified.n_iter_ == 0 and trained.n_iter_ > 0

    def kinds(est):
        return {k: type(v) for k, v in vars(est).items() if k.endswith("_")}

    assert kinds(certified) == kinds(trained)
    assert len(certified.history_) == 0
    assert certified.predict(X).shape == trained.predict(X).shape == (N,)
    np.testing.assert_allclose(
        certified.predict(X), X @ certified.coef_ + certified.intercept_, rtol=1e-12
    )


def test_wide_path_keeps_a_bounded_gram_cache_and_certifies_every_point(wide):
    X, y, labels = wide
    lam_max = lambda_max(X, y, labels, np.ones(labels.max() + 1))
    est = SparseLinearRegressor(D=2, groups=SIZE, warm_start=True)
    for ratio in (0.05, 0.1, 0.3, 1.0):
        est.set_params(lam=ratio * lam_max).fit(X, y)
        assert est.n_iter_ == 0
    key, memo = est._kept_data
    cache = memo.gram
    # memory: the cached Gram blocks hold at most sqrt(n p) features, no more than X
    assert cache.max_features <= np.sqrt(N * P)
    assert 0 < len(cache) <= cache.max_features
    # copies and pickles of the estimator leave the memo behind
    assert not hasattr(copy.deepcopy(est), "_kept_data")
    assert not hasattr(pickle.loads(pickle.dumps(est)), "_kept_data")
    assert est._kept_data[1] is memo  # while the estimator keeps it
    # another data set of the same shape gets a fresh memo
    est.fit(X[::-1].copy(), y[::-1].copy())
    assert est._kept_data[1] is not memo


def test_a_path_reuses_its_data_statistics_and_gives_the_fits_own(wide, monkeypatch):
    # the column statistics a fit on working sets needs (squared column norms, zero_tol's
    # column scale) are computed once along a warm-started path; a fit on other data of
    # the same shape gets its own, and the results are those of independent fits
    from sksparse_nn.estimators import linear
    from sksparse_nn.solvers import _gated_fits

    calls = []
    for module, name in ((linear, "column_moments"), (_gated_fits, "column_squares")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda X, f=original, n=name: calls.append(n) or f(X))
    X, y, labels = wide
    lam_max = lambda_max(X, y, labels, np.ones(labels.max() + 1))
    warm = SparseLinearRegressor(D=2, groups=SIZE, warm_start=True, zero_tol=1e-3)
    lams = [0.5 * lam_max, 0.6 * lam_max, 0.7 * lam_max]  # supports below N features
    for lam in lams:
        warm.set_params(lam=lam).fit(X, y)
    assert sorted(calls) == ["column_moments", "column_squares"]  # once for the path
    memo = warm._kept_data[1]
    for data, scale, new in (((X, y), 1.0, 0), ((X * 3.0, y), 3.0, 2)):
        before = len(calls)
        warm.fit(*data)  # the same data, then other columns of the same shape
        assert len(calls) == before + new
        cold = SparseLinearRegressor(D=2, groups=SIZE, lam=lams[-1], zero_tol=1e-3).fit(*data)
        np.testing.assert_array_equal(warm.selected_groups_, cold.selected_groups_)
        # two certified points (KKT residual per group at most KKT_TOL * scale, plus the
        # rounding) on the common support, where the objective is strongly convex with
        # modulus mu: within 2 sqrt(|live|) (KKT_TOL * scale + rounding) / mu (as above)
        Xc, yc = _centred(data[0], y, True)
        kkt_scale = _group_norms(Xc.T @ yc / N, labels).max()
        support = np.isin(labels, warm.selected_groups_)
        assert 0 < support.sum() < N
        mu = np.linalg.eigvalsh(Xc[:, support].T @ Xc[:, support] / N)[0]
        bound = 2 * np.sqrt(warm.selected_groups_.size) * (KKT_TOL + 1e4 * EPS) * kkt_scale / mu
        assert np.abs(warm.coef_ - cold.coef_).max() <= bound
        # zero_tol's scale from the memo is the median column sd (two float64 formulas)
        assert warm._fit_memo.x_std == pytest.approx(np.median(X.std(axis=0)) * scale, rel=1e-12)
    assert warm._kept_data[1] is not memo
    assert getattr(cold, "_kept_data", None) is None  # a cold fit keeps nothing


def test_a_path_keeps_its_targets_moments_and_new_targets_replace_them(wide, monkeypatch):
    # X^T y and the gradient at the last solution are kept along a path on the same
    # targets (one product with X each per point); other targets on the same X must not
    # see them: the warm fit then equals a cold fit on the new targets
    from sksparse_nn.solvers import _data_memo

    calls = []
    original = _data_memo.centered_moments
    monkeypatch.setattr(
        _data_memo,
        "centered_moments",
        lambda *a, **k: calls.append(1) or original(*a, **k),
    )
    X, y, labels = wide
    lam_max = lambda_max(X, y, labels, np.ones(labels.max() + 1))
    warm = SparseLinearRegressor(D=2, groups=SIZE, warm_start=True)
    for lam in (0.7 * lam_max, 0.6 * lam_max, 0.5 * lam_max):
        warm.set_params(lam=lam).fit(X, y)
    assert len(calls) == 1
    y2 = y[::-1].copy()  # new targets, the same design (the memo is kept)
    memo = warm._kept_data[1]
    warm.fit(X, y2)
    assert warm._kept_data[1] is memo and len(calls) == 2
    cold = SparseLinearRegressor(D=2, groups=SIZE, lam=warm.lam).fit(X, y2)
    np.testing.assert_array_equal(warm.selected_groups_, cold.selected_groups_)
    Xc, yc = _centred(X, y2, True)
    grad = Xc.T @ (Xc @ warm.coef_ - yc) / N
    # the warm fit's own certificate holds for the new targets' gradient
    kkt_scale = _group_norms(Xc.T @ yc / N, labels).max()
    norms = _group_norms(warm.coef_, labels)
    viol = [np.linalg.norm(grad[labels == g] + warm.lam * warm.coef_[labels == g] / norms[g])
            if norms[g] > 0 else max(np.linalg.norm(grad[labels == g]) - warm.lam, 0.0)
            for g in range(norms.size)]  # fmt: skip
    assert max(viol) <= (KKT_TOL + 1e4 * EPS) * kkt_scale


@pytest.mark.numerics
@pytest.mark.parametrize("case", ["groups", "groups, sample weights", "groups, positive"])
def test_supports_wider_than_the_samples_meet_the_kkt_conditions(wide, case, cd_sets):
    # at 2% of lam_max the support holds more features than the 60 samples (and than
    # 256): those working sets are solved by coordinate descent on their columns
    calls = cd_sets
    X, y, labels = wide
    positive = "positive" in case
    s = None
    if "weights" in case:
        s = np.random.default_rng(0).uniform(0.2, 3.0, size=N)
    lam = 0.02 * lambda_max(X, y, labels, np.ones(labels.max() + 1))
    est = SparseLinearRegressor(lam=lam, D=2, groups=SIZE, positive=positive)
    est.fit(X, y, sample_weight=s)
    assert est.n_iter_ == 0 and calls and max(calls) > N

    # the KKT conditions written out (weights rescaled to mean 1, weighted centring)
    w = np.ones(N) if s is None else s * N / s.sum()
    m, ybar = w @ X / N, w @ y / N
    Xc, yc = X - m, y - ybar
    grad = Xc.T @ (w * (Xc @ est.coef_ - yc)) / N
    scale = _group_norms(Xc.T @ (w * yc) / N, labels).max()
    norms = _group_norms(est.coef_, labels)
    assert (norms > 0).sum() * SIZE > N  # the support is wider than the samples
    assert not positive or est.coef_.min() >= 0
    viol = np.zeros(labels.max() + 1)
    for g in range(viol.size):
        block, coef = grad[labels == g], est.coef_[labels == g]
        if norms[g] > 0:
            d = block + lam * coef / norms[g]
        else:
            d = block
        if positive:  # a coefficient held at 0 only needs the gradient's positive part
            d = np.where(coef > 0, d, np.minimum(d, 0.0))
        viol[g] = np.linalg.norm(d) if norms[g] > 0 else max(np.linalg.norm(d) - lam, 0.0)
    rounding = 1e4 * EPS * scale  # a gradient recomputed in another order
    assert viol.max() <= KKT_TOL * scale + rounding


@pytest.mark.numerics
def test_sets_beyond_the_gram_cache_are_solved_on_their_columns(wide, monkeypatch, cd_sets):
    # a set that can never fit the Gram-block cache has no Gram route: coordinate
    # descent on its columns, even when narrower than 256 features (it held
    # whole-design block steps before, 3-6x slower on such paths)
    from sksparse_nn.solvers import _gated_fits
    from sksparse_nn.solvers._design import GramCache

    capacity = 40
    monkeypatch.setattr(
        _gated_fits, "gram_cache", lambda curv: GramCache(curv.products, curv.n_features, capacity)
    )
    calls = cd_sets
    X, y, labels = wide
    lam = 0.1 * lambda_max(X, y, labels, np.ones(labels.max() + 1))
    est = SparseLinearRegressor(lam=lam, D=2, groups=SIZE).fit(X, y)
    assert est.n_iter_ == 0
    assert any(capacity < k <= 256 for k in calls)
    Xc, yc = _centred(X, y, True)
    grad = Xc.T @ (Xc @ est.coef_ - yc) / N
    scale = _group_norms(Xc.T @ yc / N, labels).max()
    norms = _group_norms(est.coef_, labels)
    viol = [
        np.linalg.norm(grad[labels == g] + lam * est.coef_[labels == g] / norms[g])
        if norms[g] > 0
        else max(np.linalg.norm(grad[labels == g]) - lam, 0.0)
        for g in range(norms.size)
    ]
    assert max(viol) <= KKT_TOL * scale + 1e4 * EPS * scale
