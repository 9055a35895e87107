"""SparseLinearClassifier on wide data (p > n): D=2 block steps on working sets of groups.

The checks are written independently of the package's solvers: for the mean log-loss
``L(W, b)`` (weighted by ``s_i``) and the penalty ``lam sum_g rho_g ||W_g||``, a live group's
KKT residual is ``grad_g + lam rho_g W_g / ||W_g||``, a zero group's ``max(||grad_g|| -
lam rho_g, 0)`` and the intercept's its gradient. The estimator stops when the largest is at
most ``KKT_TOL`` times the largest group norm of the gradient at the null model (zero
coefficients, intercept fitted): the reference solver's rule for its ``tol``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, softmax

from sksparse_nn import SparseLinearClassifier
from sksparse_nn.estimators import linear
from sksparse_nn.exceptions import ConvergenceWarning
from sksparse_nn.solvers import KKT_TOL, solve_group_logistic

pytestmark = pytest.mark.numerics

EPS = np.finfo(np.float64).eps
# the reference's tolerance: tighter than the estimator's KKT_TOL (1e-8)
REF_TOL = 1e-10


def _problem(n, p, k, seed, grouped):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) + 0.5 * rng.normal(size=p)  # columns off zero: centring matters
    W = np.zeros((p, k))
    W[:8] = 2.0 * rng.normal(size=(8, k))
    scores = X @ W + 0.5 * rng.normal(size=(n, k))
    y = (scores[:, 0] > np.median(scores[:, 0])).astype(int) if k == 1 else scores.argmax(1)
    if grouped:  # random unequal groups (sizes 1 to ~7), random weights
        labels = np.unique(rng.integers(0, p // 3, size=p), return_inverse=True)[1]
        rho = rng.uniform(0.5, 2.0, size=labels.max() + 1)
    else:
        labels, rho = np.arange(p), np.ones(p)
    return X, y, labels, rho


def _gnorm(A, labels, n_groups):
    return np.sqrt(np.bincount(labels, weights=(A * A).sum(1), minlength=n_groups))


def _fit_quantities(X, y, classes, coef, intercept, sample_weight):
    """``(G, g0, P, s)``: loss gradient in W (p, K) and b (K,), probabilities, weights."""
    n = len(y)
    s = np.ones(n) if sample_weight is None else sample_weight * n / sample_weight.sum()
    if len(classes) == 2:
        P = expit(X @ coef[0] + intercept[0])[:, None]
        Y = (y == classes[1]).astype(float)[:, None]
    else:
        P = softmax(X @ coef.T + intercept, axis=1)
        Y = (y[:, None] == classes[None, :]).astype(float)
    R = (P - Y) * s[:, None]
    return X.T @ R / n, R.sum(0) / n, P, s, Y


def kkt_residuals(X, y, coef, intercept, classes, labels, rho, lam, fit_intercept,
                  sample_weight=None):  # fmt: skip
    """``(residuals, scale)``: per live/zero group and intercept, and the rule's scale."""
    intercept = np.atleast_1d(intercept)
    G, g0, _, s, Y = _fit_quantities(X, y, classes, coef, intercept, sample_weight)
    W, J = coef.T, rho.size
    wn = _gnorm(W, labels, J)
    D = G.copy()
    live = wn[labels] > 0
    D[live] += (lam * rho[labels] / np.where(live, wn[labels], 1.0))[live, None] * W[live]
    viol = np.where(wn > 0, _gnorm(D, labels, J), np.maximum(_gnorm(G, labels, J) - lam * rho, 0))
    if fit_intercept:
        viol = np.r_[viol, np.linalg.norm(g0)]
        freq = s @ Y / len(y)
    else:
        freq = np.full(Y.shape[1], 0.5 if Y.shape[1] == 1 else 1.0 / Y.shape[1])
    scale = _gnorm(X.T @ ((freq - Y) * s[:, None]) / len(y), labels, J).max()
    return viol, scale


def strong_convexity(X, y, est, support, sample_weight=None):
    """Smallest eigenvalue of the loss's Hessian in (W_S, b) at the estimator's point,
    in the coordinates where a multinomial row sums to zero (the flat direction out)."""
    classes, intercept = est.classes_, np.atleast_1d(est.intercept_)
    _, _, P, s, _ = _fit_quantities(X, y, classes, est.coef_, intercept, sample_weight)
    F = X[:, support]
    if est.fit_intercept:
        F = np.column_stack([F, np.ones(len(y))])
    k = P.shape[1]
    if k == 1:
        C = (P * (1 - P))[:, :, None]
    else:  # Q^T (diag p - p p^T) Q, Q an orthonormal basis of the zero-sum vectors
        Q = np.linalg.qr(np.eye(k) - 1.0 / k)[0][:, : k - 1]
        C = np.einsum("ka,ik,kb->iab", Q, P, Q) - np.einsum("ik,ka,il,lb->iab", P, Q, P, Q)
    H = np.einsum("i,ia,ib,icd->acbd", s, F, F, C) / len(y)
    m = F.shape[1] * C.shape[1]
    return np.linalg.eigvalsh(H.reshape(m, m))[0]


def distance_bound(X, y, est, viol_a, viol_b, rounding, sample_weight=None):
    """How far two points with the estimator's support and KKT residuals ``viol_a``,
    ``viol_b`` can be from each other.

    With fewer coefficients on the support than samples, the objective restricted to it
    is strongly convex with modulus mu (the loss's Hessian at the solution; along the
    segment between two such points it moves by O(|dW| max|x|), ~1e-8 relative: half
    of mu is a safe modulus). Points with subgradients r1, r2 of the restricted
    objective are within (|r1| + |r2|) / (mu / 2) of each other (strong monotonicity).
    """
    live = est.group_norms_ > 0
    mu = strong_convexity(X, y, est, live[est.group_labels_], sample_weight)
    assert mu > 0
    pick = np.r_[live, np.ones(int(est.fit_intercept), dtype=bool)]
    residual = np.linalg.norm(viol_a[pick]) + np.linalg.norm(viol_b[pick]) + 2 * rounding
    return residual / (mu / 2)


CASES = [  # (n, p, n_classes, grouped, fit_intercept, weighted)
    (40, 300, 2, False, False, False),
    (50, 400, 2, True, True, False),
    (40, 250, 2, True, True, True),
    (120, 300, 3, True, True, False),
    (45, 300, 4, False, False, False),
]


@pytest.mark.parametrize("n, p, k, grouped, intercept, weighted", CASES)
def test_wide_D2_meets_the_kkt_conditions_and_matches_the_reference(
    n, p, k, grouped, intercept, weighted
):
    X, y, labels, rho = _problem(n, p, 1 if k == 2 else k, seed=n + p + k, grouped=grouped)
    sw = np.random.default_rng(p).uniform(0.2, 3.0, size=n) if weighted else None
    params = dict(D=2, groups=labels, group_weights=rho, fit_intercept=intercept)
    lam = 0.5 * SparseLinearClassifier(**params).lambda_max(X, y)
    est = SparseLinearClassifier(lam=lam, **params).fit(X, y, sample_weight=sw)
    assert est._runs_block_steps(X) and est._working_sets(X)
    assert est.n_iter_ == 0  # certified by the block steps: no gradient epoch

    viol, scale = kkt_residuals(X, y, est.coef_, est.intercept_, est.classes_, labels, rho,
                                lam, intercept, sw)  # fmt: skip
    # the estimator's rule (KKT_TOL of the scale) plus the rounding of a gradient summed
    # in another order: a few thousand ulps of the scale
    rounding = 1e4 * EPS * scale
    assert viol.max() <= KKT_TOL * scale + rounding
    live = est.group_norms_ > 0
    assert 0 < live.sum() < 0.25 * rho.size  # sparse, non-trivial

    Y = y if k == 2 else np.eye(k)[y]
    ref = solve_group_logistic(X, Y, lam, labels, rho, tol=REF_TOL, max_iter=200_000,
                               fit_intercept=intercept, sample_weight=sw)  # fmt: skip
    assert ref.converged
    ref_coef = ref.coef[None, :] if k == 2 else ref.coef.T
    ref_b = np.atleast_1d(ref.intercept)
    np.testing.assert_array_equal(live, _gnorm(ref_coef.T, labels, rho.size) > 0)
    # same support: the coefficients agree within the strong-convexity radius of the two
    # points' KKT residuals (distance_bound)
    ref_viol, _ = kkt_residuals(X, y, ref_coef, ref_b, est.classes_, labels, rho, lam,
                                intercept, sw)  # fmt: skip
    radius = distance_bound(X, y, est, viol, ref_viol, rounding, sw)
    distance = np.sqrt(np.sum((est.coef_ - ref_coef) ** 2) + np.sum((est.intercept_ - ref_b) ** 2))
    assert distance <= radius
    assert radius < 1e-5 * np.abs(ref_coef).max()  # the check has teeth


SPARSE_CASES = [  # (grouped, fit_intercept, weighted, positive)
    (False, False, False, False),
    (True, True, False, False),
    (True, True, True, False),
    (False, True, False, True),
]


@pytest.mark.parametrize("grouped, intercept, weighted, positive", SPARSE_CASES)
def test_sparse_binary_D2_meets_the_kkt_conditions(grouped, intercept, weighted, positive,
                                                   monkeypatch):  # fmt: skip
    # sparse X, binary: working sets are solved by coordinate descent on their sparse
    # columns (solvers._coordinate_descent), never a dense Hessian; same certificate as dense X
    from sksparse_nn.solvers import _gated_logistic

    calls = []
    solve = _gated_logistic.solve_set_cd
    monkeypatch.setattr(_gated_logistic, "solve_set_cd",
                        lambda *a, **k: calls.append(1) or solve(*a, **k))  # fmt: skip
    n, p = 60, 400
    X, y, labels, rho = _problem(n, p, 1, seed=p + int(grouped), grouped=grouped)
    X[np.abs(X) < 1.2] = 0.0  # ~25% dense, columns still off zero
    Xs = sp.csr_matrix(X)
    sw = np.random.default_rng(1).uniform(0.2, 3.0, size=n) if weighted else None
    params = dict(D=2, groups=labels, group_weights=rho, fit_intercept=intercept,
                  positive=positive)  # fmt: skip
    lam = 0.3 * SparseLinearClassifier(**params).lambda_max(Xs, y)
    with warnings.catch_warnings():  # positive=True trains nothing after uncertified steps
        warnings.simplefilter("error", ConvergenceWarning)  # and warns: must not here
        est = SparseLinearClassifier(lam=lam, **params).fit(Xs, y, sample_weight=sw)
    assert calls and est.n_iter_ == 0  # certified by the coordinate-descent working sets
    viol, scale = kkt_residuals(X, y, est.coef_, est.intercept_, est.classes_, labels, rho,
                                lam, intercept, sw)  # fmt: skip
    tol = KKT_TOL * scale + 1e4 * EPS * scale  # the estimator's rule plus rounding
    if positive:
        assert est.coef_.min() >= 0.0
        # KKT with the sign constraint: a zero coefficient may have any positive gradient
        G = _fit_quantities(X, y, est.classes_, est.coef_, np.atleast_1d(est.intercept_),
                            sw)[0][:, 0]  # fmt: skip
        zero = est.coef_[0] == 0
        assert np.all(G[zero] >= -lam * rho[labels][zero] - tol)
        assert np.all(viol[:-1][~zero] <= tol)  # live: the unconstrained stationarity
        return
    assert viol.max() <= tol
    assert 0 < est.selected_groups_.size < 0.5 * rho.size
    dense = SparseLinearClassifier(lam=lam, **params).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(est.selected_groups_, dense.selected_groups_)


def test_more_than_2000_features_use_the_block_steps():
    # wider than the old limit of the classifier's block steps (2000 features)
    n, p = 60, 2500
    X, y, _, _ = _problem(n, p, 1, seed=11, grouped=False)
    assert p > linear._LOGISTIC_BLOCK_STEPS_MAX_FEATURES
    labels, rho = np.arange(p) // 5, np.ones(p // 5)
    lam = 0.3 * SparseLinearClassifier(D=2, groups=5).lambda_max(X, y)
    est = SparseLinearClassifier(lam=lam, D=2, groups=5).fit(X, y)
    assert est._runs_block_steps(X) and est._n_block_steps > 0
    assert est.n_iter_ == 0  # certified: no L-BFGS epoch
    viol, scale = kkt_residuals(X, y, est.coef_, est.intercept_, est.classes_, labels, rho,
                                lam, True)  # fmt: skip
    assert viol.max() <= KKT_TOL * scale + 1e4 * EPS * scale
    assert 0 < est.selected_groups_.size < 50
    # D > 2 keeps the limit (its steps start dense, on every live group)
    assert not SparseLinearClassifier(lam=lam, D=3)._runs_block_steps(X)


@pytest.mark.parametrize("k", [2, 3])
def test_wide_sparse_input_is_the_same_problem(k):
    n, p = 80, 400
    rng = np.random.default_rng(k)
    X = sp.random(n, p, density=0.1, format="csr", random_state=k)
    X.data = rng.normal(size=X.nnz)
    W = np.zeros((p, k))
    W[:10] = 3.0 * rng.normal(size=(10, k))
    y = (X @ W + 0.3 * rng.normal(size=(n, k))).argmax(1)
    lam = 0.4 * SparseLinearClassifier(D=2).lambda_max(X, y)
    sparse = SparseLinearClassifier(lam=lam, D=2).fit(X, y)
    dense = SparseLinearClassifier(lam=lam, D=2).fit(X.toarray(), y)
    assert sparse.n_iter_ == 0 and dense.n_iter_ == 0
    labels, rho = np.arange(p), np.ones(p)
    Xd = X.toarray()
    for est in (sparse, dense):
        viol, scale = kkt_residuals(Xd, y, est.coef_, est.intercept_, est.classes_, labels,
                                    rho, lam, True)  # fmt: skip
        assert viol.max() <= KKT_TOL * scale + 1e4 * EPS * scale
    np.testing.assert_array_equal(sparse.selected_features_, dense.selected_features_)
    residuals = [kkt_residuals(Xd, y, e.coef_, e.intercept_, e.classes_, labels, rho, lam,
                               True)[0] for e in (sparse, dense)]  # fmt: skip
    radius = distance_bound(Xd, y, dense, *residuals, 1e4 * EPS * scale)
    distance = np.sqrt(
        np.sum((sparse.coef_ - dense.coef_) ** 2)
        + np.sum((sparse.intercept_ - dense.intercept_) ** 2)
    )
    assert distance <= radius


def test_wide_path_points_are_certified():
    X, y, labels, rho = _problem(40, 300, 3, seed=5, grouped=True)
    est = SparseLinearClassifier(D=2, groups=labels, group_weights=rho)
    lams = est.lambda_max(X, y) * np.geomspace(0.05, 0.9, 5)
    path = est.regularization_path(X, y, lams=lams)
    assert path.completed
    for i, lam in enumerate(lams):
        coef, b = path.coefs[i], path.intercepts[i]
        viol, scale = kkt_residuals(X, y, coef, b, np.unique(y), labels, rho, lam, True)
        assert viol.max() <= KKT_TOL * scale + 1e4 * EPS * scale


def test_near_separable_sparse_path_takes_few_newton_steps():
    # Text-like data without intercept, along the estimator's own path order (from 1% of
    # lam_max up, the first point cold from zero): near the dense end full Newton steps
    # overshoot (seen: objective 0.066 -> 0.33) and Böhning's bound alone crawls. With
    # backtracking along the Newton direction the first point takes 38 model steps,
    # without it 137 (later points 6-16 either way): 60 separates them.
    n, p = 300, 1500
    rng = np.random.default_rng(0)
    X = sp.random(n, p, density=0.02, format="csr", random_state=1,
                  data_rvs=lambda k: rng.uniform(0.5, 1.5, size=k))  # fmt: skip
    w = np.zeros(p)
    w[:50] = 3.0 * rng.normal(size=50)
    y = (rng.random(n) < expit(X @ w)).astype(int)
    est = SparseLinearClassifier(D=2, fit_intercept=False, warm_start=True)
    lam_max = est.lambda_max(X, y)
    labels, rho = np.arange(p), np.ones(p)
    for i, lam in enumerate(lam_max * np.geomspace(0.01, 1.0, 8)[:-1]):
        est.set_params(lam=lam).fit(X, y)
        assert est.n_iter_ == 0  # certified
        assert est._n_block_steps <= 60
        viol, scale = kkt_residuals(X.toarray(), y, est.coef_, est.intercept_, est.classes_,
                                    labels, rho, lam, False)  # fmt: skip
        assert viol.max() <= KKT_TOL * scale + 1e4 * EPS * scale
        if i == 0:
            assert est.selected_features_.size > n / 2  # the support comes near n


def test_uncertified_positive_steps_warn(monkeypatch):
    # under positive=True nothing trains after the block steps, so steps that stop short
    # of the KKT tolerance must say so (seen: working sets that also took the zero groups
    # near violating stalled, and the fit returned a zero coefficient with gradient
    # 1.2e-3 beyond -lam, silently, as if certified)
    from sksparse_nn.solvers import _gated_logistic
    from sksparse_nn.solvers._logistic_newton import _NEAR_VIOLATION

    rounds = _gated_logistic.working_set_rounds

    def with_near(*args, **kwargs):
        return rounds(*args, **{**kwargs, "near": _NEAR_VIOLATION})

    monkeypatch.setattr(_gated_logistic, "working_set_rounds", with_near)
    X, y, labels, rho = _problem(60, 400, 1, seed=400, grouped=False)
    X[np.abs(X) < 1.2] = 0.0
    params = dict(D=2, groups=labels, group_weights=rho, positive=True)
    lam = 0.3 * SparseLinearClassifier(**params).lambda_max(sp.csr_matrix(X), y)
    with pytest.warns(ConvergenceWarning, match="before the KKT conditions held"):
        est = SparseLinearClassifier(lam=lam, **params).fit(sp.csr_matrix(X), y)
    G = _fit_quantities(X, y, est.classes_, est.coef_, np.atleast_1d(est.intercept_),
                        None)[0][:, 0]  # fmt: skip
    zero = est.coef_[0] == 0
    assert np.min(G[zero] + lam * rho[labels][zero]) < 0  # indeed not the solution
