"""Sphinx configuration of kaiojit's documentation site (built in CI with warnings as errors:
``python -m sphinx -W -b html docs docs/_build``; tests/test_docs.py does it)."""

from __future__ import annotations

import os
import re
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

# Every other page of docs/ (porting from numba, PyTorch, ahead-of-time export, ...) is listed
# in the index's last toctree, where the marker line is, so a page added without editing the
# index is neither left out of the site nor a warning.
OPTIONAL_MARKER = "optional-pages"


def _list_optional_pages(app, docname, source) -> None:
    if docname != "index":
        return
    here = os.path.dirname(os.path.abspath(__file__))
    listed = set(re.findall(r"^([\w-]+)$", source[0], re.M))
    others = sorted(name[:-3] for name in os.listdir(here)
                    if name.endswith(".md") and name[:-3] not in listed | {"index"})
    source[0] = source[0].replace(OPTIONAL_MARKER + "\n", "".join(p + "\n" for p in others))


def setup(app):
    app.connect("source-read", _list_optional_pages)
