"""Sphinx configuration of netsim's documentation site.

Build it (``tests/test_docs_site.py`` does, in strict mode, as part of the test run)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Why Sphinx with MyST-Parser and autodoc rather than MkDocs with mkdocstrings: netsim's
docstrings are reStructuredText with Sphinx roles (``:class:``, ``:func:``, ``:mod:``,
double-backquoted literals) and reST tables, which Sphinx renders natively; mkdocstrings
would show the roles as raw text. MyST-Parser keeps the pages themselves in Markdown, the
format of the project's other documents, which the site includes where they are.

The reference pages are generated when the build starts, by the extension in
``_ext/netsim_docs`` (into ``reference/_generated/``, gitignored), from the pydantic models,
the table schemas, the argument parser and the mechanisms themselves. There is no
intersphinx: the build must not need the network.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pygments.lexers.special import TextLexer
from sphinx.application import Sphinx
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

from netsim import __version__  # noqa: E402 - after the path set-up above, like the extension

project = "netsim"
author = "the netsim authors"
copyright = "the netsim authors, MIT License"
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "netsim_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "reference/_generated/includes"]

# MyST: heading slugs so that "file.md#section" links (as GitHub renders them) resolve.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: members in source order, signatures without the long pydantic noise.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_class_signature = "separated"
autodoc_default_options = {"show-inheritance": True}

html_theme = "furo"
html_title = f"netsim {release}"
html_static_path: list[str] = []
# Sphinx's own link to a page's source would point into the build tree for generated pages.
html_show_sourcelink = False


def google_sections(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Render the Google-style ``Returns:`` and ``Raises:`` sections that some functions of
    :mod:`netsim.learning` write. Napoleon is applied to functions only, not as the
    ``sphinx.ext.napoleon`` extension: on an attribute it takes the text before the first
    colon of a ``#:`` comment ("The norm of the sensitivity: ...") for the attribute's type."""
    if what in ("function", "method"):
        config = NapoleonConfig(napoleon_numpy_docstring=False)
        lines[:] = GoogleDocstring(lines, config, None, what, name, obj, options).lines()


def setup(app: Sphinx) -> None:
    """Hook up the docstring sections and the languages Pygments does not know by the name
    the pages' code blocks use."""
    app.connect("autodoc-process-docstring", google_sections)
    app.add_lexer("csv", TextLexer)  # CSV samples of the trace format
