"""Sphinx configuration of the sksparse_nn documentation (``make docs``)."""

import os
import re
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sksparse_nn  # noqa: E402

project = "sksparse_nn"
author = "the sksparse_nn developers"
copyright = "2026, the sksparse_nn developers"  # noqa: A001
release = getattr(sksparse_nn, "__version__", "0.1")
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    # copies MathJax 3 (from its PyPI package) into _static/mathjax and points
    # mathjax_path there: formulas render without internet (the CDN default shows TeX)
    "sphinx-mathjax-offline",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "**.zip"]
root_doc = "index"

autosummary_generate = True
# the page's table of contents lists "fit()", not "NODERegressor.fit()" (long names
# overflowed the right sidebar)
toc_object_entries_show_parents = "hide"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Parameter types stay text: "int, default=3" reads better than half-linked types.
numpydoc_xref_param_type = False

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
    "torch": ("https://docs.pytorch.org/docs/stable", None),
    "skorch": ("https://skorch.readthedocs.io/en/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
}
# Offline builds (CI has no internet) cannot fetch the inventories: they skip intersphinx
# (references into these projects stay plain text); every reference to this package must
# resolve either way.
intersphinx_timeout = 5


def _online(host="docs.python.org"):
    try:
        socket.setdefaulttimeout(2)
        socket.gethostbyname(host)
        return True
    except OSError:
        return False
    finally:
        socket.setdefaulttimeout(None)


if os.environ.get("SKSPARSE_NN_DOCS_OFFLINE") or not _online():
    intersphinx_mapping = {}

nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|torch|nn|sklearn|scipy|skorch|pandas|joblib|matplotlib)\..*"),
    (r"py:.*", r"(array-like|array|tensor|Tensor|ndarray|estimator|callable|generator)"),
    (r"py:.*", r"(collections|dataclasses)\..*"),
    # the training engine is internal (docs/architecture.md describes it)
    (r"py:.*", r"sksparse_nn\.training(\..*)?"),
    (r"py:class", r"(Module|Parameter|Dataset|Callback|NeuralNet|BaseEstimator)"),
    # numpydoc lists a classifier's fitted ``classes_`` as a member it cannot find
    (r"py:obj", r"classes_"),
]

html_theme = "pydata_sphinx_theme"
html_title = "sksparse_nn"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
# single pages have no section to navigate: no (empty) left sidebar, and the space goes
# to their wide tables and the architecture page's two-column layout
html_sidebars = {"install": [], "benchmarks": [], "architecture": []}

# The examples write their figures for the README into docs/images when run as scripts;
# run by the gallery they write into the build directory, so a docs build leaves the
# tracked figures alone.
os.environ.setdefault("SKSPARSE_NN_FIGURES", str(ROOT / "docs" / "_build" / "figures"))
Path(os.environ["SKSPARSE_NN_FIGURES"]).mkdir(parents=True, exist_ok=True)

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"demo\.py|_common\.py",
    "plot_gallery": os.environ.get("SKSPARSE_NN_DOCS_PLOT", "True"),
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
}


def _plain_foreign_refs(app, what, name, obj, options, lines):
    """Inherited scikit-learn docstrings (``score``) link labels of scikit-learn's own
    site; without its inventory they become literals instead of broken references."""
    if getattr(obj, "__module__", "").startswith("sklearn") and not intersphinx_mapping:
        lines[:] = [re.sub(r":ref:`([^`<]*?)(?: <[^>]*>)?`", r"``\1``", ln) for ln in lines]


def setup(app):
    app.connect("autodoc-process-docstring", _plain_foreign_refs)
