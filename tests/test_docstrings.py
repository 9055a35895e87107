"""The examples in the docstrings run (doctest), and every public estimator has one."""

import doctest
import importlib
import inspect
import pkgutil
import warnings

import pytest

import sksparse_nn

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(sksparse_nn.__path__, prefix="sksparse_nn.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short example fits may warn about max_epochs
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
        )
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in sksparse_nn.__all__
        if inspect.isclass(getattr(sksparse_nn, n)) and hasattr(getattr(sksparse_nn, n), "fit")
    ],
)
def test_every_public_estimator_has_an_example(name):
    doc = getattr(sksparse_nn, name).__doc__ or ""
    assert "Examples\n" in doc and ">>> " in doc, f"{name} has no runnable example"
