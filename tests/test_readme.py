"""The README's snippets for reading runs run as pasted, in a fresh directory."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import SUBPROCESS_HANG_LIMIT

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Reading a run in pandas"


def section_blocks(text: str, heading: str) -> list[tuple[str, str]]:
    """The fenced code blocks (language, code) of the README section under ``heading``."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    body = text[start : end if end >= 0 else len(text)]
    return re.findall(r"```(\w+)\n(.*?)```", body, flags=re.DOTALL)


def test_the_readme_snippets_for_reading_runs_run_as_pasted(tmp_path, monkeypatch):
    blocks = section_blocks((REPO / "README.md").read_text(encoding="utf-8"), SECTION)
    assert [language for language, _ in blocks] == ["sh", "python", "python", "python"]
    for name in ("scenarios", "traces"):  # what the snippets' relative paths name
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {}
    for language, code in blocks:
        if language == "sh":
            result = subprocess.run(
                ["bash", "-e", "-c", code], capture_output=True, text=True,
                timeout=SUBPROCESS_HANG_LIMIT, env={**os.environ, "MPLBACKEND": "Agg"}, check=False,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
        else:
            exec(compile(code, "README.md", "exec"), namespace)
    tables, long = namespace["tables"], namespace["long"]
    assert (tables["samples"]["duration"] == 1800.0).all()  # type: ignore[index]
    assert set(long["duration"]) == {1800.0}  # type: ignore[index]
    assert namespace["result"]["broadcasts"]["update"].size >= 2  # type: ignore[index]
    assert (tmp_path / "runs" / "quickstart-30min" / "manifest.json").is_file()
