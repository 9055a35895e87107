"""SparseLinearRegressor / SparseLinearClassifier against the exact group lasso and KKT."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import StandardScaler

from sksparse_nn import GroupLassoRegressor, SparseLinearClassifier, SparseLinearRegressor
from sksparse_nn.datasets import make_group_regression, make_sparse_classification


@pytest.fixture(scope="module")
def group_data():
    return make_group_regression(n_samples=120, n_test=10, n_groups=20, random_state=0)


def _group_norms(coef, labels):
    return np.sqrt(np.bincount(labels, weights=coef**2))


def _objective(X, y, coef, intercept, lam, labels, D):
    resid = y - X @ coef - intercept
    return 0.5 * np.mean(resid**2) + lam * np.sum(_group_norms(coef, labels) ** (2.0 / D))


@pytest.mark.numerics
@pytest.mark.parametrize("lam_ratio", [0.05, 0.2, 0.5])
def test_D2_matches_the_proximal_group_lasso(group_data, lam_ratio):
    X, y, labels = group_data.X, group_data.y, group_data.groups
    lam_max = SparseLinearRegressor(D=2, groups=labels).lambda_max(X, y)
    lam = lam_ratio * lam_max
    ref = GroupLassoRegressor(lam=lam, groups=labels, tol=1e-10, max_iter=100000).fit(X, y)
    est = SparseLinearRegressor(lam=lam, D=2, groups=labels, random_state=0).fit(X, y)

    ref_obj = _objective(X, y, ref.coef_, ref.intercept_, lam, labels, 2)
    # ref is certified to relative KKT 1e-10 and est's block steps to 1e-8 (L-BFGS then
    # only lowers the objective, or stops on a relative decrease of tol=1e-12): a KKT
    # violation e is an objective gap <= p e^2 / mu, ~1e-13 relative here, like the float64
    # rounding of the two evaluations. est cannot beat the optimum beyond that; 1e-9 above
    # it still allows for the objective-decrease stop.
    assert est.objective_ >= ref_obj * (1 - 1e-11)
    assert est.objective_ <= ref_obj * (1 + 1e-9)
    # the same objective evaluated twice in float64 (torch vs numpy sums over p=100
    # features): ~2 p eps64 |Xw| / |resid| ~ 1e-13 relative
    np.testing.assert_allclose(
        est.objective_, _objective(X, y, est.coef_, est.intercept_, lam, labels, 2), rtol=1e-11
    )
    # same support wherever the proximal solution has a clear KKT margin (5% of lam, or a
    # group norm 1e-3, far beyond both solvers' certified accuracy of ~1e-7)
    resid = y - ref.predict(X)
    corr = np.sqrt(np.bincount(labels, weights=(X.T @ resid / len(y)) ** 2))
    ref_norms = _group_norms(ref.coef_, labels)
    clear_zero = (ref_norms == 0) & (corr < 0.95 * lam)
    clear_live = ref_norms > 1e-3
    est_norms = est.group_norms_
    assert np.all(est_norms[clear_zero] == 0)  # exact zeros
    assert np.all(est_norms[clear_live] > 0)
    assert clear_zero.sum() + clear_live.sum() >= 0.8 * len(ref_norms)


@pytest.mark.numerics
@pytest.mark.parametrize("n_features", [30, 300], ids=["tall", "wide"])
def test_certified_D2_fit_needs_no_gradient_epoch(n_features):
    # the block steps stop at a relative KKT violation of KKT_TOL = 1e-8 (of lambda_max),
    # which certifies the solution; no gradient epoch follows. Checked here with the KKT
    # conditions written out (1e-7 of the scale: ten times the certificate, which bounds
    # every group's violation, far above float64 rounding)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, n_features))
    y = X[:, :4] @ np.array([2.0, -1.0, 1.5, 0.5]) + 0.3 * rng.normal(size=60)
    labels = np.arange(n_features) // 3
    lam = 0.1 * SparseLinearRegressor(D=2, groups=labels).lambda_max(X, y)
    est = SparseLinearRegressor(lam=lam, D=2, groups=labels).fit(X, y)
    assert est.n_iter_ == 0
    Xc, yc = X - X.mean(0), y - y.mean()
    grad = Xc.T @ (Xc @ est.coef_ - yc) / len(y)
    scale = _group_norms(Xc.T @ yc / len(y), labels).max()
    norms = _group_norms(est.coef_, labels)
    for g in range(labels.max() + 1):
        block, w = grad[labels == g], est.coef_[labels == g]
        if norms[g] > 0:
            np.testing.assert_allclose(block + lam * w / norms[g], 0.0, atol=1e-7 * scale)
        else:
            assert np.linalg.norm(block) <= lam + 1e-7 * scale


@pytest.fixture
def dgate_calls(monkeypatch):
    """How many tensors the linear estimators D-gate."""
    from sksparse_nn.estimators import linear

    calls = []
    gate = linear.dgate

    def spy(*args, **kwargs):
        calls.append(kwargs.get("D"))
        return gate(*args, **kwargs)

    monkeypatch.setattr(linear, "dgate", spy)
    return calls


@pytest.mark.parametrize("estimator", [SparseLinearRegressor, SparseLinearClassifier])
def test_a_certified_fit_is_its_plain_solution(group_data, dgate_calls, estimator):
    # a fit its block steps certify never trains: its weight is written as it is (no
    # gating, balancing and collapse round trip), with the family's zero_tol applied
    X, labels = group_data.X, group_data.groups
    y = group_data.y if estimator is SparseLinearRegressor else group_data.y > 0
    lam = 0.1 * estimator(D=2, groups=labels).lambda_max(X, y)
    est = estimator(lam=lam, D=2, groups=labels).fit(X, y)
    assert est.n_iter_ == 0 and dgate_calls == []
    coef = np.ravel(est.coef_)
    norms = _group_norms(coef, labels)
    # the same norms, summed in another order: a few float64 eps
    np.testing.assert_allclose(est.group_norms_, norms, rtol=1e-14)
    assert np.all(est.group_norms_[norms == 0] == 0)
    assert 0 < est.selected_groups_.size < 20
    # a zero_tol between two live groups' norms removes the smaller ones, exactly, and
    # the gap reports the largest removed and the smallest kept norm
    live = np.sort(norms[norms > 0])
    cut = np.sqrt(live[0] * live[1])
    big = est.set_params(zero_tol=cut / est._weight_scale(X, y)).fit(X, y)
    big_norms = _group_norms(np.ravel(big.coef_), labels)
    np.testing.assert_array_equal(big_norms == 0, norms < cut)
    np.testing.assert_allclose(big_norms, np.where(norms >= cut, norms, 0.0), rtol=1e-14)
    np.testing.assert_allclose(big.sparsity_gap_, live[:2], rtol=1e-14)


def test_an_uncertified_D2_fit_trains_through_its_gates(group_data, dgate_calls, monkeypatch):
    # when the block steps cannot certify the solution (here: a tolerance of 0), the
    # module is gated after them and L-BFGS finishes from their point: the same solution
    from sksparse_nn.solvers import _gated_fits

    X, y, labels = group_data.X, group_data.y, group_data.groups
    lam = 0.1 * SparseLinearRegressor(D=2, groups=labels).lambda_max(X, y)
    certified = SparseLinearRegressor(lam=lam, D=2, groups=labels).fit(X, y)
    monkeypatch.setattr(_gated_fits, "KKT_TOL", 0.0)
    est = SparseLinearRegressor(lam=lam, D=2, groups=labels).fit(X, y)
    assert dgate_calls == [2] and est.n_iter_ >= 1
    # both start from the block steps' point (relative KKT <= 1e-8 before L-BFGS), which
    # L-BFGS only improves: coefficients within the certificate's accuracy of each other
    scale = np.abs(certified.coef_).max()
    np.testing.assert_allclose(est.coef_, certified.coef_, atol=1e-6 * scale)
    np.testing.assert_array_equal(est.selected_groups_, certified.selected_groups_)


@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize("task", ["regression", "binary", "binary, no intercept", "3 classes"])
def test_a_lam_where_zero_is_the_global_minimum_gives_it_at_once(D, task):
    # from a ridge start a lam of 1e40 overflowed into NaN (TrainingDivergedError); zero
    # coefficients are provably optimal there (D = 2: lam >= lambda_max; D > 2: the
    # penalty outgrows the most the convex data term can gain), and are certified
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 6))
    score = X[:, 0] - X[:, 1]
    if task == "regression":
        est, y = SparseLinearRegressor(D=D), 3.0 + score + 0.1 * rng.normal(size=80)
    else:
        y = (score > 0.3).astype(int) if task.startswith("binary") else np.arange(80) % 3
        est = SparseLinearClassifier(D=D, fit_intercept=task != "binary, no intercept")
    for lam in (1e6, 1e40):
        est.set_params(lam=lam).fit(X, y)
        assert est.n_iter_ == 0 and est.selected_features_.size == 0
        assert np.all(est.coef_ == 0)
        if task == "regression":  # the intercept-only model: the mean
            np.testing.assert_allclose(est.intercept_, y.mean(), rtol=1e-12)
        elif est.fit_intercept:  # ... the class frequencies (to the solver's KKT tolerance)
            freq = np.bincount(y) / len(y)
            np.testing.assert_allclose(est.predict_proba(X)[0], freq, atol=1e-6)


@pytest.mark.numerics
@pytest.mark.parametrize("D", [2, 3, 4])
def test_dropped_groups_are_exact_zeros_with_a_gap(group_data, D):
    X, y, labels = group_data.X, group_data.y, group_data.groups
    est = SparseLinearRegressor(lam=0.3, D=D, groups=labels, random_state=0).fit(X, y)
    largest_dropped, smallest_live = est.sparsity_gap_
    # before thresholding: dropped groups end 3 orders below zero_tol (1.2e-7 * scale of
    # the coefficients, ~1 here), so the threshold only removes dust; live ones far above
    assert largest_dropped < 1e-10
    assert smallest_live > 1e-3
    assert 0 < est.selected_groups_.size < 20
    coef_groups = est.coef_.reshape(20, 5)
    dropped = np.setdiff1d(np.arange(20), est.selected_groups_)
    assert np.all(coef_groups[dropped] == 0)
    # |w| of a single output is sqrt(w * w), exact in IEEE arithmetic: no tolerance
    np.testing.assert_array_equal(est.feature_importances_, np.abs(est.coef_))
    np.testing.assert_array_equal(est.selected_features_, np.flatnonzero(est.coef_))


def test_deeper_gating_is_sparser_and_finds_the_true_groups():
    data = make_group_regression(n_samples=200, n_test=10, random_state=1)
    lam = 0.3
    sizes = {
        D: SparseLinearRegressor(lam=lam, D=D, groups=5, random_state=0)
        .fit(data.X, data.y)
        .selected_groups_
        for D in (2, 3, 4)
    }
    assert sizes[2].size > sizes[3].size >= sizes[4].size
    np.testing.assert_array_equal(sizes[4], data.informative_groups)


def test_unpenalized_features_survive_any_lam(group_data):
    X, y = group_data.X, group_data.y
    labels = group_data.groups.copy()
    labels[:5] = -1  # first five features in no group
    est = SparseLinearRegressor(lam=1e3, D=3, groups=labels, random_state=0).fit(X, y)
    assert np.all(est.coef_[:5] != 0)
    assert np.all(est.coef_[5:] == 0)
    assert est.group_labels_.tolist()[:5] == [-1] * 5


@pytest.mark.parametrize(
    "groups, message",
    [
        ([[0, 1], [1, 2]], "appears in groups|overlap"),
        ([[0, 99]], "out of range|range"),
        (np.zeros(3), "length|shape"),
    ],
)
def test_bad_groups_raise(groups, message):
    X, y = np.random.default_rng(0).normal(size=(20, 6)), np.arange(20.0)
    with pytest.raises(ValueError, match=message):
        SparseLinearRegressor(groups=groups).fit(X, y)


@pytest.mark.numerics
def test_lam_max_zeroes_everything_at_D2(group_data):
    X, y, labels = group_data.X, group_data.y, group_data.groups
    est = SparseLinearRegressor(D=2, groups=labels, random_state=0)
    lam_max = est.lambda_max(X, y)
    # a 1% KKT margin on either side, far beyond the certified relative KKT 1e-8
    assert est.set_params(lam=1.01 * lam_max).fit(X, y).selected_groups_.size == 0
    assert est.set_params(lam=0.9 * lam_max).fit(X, y).selected_groups_.size > 0


def _logistic_kkt_violation(est, X, y, lam):
    """Distance of the mean log-loss gradient to -lam * subdifferential of sum_j ||w_j||."""
    proba = est.predict_proba(X)
    onehot = (y[:, None] == est.classes_[None, :]).astype(float)
    if len(est.classes_) == 2:
        grad = X.T @ (proba[:, 1] - onehot[:, 1])[:, None] / len(y)  # (p, 1)
    else:
        grad = X.T @ (proba - onehot) / len(y)  # (p, K)
    W = est.coef_.T  # (p, K) or (p, 1)
    worst = 0.0
    for j in range(X.shape[1]):
        norm = np.linalg.norm(W[j])
        if norm == 0:
            worst = max(worst, np.linalg.norm(grad[j]) - lam)
        else:
            worst = max(worst, np.linalg.norm(grad[j] + lam * W[j] / norm))
    return worst


@pytest.mark.numerics
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_satisfies_group_lasso_kkt_at_D2(n_classes):
    X, y = make_sparse_classification(
        n_samples=200, n_features=12, n_informative=3, n_classes=n_classes, random_state=0
    )
    X = StandardScaler().fit_transform(X)
    lam = 0.02
    est = SparseLinearClassifier(lam=lam, D=2, random_state=0).fit(X, y)
    assert 0 < est.selected_features_.size < 12
    # The block steps stop at a relative KKT violation of 1e-8 (scale: the gradient at
    # zero, <= 1 on standardized X); an L-BFGS polish stopped on a relative decrease
    # tol = 1e-12 leaves a gradient ~sqrt(2 L tol f) <= 1e-6 (L <= 0.7, f <= 0.6), divided
    # by sqrt(||w_j||) >= 0.18 for the gated factors: ~5e-6 absolute. 1e-3 lam = 2e-5.
    assert _logistic_kkt_violation(est, X, y, lam) < 1e-3 * lam
    # a perturbed solution violates them: the check can fail
    est.coef_ = est.coef_ * 1.05
    est.module_.weight.data.mul_(1.05)
    assert _logistic_kkt_violation(est, X, y, lam) > 1e-2 * lam


def test_classifier_string_labels_probabilities_and_shapes():
    X, y = make_sparse_classification(n_samples=150, n_features=8, n_classes=3, random_state=1)
    names = np.array(["cat", "dog", "eel"])[y]
    est = SparseLinearClassifier(lam=0.01, D=3, random_state=0).fit(X, names)
    np.testing.assert_array_equal(est.classes_, ["cat", "dog", "eel"])
    proba = est.predict_proba(X)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)  # float64 softmax
    assert set(est.predict(X)) <= set(est.classes_)
    assert est.coef_.shape == (3, 8) and est.intercept_.shape == (3,)
    assert est.score(X, names) > 0.6


@pytest.mark.numerics
def test_sparse_input_matches_dense(group_data):
    X = group_data.X.copy()
    X[np.abs(X) < 1.0] = 0.0
    y = group_data.y
    dense = SparseLinearRegressor(lam=0.2, D=3, groups=5, random_state=3).fit(X, y)
    sparse = SparseLinearRegressor(lam=0.2, D=3, groups=5, random_state=3).fit(sp.csr_matrix(X), y)
    # Sparse and dense Gram matrices round differently, so the two fits take different
    # paths. Each stops when an iteration lowers the objective by < tol = 1e-12 (relative),
    # a gap of ~tol * f (f = 5.6); the objective's smallest curvature on the support is
    # mu ~ 0.1 (data + D=3 penalty Hessian), so each is within sqrt(2 tol f / mu) ~ 1e-5
    # of the local minimum in ||w||_2: 5e-5 for both (coefficients are ~1).
    np.testing.assert_array_equal(sparse.selected_groups_, dense.selected_groups_)
    coef_atol = 5e-5
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=coef_atol)
    # |(x_i - mean x) . dw| <= ||x_i - mean x|| ||dw||, plus the intercept's own error
    # (curvature 1: sqrt(2 tol f) ~ 3e-6)
    pred_atol = coef_atol * (np.linalg.norm(X - X.mean(axis=0), axis=1).max() + 1)
    np.testing.assert_allclose(
        sparse.predict(sp.csr_matrix(X)), dense.predict(X), rtol=0, atol=pred_atol
    )


@pytest.mark.numerics
def test_regularization_path_runs_dense_to_sparse(group_data):
    X, y, labels = group_data.X, group_data.y, group_data.groups
    est = SparseLinearRegressor(D=3, groups=labels, random_state=0)
    path = est.regularization_path(X, y, n_lams=8, X_val=X[:40], y_val=y[:40])
    assert not hasattr(est, "coef_")  # the estimator itself is not fitted
    assert np.all(np.diff(path.lams) > 0)
    n_lams = len(path)  # the default grid grows upward until nothing is selected
    # a geometric grid: equal log-steps to float64 rounding of log (~1e-15 absolute)
    assert n_lams >= 8 and np.allclose(
        np.diff(np.log(path.lams)), np.log(path.lams[1] / path.lams[0]), rtol=0, atol=1e-12
    )
    assert path.group_norms.shape == (n_lams, 20)
    assert path.coefs.shape == (n_lams, 100)
    assert path.n_selected[0] > 50
    assert path.n_selected[-1] == 0 and path.n_selected[-2] > 0
    # warm-started path points are genuine fits: each satisfies its own objective (the
    # same value evaluated twice in float64: ~1e-13 relative)
    for k in (0, 4):
        obj = _objective(X, y, path.coefs[k], path.intercepts[k], path.lams[k], labels, 3)
        np.testing.assert_allclose(path.train_objective[k], obj, rtol=1e-10)
    frame = path.to_frame()
    assert list(frame.columns[:4]) == ["lam", "n_selected", "train_objective", "train_score"]
    assert "val_score" in frame
    ax = path.plot()
    assert ax.get_xscale() == "log" and len(ax.get_lines()) == 20 + 1  # groups + zero line
    ax = path.plot(kind="score")
    train, val = ax.get_lines()
    np.testing.assert_array_equal(train.get_ydata(), path.train_score)
    np.testing.assert_array_equal(val.get_ydata(), path.val_score)


def test_penalty_groups_are_one_read_only_copy_while_the_specification_holds():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6))
    y = X[:, 0] - X[:, 2] + 0.1 * rng.normal(size=60)
    labels = np.array([0, 0, 1, 1, 2, -1])
    est = SparseLinearRegressor(lam=0.05, D=2, groups=labels).fit(X, y)
    first = est.group_labels_
    assert not first.flags.writeable and labels.flags.writeable  # the user's array as given
    est.fit(X, y)
    assert est.group_labels_ is first  # a refit: the same array, not a new copy
    labels[5] = 2  # the user's array changed in place: new labels
    est.fit(X, y)
    assert est.group_labels_ is not first and est.group_labels_[5] == 2
    assert first[5] == -1  # the earlier fit's labels stay as they were
