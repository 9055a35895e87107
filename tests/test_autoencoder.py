"""DGatedAutoencoder: a transformer whose bottleneck width is learned by D-Gating."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksparse_nn import DGatedAutoencoder, SparsePathCV

SMALL = {"hidden_layer_sizes": (8,), "n_components": 4, "max_epochs": 5, "random_state": 0}


@parametrize_with_checks([DGatedAutoencoder(**SMALL)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _rank2(n=400, p=8, noise=0.02, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, 2) @ rng.randn(2, p) + noise * rng.randn(n, p)


def _quiet_fit(est, X, y=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few epochs on purpose
        return est.fit(X, y)


@pytest.mark.parametrize("D", [2, 3])
def test_linear_autoencoder_learns_the_dimension_and_the_pca_subspace(D):
    X = _rank2()
    Xs = (X - X.mean(0)) / X.std(0)
    _, sv, Vt = np.linalg.svd(Xs, full_matrices=False)
    shares = sv**2 / Xs.size
    # lam = 0.02: well below where the second principal direction stops paying for a
    # unit (0.385 * share_2 = 0.079 for D = 2) and 100x above the noise directions' shares
    assert shares[1] > 0.15 and shares[2] < 1e-3
    ae = DGatedAutoencoder(hidden_layer_sizes=(), n_components=6, lam=0.02, D=D, random_state=0)
    ae.fit(X)
    assert ae.n_components_ == 2
    dead, live = ae.sparsity_gap_
    assert dead < 1e-6 < 0.1 < live  # exact zeros (collapse) with a clear gap
    # the decoder columns of the live units span the top-2 principal subspace
    m = ae.module_.bottleneck.n_in
    units = ae.module_.bottleneck.units.detach().double().numpy()
    decoder = units[ae.selected_components_, m + 1 :]
    basis = np.linalg.qr(decoder.T / X.std(0)[:, None])[0]  # standardized units
    cosines = np.linalg.svd(Vt[:2] @ basis, compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-3)  # float32 training, noise 2e-4


def test_transform_inverse_transform_and_names():
    X = _rank2()
    ae = DGatedAutoencoder(hidden_layer_sizes=(16,), n_components=6, lam=0.02, random_state=0)
    _quiet_fit(ae, X)
    Z = ae.transform(X)
    assert Z.shape == (len(X), ae.n_components_) and 0 < ae.n_components_ < 6
    full = ae.module_(torch.as_tensor(X, dtype=torch.float32)).detach().double().numpy()
    # removed units are exact zeros: decoding the live codes is the full reconstruction
    np.testing.assert_allclose(ae.inverse_transform(Z), full, rtol=1e-5, atol=1e-5)
    names = ae.get_feature_names_out()
    assert list(names) == [f"dgatedautoencoder{i}" for i in range(ae.n_components_)]
    small = ae.compact()
    with torch.no_grad():
        codes = small.encode(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    np.testing.assert_allclose(codes, Z, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=f"takes {ae.n_components_} codes"):
        ae.inverse_transform(np.zeros((3, ae.n_components_ + 1)))


def test_pipeline_pandas_and_sparse_input():
    X = _rank2(n=200)
    y = X @ np.arange(8.0)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(8)])
    pipe = make_pipeline(DGatedAutoencoder(**{**SMALL, "n_components": 3}), Ridge())
    _quiet_fit(pipe, frame, y)
    assert list(pipe[0].feature_names_in_) == list(frame.columns)
    assert np.all(np.isfinite(pipe.predict(frame)))
    with pytest.raises(TypeError, match="dense data is required"):
        DGatedAutoencoder(**SMALL).fit(sp.csr_matrix(X))


@pytest.mark.parametrize("sparsifier", ["dam", "ds", "l21"])
def test_every_sparsifier_sizes_the_bottleneck(sparsifier):
    X = _rank2(n=200)
    ae = DGatedAutoencoder(
        sparsifier=sparsifier,
        n_components=6,
        hidden_layer_sizes=(8,),
        lam=0.01,
        max_epochs=60,
        random_state=0,
    )
    _quiet_fit(ae, X)
    assert 0 < ae.n_components_ <= 6
    assert ae.transform(X).shape == (len(X), ae.n_components_)
    assert ae.score(X) > 0.5


def test_path_and_grid_search_score_the_reconstruction():
    X = _rank2(n=200)
    est = DGatedAutoencoder(hidden_layer_sizes=(), n_components=5, max_epochs=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = est.regularization_path(X, n_lams=5, lam_min_ratio=0.05, keep_estimators=True)
    # the learned dimension, not the number of input features, is what a point selects
    assert path.n_selected[0] >= 2 and path.n_selected[-1] == 0
    assert path.selection_unit == "components"
    assert np.all(np.diff(path.n_selected) <= 0)
    assert path.train_score[0] > 0.95
    # the empty model reconstructs every row as the same point (its output bias)
    empty = path.estimators[-1].module_(torch.as_tensor(X, dtype=torch.float32)).detach()
    assert torch.all(empty == empty[0])
    # its codes have width 0, and decoding them gives that point (transform's round trip)
    codes = path.estimators[-1].transform(X)
    assert codes.shape == (len(X), 0)
    np.testing.assert_allclose(
        path.estimators[-1].inverse_transform(codes), empty.double().numpy(), rtol=1e-6
    )
    search = GridSearchCV(est, {"lam": [0.01, 10.0]}, cv=2)
    _quiet_fit(search, X)
    assert search.best_params_["lam"] == 0.01


def test_fresh_fit_keeps_every_unit_that_pays_for_itself():
    # the fresh fit pre-trains before the penalty acts: started cold, the penalty used to
    # remove units of directions that pay for themselves before the network learned them
    from sksparse_nn.datasets import make_latent_manifold

    X = make_latent_manifold(400, 2, 10, kind="linear", random_state=0).X
    Xs = (X - X.mean(0)) / X.std(0)
    shares = np.linalg.svd(Xs, compute_uv=False) ** 2 / Xs.size
    lam = 0.05
    # both directions pay for a unit of the linear D = 2 model (the bound 0.385 * share of
    # _LAM_MAX_FACTOR's comment), with a factor 2 to spare; the rest carry nothing
    assert 0.385 * shares[1] > 2 * lam and shares[2] < 1e-12
    ae = DGatedAutoencoder(lam=lam, n_components=6, hidden_layer_sizes=(16,), random_state=0)
    ae.fit(X)
    assert ae.n_components_ == 2
    dead, live = ae.sparsity_gap_
    assert dead < 1e-6 < 0.1 < live
    assert ae.score(X) > 0.95  # two units reconstruct rank-2 data (the linear map exactly)


def test_cross_validated_paths_without_targets():
    """Unsupervised CV: folds of X only, scored by the reconstruction."""
    X = _rank2(n=200)
    est = DGatedAutoencoder(hidden_layer_sizes=(), n_components=5, max_epochs=20, random_state=0)
    # the default grid's lams, given: the reconstruction scores best at the densest lam,
    # where a default grid would go on below (tests/test_cv_extension.py)
    lams = np.geomspace(0.05, 1.0, 4) * est.lambda_max(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = est.regularization_path(X, lams=lams, cv=2)
        search = SparsePathCV(est, lams=lams, cv=2).fit(X)
    assert path.cv_scores.shape == (2, 4) and path.lam_1se_ is not None
    assert search.transform(X).shape == (len(X), search.n_components_)
    assert search.score(X) > 0.9
