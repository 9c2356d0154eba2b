"""The notebooks (notebooks/*.ipynb) run from top to bottom on short settings, and are kept
without outputs (a notebook's outputs are what a reader makes, not what the repository holds)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_the_three_notebooks():
    assert [p.stem for p in NOTEBOOKS] == ["getting-started", "private-learning", "random-walk"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_runs_on_short_settings_and_is_committed_without_outputs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code), (
        f"{path.name} has outputs: clear them before committing"
    )
    monkeypatch.setenv("NETSIM_QUICK", "1")  # the kernel inherits it
    monkeypatch.delenv("MPLBACKEND", raising=False)  # Jupyter's inline backend draws
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": path.parent}}
    )
    client.execute()
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} drew no figure"
