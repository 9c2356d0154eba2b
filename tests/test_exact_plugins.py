"""A plug-in answers whether it can run beside the compiled exact core
(``Component.exact_support``): an observer that answers yes keeps the run compiled, with the
same tables as on SimPy; one that does not sends the run to SimPy, which says why once on the
terminal and in the manifest (``docs/components.md``, Compiled forms)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

from netsim.contracts import Component, ExactSupport
from netsim.log import EventLog
from netsim.scenario.build import build_run
from netsim.scenario.loader import load_scenario
from tests.test_exact_core import assert_same_tables

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


def quickstart_with(observer: str):
    return load_scenario(
        QUICKSTART,
        ["duration=30min", f"components.traffic.kind=tests.exact_plugin_examples:{observer}",
         "components.traffic.every=5min"],
    )  # fmt: skip


def run(scenario, engine: str):
    log = EventLog()
    built = build_run(scenario, log, engine=engine)
    built.sim.run(scenario.duration)
    log.close()
    return built.exact_engine, log.to_frames()


def test_a_plugin_observer_that_answers_keeps_the_run_compiled():
    scenario = quickstart_with("Traffic")
    engine, tables = run(scenario, "auto")
    assert engine == "compiled"
    simpy_engine, simpy_tables = run(scenario, "simpy")
    assert simpy_engine == "simpy: asked for"
    assert_same_tables(simpy_tables, tables)  # its counters too, observed between events
    assert len(tables["traffic"]) == 7 and tables["traffic"]["sent"].iloc[-1] > 0


def test_a_plugin_without_an_answer_falls_back_and_says_why_once(capsys):
    scenario = quickstart_with("PlainTraffic")
    why = (
        "components.traffic (PlainTraffic) has no compiled form: its class does not answer "
        "exact_support"
    )
    assert run(scenario, "auto")[0] == f"simpy: {why}"
    assert run(scenario, "auto")[0] == f"simpy: {why}"  # the manifest's, every run
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"netsim: exact mode runs on SimPy, not the compiled core: {why}"]


def test_asking_for_simpy_says_nothing(capsys):
    run(quickstart_with("PlainTraffic"), "simpy")
    assert "exact mode" not in capsys.readouterr().err


def test_an_answer_names_a_role_and_a_no_says_why():
    with pytest.raises(ValueError, match="role"):
        ExactSupport(True, role="somewhere")
    with pytest.raises(ValueError, match="why"):
        ExactSupport(False)
    assert not Component.exact_support(object(), None).ok  # type: ignore[arg-type]


def test_the_guide_shows_the_tested_plugin():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "components.md").read_text(
        encoding="utf-8"
    )
    section = guide.split("## 9. Compiled forms", 1)[1].split("\n## ", 1)[0]
    code = (Path(__file__).with_name("exact_plugin_examples.py")).read_text(encoding="utf-8")
    blocks = section.split("```python\n")[2:]
    assert blocks and all(block.split("```", 1)[0] in code for block in blocks)


def plain_traffic_scenario(
    tmp_path: Path, *, duration: str = "4h", more: str = ""
) -> tuple[Path, dict[str, str]]:
    """The quick-start scenario with the plug-in that has no compiled form, its ``duration``
    and ``more`` top-level keys, as a file a ``netsim`` process reads, and that process's
    environment (the tests' package importable)."""
    text = (
        QUICKSTART.read_text(encoding="utf-8")
        .replace("../traces/", f"{QUICKSTART.parents[1] / 'traces'}/")
        .replace("\nduration: 4h\n", f"\nduration: {duration}\n")
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        text + "components:\n  traffic: {kind: 'tests.exact_plugin_examples:PlainTraffic', "
        "every: 5min}\n" + more,
        encoding="utf-8",
    )
    return scenario, {**os.environ, "PYTHONPATH": str(QUICKSTART.parents[1])}


def test_a_quiet_run_prints_only_its_directory_and_a_loud_one_says_why(tmp_path):
    """``netsim run -q`` prints the run directory only (or one error message): the fallback's
    reason goes to the manifest, not the terminal; without ``-q`` the terminal gets it."""
    scenario, environment = plain_traffic_scenario(tmp_path)
    told = "netsim: exact mode runs on SimPy, not the compiled core: components.traffic"
    for quiet in (True, False):
        done = subprocess.run(
            [sys.executable, "-m", "netsim", "run", str(scenario), "--set", "duration=10min",
             "--out", str(tmp_path / "runs"), *(["-q"] if quiet else [])],
            capture_output=True, text=True, env=environment, timeout=SUBPROCESS_HANG_LIMIT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (told in done.stderr) is not quiet, done.stderr
        if quiet:
            assert done.stderr == "" and len(done.stdout.splitlines()) == 1


def test_a_sweep_says_each_fallback_once_with_its_count_and_a_quiet_one_not_at_all(tmp_path):
    """``netsim sweep``'s runs (on worker processes) print no fallback line of their own:
    the sweep says each reason once, after its count of runs, with how many runs it held
    for; under ``-q`` nothing but the sweep directory."""
    scenario, environment = plain_traffic_scenario(
        tmp_path,
        duration="5min",
        more="sweep:\n  grid: {components.traffic.every: [5min, 10min, 15min]}\n",
    )
    told = (
        "netsim: exact mode ran on SimPy, not the compiled core, in 3 of the 3 runs: "
        "components.traffic (PlainTraffic) has no compiled form"
    )
    for quiet in (False, True):
        done = subprocess.run(
            [sys.executable, "-m", "netsim", "sweep", str(scenario), "--workers", "2",
             "--out", str(tmp_path / f"sweeps-{quiet}"), *(["-q"] if quiet else [])],
            capture_output=True, text=True, env=environment, timeout=SUBPROCESS_HANG_LIMIT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "runs on SimPy" not in done.stderr, done.stderr  # no worker's own line
        if quiet:
            assert done.stderr == "" and len(done.stdout.splitlines()) == 1
        else:
            assert [line for line in done.stderr.splitlines() if "SimPy" in line] == [
                line for line in done.stderr.splitlines() if line.startswith(told)
            ] and told in done.stderr, done.stderr


def test_a_quiet_run_called_in_process_leaves_the_fallbacks_told(tmp_path, capsys):
    """``netsim run -q`` keeps its own run quiet; called in a process that goes on (``main``
    from Python, as the tests do), it left every later run of that process silent about its
    fallback, so whether a test saw the message depended on the tests run before it."""
    from netsim.cli import main
    from netsim.scenario.build import tell_fallback

    out = str(tmp_path / "runs")
    assert main(["run", str(QUICKSTART), "--set", "duration=1min", "--out", out, "-q"]) == 0
    capsys.readouterr()
    tell_fallback("told after a quiet run")
    assert capsys.readouterr().err == (
        "netsim: exact mode runs on SimPy, not the compiled core: told after a quiet run\n"
    )
