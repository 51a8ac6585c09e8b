"""Links from a page to a file of the repository outside `docs/` (`../benchmarks/README.md`), as GitHub follows them.

On the site such a file is either a page of its own (`PAGES`: included from where it lives, or the tour's copy of a
notebook) and the link goes there, or it is not on the site and the link becomes its path as code text (a source
file, a data card), never a broken link.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx import addnodes

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "README": "index",
    "benchmarks/README": "benchmarks",
    "examples/quickstart": "tour/quickstart",
}
"""Repository files (without their suffix) that are pages of the site, and the page; `examples/tour/*` below."""


def page_of(path: str) -> str | None:
    """The site's page for a repository file (without its suffix), or None."""
    if path.startswith("examples/tour/"):
        return "tour/" + path.removeprefix("examples/tour/")
    return PAGES.get(path)


def outside(target: str, srcdir: Path) -> str | None:
    """The repository path of a link's target that lies outside `docs/`, or None for a page of the site."""
    path = Path(target)
    if not path.is_absolute():
        path = (srcdir / target).resolve()
    if path.is_relative_to(srcdir) or not path.is_relative_to(ROOT):
        return None
    return path.relative_to(ROOT).as_posix()


def rewrite(app, doctree: nodes.document) -> None:  # type: ignore[no-untyped-def]
    srcdir = Path(app.srcdir).resolve()
    for node in list(doctree.findall(addnodes.pending_xref)):
        if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
            continue
        path = outside(node["reftarget"], srcdir)
        if path is None:
            continue
        page = page_of(path)
        if page is not None:
            node["reftarget"] = page
        else:
            node.replace_self(_unlinked(node, path))


def _unlinked(node: addnodes.pending_xref, path: str) -> nodes.Node:
    """The link's own words without the link, and the file's path after them unless they name it."""
    words = [child.deepcopy() for child in node.children]
    if Path(path).name in node.astext():
        return nodes.inline("", "", *words)
    return nodes.inline("", "", *words, nodes.Text(" ("), nodes.literal(path, path), nodes.Text(")"))


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("doctree-read", rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
