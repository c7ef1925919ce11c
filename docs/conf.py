"""Sphinx configuration of kaiojit's documentation site (built in CI with warnings as errors:
``python -m sphinx -W -b html docs docs/_build``; tests/test_docs.py does it)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

project = "kaiojit"
author = "kaiojit developers"
copyright = "2026, kaiojit developers"  # noqa: A001 - Sphinx's name
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # signatures as written; the docstrings say the types
html_theme = "alabaster"
html_title = "kaiojit"

# Pages other work adds (porting from numba, PyTorch): listed in the index's toctree where the
# file exists (the marker line below is replaced), so the build has no dangling entry.
OPTIONAL_PAGES = ("porting", "torch")
OPTIONAL_MARKER = "optional-pages"


def _list_optional_pages(app, docname, source) -> None:
    if docname != "index":
        return
    here = os.path.dirname(os.path.abspath(__file__))
    present = [p for p in OPTIONAL_PAGES if os.path.exists(os.path.join(here, p + ".md"))]
    source[0] = source[0].replace(OPTIONAL_MARKER + "\n", "".join(p + "\n" for p in present))


def setup(app):
    app.connect("source-read", _list_optional_pages)
