"""Sample weights of the logistic group lasso (solve_group_logistic, GroupLassoClassifier).

Convention (scikit-learn's LogisticRegression): the loss is the weighted mean of the
log-losses with the weights rescaled to sum to ``n``, so integer weights repeat rows,
zero weights drop them and a common factor changes nothing.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.linear_model import LogisticRegression

from sksparse_nn.solvers import GroupLassoClassifier, lambda_max, solve_group_logistic

EPS = np.finfo(np.float64).eps


def _problem(n=90, p=12, n_classes=2, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, p)) + rng.uniform(-1, 1, p)
    k = 1 if n_classes == 2 else n_classes
    B = np.zeros((p, k))
    B[:4] = 1.5 * rng.standard_normal((4, k))
    Z = (X - X.mean(0)) @ B
    if n_classes == 2:
        y = (Z[:, 0] + rng.logistic(size=n) > 0).astype(int)
        return X, y, y.astype(float)
    y = np.argmax(Z + rng.gumbel(size=Z.shape), axis=1)
    return X, y, np.eye(n_classes)[y]


def _objective(X, Y, coef, intercept, labels, lam, s=None):
    n = X.shape[0]
    W = coef.reshape(X.shape[1], -1)
    Z = X @ W + intercept
    if W.shape[1] == 1:
        losses = np.logaddexp(0.0, Z[:, 0]) - Y.reshape(-1) * Z[:, 0]
    else:
        losses = np.log(np.exp(Z - Z.max(1, keepdims=True)).sum(1)) + Z.max(1) - (Y * Z).sum(1)
    s = np.ones(n) if s is None else np.asarray(s, float) * n / np.sum(s)
    norms = np.sqrt(np.bincount(labels, weights=(W**2).sum(1)))
    return s @ losses / n + lam * norms.sum()


def _coef_tolerance(X, Y, coef, intercept, s, kkt_abs):
    """Distance to the optimum implied by a KKT residual ``kkt_abs`` per group.

    Near the optimum the objective is ``mu``-strongly convex, ``mu`` the smallest
    eigenvalue of the weighted log-loss Hessian ``[X, 1]^T diag(s p (1 - p)) [X, 1] / n``
    at the solution (binary), so ``||w - w*|| <= sqrt(#groups + 1) kkt_abs / mu``; a factor
    10 covers the change of the Hessian over that (tiny) distance and the intercept's
    rescaled units, plus float64 rounding.
    """
    n, p = X.shape
    s = np.ones(n) if s is None else np.asarray(s, float) * n / np.sum(s)
    P = expit(X @ coef + intercept)
    A = np.column_stack([X, np.ones(n)])
    H = A.T @ (A * (s * P * (1 - P))[:, None]) / n
    mu = float(np.linalg.eigvalsh(H)[0])
    assert mu > 0
    return 10 * np.sqrt(p + 1) * kkt_abs / mu + 1e4 * EPS


def _kkt_scale(X, Y, s, labels):
    """The solver's KKT scale: largest group norm of the gradient at the null model."""
    n = X.shape[0]
    s = np.ones(n) if s is None else np.asarray(s, float) * n / np.sum(s)
    Xc = X - s @ X / n
    R = (Y.reshape(n, -1) - s @ Y.reshape(n, -1) / n) * s[:, None]
    G = Xc.T @ R / n
    return np.sqrt(np.bincount(labels, weights=(G**2).sum(1))).max()


@pytest.mark.parametrize("sparse", [False, True])
def test_integer_weights_equal_repeated_rows(sparse):
    X, y, Y = _problem(seed=1)
    labels = np.repeat(np.arange(4), 3)
    rho = np.ones(4)
    counts = np.random.RandomState(2).randint(0, 4, X.shape[0])
    lam, tol = 0.02, 1e-11
    Xin = sp.csr_matrix(X) if sparse else X
    w = solve_group_logistic(Xin, Y, lam, labels, rho, tol=tol, sample_weight=counts)
    rep = np.repeat(np.arange(X.shape[0]), counts)
    r = solve_group_logistic(X[rep], Y[rep], lam, labels, rho, tol=tol)
    assert w.converged and r.converged
    plain = solve_group_logistic(X, Y, lam, labels, rho, tol=tol)
    assert np.abs(plain.coef - r.coef).max() > 1e-3  # the weights matter
    kkt_abs = max(w.kkt, r.kkt) * _kkt_scale(X[rep], Y[rep], None, labels)
    atol = 2 * _coef_tolerance(X[rep], Y[rep], r.coef, r.intercept, None, kkt_abs)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=atol)
    np.testing.assert_allclose(w.intercept, r.intercept, rtol=0, atol=atol * (1 + np.abs(X).max()))


def test_zero_weight_drops_the_row_and_scale_does_not_matter():
    X, y, Y = _problem(seed=3)
    labels = np.arange(X.shape[1]) // 2
    rho = np.ones(labels.max() + 1)
    s = np.ones(X.shape[0])
    s[[0, 5, 9]] = 0.0
    Yflip = Y.copy()
    Yflip[[0, 5, 9]] = 1.0 - Yflip[[0, 5, 9]]  # what zero-weight rows hold does not matter
    lam, tol = 0.03, 1e-11
    w = solve_group_logistic(X, Yflip, lam, labels, rho, tol=tol, sample_weight=s)
    keep = s > 0
    r = solve_group_logistic(X[keep], Y[keep], lam, labels, rho, tol=tol)
    kkt_abs = max(w.kkt, r.kkt) * _kkt_scale(X[keep], Y[keep], None, labels)
    atol = 2 * _coef_tolerance(X[keep], Y[keep], r.coef, r.intercept, None, kkt_abs)
    np.testing.assert_allclose(w.coef, r.coef, rtol=0, atol=atol)
    assert np.abs(w.coef - solve_group_logistic(X, Yflip, lam, labels, rho).coef).max() > 1e-3
    # weights are rescaled to sum to n: a common factor is the same problem, to rounding
    w7 = solve_group_logistic(X, Yflip, lam, labels, rho, tol=tol, sample_weight=7.0 * s)
    np.testing.assert_allclose(w7.coef, w.coef, rtol=0, atol=atol)


def test_weighted_l1_matches_sklearn_logistic_regression():
    n, p = 120, 10
    X, y, Y = _problem(n, p, seed=4)
    s = np.random.RandomState(5).uniform(0.1, 3.0, n)
    labels = np.arange(p)
    lam = 0.02
    # scikit-learn: sum_i s_i loss_i + ||w||_1 / C; ours: sum_i s'_i loss_i / n + lam ||w||_1
    # with s' = s n / sum(s), i.e. (1 / sum s) sum_i s_i loss_i + lam ||w||_1: C = 1/(lam sum s)
    ref = LogisticRegression(
        C=1.0 / (lam * s.sum()), l1_ratio=1.0, solver="saga", tol=1e-12, max_iter=200000
    ).fit(X, y, sample_weight=s)
    model = GroupLassoClassifier(lam=lam, tol=1e-11).fit(X, y, sample_weight=s)
    ours = _objective(X, Y, model.coef_[0], model.intercept_, labels, lam, s)
    theirs = _objective(X, Y, ref.coef_[0], ref.intercept_, labels, lam, s)
    # both stop near a stationary point; the objective gap is second order in the
    # distance (1e-9 relative still fails for a wrong C or unweighted intercept)
    assert abs(ours - theirs) <= 1e-9 * ours
    assert ours <= theirs * (1 + 1e-12)
    unweighted = GroupLassoClassifier(lam=lam, tol=1e-11).fit(X, y)
    assert _objective(X, Y, unweighted.coef_[0], unweighted.intercept_, labels, lam, s) > (
        ours * (1 + 1e-6)
    )


@pytest.mark.parametrize("n_classes", [2, 3])
def test_dense_and_sparse_agree_with_weights(n_classes):
    """Dense binary problems run proximal Newton steps, sparse ones FISTA: same answer."""
    X, y, Y = _problem(seed=6, n_classes=n_classes)
    X[np.abs(X) < 0.5] = 0.0
    labels = np.arange(X.shape[1]) // 3
    rho = np.ones(4)
    s = np.random.RandomState(7).uniform(0.0, 2.0, X.shape[0])
    kw = dict(tol=1e-11, sample_weight=s)
    d = solve_group_logistic(X, Y, 0.02, labels, rho, **kw)
    q = solve_group_logistic(sp.csc_matrix(X), Y, 0.02, labels, rho, **kw)
    assert d.converged and q.converged
    assert abs(d.objective - q.objective) <= 1e-12 * d.objective
    if n_classes == 2:
        kkt_abs = max(d.kkt, q.kkt) * _kkt_scale(X, Y, s, labels)
        atol = 2 * _coef_tolerance(X, Y, d.coef, d.intercept, s, kkt_abs)
        np.testing.assert_allclose(d.coef, q.coef, rtol=0, atol=atol)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_lambda_max_is_the_threshold(fit_intercept):
    X, y, Y = _problem(seed=8, n_classes=3)
    labels = np.repeat(np.arange(4), 3)
    rho = np.ones(4)
    s = np.random.RandomState(9).uniform(0.1, 2.0, X.shape[0])
    lm = lambda_max(X, Y, labels, rho, fit_intercept, loss="log_loss", sample_weight=s)
    assert lm != lambda_max(X, Y, labels, rho, fit_intercept, loss="log_loss")
    kw = dict(fit_intercept=fit_intercept, sample_weight=s, tol=1e-12)
    # a relative 1e-9 above lam_max is far above the rounding of the gradient norms
    at = solve_group_logistic(X, Y, (1 + 1e-9) * lm, labels, rho, **kw)
    below = solve_group_logistic(X, Y, 0.99 * lm, labels, rho, **kw)
    assert not at.coef.any()
    assert below.coef.any()


def test_one_weighted_class_is_refused():
    X, y, Y = _problem(seed=10)
    with pytest.raises(ValueError, match="class"):
        GroupLassoClassifier(lam=0.01).fit(X, y, sample_weight=(y == 1).astype(float))
    with pytest.raises(ValueError, match="[Nn]egative"):
        GroupLassoClassifier(lam=0.01).fit(X, y, sample_weight=np.r_[-1.0, np.ones(89)])


def test_multinomial_weights_equal_repeated_rows():
    X, y, Y = _problem(seed=11, n_classes=3)
    labels = np.arange(X.shape[1]) // 4
    rho = np.ones(3)
    counts = np.random.RandomState(12).randint(0, 3, X.shape[0])
    lam = 0.02
    w = solve_group_logistic(X, Y, lam, labels, rho, tol=1e-11, sample_weight=counts)
    rep = np.repeat(np.arange(X.shape[0]), counts)
    r = solve_group_logistic(X[rep], Y[rep], lam, labels, rho, tol=1e-11)
    # the same problem: objectives equal to the second order of the KKT residuals
    obj_w = _objective(X, Y, w.coef, w.intercept, labels, lam, counts)
    obj_r = _objective(X[rep], Y[rep], r.coef, r.intercept, labels, lam)
    assert abs(obj_w - obj_r) <= 1e-12 * obj_r
    P = softmax(X @ w.coef + w.intercept, axis=1)
    Pr = softmax(X @ r.coef + r.intercept, axis=1)
    # KKT residuals of 1e-11 (relative) move the coefficients by about 1e-11 / mu (mu the
    # smallest curvature of the loss at the solution); 1e-7 allows mu down to 1e-4, while
    # ignoring the weights moves the probabilities by far more (checked below)
    np.testing.assert_allclose(P, Pr, rtol=0, atol=1e-7)
    u = solve_group_logistic(X, Y, lam, labels, rho, tol=1e-11)
    assert np.abs(softmax(X @ u.coef + u.intercept, axis=1) - Pr).max() > 1e-3
