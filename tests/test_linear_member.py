"""The networks' searches against their linear member (the model whose non-linear part
is zero): the member a family declares, the choice between the two searches on the
same folds, and what SparsePathCV keeps."""

import numpy as np
import pytest
from _user_module import TwoLayer
from sklearn.model_selection import KFold

from sksparse_nn import (
    DGatedMLPClassifier,
    DGatedMLPRegressor,
    DGatedNAMRegressor,
    DGatedNeuralNetRegressor,
    NODERegressor,
    SparseLinearClassifier,
    SparseLinearRegressor,
    SparsePathCV,
)
from sksparse_nn.path import prefer_linear

# a few epochs of small networks: the tests check which search is kept and that it
# is the one the CV scores say, not how good either is
SMALL = {"hidden_layer_sizes": (8,), "max_epochs": 15, "random_state": 0}


@pytest.mark.parametrize(
    "network, member",
    [
        (DGatedMLPClassifier(D=4, groups=[0, 0, 1], group_weights=[1.0, 2.0], random_state=3),
         SparseLinearClassifier),
        (DGatedMLPRegressor(D=2), SparseLinearRegressor),
        (DGatedNAMRegressor(D=3, groups=[0, 1, 1]), SparseLinearRegressor),
    ],
)  # fmt: skip
def test_the_member_has_the_networks_penalty(network, member):
    linear = network.linear_member()
    assert type(linear) is member
    for name in ("D", "groups", "group_weights", "random_state", "n_threads"):
        assert linear.get_params()[name] is network.get_params()[name]
    assert not hasattr(linear, "coef_")  # unfitted


@pytest.mark.parametrize(
    "estimator",
    [
        DGatedMLPRegressor(sparsifier="dam"),  # another penalty than the member's
        DGatedMLPRegressor(sparsity="weights"),  # every weight its group
        DGatedMLPRegressor(gate_inputs=False, gate_hidden=True),  # features not gated
        DGatedNAMRegressor(sparsifier="l21"),
        SparseLinearRegressor(),  # a linear model has no other member
        NODERegressor(),
        DGatedNeuralNetRegressor(TwoLayer, gates={"hidden.weight": "in"}),
    ],
    ids=lambda e: type(e).__name__,
)
def test_no_member_where_the_penalty_is_not_the_members(estimator):
    assert estimator.linear_member() is None


class _Path:
    """What prefer_linear reads of a path: per-fold scores and the chosen lams."""

    def __init__(self, scores, best=0, one_se=0):
        self.cv_scores = np.asarray(scores, dtype=float)
        self.lams = np.arange(1.0, self.cv_scores.shape[1] + 1)
        self.best_lam_, self.lam_1se_ = self.lams[best], self.lams[one_se]

    def index_of(self, lam):
        return int(np.flatnonzero(self.lams == lam)[0])


def test_prefer_linear_compares_the_chosen_points_fold_by_fold():
    linear = _Path([[0.50], [0.60], [0.70]])
    # the network's best point beats the member's mean by 0.01 on every fold
    better = _Path([[0.0, 0.51], [0.0, 0.61], [0.0, 0.71]], best=1, one_se=0)
    assert not prefer_linear(better, linear, "best")
    # a tie keeps the simpler model
    assert prefer_linear(_Path([[0.50], [0.60], [0.70]]), linear, "best")
    # 1se reads the one-SE point (here the poor first lam): the member wins
    assert prefer_linear(better, linear, "1se")
    # 1se: better by 0.01 on average, but the paired differences spread by more
    noisy = _Path([[0.53], [0.58], [0.72]], one_se=0)
    gain = np.array([0.03, -0.02, 0.02])
    assert gain.mean() > 0 and gain.mean() <= gain.std(ddof=1) / np.sqrt(3)
    assert not prefer_linear(noisy, linear, "best") and prefer_linear(noisy, linear, "1se")
    steady = _Path([[0.52], [0.62], [0.715]], one_se=0)  # better on every fold
    assert not prefer_linear(steady, linear, "1se")


def test_prefer_linear_when_one_search_chose_nothing():
    linear, network = _Path([[0.5]]), _Path([[0.6]])
    network.best_lam_ = None
    assert prefer_linear(network, linear)
    linear.best_lam_ = None
    assert not prefer_linear(_Path([[0.6]]), linear)


def _linear_data(seed=0, n=160):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
    return X, y


def _keeps_what_the_scores_say(search):
    network, linear = search.member_paths_["estimator"], search.member_paths_["linear"]
    kept = "linear" if prefer_linear(network, linear, search.rule) else "estimator"
    assert search.member_ == kept
    assert search.cv_path_ is search.member_paths_[kept]
    assert search.cv_path_.estimators == [] and network.estimators == []
    # both searches ran on the same folds
    assert network.cv_scores.shape[0] == linear.cv_scores.shape[0] == 3


def test_a_linear_signal_keeps_the_linear_member():
    X, y = _linear_data()
    search = SparsePathCV(DGatedMLPRegressor(**SMALL), n_lams=4, cv=3).fit(X, y)
    _keeps_what_the_scores_say(search)
    assert search.member_ == "linear"
    assert type(search.estimator_) is SparseLinearRegressor
    assert search.estimator_.lam == search.lam_
    assert search.lam_ in search.member_paths_["linear"].lams
    np.testing.assert_array_equal(search.predict(X), search.estimator_.predict(X))
    assert set(search.selected_features_) >= {0, 1}


def test_an_interaction_keeps_the_network():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.sign(X[:, 0] * X[:, 1]) + 0.1 * rng.normal(size=300)  # no linear trace
    network = DGatedMLPRegressor(hidden_layer_sizes=(16,), max_epochs=40, random_state=0)
    search = SparsePathCV(network, n_lams=4, cv=3).fit(X, y)
    _keeps_what_the_scores_say(search)
    assert search.member_ == "estimator"
    assert type(search.estimator_) is DGatedMLPRegressor


def test_folds_given_once_serve_both_searches():
    # a generator of splits can be read once: the search reads it once for both
    X, y = _linear_data(n=90)
    search = SparsePathCV(DGatedMLPRegressor(**SMALL), n_lams=3, cv=KFold(3).split(X))
    _keeps_what_the_scores_say(search.fit(X, y))


def test_a_linear_model_has_no_member_to_search():
    X, y = _linear_data(n=90)
    search = SparsePathCV(SparseLinearRegressor(), n_lams=3, cv=3).fit(X, y)
    assert search.member_ == "estimator" and list(search.member_paths_) == ["estimator"]


def test_the_network_alone_on_request():
    X, y = _linear_data(n=90)
    search = SparsePathCV(DGatedMLPRegressor(**SMALL), n_lams=3, cv=3, linear_member=False)
    search.fit(X, y)
    assert search.member_ == "estimator" and list(search.member_paths_) == ["estimator"]
    assert type(search.estimator_) is DGatedMLPRegressor


def test_the_member_keeps_the_variables_of_a_raw_table():
    # VariableModel sets the search's groups; the member takes them: a categorical
    # enters or leaves whole, in the member as in the network
    import pandas as pd

    from sksparse_nn import VariableModel

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"city": rng.choice(["a", "b", "c"], 150), "x": rng.normal(size=150)})
    y = df["city"].map({"a": 1.0, "b": -1.0, "c": 0.0}) + df["x"] + 0.3 * rng.normal(size=150)
    search = SparsePathCV(DGatedMLPRegressor(**SMALL), n_lams=3, cv=3)
    model = VariableModel(search).fit(df, y)
    inner = model.estimator_
    assert inner.member_ == "linear"
    groups = inner.estimator_.get_params()["groups"]
    np.testing.assert_array_equal(groups, model.groups_)
    assert model.selected_variables_.tolist() == ["city", "x"]
