"""The tutorial (docs/tutorial.md) works: its shell and Python blocks, run in order in an
empty directory, succeed and leave the outputs the tutorial talks about."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
#: A fenced block: its info string (language) and its text. Only ``sh`` and ``python`` blocks
#: are run; ``console`` blocks (installing netsim) and the others are for reading.
BLOCK = re.compile(r"^```(?P<language>[^\s`]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.M | re.S)


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every ``sh`` and ``python`` block, in the order of the page."""
    return [
        (match["language"], match["body"])
        for match in BLOCK.finditer(text)
        if match["language"] in ("sh", "python")
    ]


def test_the_tutorial_has_shell_and_python_blocks() -> None:
    languages = [language for language, _ in runnable_blocks(TUTORIAL.read_text("utf-8"))]
    assert languages.count("sh") >= 4 and languages.count("python") >= 3


def test_the_tutorial_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the tutorial runs from the root of a checkout: link what it reads from there
    for name in ("scenarios", "traces"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")  # figures are written to files, never shown
    # the netsim command of this interpreter, even if another one is first on PATH
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    namespace: dict[str, object] = {"__name__": "__tutorial__"}
    for index, (language, code) in enumerate(runnable_blocks(TUTORIAL.read_text("utf-8"))):
        if language == "sh":
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", code],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=SUBPROCESS_HANG_LIMIT,
            )
            assert done.returncode == 0, (
                f"shell block {index} failed ({done.returncode}):\n{code}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        else:
            exec(compile(code, f"docs/tutorial.md block {index}", "exec"), namespace)

    runs = [path for path in (tmp_path / "runs").glob("quickstart-*") if path.is_dir()]
    assert len(runs) == 1 and (runs[0] / "manifest.json").is_file()
    report = tmp_path / "runs" / "tutorial-gossip-period" / "report"
    assert (report / "report.md").is_file()
    assert list(report.glob("*.png"))
    assert (tmp_path / "online.png").is_file()
