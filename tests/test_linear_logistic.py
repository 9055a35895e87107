"""SparseLinearClassifier at D=2 is the (group) L1-logistic solution: KKT and peers.

The KKT check here is written independently of the package: for the mean log-loss
``L(W, b)`` and the penalty ``lam sum_g rho_g ||W_g||``, at the solution the intercept's
gradient is 0, every live group has ``grad_g = -lam rho_g W_g / ||W_g||`` and every zero
group ``||grad_g|| <= lam rho_g``. Violations are measured relative to the largest group
norm of the gradient at the zero model (the convention of the package's solvers).
"""

import numpy as np
import pytest
from scipy.special import expit, softmax
from sklearn.linear_model import LogisticRegression

from sksparse_nn import SparseLinearClassifier

pytestmark = pytest.mark.numerics  # re-run with 2 threads by `make test`

# The block steps stop at a relative KKT violation of 1e-8 or where float64 can no longer
# see the objective decrease (a KKT violation e gives an objective gap ~ e^2 / curvature,
# so ~1e-8 relative); L-BFGS then polishes. 1e-6 leaves two orders of margin and still
# fails for the old solver (violations of 0.3 lam and more).
KKT_TOL = 1e-6


def _gradient(X, y, coef, intercept, classes):
    n = len(y)
    if len(classes) == 2:
        p = expit(X @ coef[0] + intercept[0])
        resid = (p - (y == classes[1]))[:, None]
    else:
        P = softmax(X @ coef.T + intercept, axis=1)
        resid = P - (y[:, None] == classes[None, :])
    return X.T @ resid / n, resid.mean(axis=0)  # (p, k), (k,)


def relative_kkt(est, X, y, labels, rho, lam):
    G, g0 = _gradient(X, y, est.coef_, np.atleast_1d(est.intercept_), est.classes_)
    W = est.coef_.T
    n_groups = rho.size
    gnorm = lambda A: np.sqrt(np.bincount(labels, weights=(A**2).sum(1), minlength=n_groups))  # noqa: E731
    wn = gnorm(W)
    D = G.copy()
    live_rows = wn[labels] > 0
    D[live_rows] += (lam * rho[labels] / np.where(wn[labels] > 0, wn[labels], 1))[
        live_rows, None
    ] * W[live_rows]
    viol = np.where(wn > 0, gnorm(D), np.maximum(gnorm(G) - lam * rho, 0.0))
    if est.fit_intercept:
        viol = np.r_[viol, np.abs(g0)]
    # scale: gradient group norms at the zero model with the intercept fitted
    zero = SparseLinearClassifier(lam=np.inf)
    zero.classes_ = est.classes_
    freq = np.array([(y == c).mean() for c in est.classes_])
    if len(est.classes_) == 2:
        resid0 = (freq[1] - (y == est.classes_[1]))[:, None]
    else:
        resid0 = freq[None, :] - (y[:, None] == est.classes_[None, :])
    scale = gnorm(X.T @ resid0 / len(y)).max()
    return viol.max() / scale


def _problem(n, p, k, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    W = rng.normal(size=(p, k)) * (rng.random(p) < 0.3)[:, None]
    scores = X @ W + 0.3 * rng.normal(size=(n, k))
    y = (scores[:, 0] > 0).astype(int) if k == 1 else scores.argmax(axis=1)
    return X, y


CASES = [  # (n, p, classes, grouped, intercept)
    (30, 60, 2, False, False),
    (80, 20, 2, False, True),
    (60, 40, 2, True, True),
    (100, 15, 3, False, True),
    (50, 30, 4, True, True),
]


@pytest.mark.parametrize("n, p, k, grouped, intercept", CASES)
@pytest.mark.parametrize("ratio", [0.05, 0.3])
def test_D2_classifier_satisfies_the_kkt_conditions(n, p, k, grouped, intercept, ratio):
    X, y = _problem(n, p, 1 if k == 2 else k, seed=n + p)
    rng = np.random.default_rng(p)
    if grouped:
        labels = rng.integers(0, p // 3, size=p)  # random unequal groups
        labels = np.unique(labels, return_inverse=True)[1]
        rho = rng.uniform(0.5, 2.0, size=labels.max() + 1)
    else:
        labels, rho = np.arange(p), np.ones(p)
    probe = SparseLinearClassifier(lam=1.0, D=2, groups=labels, group_weights=rho,
                                   fit_intercept=intercept)  # fmt: skip
    lam_max = probe.lambda_max(X, y)
    lam = ratio * lam_max
    est = SparseLinearClassifier(lam=lam, D=2, groups=labels, group_weights=rho,
                                 fit_intercept=intercept, random_state=0).fit(X, y)  # fmt: skip
    assert 0 < est.selected_groups_.size < rho.size or ratio < 0.1
    assert relative_kkt(est, X, y, labels, rho, lam) <= KKT_TOL


def test_matches_l1_logistic_regression_of_scikit_learn():
    # the reproducer of the issue: p > n, separable, no intercept
    rng = np.random.RandomState(0)
    w = rng.randn(60)
    X = rng.randn(30, 60)
    y = np.sign(X @ w)
    n = 30
    lam = np.abs(X.T @ y).max() / 2 / 20 / n
    est = SparseLinearClassifier(lam=lam, D=2, fit_intercept=False, random_state=0).fit(X, y)
    ref = LogisticRegression(C=1 / (n * lam), l1_ratio=1.0, solver="liblinear",
                             fit_intercept=False, tol=1e-12, max_iter=100000).fit(X, y)  # fmt: skip
    s = np.where(y > 0, 1.0, -1.0)

    def objective(coef):
        return np.mean(np.logaddexp(0.0, -s * (X @ coef))) + lam * np.abs(coef).sum()

    # both at KKT to ~1e-9: objectives agree to ~(1e-9)^2 relative, far below 1e-10
    assert objective(est.coef_[0]) <= objective(ref.coef_[0]) * (1 + 1e-10)
    np.testing.assert_array_equal(est.selected_features_, np.flatnonzero(ref.coef_[0]))


@pytest.mark.parametrize("k", [1, 3])
def test_D2_classifier_equals_the_proximal_group_logistic_solver(k):
    from sksparse_nn import GroupLassoClassifier

    X, y = _problem(90, 24, k, seed=7)
    labels = np.arange(24) // 3
    lam = 0.2 * SparseLinearClassifier(lam=1.0, D=2, groups=labels).lambda_max(X, y)
    ref = GroupLassoClassifier(lam=lam, groups=labels, tol=1e-11, max_iter=10**6).fit(X, y)
    est = SparseLinearClassifier(lam=lam, D=2, groups=labels, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_groups_, ref.selected_groups_)
    # both at relative KKT <= 1e-8 (seen: 0.95e-8 for k=1): coefficients (a feature's row
    # sums to zero across classes for both) and probabilities agree to sqrt(#live) 1e-8
    # scale / (mu / 2), mu >= 0.04 the loss's curvature on the support: <= 5e-7 of the
    # largest coefficient here, allowed 1e-6
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6 * np.abs(ref.coef_).max())
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)
