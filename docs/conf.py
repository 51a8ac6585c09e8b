"""The documentation site: Sphinx with MyST-NB and the Furo theme, built offline (`sphinx-build -W docs docs/_build`).

Pages are the Markdown files in this folder; the tour's notebooks are copied from `examples/` into `tour/` (git-ignored)
when the build starts and rendered from their stored outputs (nothing runs); the API reference (`api/`) is autodoc
over the package's docstrings. Nothing is fetched: no intersphinx, no CDN scripts for widgets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))  # the package as checked out (an editable install points here too)

project = "jupyter_chatflow"
author = "the jupyter_chatflow authors"
copyright = "the jupyter_chatflow authors, Apache-2.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "docstrings", "repo_links"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]  # a notebook's later cells may start at ### under a ## (as Jupyter shows them)

# MyST: GitHub-style anchors on headings, so `page.md#a-heading` links work on the site as they do on GitHub.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# The notebooks as stored: never executed here. A panel's widget view needs its front end, which a static page does
# not have (and ipywidgets' embed script would come from a CDN): the view's text shows instead, and beside it the
# panel's static copy, which the notebook stores as an HTML output of its own.
nb_execution_mode = "off"
nb_ipywidgets_js: dict = {}
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None)]

# The API reference: autodoc, members in source order, type hints beside the parameters.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

html_theme = "furo"
html_title = "jupyter_chatflow"
html_static_path: list[str] = []
html_copy_source = False  # no `_sources/` copies (the notebooks are megabytes); the repository has the sources


def copy_the_tour(_app=None, _config=None) -> None:
    """`examples/quickstart.ipynb` and `examples/tour/*.ipynb` into `docs/tour/`, only those that changed (so an
    incremental build reads only them); a notebook removed from `examples/` leaves `docs/tour/` too. A notebook
    stored without `language_info` gets IPython's, so its `%%chat` cells are highlighted as IPython; the widgets'
    saved state (the panel's whole front end, for a page that would run it) is left out."""
    tour = DOCS / "tour"
    tour.mkdir(exist_ok=True)
    sources = [ROOT / "examples" / "quickstart.ipynb", *sorted((ROOT / "examples" / "tour").glob("*.ipynb"))]
    for source in sources:
        notebook = json.loads(source.read_text(encoding="utf-8"))
        notebook["metadata"].setdefault("language_info", {"name": "python", "pygments_lexer": "ipython3"})
        notebook["metadata"].pop("widgets", None)  # the panels' saved state: no page loads a widget to read it
        text = json.dumps(notebook, ensure_ascii=False, indent=1) + "\n"
        target = tour / source.name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    for stale in set(tour.glob("*.ipynb")) - {tour / s.name for s in sources}:
        stale.unlink()


def setup(app):  # type: ignore[no-untyped-def]
    from pygments.lexers import get_lexer_by_name

    # The pages' ```python cells hold magics (`%%chat`), as a notebook's do: IPython's lexer (IPython registers it).
    app.add_lexer("python", type(get_lexer_by_name("ipython3")))
    app.connect("config-inited", copy_the_tour)
