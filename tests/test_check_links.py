"""The internal link check of the built documentation (docs/check_links.py, run by
``make docs``) finds every kind of broken link on a small hand-written site, and only
those."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "check_links.py"


@pytest.fixture(scope="module")
def check_links():
    spec = importlib.util.spec_from_file_location("check_links", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<html><body>{body}</body></html>", encoding="utf-8")


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "html"
    _write(
        root / "index.html",
        '<a href="guide/page.html#intro">ok</a>'
        '<a href="guide/page.html#old-name">missing id</a>'
        '<a href="guide/gone.html">missing file</a>'
        '<a href="guide/">directory</a>'
        '<a href="#top">same page</a><span id="top"></span>'
        '<a href="guide/my%20page.html">percent-encoded</a>'
        '<img src="_static/logo.png"><img src="_static/missing.png">'
        '<a href="https://example.org/x.html#nowhere">external</a>'
        '<a href="mailto:someone@example.org">mail</a>'
        '<a href="//cdn.example.org/lib.js">protocol-relative</a>'
        '<a href="../outside.html">outside</a>'
        '<a href="page.txt#anything">non-HTML target with a fragment</a>',
    )
    _write(root / "guide" / "page.html", '<h1 id="intro">x</h1><a name="legacy"></a>')
    _write(root / "guide" / "index.html", '<a href="page.html#legacy">a name</a>')
    _write(root / "guide" / "my page.html", "")
    (root / "page.txt").write_text("plain")
    (root / "_static").mkdir()
    (root / "_static" / "logo.png").write_bytes(b"")
    # a theme's Jinja macros copied into _static: an asset, not a page
    _write(root / "_static" / "macros.html", "<a href=\"{{ pathto('x') }}\">macro</a>")
    (tmp_path / "outside.html").write_text("")  # exists, but not in the site
    return root


def test_finds_exactly_the_broken_links(check_links, site):
    broken = check_links.broken_links(site)
    assert [(page, link) for page, link, _ in broken] == [
        ("index.html", "../outside.html"),
        ("index.html", "_static/missing.png"),
        ("index.html", "guide/gone.html"),
        ("index.html", "guide/page.html#old-name"),
    ]
    reasons = {link: reason for _, link, reason in broken}
    assert "no id 'old-name'" in reasons["guide/page.html#old-name"]
    assert reasons["guide/gone.html"] == "no such file"
    assert reasons["../outside.html"] == "points outside the site"


def test_exit_status(check_links, site, tmp_path, capsys):
    assert check_links.main([str(site)]) == 1
    assert "4 broken internal link(s)" in capsys.readouterr().out
    clean = tmp_path / "clean"
    _write(clean / "index.html", '<a href="#a">x</a><p id="a"></p>')
    assert check_links.main([str(clean)]) == 0
    assert check_links.main([str(tmp_path / "not_built")]) == 1
