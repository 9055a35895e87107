"""Check the internal links of a built HTML site (``make docs`` runs it on docs/_build/html).

Every ``href`` and ``src`` of every ``.html`` file that points inside the site (no scheme
such as ``https:`` or ``mailto:``, not protocol-relative) must name an existing file, and a
``#fragment`` into an HTML page must name an ``id`` (or ``<a name>``) of that page. A link
to a directory resolves to its ``index.html``. Links written by JavaScript at run time
(the search page) are not seen.

Usage: ``python docs/check_links.py [SITE_DIR]`` (default docs/_build/html); prints every
broken link as ``page: link (reason)`` and exits with status 1 if there is one.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

DEFAULT_SITE = Path(__file__).resolve().parent / "_build" / "html"
#: attributes holding a link (``srcset`` and the like are not used by this site)
LINK_ATTRIBUTES = ("href", "src")
#: top-level directories whose .html files are assets, not pages (the theme copies its
#: Jinja macros there); links *into* them are still checked
ASSET_DIRS = ("_static",)


class _PageParser(HTMLParser):
    """Collects a page's links and its anchor targets."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in LINK_ATTRIBUTES:
                self.links.append(value.strip())
            elif name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)

    handle_startendtag = handle_starttag


def _parse(page: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


def _is_internal(link: str) -> bool:
    parts = urlsplit(link)
    return not (parts.scheme or parts.netloc or link.startswith("//"))


def _pages(site: Path) -> list[Path]:
    return [
        p for p in sorted(site.rglob("*.html")) if p.relative_to(site).parts[0] not in ASSET_DIRS
    ]


def broken_links(site: Path) -> list[tuple[str, str, str]]:
    """Every broken internal link of the site: (page, link, reason), sorted.

    Parameters
    ----------
    site : Path
        Root directory of the built HTML site.

    Returns
    -------
    list of tuple of str
        The page (relative to ``site``), the link as written and why it is broken.
    """
    site = site.resolve()
    pages = {p.resolve(): _parse(p) for p in _pages(site)}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            if not link or not _is_internal(link):
                continue
            parts = urlsplit(link)
            path, fragment = unquote(parts.path), unquote(parts.fragment)
            target = (page.parent / path).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            where = str(page.relative_to(site))
            if not target.is_relative_to(site):
                broken.append((where, link, "points outside the site"))
            elif not target.is_file():
                broken.append((where, link, "no such file"))
            elif fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if fragment not in ids:
                    broken.append((where, link, f"no id {fragment!r} in {target.name}"))
    return sorted(broken)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else DEFAULT_SITE
    if not (site / "index.html").is_file():
        print(f"check_links: no built site at {site} (run `make docs` first)")
        return 1
    broken = broken_links(site)
    n_pages = len(_pages(site.resolve()))
    for page, link, reason in broken:
        print(f"{page}: {link} ({reason})")
    print(f"check_links: {n_pages} pages, {len(broken)} broken internal link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
