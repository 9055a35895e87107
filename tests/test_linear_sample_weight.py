"""Sample weights of the linear models: scikit-learn's Lasso convention (weights rescaled to
sum to n_samples), so integer weights repeat rows and zero weights drop them.

Tolerances: the D=2 block steps stop at a relative KKT violation of ``KKT_TOL`` = 1e-8 (of
lambda_max); on these well-conditioned designs (smallest eigenvalue of the Gram matrix on
the support above 0.1) that bounds coefficient errors below the 1e-6 used between two of
our fits, and against scikit-learn's the two points' own KKT residuals bound their
distance (``tests/_lasso_kkt.py``). D=3 fits are compared with each other (same start,
same objective) at 1e-5: L-BFGS stops on a relative objective change of ``tol`` = 1e-12,
i.e. coefficients to about sqrt(1e-12) relative.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _lasso_kkt import assert_same_lasso_point
from sklearn.linear_model import Lasso

from sksparse_nn import SparseLinearClassifier, SparseLinearRegressor
from sksparse_nn.solvers import KKT_TOL


def _data(n=60, p=8, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    y = 2 * X[:, 0] - X[:, 1] + 0.3 * rng.randn(n)
    weights = rng.randint(0, 4, n).astype(float)
    return X, y, weights


@pytest.mark.numerics
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("shape", [(60, 8), (40, 300)], ids=["tall", "wide"])
def test_weighted_d2_equals_weighted_lasso(sparse, fit_intercept, shape):
    X, y, weights = _data(*shape)
    weights += 0.5 * np.random.RandomState(1).rand(len(y))  # not only integers
    Xin = sp.csr_matrix(X) if sparse else X
    ours = SparseLinearRegressor(lam=0.1, D=2, fit_intercept=fit_intercept)
    ours.fit(Xin, y, sample_weight=weights)
    ref = Lasso(alpha=0.1, fit_intercept=fit_intercept, tol=1e-14, max_iter=100_000)
    ref.fit(X, y, sample_weight=weights)
    # our certificate under scikit-learn's weighting convention, and scikit-learn's point
    # within the distance the two points' own KKT residuals allow (a fixed 1e-6 was
    # tighter than the certificate alone guarantees on the wide design)
    assert_same_lasso_point(
        X, y, ours, ref, 0.1, fit_intercept, sample_weight=weights, kkt_tol=KKT_TOL
    )
    # and it is a different model from the unweighted one
    plain = SparseLinearRegressor(lam=0.1, D=2, fit_intercept=fit_intercept).fit(Xin, y)
    assert np.abs(plain.coef_ - ours.coef_).max() > 1e-3


@pytest.mark.numerics
@pytest.mark.parametrize(
    "make, n_classes",
    [
        (lambda: SparseLinearRegressor(lam=0.1, D=2), None),
        (lambda: SparseLinearRegressor(lam=0.1, D=3), None),
        (lambda: SparseLinearClassifier(lam=0.02, D=2), 2),
        (lambda: SparseLinearClassifier(lam=0.02, D=3), 2),
        (lambda: SparseLinearClassifier(lam=0.02, D=2), 3),
        (lambda: SparseLinearClassifier(lam=0.02, D=3), 3),
    ],
    ids=["reg-D2", "reg-D3", "binary-D2", "binary-D3", "multinomial-D2", "multinomial-D3"],
)
def test_integer_weights_repeat_rows_and_zero_weights_drop_them(make, n_classes):
    X, y, weights = _data()  # weights 0..3: zeros drop rows, others repeat them
    if n_classes is not None:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    copies = weights.astype(int)
    given = weights.copy()
    weighted = make().fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(weights, given)  # the user's array is not modified
    repeated = make().fit(np.repeat(X, copies, axis=0), np.repeat(y, copies))
    atol = 1e-6 if make().D == 2 else 1e-5
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, atol=atol)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, atol=atol)
    # at a (local) minimum the objective is second order in the coefficients' error
    # (<= 1e-5 above): ~1e-10 relative, so 1e-9 holds with margin
    np.testing.assert_allclose(weighted.objective_, repeated.objective_, rtol=1e-9)


def test_minibatch_training_uses_the_weights():
    # half the rows carry a contradicting relation; weighting them out recovers the rest
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    y = X[:, 0].copy()
    y[100:] = -X[100:, 0]
    weights = np.r_[np.ones(100), np.zeros(100)]
    kwargs = dict(lam=1e-3, D=3, optimizer="adam", lr=0.02, batch_size=32, max_epochs=60)
    est = SparseLinearRegressor(**kwargs, random_state=0).fit(X, y, sample_weight=weights)
    assert abs(est.coef_[0] - 1.0) < 0.05  # the unweighted fit would give about 0
    plain = SparseLinearRegressor(**kwargs, random_state=0).fit(X, y)
    assert abs(plain.coef_[0]) < 0.2


@pytest.mark.parametrize(
    "weights, match",
    [
        (-np.ones(60), "(?i)negative"),
        (np.zeros(60), "non-zero"),
        (np.ones(59), "sample_weight"),
        (np.r_[np.nan, np.ones(59)], "NaN"),
    ],
)
@pytest.mark.parametrize("Est", [SparseLinearRegressor, SparseLinearClassifier])
def test_bad_sample_weights_are_named(weights, match, Est):
    X, y, _ = _data()
    if Est is SparseLinearClassifier:
        y = (y > 0).astype(int)
    with pytest.raises(ValueError, match=match):
        Est(lam=0.1).fit(X, y, sample_weight=weights)
