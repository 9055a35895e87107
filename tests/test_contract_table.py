"""The family contract is the code's: families override only the hooks of HOOKS, the
table in docs/architecture.md is the code's table, and a family written from the table
alone (tests/_minimal_family.py) trains, selects and predicts."""

import inspect
from pathlib import Path

import numpy as np
import pytest
from _minimal_family import OneHidden, OneHiddenRegressor
from sklearn.base import BaseEstimator, clone

import sksparse_nn
from sksparse_nn.estimators import HOOKS, BaseDGated, ClassifierTaskMixin, RegressorTaskMixin
from sksparse_nn.estimators._contract import hook_table
from sksparse_nn.training import GradientTrainer

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
#: What any Python class (or any ABC) has: never a family hook.
_ANY_CLASS = {
    *vars(type("_Empty", (), {})),
    "__abstractmethods__",
    "_abc_impl",
    "__annotations__",
}
_TASK_MIXINS = (RegressorTaskMixin, ClassifierTaskMixin)


def _families():
    """Every public estimator class of the package that derives from BaseDGated."""
    return [
        cls
        for name in sksparse_nn.__all__
        if isinstance(cls := getattr(sksparse_nn, name), type) and issubclass(cls, BaseDGated)
    ]


def _overrides(cls):
    """``{name: defining class}`` for every attribute of BaseDGated or of the task mixin
    ``cls`` uses that a class of ``cls``'s MRO below them (not scikit-learn's mixins)
    defines again."""
    mixins = [m for m in _TASK_MIXINS if issubclass(cls, m)]
    contract = set(dir(BaseDGated)).union(*(vars(m) for m in mixins))
    skip = {*BaseDGated.__mro__, *mixins}
    found = {}
    for klass in cls.__mro__:
        module = klass.__module__
        if klass in skip or module == "sklearn" or module.startswith("sklearn."):
            continue
        for name in vars(klass):
            if name in _ANY_CLASS or name == "__init__" or name not in contract:
                continue
            found.setdefault(name, klass.__name__)
    return found


def test_every_public_family_is_checked():
    assert len(_families()) >= 11


@pytest.mark.parametrize("family", [*_families(), OneHiddenRegressor], ids=lambda c: c.__name__)
def test_families_override_only_the_hooks_of_the_table(family):
    allowed = {hook.name for hook in HOOKS}
    stray = {name: owner for name, owner in _overrides(family).items() if name not in allowed}
    assert not stray, f"{family.__name__} overrides base attributes outside HOOKS: {stray}"


def test_a_stray_override_is_caught():
    # the check above can fail: a family that redefines the base's fit orchestration
    class Rogue(OneHiddenRegressor):
        def _fit(self, X, y, warm_module=None, sample_weight=None):  # pragma: no cover
            raise AssertionError

    assert "_fit" in _overrides(Rogue)
    assert "_fit" not in {hook.name for hook in HOOKS}


def test_a_task_method_overridden_by_a_family_is_caught():
    # predict belongs to the task mixin: a family may not redefine it
    class Rogue(OneHiddenRegressor):
        def predict(self, X):  # pragma: no cover
            raise AssertionError

    assert "predict" in _overrides(Rogue)


@pytest.mark.parametrize("family", [*_families(), OneHiddenRegressor], ids=lambda c: c.__name__)
def test_a_family_trainer_only_trains(family):
    # a family's trainer may run its own solver in train(), never rebuild the net
    trainer = type(family._trainer(object.__new__(family)))
    for klass in trainer.__mro__[: trainer.__mro__.index(GradientTrainer)]:
        redefined = {n for n in vars(klass) if n in vars(GradientTrainer) and n not in _ANY_CLASS}
        assert redefined <= {"train", "__init__"}, (trainer.__name__, redefined)


def test_every_hook_exists_on_the_base():
    for hook in HOOKS:
        assert hasattr(BaseDGated, hook.name), hook.name


def test_required_hooks_are_abstract():
    required = {hook.name for hook in HOOKS if hook.kind == "required"}
    assert required <= BaseDGated.__abstractmethods__

    class Incomplete(OneHiddenRegressor):
        _gate_module = BaseDGated._gate_module

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_architecture_md_carries_the_code_table():
    text = ARCHITECTURE.read_text()
    assert hook_table() in text, "docs/architecture.md's hook table differs from:\n" + hook_table()


def test_the_base_docstring_carries_the_table():
    doc = inspect.getdoc(BaseDGated)
    assert all(f"``{hook.name}``" in doc for hook in HOOKS)


def test_the_minimal_family_selects_the_informative_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8))
    y = X[:, 0] - 2 * X[:, 1] + 0.05 * rng.normal(size=300)
    est = OneHiddenRegressor(lam=0.05, max_epochs=None, random_state=0).fit(X, y)
    assert set(est.selected_features_) == {0, 1}
    largest_zero, smallest_live = est.sparsity_gap_
    assert largest_zero < 1e-6 * smallest_live  # exact zeros with a clear gap
    assert est.score(X, y) > 0.9
    np.testing.assert_array_equal(est.feature_importances_ == 0, ~np.isin(np.arange(8), [0, 1]))
    assert isinstance(est.module_, OneHidden)  # collapsed: a plain module again
    path = clone(est).regularization_path(X, y, n_lams=4)
    assert path.n_selected[0] >= path.n_selected[-1]


def test_the_minimal_family_is_a_scikit_learn_estimator():
    assert isinstance(OneHiddenRegressor(), BaseEstimator)
