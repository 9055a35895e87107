"""The group-lasso solver with the logistic / multinomial loss (sksparse_nn.solvers).

The optimality check below is written from the problem's definition, not from the
solver's code. For the mean log-loss of the scores ``Z = X W + 1 b^T`` and the penalty
``lam sum_g rho_g ||W_g||_F``, the pair ``(W, b)`` is optimal iff, with
``G = X_c^T (P - Y) / n`` (``P`` the predicted probabilities, ``X_c`` the centered design
when an intercept is fitted; this is the coefficient gradient in the coordinates
``(W, b + mean(X) W)``, an invertible change of variables),

* the intercept gradient ``mean(P - Y)`` is zero,
* every group with ``W_g != 0`` has ``G_g = -lam rho_g W_g / ||W_g||``,
* every group with ``W_g = 0`` has ``||G_g|| <= lam rho_g``,
* unpenalized features have ``G_j = 0``.

The documented stopping rule bounds the largest of these residuals by ``tol * scale``,
``scale`` being the largest group norm of ``G`` at the null model (intercept only), the
intercept residual counted as ``||X_c||_2 / sqrt(n) * ||mean(P - Y)||``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksparse_nn import GroupLassoClassifier
from sksparse_nn.groups import check_groups, resolve_group_weights
from sksparse_nn.solvers import lambda_max, solve_group_logistic

# ------------------------------------------------------------------------------------
# Problems and an independent optimality check
# ------------------------------------------------------------------------------------


def make_problem(n, p, n_classes=2, n_informative=5, seed=0):
    """Labels drawn from a sparse logistic / softmax model on non-centered features.

    Returns ``X``, the labels ``y`` (0..K-1) and the solver targets ``Y`` (``y`` itself
    for two classes, one-hot rows otherwise).
    """
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-1.5, 1.5, size=p)
    k = 1 if n_classes == 2 else n_classes
    B = np.zeros((p, k))
    B[:n_informative] = 1.5 * rng.standard_normal((n_informative, k))
    scores = (X - X.mean(axis=0)) @ B + 0.4 * rng.standard_normal(k)
    if n_classes == 2:
        y = (scores[:, 0] + rng.logistic(size=n) > 0).astype(int)
        return X, y, y.astype(float)
    y = np.argmax(scores + rng.gumbel(size=scores.shape), axis=1)
    return X, y, np.eye(n_classes)[y]


def probabilities(X, W, b):
    Z = X @ W + b
    return expit(Z) if W.shape[1] == 1 else softmax(Z, axis=1)


def group_norm(A, idx):
    return float(np.linalg.norm(A[idx]))


def optimality_report(X, Y, coef, intercept, labels, rho, lam, fit_intercept):
    """Largest KKT residual, the scale of the stopping rule, live and zero group counts."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    n, p = X.shape
    Y = Y.reshape(n, -1)
    W = np.asarray(coef, dtype=float).reshape(p, -1)
    b = np.atleast_1d(np.asarray(intercept, dtype=float))
    Xc = X - X.mean(axis=0) if fit_intercept else X
    R = probabilities(X, W, b) - Y
    G = Xc.T @ R / n
    # the null model: class frequencies with an intercept, uniform probabilities without
    if fit_intercept:
        P0 = np.broadcast_to(Y.mean(axis=0), Y.shape)
    else:
        P0 = np.full(Y.shape, 0.5 if Y.shape[1] == 1 else 1.0 / Y.shape[1])
    G0 = Xc.T @ (P0 - Y) / n
    residuals, scale_terms = [], []
    n_live = n_zero = 0
    for j in range(len(rho)):
        idx = np.flatnonzero(labels == j)
        scale_terms.append(group_norm(G0, idx))
        norm_w = group_norm(W, idx)
        if rho[j] == 0:
            residuals.append(group_norm(G, idx))
        elif norm_w == 0:
            n_zero += 1
            residuals.append(max(0.0, group_norm(G, idx) - lam * rho[j]))
        else:
            n_live += 1
            residuals.append(group_norm(G[idx] + lam * rho[j] * W[idx] / norm_w, np.s_[:]))
    for j in np.flatnonzero(labels < 0):
        scale_terms.append(group_norm(G0, [j]))
        residuals.append(group_norm(G, [j]))
    if fit_intercept:
        s = np.linalg.norm(Xc, 2) / np.sqrt(n)
        residuals.append(s * np.linalg.norm(R.mean(axis=0)))
    else:
        assert np.all(b == 0.0)
    scale = max(scale_terms) or 1.0
    return max(residuals), scale, n_live, n_zero


def objective(X, Y, coef, intercept, labels, rho, lam):
    """Mean log-loss plus penalty, computed directly (stable log-sum-exp)."""
    n, p = X.shape
    W = np.asarray(coef, dtype=float).reshape(p, -1)
    Z = X @ W + np.atleast_1d(intercept)
    if W.shape[1] == 1:
        loss = np.logaddexp(0.0, Z[:, 0]) - Y.reshape(-1) * Z[:, 0]
    else:
        top = Z.max(axis=1, keepdims=True)
        loss = (top[:, 0] + np.log(np.exp(Z - top).sum(axis=1))) - (Y * Z).sum(axis=1)
    penalty = sum(rho[j] * group_norm(W, labels == j) for j in range(len(rho)))
    return float(loss.mean() + lam * penalty)


def random_partition(p, rng, max_size=6):
    """Labels of a random partition of ``p`` features into groups of unequal sizes."""
    sizes = []
    while sum(sizes) < p:
        sizes.append(int(rng.randint(1, max_size + 1)))
    sizes[-1] -= sum(sizes) - p
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return rng.permutation(labels)


# (n, p, group spec, weights, fit_intercept); "partition" draws unequal groups with weights
CASES = {
    "tall-singletons": (150, 20, None, None, True),
    "wide-groups-of-3": (40, 90, 3, "sqrt", True),
    "unequal-weighted": (120, 30, "partition", "random", True),
    "no-intercept": (150, 20, "partition", "random", False),
    "unpenalized-features": (100, 24, "with-free", None, True),
}


def resolve_case(name, p):
    _, _, spec, weights, _ = CASES[name]
    rng = np.random.RandomState(11)
    if spec == "partition":
        spec = random_partition(p, rng)
    elif spec == "with-free":
        spec = np.arange(p) // 2
        spec[[1, 6, 13]] = -1  # features in no group: unpenalized
    labels = check_groups(spec, p)
    if weights == "random":
        weights = rng.uniform(0.3, 2.0, size=labels.max() + 1)
        weights[1] = 0.0  # one unpenalized group
    return spec, weights, labels, resolve_group_weights(weights, labels)


# ------------------------------------------------------------------------------------
# (a) KKT at the solution, binary
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_kkt_conditions_hold_binary(case):
    n, p, _, _, fit_intercept = CASES[case]
    X, _, Y = make_problem(n, p, seed=1)
    _, _, labels, rho = resolve_case(case, p)
    lam_max = lambda_max(X, Y, labels, rho, fit_intercept=fit_intercept, loss="log_loss")
    tol = 1e-8
    seen_live = seen_zero = False
    for frac in [0.5, 0.1]:
        lam = frac * lam_max
        res = solve_group_logistic(X, Y, lam, labels, rho, tol=tol, fit_intercept=fit_intercept)
        assert res.converged and res.kkt <= tol and res.coef.shape == (p,)
        worst, scale, n_live, n_zero = optimality_report(
            X, Y, res.coef, res.intercept, labels, rho, lam, fit_intercept
        )
        # the solver's own arithmetic differs from this check's by rounding only
        assert worst <= tol * scale * (1 + 1e-6), (frac, worst / scale)
        np.testing.assert_allclose(
            res.objective, objective(X, Y, res.coef, res.intercept, labels, rho, lam), rtol=1e-12
        )
        seen_live |= n_live > 0
        seen_zero |= n_zero > 0
    assert seen_live and seen_zero  # both KKT branches were exercised


# ------------------------------------------------------------------------------------
# (b) singleton groups, binary: scikit-learn's L1 logistic regression
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "solver, fit_intercept",
    # liblinear penalizes its intercept: compared without one. saga does not.
    [("liblinear", False), ("saga", True)],
)
def test_singletons_match_l1_logistic_regression(solver, fit_intercept):
    n, p = 150, 12
    X, y, Y = make_problem(n, p, seed=4)
    labels, rho = np.arange(p), np.ones(p)
    sizes = []
    for lam in [0.08, 0.04, 0.015]:
        # sum_i loss_i + ||w||_1 / C  ==  n * lam * (our objective)  for C = 1 / (n lam)
        ref = LogisticRegression(
            C=1.0 / (n * lam),
            l1_ratio=1.0,
            solver=solver,
            fit_intercept=fit_intercept,
            tol=1e-12,
            max_iter=100000,
            random_state=0,  # liblinear's coordinate order; ~5% of seeds stall at tol=1e-12
        ).fit(X, y)
        res = solve_group_logistic(X, Y, lam, labels, rho, tol=1e-10, fit_intercept=fit_intercept)
        ours = objective(X, Y, res.coef, res.intercept, labels, rho, lam)
        theirs = objective(X, Y, ref.coef_[0], ref.intercept_, labels, rho, lam)
        # Both solvers stop within ~1e-10 of a stationary point; the objective gap is
        # second order in that distance (measured: |difference| ~ 1e-16 relative). 1e-9
        # relative leaves a wide margin and still fails for a wrong scaling of C (which
        # moves the optimum by O(1)) or a penalized intercept.
        assert abs(ours - theirs) <= 1e-9 * ours, (lam, ours, theirs)
        assert ours <= theirs * (1 + 1e-12)  # never worse than the reference
        # n > p, continuous X (general position): the L1-logistic solution is unique
        np.testing.assert_allclose(res.coef, ref.coef_[0], atol=1e-7)
        np.testing.assert_allclose(res.intercept, np.atleast_1d(ref.intercept_)[0], atol=1e-7)
        np.testing.assert_array_equal(res.coef == 0, ref.coef_[0] == 0)
        sizes.append(np.count_nonzero(res.coef))
    assert any(0 < k < p for k in sizes)


def test_weighted_singletons_are_rescaled_columns():
    # singleton weights rho_j: the plain L1 problem on X_j / rho_j, then w_j = u_j / rho_j
    n, p = 120, 10
    X, _, Y = make_problem(n, p, seed=6)
    rho = np.random.RandomState(2).uniform(0.5, 2.0, size=p)
    lam = 0.03
    plain = solve_group_logistic(X / rho, Y, lam, np.arange(p), np.ones(p), tol=1e-11)
    weighted = solve_group_logistic(X, Y, lam, np.arange(p), rho, tol=1e-11)
    np.testing.assert_allclose(weighted.coef, plain.coef / rho, atol=1e-7)
    np.testing.assert_allclose(weighted.intercept, plain.intercept, atol=1e-7)
    assert 0 < np.count_nonzero(weighted.coef) < p


# ------------------------------------------------------------------------------------
# (c) lambda_max
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("free", [False, True])
def test_lambda_max_is_the_threshold(n_classes, fit_intercept, free):
    n, p = 100, 16
    X, _, Y = make_problem(n, p, n_classes=n_classes, seed=3)
    spec = np.array([0, 0, 1, 1, 1, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6])
    rho = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 1.5, 0.8])
    if free:  # two features in no group and one group of weight 0, fitted first
        spec[[2, 9]] = -1
        rho[5] = 0.0
    labels = check_groups(spec, p)
    rho = rho[: labels.max() + 1]
    penalized = (labels >= 0) & (rho[np.maximum(labels, 0)] > 0)
    lam_max = lambda_max(X, Y, labels, rho, fit_intercept=fit_intercept, loss="log_loss")
    # Without unpenalized features lambda_max is a closed form and the zero model passes
    # the stopping rule at lam_max itself. With them it rests on a fit to tol=1e-12, and
    # at the exact boundary the solver may leave a group at the 1e-10 level: test just above.
    top = lam_max * (1 + 1e-6) if free else lam_max
    for lam in [top, 3 * lam_max]:
        res = solve_group_logistic(X, Y, lam, labels, rho, fit_intercept=fit_intercept)
        coef = res.coef.reshape(p, -1)
        assert res.converged and np.all(coef[penalized] == 0.0), lam / lam_max
        if free:
            assert np.all(np.linalg.norm(coef[~penalized], axis=1) > 0)
    below = solve_group_logistic(X, Y, 0.99 * lam_max, labels, rho, fit_intercept=fit_intercept)
    assert np.any(below.coef.reshape(p, -1)[penalized] != 0.0)


def test_lambda_max_rejects_an_unknown_loss():
    X, _, Y = make_problem(30, 6)
    with pytest.raises(ValueError, match="loss"):
        lambda_max(X, Y, np.arange(6), np.ones(6), loss="hinge")


# ------------------------------------------------------------------------------------
# (d) multinomial
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, p, n_classes, case",
    [(150, 30, 4, "tall-singletons"), (60, 90, 3, "wide-groups-of-3"), (120, 30, 3,
     "unequal-weighted"), (150, 20, 5, "no-intercept")],
)  # fmt: skip
def test_multinomial_kkt_and_features_drop_across_all_classes(n, p, n_classes, case):
    fit_intercept = CASES[case][4]
    X, _, Y = make_problem(n, p, n_classes=n_classes, seed=7)
    _, _, labels, rho = resolve_case(case, p)
    lam_max = lambda_max(X, Y, labels, rho, fit_intercept=fit_intercept, loss="log_loss")
    tol = 1e-8
    res = solve_group_logistic(X, Y, 0.2 * lam_max, labels, rho, fit_intercept=fit_intercept)
    assert res.converged and res.coef.shape == (p, n_classes)
    worst, scale, n_live, n_zero = optimality_report(
        X, Y, res.coef, res.intercept, labels, rho, 0.2 * lam_max, fit_intercept
    )
    assert worst <= tol * scale * (1 + 1e-6) and n_live > 0 and n_zero > 0
    # a feature's coefficients are zero for every class or for none
    zero = res.coef == 0.0
    np.testing.assert_array_equal(zero.all(axis=1), zero.any(axis=1))
    assert 0 < zero.all(axis=1).sum() < p
    # the softmax ignores a common shift: the solution has rows and intercepts summing to 0
    np.testing.assert_allclose(res.coef.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.sum(res.intercept), 0.0, atol=1e-12)


def test_two_column_softmax_is_binary_logistic_at_lam_over_sqrt2():
    # With columns (-u/2, u/2) the softmax of two classes is the logistic model of u, and
    # the group norm of a row is |u_j| / sqrt(2): the multinomial problem at lam is the
    # binary one at lam / sqrt(2), with coef = W[:, 1] - W[:, 0].
    n, p = 120, 10
    X, y, _ = make_problem(n, p, seed=5)
    labels, rho = np.arange(p) // 2, np.ones(5)
    sizes = []
    for lam in [0.08, 0.02]:
        binary = solve_group_logistic(X, y, lam / np.sqrt(2), labels, rho, tol=1e-10)
        multi = solve_group_logistic(X, np.eye(2)[y], lam, labels, rho, tol=1e-10)
        np.testing.assert_allclose(multi.coef[:, 1] - multi.coef[:, 0], binary.coef, atol=1e-8)
        np.testing.assert_allclose(
            multi.intercept[1] - multi.intercept[0], binary.intercept, atol=1e-8
        )
        np.testing.assert_allclose(multi.objective, binary.objective, rtol=1e-12)
        sizes.append(np.count_nonzero(binary.coef))
    assert any(0 < k < p for k in sizes)


# ------------------------------------------------------------------------------------
# (e) warm starts
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_classes", [2, 3])
def test_warm_start_from_a_nearby_solution_needs_fewer_iterations(n_classes):
    n, p = 40, 90  # p > n: the slow regime, where a good start matters
    X, _, Y = make_problem(n, p, n_classes=n_classes, seed=8)
    labels = check_groups(3, p)
    rho = resolve_group_weights("sqrt", labels)
    lam_max = lambda_max(X, Y, labels, rho, loss="log_loss")
    near = solve_group_logistic(X, Y, 0.11 * lam_max, labels, rho)
    cold = solve_group_logistic(X, Y, 0.1 * lam_max, labels, rho)
    warm = solve_group_logistic(X, Y, 0.1 * lam_max, labels, rho, w0=near.coef)
    assert cold.converged and warm.converged
    assert warm.n_iter < cold.n_iter, (warm.n_iter, cold.n_iter)
    np.testing.assert_allclose(warm.objective, cold.objective, rtol=1e-9)
    # a start at the solution (the intercept re-fitted) meets the stopping rule up to
    # rounding (~1e-16 of the scale): at 10x the tolerance that certified it (1e-8, the
    # default) no iteration is needed, and the start is returned as it is
    again = solve_group_logistic(X, Y, 0.1 * lam_max, labels, rho, w0=warm.coef, tol=1e-7)
    assert again.n_iter == 0 and again.converged
    np.testing.assert_array_equal(again.coef, warm.coef)


def test_classifier_warm_start():
    X, y, _ = make_problem(40, 90, n_classes=3, seed=8)
    cold = GroupLassoClassifier(lam=0.02, groups=3).fit(X, y)
    warm = GroupLassoClassifier(lam=0.022, groups=3, warm_start=True).fit(X, y)
    warm.set_params(lam=0.02).fit(X, y)
    assert warm.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(warm.objective_, cold.objective_, rtol=1e-9)
    # a start at the optimum meets the rule up to rounding: no iteration at 10x its tol
    assert warm.set_params(tol=10 * warm.tol).fit(X, y).n_iter_ == 0


# ------------------------------------------------------------------------------------
# (f) sparse input
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sparse_matches_dense(fmt, n_classes, fit_intercept):
    X, y, Y = make_problem(80, 30, n_classes=n_classes, seed=9)
    X[np.abs(X) < 1.0] = 0.0
    Xs = sp.csr_matrix(X) if fmt == "csr" else sp.csc_matrix(X)
    labels = check_groups(3, 30)
    rho = resolve_group_weights("sqrt", labels)
    lam = 0.3 * lambda_max(Xs, Y, labels, rho, fit_intercept=fit_intercept, loss="log_loss")
    kw = dict(tol=1e-12, fit_intercept=fit_intercept)
    dense = solve_group_logistic(X, Y, lam, labels, rho, **kw)
    sparse = solve_group_logistic(Xs, Y, lam, labels, rho, **kw)
    assert dense.converged and sparse.converged
    # Both stop at a relative KKT violation <= 1e-12; they run the same iterations with
    # products that differ by rounding only (implicit vs explicit centering), so the
    # solutions agree far below the 1e-9 asked here (measured: ~1e-15).
    np.testing.assert_allclose(sparse.coef, dense.coef, atol=1e-9)
    np.testing.assert_allclose(sparse.intercept, dense.intercept, atol=1e-9)
    np.testing.assert_allclose(sparse.objective, dense.objective, rtol=1e-12)
    assert 0 < np.count_nonzero(dense.coef) < dense.coef.size
    # the estimator: sparse in fit and in predict
    est_d = GroupLassoClassifier(lam=lam, groups=3, group_weights="sqrt", tol=1e-12,
                                 fit_intercept=fit_intercept).fit(X, y)  # fmt: skip
    est_s = GroupLassoClassifier(**est_d.get_params()).fit(Xs, y)
    np.testing.assert_allclose(est_s.predict_proba(Xs), est_d.predict_proba(X), atol=1e-9)


def test_sparse_input_is_not_densified(monkeypatch):
    X, _, Y = make_problem(60, 20, seed=2)
    X[np.abs(X) < 1.0] = 0.0
    Xs = sp.csr_matrix(X)

    def refuse(*args, **kwargs):
        raise AssertionError("the solver densified X")

    monkeypatch.setattr(sp.csr_matrix, "toarray", refuse)
    monkeypatch.setattr(sp.csr_matrix, "todense", refuse)
    res = solve_group_logistic(Xs, Y, 0.02, np.arange(20) // 4, np.ones(5))
    assert res.converged


# ------------------------------------------------------------------------------------
# Numerics and input handling of the solver
# ------------------------------------------------------------------------------------


def test_confident_problems_stay_finite_and_warning_free():
    # separable classes and large features: scores in the hundreds. Every exponential must
    # be taken stably (log1p(exp), log-sum-exp, expit, softmax).
    X, y, _ = make_problem(100, 8, n_classes=3, seed=12)
    X = 50.0 * X
    Y = np.eye(3)[np.argmax(X[:, :3], axis=1)]  # separable by construction
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for targets in (Y, Y[:, 0]):
            res = solve_group_logistic(X, targets, 1e-3, np.arange(8), np.ones(8), max_iter=300)
            assert np.isfinite(res.objective) and np.all(np.isfinite(res.coef))
            assert np.isfinite(res.kkt)


def test_bad_targets_and_starts_raise():
    X, y, Y = make_problem(40, 6, n_classes=3)
    labels, rho = np.arange(6), np.ones(6)
    with pytest.raises(ValueError, match="both classes"):
        solve_group_logistic(X, np.ones(40), 0.1, labels, rho)
    with pytest.raises(ValueError, match="never occurs"):
        solve_group_logistic(X, np.column_stack([Y, np.zeros(40)]), 0.1, labels, rho)
    with pytest.raises(ValueError, match="sum to 1"):
        solve_group_logistic(X, 0.5 * Y, 0.1, labels, rho)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        solve_group_logistic(X, 2.0 * (y == 1), 0.1, labels, rho)
    with pytest.raises(ValueError, match="w0"):
        solve_group_logistic(X, Y, 0.1, labels, rho, w0=np.zeros(6))
    with pytest.raises(ValueError, match="groups_index"):
        solve_group_logistic(X, Y, 0.1, labels[:5], rho[:5])
    # without an intercept one class is a valid (if odd) problem
    assert solve_group_logistic(X, np.ones(40), 0.1, labels, rho, fit_intercept=False).converged


# ------------------------------------------------------------------------------------
# The estimator
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_is_the_solver_with_sklearn_conventions(n_classes):
    X, y, Y = make_problem(120, 12, n_classes=n_classes, seed=13)
    names = np.array(["ant", "bee", "cat"])[:n_classes]
    groups = [[0, 1, 2], [3, 4], [6, 7, 8, 9]]  # 5, 10, 11 unpenalized
    est = GroupLassoClassifier(lam=0.05, groups=groups, group_weights="sqrt").fit(X, names[y])
    labels = check_groups(groups, 12)
    rho = resolve_group_weights("sqrt", labels)
    res = solve_group_logistic(X, Y, 0.05, labels, rho)
    k = 1 if n_classes == 2 else n_classes
    np.testing.assert_array_equal(est.classes_, names)
    assert est.coef_.shape == (k, 12) and est.intercept_.shape == (k,)
    np.testing.assert_allclose(est.coef_, res.coef.reshape(12, k).T)
    np.testing.assert_allclose(est.intercept_, np.atleast_1d(res.intercept))
    assert est.n_iter_ == res.n_iter and est.objective_ == pytest.approx(res.objective)
    norms = [np.linalg.norm(est.coef_[:, g]) for g in groups]
    np.testing.assert_allclose(est.group_norms_, norms)
    np.testing.assert_array_equal(est.selected_groups_, np.flatnonzero(norms))
    expected = np.flatnonzero((labels < 0) | np.any(est.coef_ != 0, axis=0))
    np.testing.assert_array_equal(est.selected_features_, expected)
    assert 0 < est.selected_groups_.size < 3
    # probabilities: expit / softmax of the scores, consistent with predict
    scores = est.decision_function(X)
    assert scores.shape == ((120,) if n_classes == 2 else (120, n_classes))
    proba = est.predict_proba(X)
    direct = expit(np.column_stack([-scores, scores])) if n_classes == 2 else softmax(scores, 1)
    np.testing.assert_allclose(proba, direct, rtol=1e-12)
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), proba, rtol=1e-12)
    np.testing.assert_array_equal(est.predict(X), names[np.argmax(proba, axis=1)])
    assert est.score(X, names[y]) > 0.7


def test_classifier_convergence_warning_names_max_iter():
    X, y, _ = make_problem(40, 90, seed=8)
    est = GroupLassoClassifier(lam=1e-3, groups=3, max_iter=3)
    with pytest.warns(ConvergenceWarning, match=r"max_iter \(currently 3\)"):
        est.fit(X, y)
    assert est.n_iter_ == 3 and est.kkt_ > est.tol


@parametrize_with_checks([GroupLassoClassifier(lam=0.01, groups=2, group_weights="sqrt")])
def test_sklearn_compatible_with_groups(estimator, check):
    check(estimator)


def test_step_size_is_not_overly_conservative():
    # p > n at lam = 0.05 lam_max takes a few hundred iterations with L = mu / 4; a
    # regression to a much smaller step (a cruder Lipschitz bound, an uncentered design
    # with the intercept column at scale 1) would multiply it
    X, _, Y = make_problem(40, 90, seed=1)
    X = X * 1e-3 + 5.0  # units of X must not matter
    labels = check_groups(3, 90)
    rho = resolve_group_weights("sqrt", labels)
    lam = 0.05 * lambda_max(X, Y, labels, rho, loss="log_loss")
    res = solve_group_logistic(X, Y, lam, labels, rho)
    assert res.converged and res.n_iter < 2000, res.n_iter


@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("weighted", [False, True])
def test_working_set_routes_need_no_power_iteration(fmt, weighted, monkeypatch):
    # binary problems go to the working-set routes, whose sets scale themselves: the
    # intercept column takes the largest centred column mean square as its scale and no
    # power iteration for mu runs (it was 0.86 s of a 1.16 s 20-lam path with an
    # intercept on 2000 x 500); the answer is the certified one either way
    from sksparse_nn.solvers import _logistic_design

    calls = []
    top = _logistic_design.top_eigenvalue

    def counted(*args, **kwargs):
        calls.append(1)
        return top(*args, **kwargs)

    monkeypatch.setattr(_logistic_design, "top_eigenvalue", counted)
    X, y, _ = make_problem(60, 12, seed=3)
    X = X + 2.0  # off-centre columns: the intercept matters
    if fmt == "csr":
        X = sp.csr_matrix(np.where(np.abs(X - 2.0) > 0.5, X, 0.0))
    s = np.random.default_rng(0).uniform(0.5, 2.0, 60) if weighted else None
    labels, rho = np.arange(12), np.ones(12)
    lam = 0.1 * lambda_max(X, y, labels, rho, loss="log_loss", sample_weight=s)
    res = solve_group_logistic(X, y, lam, labels, rho, tol=1e-10, sample_weight=s)
    assert res.converged and not calls
    design = _logistic_design.LogisticDesign(X, y, True, sample_weight=s)
    assert design.route == ("cd" if fmt == "csr" else "newton")
    # the KKT conditions, written out (weights rescaled to mean 1)
    Xd = X.toarray() if sp.issparse(X) else X
    w = np.ones(60) if s is None else s * 60 / s.sum()
    r = w * (expit(Xd @ res.coef + res.intercept) - y)
    grad, scale = Xd.T @ r / 60, np.abs(Xd.T @ (w * (w @ y / 60 - y)) / 60).max()
    assert abs(r.sum()) / 60 <= 1e-8 * scale  # the intercept's condition
    live = res.coef != 0
    viol = np.where(live, np.abs(grad + lam * np.sign(res.coef)), np.abs(grad) - lam)
    assert viol.max() <= 1e-10 * scale + 1e4 * np.finfo(float).eps * scale


def test_constant_columns_take_the_plain_route():
    # X_c = 0 (every column constant): nothing to fit but the intercept; the plain
    # iterations handle it (their mu is 0)
    from sksparse_nn.solvers._logistic_design import LogisticDesign

    y = np.r_[np.zeros(10), np.ones(30)]
    X = np.full((40, 3), 7.0)
    design = LogisticDesign(X, y, True)
    assert design.degenerate and design.route == "fista"
    res = solve_group_logistic(X, y, 0.01, np.arange(3), np.ones(3))
    assert res.converged and not np.any(res.coef)
    assert res.intercept == pytest.approx(np.log(3.0), rel=1e-9)
