"""The gallery's examples run (the CI docs build skips executing them).

Every ``examples/plot_*.py`` defines ``main(out)`` writing its figure to ``out``; here it
writes to a temporary directory instead of ``docs/images``.
"""

import runpy
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_writes_its_figure(path, tmp_path):
    namespace = runpy.run_path(str(path), run_name="example")  # defines, does not run
    assert "main" in namespace, f"{path.name} must define main(out)"
    namespace["main"](tmp_path)
    plt.close("all")
    assert list(tmp_path.glob("*.png")), f"{path.name} wrote no figure"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_docstring_is_a_valid_gallery_header(path):
    # sphinx-gallery turns the module docstring into the page's reST; a title whose
    # underline is shorter than itself is a docutils warning, which fails the -W docs build.
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert doc, f"{path.name} has no module docstring (the gallery needs a title)"
    lines = doc.strip("\n").splitlines()
    assert len(lines) >= 2, f"{path.name}: the docstring must start with a title"
    title, underline = lines[0], lines[1]
    assert underline and set(underline) == {underline[0]} and underline[0] in "=-~^#*", (
        f"{path.name}: the title must be followed by an underline"
    )
    assert len(underline) >= len(title), (
        f"{path.name}: the title's underline ({len(underline)}) is shorter than the "
        f"title ({len(title)})"
    )
