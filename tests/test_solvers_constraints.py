"""Non-negative coefficients, sample weights and lambda_max of the group-lasso solver.

Reference answers come from scikit-learn's ``Lasso`` (singleton groups) or from the
optimality conditions written out here independently of ``sksparse_nn.solvers``.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Lasso

from sksparse_nn.solvers import (
    GroupLassoRegressor,
    group_lasso_path,
    lambda_max,
    solve_group_lasso,
)

EPS = np.finfo(np.float64).eps


def _data(n=120, p=12, seed=0, informative=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.5
    coef = np.zeros(p)
    coef[:informative] = rng.choice([-2.0, 2.0], informative) * rng.uniform(0.5, 1.5, informative)
    y = X @ coef + 0.5 * rng.standard_normal(n) + 3.0
    return X, y


def _weighted_centered(X, y, s, fit_intercept):
    """S^(1/2)-scaled, weighted-centered data (s rescaled to sum to n)."""
    n = X.shape[0]
    s = np.ones(n) if s is None else np.asarray(s, float) * n / np.sum(s)
    if fit_intercept:
        Xc, yc = X - s @ X / n, y - s @ y / n
    else:
        Xc, yc = X, y
    r = np.sqrt(s)
    return Xc * r[:, None], yc * r


def _coef_tolerance(X, y, s, fit_intercept, kkt_abs, gap):
    """Bound on ``||w - w*||_inf`` from the two solvers' stopping rules.

    The objective is ``mu``-strongly convex, ``mu`` the smallest eigenvalue of
    ``X_c^T X_c / n`` (positive here: n > p). Our stop bounds every coordinate's distance
    of ``-grad`` to the subdifferential by ``kkt_abs``, hence the distance of 0 to the
    objective's subdifferential by ``sqrt(p) kkt_abs`` and ``||w - w*|| <= sqrt(p)
    kkt_abs / mu``. scikit-learn stops on a duality gap, which bounds the objective gap
    (it reports it on ``n`` times our objective, so using it as is is conservative) and
    ``||w - w*|| <= sqrt(2 gap / mu)``. Plus a few ulps of float64 rounding.
    """
    Xc, _ = _weighted_centered(X, y, s, fit_intercept)
    n, p = X.shape
    mu = float(np.linalg.eigvalsh(Xc.T @ Xc / n)[0])
    assert mu > 0
    return np.sqrt(p) * kkt_abs / mu + np.sqrt(2 * max(gap, 0.0) / mu) + 1e3 * EPS


def _kkt_scale(X, y, s, fit_intercept, labels):
    Xc, yc = _weighted_centered(X, y, s, fit_intercept)
    c = Xc.T @ yc / X.shape[0]
    scale = np.sqrt(np.bincount(labels, weights=c * c)).max()
    return scale if scale > 0 else 1.0


# ------------------------------------------------------------------------ positive


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_positive_equals_sklearn_lasso(fit_intercept, sparse):
    X, y = _data()
    p = X.shape[1]
    lam = 0.05
    tol = 1e-12
    ref = Lasso(alpha=lam, positive=True, fit_intercept=fit_intercept, tol=1e-14, max_iter=10**6)
    ref.fit(X, y)
    Xin = sp.csr_matrix(X) if sparse else X
    res = solve_group_lasso(
        Xin, y, lam, np.arange(p), np.ones(p), tol=tol, fit_intercept=fit_intercept, positive=True
    )
    assert res.converged
    # the constraint is active: the unconstrained lasso has negative coefficients
    free = Lasso(alpha=lam, fit_intercept=fit_intercept, tol=1e-14, max_iter=10**6).fit(X, y)
    assert free.coef_.min() < -0.1
    assert res.coef.min() >= 0.0
    kkt_abs = res.kkt * _kkt_scale(X, y, None, fit_intercept, np.arange(p))
    atol = _coef_tolerance(X, y, None, fit_intercept, kkt_abs, float(ref.dual_gap_))
    np.testing.assert_allclose(res.coef, ref.coef_, rtol=0, atol=atol)
    np.testing.assert_allclose(
        res.intercept, ref.intercept_, rtol=0, atol=atol * (np.abs(X.mean(0)).sum() + 1)
    )


def _positive_group_kkt(X, y, lam, labels, rho, w, fit_intercept):
    """Largest violation of the constrained optimality conditions, written out per group.

    ``g = -grad``. A group at 0 is optimal iff ``||max(g_j, 0)|| <= lam rho_j``. In a live
    group, coordinates with ``w_i > 0`` need ``g_i = lam rho_j w_i / ||w_j||`` and
    coordinates at 0 need ``g_i <= 0``.
    """
    Xc, yc = _weighted_centered(X, y, None, fit_intercept)
    g = Xc.T @ (yc - Xc @ w) / X.shape[0]
    worst = 0.0
    for j in range(labels.max() + 1):
        idx = np.flatnonzero(labels == j)
        wj, gj = w[idx], g[idx]
        nw = np.linalg.norm(wj)
        if nw == 0:
            worst = max(worst, np.linalg.norm(np.maximum(gj, 0.0)) - lam * rho[j])
        else:
            pos = wj > 0
            worst = max(worst, np.max(np.abs(gj[pos] - lam * rho[j] * wj[pos] / nw)))
            if (~pos).any():
                worst = max(worst, np.max(gj[~pos]))
    return worst


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_positive_kkt_on_unequal_groups(fit_intercept):
    rng = np.random.default_rng(3)
    n, p = 60, 40
    X = rng.standard_normal((n, p))
    coef = np.zeros(p)
    coef[[0, 1, 7, 8, 9, 20]] = [2.0, -1.5, 1.0, 1.0, -2.0, 1.5]
    y = X @ coef + 0.3 * rng.standard_normal(n)
    sizes = [1, 3, 5, 2, 7, 4, 6, 1, 8, 3]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    rho = np.sqrt(sizes)
    lam = 0.1 * lambda_max(X, y, labels, rho, fit_intercept, positive=True)
    tol = 1e-10
    res = solve_group_lasso(
        X, y, lam, labels, rho, tol=tol, fit_intercept=fit_intercept, positive=True
    )
    assert res.converged
    assert res.coef.min() >= 0.0
    scale = _kkt_scale(X, y, None, fit_intercept, labels)
    # the certified stop bounds every group's violation by tol * scale; the per-coordinate
    # conditions here are each below their group's violation. The gradient is recomputed
    # here in another order: plus its rounding, a few thousand ulps of the scale (as in
    # test_working_sets_certify_every_group_on_a_wide_path)
    worst = _positive_group_kkt(X, y, lam, labels, rho, res.coef, fit_intercept)
    assert worst <= tol * scale + 1e4 * EPS * scale
    # the check can fail: the unconstrained solution violates the constrained conditions
    free = solve_group_lasso(X, y, lam, labels, rho, tol=tol, fit_intercept=fit_intercept)
    assert free.coef.min() < 0
    assert (
        _positive_group_kkt(X, y, lam, labels, rho, np.maximum(free.coef, 0), fit_intercept) > 1e-3
    )


def test_positive_lambda_max_is_the_threshold():
    X, y = _data(seed=5)
    labels = np.repeat(np.arange(4), 3)
    rho = np.ones(4)
    lam_max = lambda_max(X, y, labels, rho, positive=True)
    # only the positive part of -grad counts: not larger than the unconstrained value
    assert 0 < lam_max <= lambda_max(X, y, labels, rho)
    # just above lam_max: a relative 1e-9 is far above the rounding of the gradient norms
    at = solve_group_lasso(X, y, (1 + 1e-9) * lam_max, labels, rho, positive=True, tol=1e-12)
    below = solve_group_lasso(X, y, 0.99 * lam_max, labels, rho, positive=True, tol=1e-12)
    assert not at.coef.any()
    assert below.coef.any()


def test_positive_estimator_and_path():
    X, y = _data(seed=2)
    model = GroupLassoRegressor(lam=0.02, groups=3, positive=True, tol=1e-10).fit(X, y)
    assert model.coef_.min() >= 0.0
    assert GroupLassoRegressor(lam=0.02, groups=3).fit(X, y).coef_.min() < 0
    labels = np.arange(X.shape[1]) // 3
    lams = lambda_max(X, y, labels, np.ones(4), positive=True) * np.geomspace(1, 1e-3, 6)
    coefs, _, _, kkts = group_lasso_path(X, y, lams, labels, np.ones(4), positive=True)
    assert coefs.min() >= 0.0
    assert np.all(kkts <= 1e-8)


# ------------------------------------------------------------------------ sample weights


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_sample_weight_equals_sklearn_lasso(fit_intercept, sparse):
    X, y = _data(seed=1)
    n, p = X.shape
    s = np.random.default_rng(4).uniform(0.0, 3.0, n)
    lam, tol = 0.03, 1e-12
    ref = Lasso(alpha=lam, fit_intercept=fit_intercept, tol=1e-14, max_iter=10**6)
    ref.fit(X, y, sample_weight=s)
    Xin = sp.csc_matrix(X) if sparse else X
    model = GroupLassoRegressor(lam=lam, tol=tol, fit_intercept=fit_intercept)
    model.fit(Xin, y, sample_weight=s)
    # the weighted problem is not the unweighted one
    plain = GroupLassoRegressor(lam=lam, tol=tol, fit_intercept=fit_intercept).fit(X, y)
    assert np.abs(plain.coef_ - ref.coef_).max() > 1e-3
    kkt_abs = model.kkt_ * _kkt_scale(X, y, s, fit_intercept, np.arange(p))
    atol = _coef_tolerance(X, y, s, fit_intercept, kkt_abs, float(ref.dual_gap_))
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=atol)
    np.testing.assert_allclose(
        model.intercept_, ref.intercept_, rtol=0, atol=atol * (np.abs(X.mean(0)).sum() + 1)
    )


def _groups_problem(seed=7):
    rng = np.random.default_rng(seed)
    n, p = 50, 15
    X = rng.standard_normal((n, p))
    y = X[:, :4] @ np.array([1.0, -2.0, 1.5, 0.5]) + 0.5 * rng.standard_normal(n) + 1.0
    labels = np.repeat(np.arange(5), [2, 4, 3, 1, 5])
    rho = np.array([1.0, 2.0, 0.5, 1.0, 1.5])
    return X, y, labels, rho


@pytest.mark.parametrize("sparse", [False, True])
def test_integer_weights_equal_repeated_rows(sparse):
    X, y, labels, rho = _groups_problem()
    counts = np.random.default_rng(8).integers(0, 4, X.shape[0])
    counts[0] = 3
    lam, tol = 0.05, 1e-12
    Xin = sp.csr_matrix(X) if sparse else X
    w = solve_group_lasso(Xin, y, lam, labels, rho, tol=tol, sample_weight=counts)
    rep = np.repeat(np.arange(X.shape[0]), counts)
    r = solve_group_lasso(X[rep], y[rep], lam, labels, rho, tol=tol)
    assert w.converged and r.converged
    assert np.abs(solve_group_lasso(X, y, lam, labels, rho, tol=tol).coef - r.coef).max() > 1e-3
    # both are the same strongly convex problem (n > p): the two certified stops give
    # ||w - w*|| <= sqrt(p) kkt_abs / mu each (see _coef_tolerance)
    kkt_abs = max(w.kkt, r.kkt) * _kkt_scale(X[rep], y[rep], None, True, labels)
    atol = 2 * _coef_tolerance(X[rep], y[rep], None, True, kkt_abs, 0.0)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=atol)
    np.testing.assert_allclose(
        w.intercept, r.intercept, rtol=0, atol=atol * (np.abs(X).mean(0).sum() + 1)
    )


def test_zero_weight_equals_dropping_the_row():
    X, y, labels, rho = _groups_problem(seed=9)
    s = np.ones(X.shape[0])
    s[[3, 10, 11]] = 0.0
    y_bad = y.copy()
    y_bad[[3, 10, 11]] = 1e3  # what a zero-weight row holds does not matter
    lam, tol = 0.05, 1e-12
    w = solve_group_lasso(X, y_bad, lam, labels, rho, tol=tol, sample_weight=s)
    keep = s > 0
    r = solve_group_lasso(X[keep], y[keep], lam, labels, rho, tol=tol)
    kkt_abs = max(w.kkt, r.kkt) * _kkt_scale(X[keep], y[keep], None, True, labels)
    atol = 2 * _coef_tolerance(X[keep], y[keep], None, True, kkt_abs, 0.0)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=atol)
    assert np.abs(w.coef - solve_group_lasso(X, y_bad, lam, labels, rho).coef).max() > 1e-3


@pytest.mark.parametrize("bad", [[-1.0], [np.nan], "short"])
def test_bad_sample_weights_raise(bad):
    X, y, labels, rho = _groups_problem()
    n = X.shape[0]
    if bad == "short":
        s = np.ones(n - 1)
    else:
        s = np.ones(n)
        s[0] = bad[0]
    with pytest.raises(ValueError):
        GroupLassoRegressor(lam=0.1, groups=labels).fit(X, y, sample_weight=s)
    with pytest.raises(ValueError):
        solve_group_lasso(X, y, 0.1, labels, rho, sample_weight=s)


def test_negative_weight_message():
    X, y, labels, rho = _groups_problem()
    s = np.ones(X.shape[0])
    s[4] = -0.5
    with pytest.raises(ValueError, match="[Nn]egative"):
        solve_group_lasso(X, y, 0.1, labels, rho, sample_weight=s)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("free", [False, True])
def test_weighted_lambda_max_is_the_threshold(fit_intercept, free):
    X, y, labels, rho = _groups_problem(seed=11)
    if free:
        labels = labels.copy()
        labels[labels == 3] = -1  # an unpenalized feature, fitted first
        labels[labels == 4] = 3
        rho = rho[:4]
    s = np.random.default_rng(12).uniform(0.2, 2.0, X.shape[0])
    lam_max = lambda_max(X, y, labels, rho, fit_intercept, sample_weight=s)
    assert lam_max != lambda_max(X, y, labels, rho, fit_intercept)
    kw = dict(fit_intercept=fit_intercept, sample_weight=s, tol=1e-12)
    # just above lam_max (a relative 1e-9, far above the rounding of the gradient
    # norms, a few ulps; at lam_max itself rounding decides)
    at = solve_group_lasso(X, y, (1 + 1e-9) * lam_max, labels, rho, **kw)
    below = solve_group_lasso(X, y, 0.99 * lam_max, labels, rho, **kw)
    assert not at.coef[labels >= 0].any()
    assert below.coef[labels >= 0].any()


# ------------------------------------------------------------------------ lambda_max


def test_lambda_max_two_dimensional_targets():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((40, 9))
    Y = rng.standard_normal((40, 3))
    labels = np.repeat(np.arange(3), 3)
    rho = np.array([1.0, 2.0, 0.5])
    Yc = Y - Y.mean(0)
    Xc = X - X.mean(0)
    Z = Xc.T @ Yc / 40
    expected = max(np.linalg.norm(Z[labels == j]) / rho[j] for j in range(3))
    assert lambda_max(X, Y, labels, rho) == pytest.approx(expected, rel=1e3 * EPS)
    # one column: the 1-d value
    assert lambda_max(X, Y[:, :1], labels, rho) == pytest.approx(
        lambda_max(X, Y[:, 0], labels, rho), rel=1e3 * EPS
    )
    assert lambda_max(sp.csr_matrix(X), Y, labels, rho) == pytest.approx(expected, rel=1e3 * EPS)


def test_path_module_has_no_lambda_max():
    import sksparse_nn.path as path

    assert not hasattr(path, "lambda_max")
    assert "lambda_max" not in path.__all__


# ------------------------------------------------------------------------ working sets


@pytest.mark.parametrize("precompute", ["auto", False])
def test_working_sets_certify_every_group_on_a_wide_path(precompute):
    """p > n, unequal groups: every point of the path meets the KKT conditions of all
    groups, checked here from the coefficients alone."""
    rng = np.random.default_rng(21)
    n, p = 60, 300
    X = rng.standard_normal((n, p))
    y = X[:, :10] @ rng.standard_normal(10) + 0.5 * rng.standard_normal(n)
    sizes = rng.integers(1, 8, 80)
    sizes = sizes[np.cumsum(sizes) <= p]
    labels = np.full(p, -1)
    labels[: sizes.sum()] = np.repeat(np.arange(sizes.size), sizes)
    labels[labels == 2] = -1  # an unpenalized group too
    labels[labels > 2] -= 1
    J = labels.max() + 1
    rho = rng.uniform(0.5, 2.0, J)
    lams = lambda_max(X, y, labels, rho) * np.geomspace(1.0, 0.02, 12)
    tol = 1e-8
    coefs, b, _, kkts = group_lasso_path(X, y, lams, labels, rho, tol=tol, precompute=precompute)
    assert np.all(kkts <= tol)
    Xc, yc = X - X.mean(0), y - y.mean()
    c = Xc.T @ yc / n
    ext = labels.copy()
    ext[labels < 0] = J + np.arange((labels < 0).sum())
    scale = np.sqrt(np.bincount(ext, weights=c * c)).max()
    rho_ext = np.concatenate([rho, np.zeros((labels < 0).sum())])
    for w, lam in zip(coefs, lams, strict=True):
        g = Xc.T @ (yc - Xc @ w) / n  # minus the gradient
        worst = 0.0
        for j in range(ext.max() + 1):
            idx = ext == j
            nw = np.linalg.norm(w[idx])
            if nw == 0:
                worst = max(worst, np.linalg.norm(g[idx]) - lam * rho_ext[j])
            else:
                worst = max(worst, np.linalg.norm(g[idx] - lam * rho_ext[j] * w[idx] / nw))
        # the solver's own stop, recomputed: rounding of the two gradients differs by a
        # few ulps of the gradient's size
        assert worst <= tol * scale + 1e4 * EPS * scale
    # the support grows along the path: the working sets had to grow too
    assert (coefs[-1] != 0).sum() > 5 * max(1, (coefs[1] != 0).sum())


@pytest.mark.parametrize("case", ["dense", "sparse, sample weights"])
def test_block_cache_limit_falls_back_to_the_sets_columns(case, monkeypatch):
    """When the cached Gram blocks would outgrow their bound, a set is solved without
    its Gram block: coordinate descent on its columns, or plain FISTA on the whole
    problem where the columns cannot be held (sparse X with sample weights, centred
    along their square roots). Same certified answer."""
    from sksparse_nn.solvers import _design, _least_squares

    rng = np.random.default_rng(22)
    n, p = 40, 120
    X = rng.standard_normal((n, p))
    y = X[:, :15] @ rng.standard_normal(15) + 0.1 * rng.standard_normal(n)
    s = None
    if case != "dense":
        X = sp.csr_matrix(np.where(rng.random((n, p)) < 0.5, X, 0.0))
        s = rng.uniform(0.5, 2.0, n)
    labels = np.arange(p) // 4
    rho = np.ones(labels.max() + 1)
    lam = 0.1 * lambda_max(X, y, labels, rho, sample_weight=s)
    tol = 1e-9
    ref = solve_group_lasso(X, y, lam, labels, rho, tol=tol, sample_weight=s)
    assert (ref.coef != 0).sum() > 8  # the working sets need more than the bound below
    monkeypatch.setattr(_design, "_GRAM_MAX_FEATURES", 8)
    calls = {"fista": 0, "cd": 0}
    plain, cd = _least_squares.fista, _least_squares.least_squares_cd

    def counted_fista(*args, **kwargs):
        calls["fista"] += 1
        return plain(*args, **kwargs)

    def counted_cd(*args, **kwargs):
        calls["cd"] += 1
        return cd(*args, **kwargs)

    monkeypatch.setattr(_least_squares, "fista", counted_fista)
    monkeypatch.setattr(_least_squares, "least_squares_cd", counted_cd)
    small = solve_group_lasso(X, y, lam, labels, rho, tol=tol, sample_weight=s)
    if case == "dense":
        assert calls["cd"] and not calls["fista"]
    else:
        assert calls["fista"] and not calls["cd"]
    assert ref.converged and small.converged
    # both certified at tol: p > n, so compare what is unique (the fitted values)
    fit_ref, fit_small = X @ ref.coef, X @ small.coef
    scale = np.abs(fit_ref).max()
    assert np.abs(fit_ref - fit_small).max() <= 1e-5 * scale
