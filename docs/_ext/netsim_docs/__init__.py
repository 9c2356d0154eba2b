"""Sphinx extension that writes netsim's generated reference pages before the site is read.

On ``builder-inited`` it writes Markdown into ``docs/reference/_generated/`` (gitignored):
the scenario keys (from the pydantic models), the event tables (from every ``TableSchema``),
the command line (from ``netsim.cli.build_parser()``), the Python API pages (autodoc
directives for every public module) and the privacy-guarantee table that
``docs/explanation/privacy.md`` includes. Nothing generated is committed, so nothing can drift
from the code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Where the pages are written, relative to the documentation source directory.
GENERATED = Path("reference") / "_generated"


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds exactly that already (an unchanged file
    keeps its time stamp, so Sphinx does not read it again on an incremental build)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generated_pages() -> dict[str, str]:
    """Path below :data:`GENERATED` → content of every generated page."""
    from netsim_docs import api, cli, privacy, scenario_keys, tables

    pages = {
        "scenario-keys.md": scenario_keys.render(),
        "event-tables.md": tables.render(),
        "cli.md": cli.render(),
        "includes/privacy-guarantees.md": privacy.render(),
    }
    pages.update({f"api/{name}": text for name, text in api.pages().items()})
    return pages


def generate(source_dir: Path) -> list[Path]:
    """Write every generated page below ``source_dir`` and remove pages no longer generated
    (Sphinx would read them and warn that no toctree lists them); the paths written."""
    root = source_dir / GENERATED
    written = []
    for name, text in generated_pages().items():
        write_if_changed(root / name, text)
        written.append(root / name)
    for stale in set(root.rglob("*.md")) - set(written):
        stale.unlink()
    return written


def on_builder_inited(app: Any) -> None:
    generate(Path(app.srcdir))


def setup(app: Any) -> dict[str, Any]:
    """Register the generator with Sphinx."""
    app.connect("builder-inited", on_builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
