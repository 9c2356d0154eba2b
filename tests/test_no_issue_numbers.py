"""No tracked file cites an issue, ticket or pull request: the project cites what it contains
(a document, a script, a test, a commit), because an issue tracker is not part of a clone and
its numbers mean nothing to a reader of the code or the docs.

Every text file ``git ls-files`` lists is scanned, this one included (a file with a NUL byte in
its first 8 KiB is binary and skipped). What counts as a reference (N a number):

- a tracker word and a number: issue N, issue #N, issues N and M, ticket N, pull request N,
  merge request N, PR N, PR #N, GH-N;
- a tracker's address: ``github.com/OWNER/REPO/issues/N`` or ``…/pull/N``;
- a bare #N where prose would put it: at the start of a line or after a space or an opening
  bracket, followed by neither a letter, a digit nor a hyphen. A colour (``"#1f77b4"``, six or
  eight digits, or any after ``color:``), an anchor (``page.md#2-rounds``), an HTML entity and
  a comment marker followed by a space are not references;
- an issue or ticket as a source: its possessive (the sizes it gave, named by its
  possessive), or it asking, saying, listing, requesting … something.

A journal's issue in a citation (CFF's ``issue`` key, in ``CITATION.cff``) is a bibliographic
field, not a tracker's number, and is allowed there. The examples below are assembled from
pieces, so that this file holds no reference itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

REPO = Path(__file__).resolve().parents[1]

#: The words of a tracker, singular or plural, and "PR" only in capitals (below).
TRACKER = r"(?:issue|ticket|pull[ -]request|merge[ -]request|bug report)s?"
#: The verbs with which a text treats an issue as its source.
SOURCE_VERBS = (
    r"(?:asks?|asked|says?|said|wants?|wanted|requires?|required|reports?|reported|gives?|"
    r"gave|lists?|listed|states?|stated|targets?|targeted|names?|named|specifies|specified|"
    r"requests?|requested|describes?|described)"
)

PATTERNS: dict[str, re.Pattern[str]] = {
    "tracker word and number": re.compile(
        rf"\b{TRACKER}[ \t]*[:,(]?[ \t]*(?:no\.?[ \t]*|number[ \t]*)?#?\d+\b", re.IGNORECASE
    ),
    "PR and number": re.compile(r"\bPRs?[ \t]*#?\d+\b"),
    "GH-number": re.compile(r"\bGH-\d+\b", re.IGNORECASE),
    "tracker address": re.compile(r"github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+"),
    "bare #number": re.compile(r"(?:^|(?<=[\s(\[{]))#(\d+)(?![\w-])", re.MULTILINE),
    "possessive": re.compile(r"\b(?:issue|ticket)(?:'|’)s\b", re.IGNORECASE),
    "named as the source": re.compile(
        rf"\b(?:the|this|that|an?|our)[ \t]+(?:issue|ticket)s?[ \t]+{SOURCE_VERBS}\b"
        rf"|\b{SOURCE_VERBS}[ \t]+(?:in|by)[ \t]+(?:the|this|that)[ \t]+(?:issue|ticket)s?\b"
        r"|\bas[ \t]+(?:the|this)[ \t]+(?:issue|ticket)[ \t]+(?:says|asks|wants|requires)\b",
        re.IGNORECASE,
    ),
}

#: ``#`` and digits that are a colour, not a number: ``#RRGGBB``, ``#RRGGBBAA``, or any after
#: ``color:`` / ``colour =``.
COLOUR_BEFORE = re.compile(r"colou?r\s*[:=]\s*$", re.IGNORECASE)
#: A citation file's journal issue (CFF's ``issue`` key of a reference).
CITATION_ISSUE = re.compile(r"^\s*issue:\s*[\"']?\d+[\"']?\s*$")
CITATION_FILES = ("CITATION.cff",)


def is_colour(text: str, match: re.Match[str]) -> bool:
    """``#digits`` that reads as a colour: six or eight digits, or written after ``color:``."""
    digits = match.group(1)
    line_start = text.rfind("\n", 0, match.start()) + 1
    return len(digits) in (6, 8) or bool(COLOUR_BEFORE.search(text[line_start : match.start()]))


def references(text: str, path: str = "") -> list[tuple[int, str, str]]:
    """Every issue reference in ``text``: (line number, pattern name, the matched text)."""
    found = []
    for name, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            line_end = text.find("\n", match.end())
            line = text[line_start : line_end if line_end >= 0 else len(text)]
            if name == "bare #number" and is_colour(text, match):
                continue
            if Path(path).name in CITATION_FILES and CITATION_ISSUE.match(line):
                continue
            found.append((text.count("\n", 0, match.start()) + 1, name, match.group(0)))
    return sorted(found)


def tracked_text_files() -> dict[str, str]:
    """Every file ``git ls-files`` lists that is text (no NUL byte in its first 8 KiB), as
    text (undecodable bytes replaced), by its path in the repository."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True,
        timeout=SUBPROCESS_HANG_LIMIT,
    ).stdout.decode()  # fmt: skip
    files = {}
    for name in filter(None, listed.split("\0")):
        path = REPO / name
        if not path.is_file():  # deleted in the working tree, or a dangling link
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        files[name] = data.decode("utf-8", errors="replace")
    return files


def test_no_tracked_file_cites_an_issue_number() -> None:
    files = tracked_text_files()
    assert "README.md" in files and "netsim/__init__.py" in files  # the scan sees the project
    found = [
        f"{name}:{line}: {text!r} ({pattern})"
        for name, content in files.items()
        for line, pattern, text in references(content, name)
    ]
    assert not found, "cite the document, script, test or commit instead:\n" + "\n".join(found)


# The examples are assembled from pieces, so that this file holds no reference itself.
ISSUE, HASH, PR, TICKET, GH = "iss" + "ue", "#", "P" + "R", "tick" + "et", "G" + "H"


@pytest.mark.parametrize(
    "text",
    [
        f"before {ISSUE} 29's work",
        f"{ISSUE.title()} 28, done when: the example",
        f"({ISSUE} 30)",
        f"{ISSUE} {HASH}30",
        f"{ISSUE}s 26 and 29",
        f"{ISSUE} no. 7",
        f"{PR} 12",
        f"{PR} {HASH}12",
        f"see {GH}-12",
        f"fixed in {HASH}30.",
        f"{HASH}30 says",
        f"(see {HASH}4)",
        f"{TICKET} 9",
        "pull" + " request 5",
        f"at the {ISSUE}'s sizes",
        f"The {ISSUE}’s target is 15 s",
        f"as the {ISSUE} says",
        f"the {ISSUE} asks for a worked example",
        f"listed in the {TICKET}",
        "https://github.com/owner/repo/" + ISSUE + "s/30",
        "https://github.com/owner/repo/" + "pull/12",
    ],
)
def test_a_reference_is_found(text: str) -> None:
    assert references(text), text


@pytest.mark.parametrize(
    "text",
    [
        'color = "#1f77b4"',
        "ax.plot(x, color='#333333')",
        "color: #333",
        "background: #123456;",
        "see [the modes](components.md#2-round-mode-is-a-declared-capability)",
        "&#64; an entity",
        "x = 1  # 1 is the default",
        "# 2. Second step",
        "Alg. 2, lines 6–11; Fig. 3; §5.2; round 12; the 3rd repetition",
        "the rounds of a sweep; an issue with the clock",  # an issue as a problem, no number
        "pr = probability(0.5); prs = [pr]",
        "cols[#]",
        "row #a",
    ],
)
def test_no_reference_is_found_in(text: str) -> None:
    assert references(text) == [], text


def test_a_citations_journal_issue_is_not_a_reference() -> None:
    entry = f"    journal: Journal of Wireless Mobile Networks\n    {ISSUE}: 2\n"
    assert references(entry, "CITATION.cff") == []
    assert references(entry.replace("2", '"2"'), "CITATION.cff") == []
    assert references(entry, "docs/papers.md")  # anywhere else it reads as a tracker's number
