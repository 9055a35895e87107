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
