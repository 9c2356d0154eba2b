"""Small helpers that write MyST Markdown: tables, code blocks, reST blocks and targets."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence


def cell(text: object) -> str:
    """``text`` fit for one cell of a pipe table: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def prose(text: str) -> str:
    """Plain text (e.g. a table's description) on one line, with the characters Markdown
    would take for markup or HTML escaped."""
    text = " ".join(text.split())
    for char in "\\<*[]$":
        text = text.replace(char, "\\" + char)
    return text


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A pipe table; every cell goes through :func:`cell`."""
    lines = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: object) -> str:
    """``text`` as inline code, with a fence long enough for backticks inside it."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str, language: str = "text") -> str:
    """A fenced code block (the fence is longer than any backtick run in ``text``)."""
    longest = max((len(run) for run in text.split("`") if not run), default=0)
    fence = "`" * max(3, longest + 4)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}\n"


def rst(text: str) -> str:
    """reST (e.g. a docstring, with its Sphinx roles) embedded in a Markdown page."""
    return fenced(text, "{eval-rst}")


def docstring(obj: object) -> str:
    """``obj``'s own docstring, cleaned (not one inherited from a base class)."""
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def target(label: str) -> str:
    """A MyST reference target, for :func:`link` to the heading that follows it."""
    return f"({label})=\n"


def link(text: str, label: str) -> str:
    """A link to the target ``label`` (anywhere in the site) with the Markdown ``text``."""
    return f"[{text}](#{label})"


def slug(*parts: str) -> str:
    """A reference label made of ``parts`` (lower case, only letters, digits and dashes)."""
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
