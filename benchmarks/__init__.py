"""Benchmarks (not part of the test run): ``python -m benchmarks.walk_rounds``.

A benchmark whose output docs/performance.md quotes writes it there itself (``--write-docs``),
into the page's block ``<!-- generated: NAME -->`` … ``<!-- /generated -->``: the quote is
the benchmark's output as printed, never retyped."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The page of the benchmarks' figures.
PERFORMANCE_PAGE = REPO / "docs" / "performance.md"


def generated_block(text: str, name: str) -> str:
    """The text of the generated block ``name`` of a page (between its markers, without the
    code fence), or a ``KeyError`` naming the block when the page has none."""
    start, end = f"<!-- generated: {name} -->\n```\n", "\n```\n<!-- /generated -->"
    if start not in text:
        raise KeyError(f"no generated block {name!r}")
    return text.split(start, 1)[1].split(end, 1)[0]


def write_output(name: str, output: str, page: Path = PERFORMANCE_PAGE) -> bool:
    """Replace the generated block ``name`` of ``page`` by ``output`` (a benchmark's printed
    lines, in a code block); whether the page changed."""
    text = page.read_text(encoding="utf-8")
    old = generated_block(text, name)
    start = f"<!-- generated: {name} -->\n```\n"
    updated = text.replace(f"{start}{old}\n```", f"{start}{output.strip()}\n```", 1)
    if updated == text:
        return False
    page.write_text(updated, encoding="utf-8")
    return True
