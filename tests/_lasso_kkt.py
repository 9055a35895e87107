"""Two Lasso points compared through their own KKT residuals (scikit-learn's problem).

Neither our stopping rule (a relative KKT violation of ``KKT_TOL``) nor scikit-learn's
(a duality gap) fixes the coefficients to a set precision, so a fixed tolerance between
the two is either loose or tighter than the certificates guarantee. Here: on the union
``U`` of the two supports the objective is ``mu``-strongly convex (``mu`` the smallest
eigenvalue of ``X_c[:, U]^T X_c[:, U] / n``); points whose subgradients there are
``r_a``, ``r_b`` lie within ``(|r_a| + |r_b|) / mu`` of each other (strong
monotonicity), plus the rounding of recomputing the gradient (``1e4`` ulps of the scale
per feature: products of a few hundred terms).
"""

import numpy as np

EPS = np.finfo(np.float64).eps
#: Rounding of one recomputed gradient entry, in units of the KKT scale.
ROUNDING = 1e4 * EPS


def lasso_residuals(X, y, coef, lam, fit_intercept=True, positive=False, sample_weight=None):
    """``(r, X_c, x_mean, scale)``: per feature, the distance of 0 to the subdifferential
    of scikit-learn's (weighted, non-negative) Lasso objective at ``coef`` (weights
    rescaled to sum to n, the intercept profiled out), the centred row-scaled design, its
    column means and the KKT scale (lambda_max)."""
    n = len(y)
    s = np.ones(n) if sample_weight is None else sample_weight * n / sample_weight.sum()
    m = s @ X / n if fit_intercept else np.zeros(X.shape[1])
    ybar = s @ y / n if fit_intercept else 0.0
    root = np.sqrt(s)
    Xc, yc = (X - m) * root[:, None], (y - ybar) * root
    g = Xc.T @ (Xc @ coef - yc) / n
    # a zero coefficient: g + lam [-1, 1], or g + (-inf, lam] under w >= 0
    zero = np.maximum(-(g + lam), 0.0) if positive else np.maximum(np.abs(g) - lam, 0.0)
    r = np.where(coef != 0, g + lam * np.sign(coef), zero)
    return r, Xc, m, np.abs(Xc.T @ yc).max() / n


def distance_bound(X, y, coef_a, coef_b, lam, fit_intercept=True, positive=False,
                   sample_weight=None):  # fmt: skip
    """How far the points ``coef_a`` and ``coef_b`` can be from each other (see the
    module docstring); returns the bound and the column means on ``U`` (an intercept
    ``ybar - x_mean . w`` moves by at most ``|x_mean|`` times the bound)."""
    args = (lam, fit_intercept, positive, sample_weight)
    r_a, Xc, m, scale = lasso_residuals(X, y, coef_a, *args)
    r_b = lasso_residuals(X, y, coef_b, *args)[0]
    U = (coef_a != 0) | (coef_b != 0)
    mu = np.linalg.eigvalsh(Xc[:, U].T @ Xc[:, U] / len(y))[0]
    assert mu > 0
    rounding = 2 * np.sqrt(U.sum()) * ROUNDING * scale
    return (np.linalg.norm(r_a[U]) + np.linalg.norm(r_b[U]) + rounding) / mu, m[U]


def assert_same_lasso_point(X, y, ours, ref, lam, fit_intercept=True, positive=False,
                            sample_weight=None, kkt_tol=None):  # fmt: skip
    """``ours`` (a fitted estimator) certified under scikit-learn's definition of the
    problem (``kkt_tol`` of the scale plus the rounding of another gradient, when
    given), and at scikit-learn's point ``ref`` within :func:`distance_bound`, the
    intercepts within ``|x_mean|`` times it plus their rounding."""
    args = (lam, fit_intercept, positive, sample_weight)
    if kkt_tol is not None:
        r, _, _, scale = lasso_residuals(X, y, ours.coef_, *args)
        assert np.abs(r).max() <= (kkt_tol + ROUNDING) * scale
    radius, x_mean = distance_bound(X, y, ours.coef_, ref.coef_, *args)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=0, atol=radius)
    atol = radius * np.linalg.norm(x_mean) + ROUNDING * (1 + np.abs(ref.intercept_))
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=0, atol=atol)
    return radius
