"""Shared fixtures: where the research-only data lives, and small scenario builders."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
STUNNER_TRACE = SHARED_DATA / "traces" / "stunner" / "peersim_session_100.txt"


def require_shared(path: Path) -> Path:
    """Skip the calling test, saying why, when a file of ../shared/data is not available."""
    if not path.is_file():
        pytest.skip(
            f"data file {path} is absent (research-only or large data is read from "
            "../shared/data and never committed)"
        )
    return path


@pytest.fixture
def stunner_trace() -> Path:
    return require_shared(STUNNER_TRACE)
