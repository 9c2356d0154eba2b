"""No tracked file cites the developers' private folder as a source: the specification and
design notes (the two capitalised file names, cited by section or principle), the papers kept
beside them, or the data folder's notes on its files (``SOURCES.md``). A user's clone has none
of them, so a citation of one points nowhere; what the code relies on is restated, with the
paper it comes from, in ``docs/`` (``docs/papers.md``, ``docs/explanation/``,
``docs/citations.md``, ``docs/architecture.md``), and the code cites that page.

Allowed, narrowly: a path under ``../shared/data`` or ``../shared/bench`` that says where a
research-only file (a trace, a data set, a benchmark's outside anchor) is read from at run
time. That is a fact about what the program does, not a source of a claim.

Every text file ``git ls-files`` lists is scanned (the helper of
``tests/test_no_issue_numbers.py``). The examples below are assembled from pieces, so that this
file holds no citation itself.
"""

from __future__ import annotations

import re

import pytest
from test_no_issue_numbers import tracked_text_files

#: The private documents' names, assembled so that this file does not cite them.
SPEC_WORD, DESIGN_WORD, SOURCES = "SP" + "EC", "DES" + "IGN", "SOUR" + "CES.md"

PATTERNS: dict[str, re.Pattern[str]] = {
    # The names as their authors write them: whole capitalised words, so that ``spec.py``,
    # ``FigureSpec``, ``SCENARIO_SPEC`` or "the design" are not citations.
    "specification or design notes": re.compile(
        rf"(?<![\w.]){SPEC_WORD}(?:\.md)?(?![\w])|(?<![\w.]){DESIGN_WORD}(?:\.md)?(?![\w])"
    ),
    "private folder as a source": re.compile(
        rf"shared/(?:{SPEC_WORD}|{DESIGN_WORD}|papers\b|data/{re.escape(SOURCES)})",
        re.IGNORECASE,
    ),
}


def citations(text: str) -> list[tuple[int, str, str]]:
    """Every citation of the private folder in ``text``: (line number, pattern name, match)."""
    found = []
    for name, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            found.append((text.count("\n", 0, match.start()) + 1, name, match.group(0)))
    return sorted(found)


def test_no_tracked_file_cites_the_private_folder() -> None:
    files = tracked_text_files()
    assert "netsim/privacy/linear.py" in files and "docs/papers.md" in files  # the scan sees them
    found = [
        f"{name}:{line}: {text!r} ({pattern})"
        for name, content in files.items()
        for line, pattern, text in citations(content)
    ]
    assert not found, "cite the docs page that restates it instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        f"(ε, δ) by RDP ({SPEC_WORD} §8.2)",
        f"{SPEC_WORD} §9.1–9.2",
        f"the {SPEC_WORD} expects the path-known figure",
        f"see ../shared/{SPEC_WORD}.md",
        f"see {SPEC_WORD}.md, section 8",
        f"yardsticks ({DESIGN_WORD} principle 9)",
        f"as {DESIGN_WORD}.md says",
        f"../shared/{DESIGN_WORD}.md",
        "../shared/" + "papers/003_b000a35a57a156c9.txt",
        f"durations in ms (``../shared/data/{SOURCES}``)",
    ],
)
def test_a_citation_is_found(text: str) -> None:
    assert citations(text), text


@pytest.mark.parametrize(
    "text",
    [
        "netsim/sweep/spec.py",
        "class FigureSpec:",
        "SCENARIO_SPEC = load()",
        "a sweep specification; the design of the walk",
        "Spec and design are in docs/architecture.md",
        "path: ../../../shared/data/traces/stunner/peersim_session_100.txt",
        "UCI Adult is read from ../shared/data (research data, not shipped)",
        "the anchors' folder (``../shared/bench/peersim``)",
        'docs/citations.md, "The STUNner trace"',
    ],
)
def test_no_citation_is_found_in(text: str) -> None:
    assert citations(text) == [], text
