"""Tests of the numpy/scipy group-lasso reference solver (sksparse_nn.solvers)."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso, LinearRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksparse_nn.solvers import (
    GroupLassoRegressor,
    check_groups,
    group_lasso_path,
    lambda_max,
    resolve_group_weights,
    solve_group_lasso,
)

N_SAMPLES, N_FEATURES = 60, 24

# Tolerances. The solver certifies max_j viol_j <= tol * scale (relative KKT violation,
# see the solvers module); a test checks it with an independent float64 computation of
# the same gradient, whose rounding (~n * eps64 ~ 1e-14 relative) is far below any tol
# used here, hence the factor 2. Coefficients follow from the KKT violation because the
# objective is mu-strongly convex in w (see ``coef_error_bound``), not from rounding.
KKT_SLACK = 2.0
# Distance between the exact optima of two float64 roundings of the same problem (sparse
# vs dense products, Gram vs direct iterations): ~n * eps64 * cond ~ 1e-13 here.
ROUNDING = 1e-12


def make_data(n=N_SAMPLES, p=N_FEATURES, n_informative=6, offset=3.0, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-1, 1, size=p)  # non-centered columns
    w = np.zeros(p)
    w[:n_informative] = rng.standard_normal(n_informative) * 2
    y = X @ w + offset + 0.5 * rng.standard_normal(n)
    return X, y


def kkt_report(X, y, coef, intercept, labels, rho, lam, fit_intercept):
    """Independent, loop-based KKT check; returns (max violation, scale, n_live, n_zero).

    ``scale`` is the solver's: the largest norm of ``X_c^T y_c / n`` over the groups and
    the unpenalized features (so a solver stopped at tol has ``violation <= tol * scale``).
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    n = X.shape[0]
    r = y - X @ coef - intercept
    z = X.T @ r / n
    yc = y - y.mean() if fit_intercept else y
    xc = X - X.mean(axis=0) if fit_intercept else X
    c = xc.T @ yc / n
    scale = np.abs(c[labels < 0]).max(initial=0.0)
    viol = [abs(r.mean())] if fit_intercept else [0.0]
    n_live = n_zero = 0
    for j in range(len(rho)):
        idx = np.flatnonzero(labels == j)
        norm_w = np.linalg.norm(coef[idx])
        scale = max(scale, np.linalg.norm(c[idx]))
        if rho[j] == 0:
            viol.append(np.linalg.norm(z[idx]))
        elif norm_w == 0:
            n_zero += 1
            viol.append(max(0.0, np.linalg.norm(z[idx]) - lam * rho[j]))
        else:
            n_live += 1
            viol.append(np.linalg.norm(z[idx] - lam * rho[j] * coef[idx] / norm_w))
    free = np.flatnonzero(labels < 0)
    if free.size:
        viol.append(np.abs(z[free]).max())
    return max(viol), scale, n_live, n_zero


def coef_error_bound(X, kkt, fit_intercept=True):
    """Bound on ``||w - w*||_2`` (and on the intercept's error) at KKT violation ``kkt``.

    ``kkt`` is an absolute per-group violation (e.g. ``tol * scale``). The objective is
    mu-strongly convex in w, mu = smallest eigenvalue of ``X_c^T X_c / n`` (the intercept
    is exact given w), so the minimal subgradient s at w satisfies
    ``mu ||w - w*|| <= ||s|| <= sqrt(n_groups) * kkt <= sqrt(p) * kkt``; the intercept
    ``b = mean(y) - mean(X) w`` is then off by at most ``||mean(X)|| ||w - w*||``.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    xc = X - X.mean(axis=0) if fit_intercept else X
    mu = np.linalg.eigvalsh(xc.T @ xc / X.shape[0])[0]
    assert mu > 1e-3, mu  # the bound needs a well-posed (n > p, full rank) problem
    coef = np.sqrt(X.shape[1]) * kkt / mu
    intercept = np.linalg.norm(X.mean(axis=0)) * coef if fit_intercept else 0.0
    return coef, intercept


GROUP_SPECS = {
    "singletons": None,
    "size3": 3,
    "lists": [[0, 1, 2, 3], [8, 9], [4, 5, 6, 7], [12, 13, 14, 15, 16, 17, 18]],
    "labels": np.array([2, 2, 2, -1, 0, 0, 0, 0, 5, 5, 5, 5] * 2),
}


def explicit_weights(labels):
    """Explicit weights with one unpenalized (weight 0) group."""
    n_groups = labels.max() + 1
    rho = np.linspace(0.5, 2.0, n_groups)
    rho[n_groups // 2] = 0.0
    return rho


@pytest.mark.numerics
@pytest.mark.parametrize("spec", list(GROUP_SPECS))
@pytest.mark.parametrize("weights", [None, "sqrt", "explicit"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_kkt_conditions_hold(spec, weights, fit_intercept):
    X, y = make_data()
    labels = check_groups(GROUP_SPECS[spec], N_FEATURES)
    gw = explicit_weights(labels) if weights == "explicit" else weights
    rho = resolve_group_weights(gw, labels)
    lam_max = lambda_max(X, y, labels, rho, fit_intercept=fit_intercept)
    seen_live = seen_zero = False
    for frac in [0.6, 0.2, 0.02]:
        lam = frac * lam_max
        model = GroupLassoRegressor(
            lam=lam, groups=GROUP_SPECS[spec], group_weights=gw, fit_intercept=fit_intercept
        ).fit(X, y)
        viol, scale, n_live, n_zero = kkt_report(
            X, y, model.coef_, model.intercept_, labels, rho, lam, fit_intercept
        )
        # the solver's certificate, recomputed independently (float64 rounding: factor 2)
        assert viol <= KKT_SLACK * model.tol * scale, (frac, viol, scale)
        assert model.kkt_ <= model.tol  # the stopping rule itself: exact
        if not fit_intercept:
            assert model.intercept_ == 0.0
        seen_live |= n_live > 0
        seen_zero |= n_zero > 0
    assert seen_live and seen_zero  # the checks above exercised both KKT branches


@pytest.mark.numerics
def test_kkt_wide_problem_without_gram():
    # p > n: the iterations use X directly instead of the Gram matrix.
    X, y = make_data(n=30, p=90, seed=3)
    labels = check_groups(3, 90)
    rho = resolve_group_weights("sqrt", labels)
    lam = 0.1 * lambda_max(X, y, labels, rho)
    res = solve_group_lasso(X, y, lam, labels, rho)
    assert res.converged
    viol, scale, n_live, n_zero = kkt_report(X, y, res.coef, res.intercept, labels, rho, lam, True)
    # default tol=1e-8, recomputed independently (float64 rounding: factor 2)
    assert viol <= KKT_SLACK * 1e-8 * scale and n_live > 0 and n_zero > 0


@pytest.mark.numerics
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("lam", [0.5, 0.1, 0.01])
def test_singletons_match_sklearn_lasso(lam, fit_intercept):
    X, y = make_data()
    ref = Lasso(alpha=lam, fit_intercept=fit_intercept, tol=1e-12, max_iter=100000).fit(X, y)
    model = GroupLassoRegressor(lam=lam, fit_intercept=fit_intercept, tol=1e-10).fit(X, y)
    labels, rho = np.arange(N_FEATURES), np.ones(N_FEATURES)
    ours, scale, _, _ = kkt_report(X, y, model.coef_, model.intercept_, labels, rho, lam,
                                   fit_intercept)  # fmt: skip
    theirs, *_ = kkt_report(X, y, ref.coef_, ref.intercept_, labels, rho, lam, fit_intercept)
    assert ours <= KKT_SLACK * model.tol * scale
    # both are within their KKT violation / mu of the optimum (coordinate descent's
    # violation is measured, its tol is on the duality gap): ~1e-8 here
    atol, atol_b = coef_error_bound(X, ours + theirs, fit_intercept)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=atol + ROUNDING)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=0, atol=atol_b + ROUNDING)
    # exact zeros on both sides (soft-thresholding); 1e-10 only absorbs CD's rounding
    np.testing.assert_array_equal(model.coef_ == 0, np.abs(ref.coef_) < 1e-10)


@pytest.mark.numerics
def test_weighted_singletons_match_rescaled_lasso():
    # Singleton groups with weights rho: the Lasso on the columns X_j / rho_j, then
    # w_j = u_j / rho_j. Labels are a permutation, so group j is not feature j.
    X, y = make_data()
    rng = np.random.RandomState(5)
    perm_labels = rng.permutation(N_FEATURES)
    rho = rng.uniform(0.5, 2.0, size=N_FEATURES)  # weight of group (= sorted label) j
    rho_feat = rho[perm_labels]
    lam = 0.05
    ref = Lasso(alpha=lam, tol=1e-12, max_iter=100000).fit(X / rho_feat, y)
    model = GroupLassoRegressor(lam=lam, groups=perm_labels, group_weights=rho, tol=1e-10)
    model.fit(X, y)
    labels = model.group_labels_
    ours, scale, _, _ = kkt_report(X, y, model.coef_, model.intercept_, labels, rho, lam, True)
    theirs, *_ = kkt_report(X, y, ref.coef_ / rho_feat, ref.intercept_, labels, rho, lam, True)
    assert ours <= KKT_SLACK * model.tol * scale
    # both within their (measured) KKT violation / mu of the optimum of the weighted problem
    atol, atol_b = coef_error_bound(X, ours + theirs)
    np.testing.assert_allclose(model.coef_, ref.coef_ / rho_feat, rtol=0, atol=atol + ROUNDING)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=0, atol=atol_b + ROUNDING)
    assert 0 < np.count_nonzero(model.coef_) < N_FEATURES


@pytest.mark.numerics
def test_singletons_with_unpenalized_features_kkt():
    X, y = make_data()
    labels_in = np.arange(N_FEATURES)
    labels_in[[2, 7]] = -1
    labels = check_groups(labels_in, N_FEATURES)
    rho = np.ones(labels.max() + 1)
    lam = 0.2 * lambda_max(X, y, labels, rho)
    model = GroupLassoRegressor(lam=lam, groups=labels_in).fit(X, y)
    viol, scale, n_live, n_zero = kkt_report(
        X, y, model.coef_, model.intercept_, labels, rho, lam, True
    )
    assert viol <= KKT_SLACK * model.tol * scale and n_live > 0 and n_zero > 0
    assert model.coef_[2] != 0 and model.coef_[7] != 0


@pytest.mark.numerics
def test_orthogonal_design_closed_form():
    # With X_c^T X_c / n = I the solution is the block soft-thresholding of X_c^T y / n.
    rng = np.random.RandomState(1)
    n, p = 80, 12
    A = rng.standard_normal((n, p))
    Q, _ = np.linalg.qr(A - A.mean(axis=0))  # columns orthonormal and orthogonal to 1
    X = np.sqrt(n) * Q + rng.standard_normal(p)  # shifted columns: the intercept matters
    y = X[:, :4] @ [1.0, -2.0, 0.5, 0.3] + 1.0 + rng.standard_normal(n)
    groups = [[0, 1], [2, 3, 4], [5], [6, 7, 8, 9, 10, 11]]
    labels = check_groups(groups, p)
    rho = resolve_group_weights("sqrt", labels)
    z = (X - X.mean(axis=0)).T @ (y - y.mean()) / n
    mixed = False
    for lam in [0.05, 0.3, 1.0]:
        expected = np.zeros(p)
        for j, idx in enumerate(groups):
            norm = np.linalg.norm(z[idx])
            expected[idx] = max(0.0, 1 - lam * rho[j] / norm) * z[idx]
        model = GroupLassoRegressor(lam=lam, groups=groups, group_weights="sqrt").fit(X, y)
        # certified to KKT tol * scale with mu = 1 (orthonormal design); scale = max group
        # norm of z. (One proximal step from any start is exact here, so in practice the
        # error is float64 rounding.)
        scale = max(np.linalg.norm(z[idx]) for idx in groups)
        atol, _ = coef_error_bound(X, model.tol * scale)
        np.testing.assert_allclose(model.coef_, expected, rtol=0, atol=atol + ROUNDING)
        np.testing.assert_array_equal(model.coef_ == 0, expected == 0)
        mixed |= 0 < np.count_nonzero(expected) < p
    assert mixed


@pytest.mark.numerics
def test_all_unpenalized_is_least_squares():
    X, y = make_data()
    model = GroupLassoRegressor(lam=5.0, groups=np.full(N_FEATURES, -1), tol=1e-10).fit(X, y)
    ref = LinearRegression().fit(X, y)  # exact least squares, to float64 rounding
    labels, rho = model.group_labels_, model.group_weights_
    viol, scale, _, _ = kkt_report(X, y, model.coef_, model.intercept_, labels, rho, 5.0, True)
    assert viol <= KKT_SLACK * model.tol * scale
    atol, atol_b = coef_error_bound(X, viol)  # ~1e-9 here
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=atol + ROUNDING)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=0, atol=atol_b + ROUNDING)
    assert lambda_max(X, y, model.group_labels_, model.group_weights_) == 0.0
    np.testing.assert_array_equal(model.selected_features_, np.arange(N_FEATURES))


@pytest.mark.numerics
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize(
    "spec, weights",
    [(None, None), (4, "sqrt"), ("labels", None), (3, "zero")],
)
@pytest.mark.parametrize("sparse", [False, True])
def test_lambda_max_is_exact(spec, weights, fit_intercept, sparse):
    X, y = make_data()
    groups = GROUP_SPECS["labels"] if spec == "labels" else spec
    labels = check_groups(groups, N_FEATURES)
    if weights == "zero":  # an unpenalized group: fitted first by least squares
        weights = np.ones(labels.max() + 1)
        weights[1] = 0.0
    rho = resolve_group_weights(weights, labels)
    Xin = sp.csr_matrix(X) if sparse else X
    lam_max = lambda_max(Xin, y, labels, rho, fit_intercept=fit_intercept)
    penalized = (labels >= 0) & (rho[np.maximum(labels, 0)] > 0)
    assert penalized.sum() < N_FEATURES or spec in (None, 4)

    above = GroupLassoRegressor(
        lam=1.01 * lam_max, groups=groups, group_weights=weights, fit_intercept=fit_intercept
    ).fit(Xin, y)
    assert np.all(above.coef_[penalized] == 0.0)
    below = GroupLassoRegressor(
        lam=0.9 * lam_max, groups=groups, group_weights=weights, fit_intercept=fit_intercept
    ).fit(Xin, y)
    assert np.any(below.coef_[penalized] != 0.0)


@pytest.mark.numerics
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sparse_matches_dense(fmt, fit_intercept):
    X, y = make_data()
    X[np.abs(X) < 0.8] = 0.0
    Xs = sp.csr_matrix(X) if fmt == "csr" else sp.csc_matrix(X)
    kwargs = dict(lam=0.05, groups=3, group_weights="sqrt", fit_intercept=fit_intercept)
    kwargs["tol"] = 1e-12
    dense = GroupLassoRegressor(**kwargs).fit(X, y)
    sparse = GroupLassoRegressor(**kwargs).fit(Xs, y)
    # sparse and dense products round differently: each fit is certified to KKT tol *
    # scale, i.e. within coef_error_bound of the optimum (~1e-10 here), not bitwise equal
    labels = sparse.group_labels_
    _, scale, _, _ = kkt_report(X, y, dense.coef_, dense.intercept_, labels,
                                dense.group_weights_, 0.05, fit_intercept)  # fmt: skip
    atol, atol_b = coef_error_bound(X, 2 * kwargs["tol"] * scale, fit_intercept)
    atol, atol_b = atol + ROUNDING, atol_b + ROUNDING
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=atol)
    np.testing.assert_allclose(sparse.intercept_, dense.intercept_, rtol=0, atol=atol_b)
    # |x_i . dw + db| <= ||x_i|| ||dw|| + |db|
    pred_atol = np.linalg.norm(X, axis=1).max() * atol + atol_b
    np.testing.assert_allclose(sparse.predict(Xs), dense.predict(X), rtol=0, atol=pred_atol)


@pytest.mark.numerics
@pytest.mark.parametrize("sparse", [False, True])
def test_gram_and_direct_iterations_agree(sparse):
    X, y = make_data()
    Xin = sp.csc_matrix(X) if sparse else X
    labels = check_groups(4, N_FEATURES)
    rho = np.ones(labels.max() + 1)
    a = solve_group_lasso(Xin, y, 0.05, labels, rho, tol=1e-12, precompute=True)
    b = solve_group_lasso(Xin, y, 0.05, labels, rho, tol=1e-12, precompute=False)
    assert a.converged and b.converged
    # two roundings of the gradient, each certified to KKT 1e-12 * scale (~1e-10 in w)
    _, scale, _, _ = kkt_report(X, y, a.coef, a.intercept, labels, rho, 0.05, True)
    atol, atol_b = coef_error_bound(X, 2 * 1e-12 * scale)
    np.testing.assert_allclose(a.coef, b.coef, rtol=0, atol=atol + ROUNDING)
    np.testing.assert_allclose(a.intercept, b.intercept, rtol=0, atol=atol_b + ROUNDING)


@pytest.mark.numerics
def test_pandas_input_sets_feature_names():
    X, y = make_data()
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(N_FEATURES)])
    model = GroupLassoRegressor(lam=0.1, groups=4).fit(df, pd.Series(y))
    np.testing.assert_array_equal(model.feature_names_in_, df.columns.to_numpy())
    ref = GroupLassoRegressor(lam=0.1, groups=4).fit(X, y)
    assert not hasattr(ref, "feature_names_in_")
    # same numbers, but pandas hands over a Fortran-ordered copy (other BLAS rounding):
    # both certified to the default KKT tol 1e-8 * scale
    _, scale, _, _ = kkt_report(X, y, ref.coef_, ref.intercept_, ref.group_labels_,
                                ref.group_weights_, 0.1, True)  # fmt: skip
    atol, atol_b = coef_error_bound(X, 2 * ref.tol * scale)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=atol + ROUNDING)
    row = np.linalg.norm(X, axis=1).max()
    np.testing.assert_allclose(model.predict(df), ref.predict(X), rtol=0, atol=row * atol + atol_b)


@pytest.mark.parametrize("sparse", [False, True])
def test_inputs_are_not_modified(sparse):
    X, y = make_data()
    X = sp.csr_matrix(X) if sparse else X
    groups = [[0, 1, 2], [5, 6], [10, 11, 12, 13]]
    weights = np.array([1.0, 0.0, 2.0])
    X0, y0 = X.copy(), y.copy()
    groups0, weights0 = [list(g) for g in groups], weights.copy()
    model = GroupLassoRegressor(lam=0.1, groups=groups, group_weights=weights).fit(X, y)
    model.predict(X)
    if sparse:
        assert (X != X0).nnz == 0
    else:
        np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert groups == groups0
    np.testing.assert_array_equal(weights, weights0)
    assert model.groups is groups and model.group_weights is weights


@pytest.mark.numerics
def test_warm_start_same_solution_fewer_iterations():
    X, y = make_data()
    cold = GroupLassoRegressor(lam=0.02, groups=3).fit(X, y)
    warm = GroupLassoRegressor(lam=0.025, groups=3, warm_start=True).fit(X, y)
    first_iter = warm.n_iter_
    warm.set_params(lam=0.02).fit(X, y)
    # different iterates, both certified to the default KKT tol 1e-8 * scale
    _, scale, _, _ = kkt_report(X, y, cold.coef_, cold.intercept_, cold.group_labels_,
                                cold.group_weights_, 0.02, True)  # fmt: skip
    atol, _ = coef_error_bound(X, 2 * cold.tol * scale)
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=0, atol=atol + ROUNDING)
    assert warm.n_iter_ < cold.n_iter_
    assert first_iter > 0
    # a start that meets the stopping rule needs no iteration at all. A start at the
    # optimum meets it up to rounding: its violation, computed again (the intercept
    # re-fitted), moves by ~1e-16 of the scale, so the refits stop at 10x the tolerance
    # that certified the optimum (a margin of 9 tol, not rounding's luck)
    assert warm.set_params(tol=10 * warm.tol).fit(X, y).n_iter_ == 0
    # the function-level warm start too
    labels, rho = cold.group_labels_, cold.group_weights_
    res = solve_group_lasso(X, y, 0.02, labels, rho, w0=cold.coef_, tol=10 * cold.tol)
    assert res.n_iter == 0 and res.converged


@pytest.mark.numerics
def test_group_lasso_path_matches_single_solves():
    X, y = make_data()
    labels = check_groups(2, N_FEATURES)
    rho = resolve_group_weights("sqrt", labels)
    lams = lambda_max(X, y, labels, rho) * np.logspace(0, -3, 8)
    coefs, intercepts, n_iters, kkts = group_lasso_path(X, y, lams, labels, rho)
    assert np.all(kkts <= 1e-8)  # the stopping rule (default tol): exact
    assert np.all(coefs[0] == 0)
    # warm-started and cold solves: different iterates, both certified to KKT 1e-8 * scale
    _, scale, _, _ = kkt_report(X, y, coefs[0], intercepts[0], labels, rho, lams[0], True)
    atol, atol_b = coef_error_bound(X, 2 * 1e-8 * scale)
    for k in [2, 5, 7]:
        res = solve_group_lasso(X, y, lams[k], labels, rho)
        np.testing.assert_allclose(coefs[k], res.coef, rtol=0, atol=atol + ROUNDING)
        np.testing.assert_allclose(intercepts[k], res.intercept, rtol=0, atol=atol_b + ROUNDING)


@pytest.mark.numerics
def test_simulation_path_converges():
    # The benchmark of the module: 40 groups of 5 features, 7 informative, 30 penalties.
    rng = np.random.RandomState(0)
    X = rng.standard_normal((200, 200))
    beta = np.zeros(200)
    for g in rng.choice(40, 7, replace=False):
        beta[5 * g : 5 * g + 5] = rng.standard_normal(5)
    y = X @ beta + rng.standard_normal(200)
    labels = check_groups(5, 200)
    lams = np.logspace(np.log10(15), -5, 30)
    coefs, _, n_iters, kkts = group_lasso_path(X, y, lams, labels, np.ones(40))
    assert np.all(kkts <= 1e-8), kkts  # every problem met the stopping rule (default tol)
    assert n_iters.max() < 10000


def test_selection_attributes():
    X, y = make_data()
    labels = GROUP_SPECS["labels"]
    model = GroupLassoRegressor(lam=0.3, groups=labels).fit(X, y)
    lab = model.group_labels_
    norms = np.array([np.linalg.norm(model.coef_[lab == j]) for j in range(lab.max() + 1)])
    np.testing.assert_array_equal(model.selected_groups_, np.flatnonzero(norms > 0))
    assert 0 < len(model.selected_groups_) < lab.max() + 1
    expected = np.flatnonzero((lab < 0) | (model.coef_ != 0))
    np.testing.assert_array_equal(model.selected_features_, expected)


def test_convergence_warning_names_max_iter():
    X, y = make_data()
    model = GroupLassoRegressor(lam=0.001, groups=3, max_iter=2)
    with pytest.warns(ConvergenceWarning, match=r"max_iter \(currently 2\)"):
        model.fit(X, y)
    assert model.n_iter_ == 2 and model.kkt_ > model.tol


@pytest.mark.parametrize(
    "params", [{"lam": -1.0}, {"tol": 0.0}, {"max_iter": 0}, {"max_iter": 1.5}, {"groups": 0}]
)
def test_invalid_parameters_raise(params):
    X, y = make_data()
    with pytest.raises(ValueError):
        GroupLassoRegressor(**params).fit(X, y)


def test_invalid_group_weights_raise():
    X, y = make_data()
    for gw, match in [([1.0, 2.0], "shape"), ("log", "sqrt"), (-np.ones(8), ">= 0")]:
        with pytest.raises(ValueError, match=match):
            GroupLassoRegressor(groups=3, group_weights=gw).fit(X, y)


# ------------------------------------------------------------------------------------
# check_groups / resolve_group_weights
# ------------------------------------------------------------------------------------


def test_check_groups_accepted_formats():
    np.testing.assert_array_equal(check_groups(None, 4), [0, 1, 2, 3])
    np.testing.assert_array_equal(check_groups(2, 5), [0, 0, 1, 1, 2])
    np.testing.assert_array_equal(check_groups(np.int64(3), 7), [0, 0, 0, 1, 1, 1, 2])
    np.testing.assert_array_equal(check_groups(10, 3), [0, 0, 0])
    # lists: numbered in list order, unlisted features unpenalized
    np.testing.assert_array_equal(check_groups([[3, 4], [0]], 6), [1, -1, -1, 0, 0, -1])
    np.testing.assert_array_equal(
        check_groups([np.array([2]), range(0, 2), (5,)], 6), [1, 1, 0, -1, -1, 2]
    )
    np.testing.assert_array_equal(check_groups(np.array([[0, 2], [1, 3]]), 4), [0, 1, 0, 1])
    # label arrays: renumbered in sorted label order, -1 = no group
    np.testing.assert_array_equal(check_groups([5, 5, -1, 2, 2], 5), [1, 1, -1, 0, 0])
    np.testing.assert_array_equal(check_groups(np.array([1.0, 0.0, 1.0]), 3), [1, 0, 1])
    np.testing.assert_array_equal(check_groups(pd.Series([7, 3, 3]), 3), [1, 0, 0])
    out = check_groups([[1], [0]], 2)
    assert out.dtype.kind == "i" and out.shape == (2,)


@pytest.mark.parametrize(
    "groups, n_features, match",
    [
        ([[0, 3], [1], [3, 4]], 5, "feature 3 appears in groups 0 and 2"),
        ([[0, 1, 1]], 3, "appears twice in group 0"),
        ([[0, 5]], 5, "out of range"),
        ([[-1, 0]], 5, "out of range"),
        ([[0, 1], []], 3, "empty"),
        ([[0.5, 1]], 3, "integers"),
        ([0, 1.5, 1], 3, "integer"),
        (["a", "b"], 2, "integers"),
        ([0, 1, 1], 4, "shape"),
        (np.zeros((2, 2, 2), dtype=int), 4, "dimensions"),
        ([0, -2, 1], 3, ">= 0"),
        ([[0, 1], 2], 3, "mixes"),
        ([], 3, "empty"),
        (0, 3, ">= 1"),
        (True, 3, "boolean"),
        ("in", 3, "groups must be"),
        ([True, False, True], 3, "integers"),
    ],
)
def test_check_groups_errors(groups, n_features, match):
    with pytest.raises(ValueError, match=match):
        check_groups(groups, n_features)


def test_resolve_group_weights():
    labels = np.array([0, 0, 0, -1, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(resolve_group_weights(None, labels), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(resolve_group_weights("sqrt", labels), np.sqrt([3, 1, 4]))
    np.testing.assert_array_equal(resolve_group_weights([0, 2, 1.5], labels), [0, 2, 1.5])
    assert resolve_group_weights(None, np.full(3, -1)).shape == (0,)
    for bad, match in [
        ([1.0, 1.0], "shape"),
        ([1.0, -1.0, 1.0], ">= 0"),
        ([1.0, np.nan, 1.0], "finite"),
        ([1.0, np.inf, 1.0], "finite"),
        ("linear", "sqrt"),
        (["a", "b", "c"], "numeric"),
    ]:
        with pytest.raises(ValueError, match=match):
            resolve_group_weights(bad, labels)


# ------------------------------------------------------------------------------------
# scikit-learn API conformance
# ------------------------------------------------------------------------------------


def _expected_failed_checks(estimator):
    if estimator.lam >= 0.9:
        # check_regressors_train fits the standardized make_regression data and requires
        # R^2 > 0.5; it sets alpha=0.01 for Lasso-like estimators, but ours is called lam.
        # Its lambda_max is 0.89, so the default lam=1.0 rightly zeroes every coefficient.
        # The lam=0.01 instance below runs (and passes) the check.
        return {"check_regressors_train": "default lam=1.0 exceeds lambda_max of the data"}
    return {}


@parametrize_with_checks(
    [GroupLassoRegressor(), GroupLassoRegressor(lam=0.01, groups=2, group_weights="sqrt")],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc"])
def test_column_moments_and_squares_follow_their_definition(fmt):
    # columns far off centre (mean 1e4, spread 1: a one-pass E[x^2] - mean^2 would lose
    # 8 digits), explicit zeros, an empty and a constant column, and duplicate entries
    from sksparse_nn.utils.columns import column_moments, column_squares

    rng = np.random.default_rng(0)
    D = rng.normal(size=(40, 6)) * (rng.random((40, 6)) < 0.4)
    D[:, 0] = 1e4 + rng.normal(size=40)
    D[:, 1] = 0.0
    D[:, 2] = 3.0
    if fmt == "dense":
        X = D
    else:
        X = sp.csr_matrix(D) if fmt == "csr" else sp.csc_matrix(D)
        X.data[::7] = 0.0  # stored zeros
        D = X.toarray()
        # the same matrix with its first stored entry split into two duplicates
        data = np.concatenate([[X.data[0] + 0.5, -0.5], X.data[1:]])
        indices = np.concatenate([X.indices[:1], X.indices])
        indptr = X.indptr + (X.indptr > 0)
        X = type(X)((data, indices, indptr), shape=X.shape)
        assert not X.has_canonical_format
    before = X.copy()
    mean, var = column_moments(X)
    # float64 rounding of sums over 40 rows: a few eps of the largest magnitude involved
    np.testing.assert_allclose(mean, D.mean(axis=0), rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(var, D.var(axis=0), rtol=1e-9, atol=1e-12)
    constant = np.ptp(D, axis=0) == 0  # the empty column, and the constant one if dense
    assert constant[1] and np.all(var[constant] == 0.0)
    np.testing.assert_allclose(column_squares(X), (D**2).sum(axis=0), rtol=1e-13)
    if fmt != "dense":  # the caller's matrix is left as it was
        np.testing.assert_array_equal(X.data, before.data)
