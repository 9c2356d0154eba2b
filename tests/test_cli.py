"""The ``netsim`` command line: ``run`` output, run directories, seeds, determinism, interrupts."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import SUBPROCESS_HANG_LIMIT

import netsim
import netsim.scenario.runner as runner
from netsim.analysis import load_run
from netsim.cli import EXIT_INTERRUPTED, build_parser, main
from netsim.storage import PARTIAL_MARK, is_complete_run

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
SMALL = ("--set", "duration=20min", "--set", "nodes=200")


def run_cli(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> tuple[Path, str]:
    """``netsim run quickstart --out out <small> *extra``; returns (run directory, stdout)."""
    code = main(["run", str(QUICKSTART), "--out", str(out), *SMALL, *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    last = captured.out.splitlines()[-1]
    return Path(last), captured.out


def read_manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text(encoding="utf-8"))


def test_run_prints_run_directory_as_last_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    directory, stdout = run_cli(capsys, out)
    assert stdout.endswith(f"\n{directory}\n")
    assert directory.parent == out
    assert directory.is_dir()
    assert is_complete_run(directory)
    manifest = read_manifest(directory)
    assert directory.name == manifest["run_id"]
    assert manifest["run_id"].startswith("quickstart-seed1-")
    # the summary comes before the directory
    assert stdout.startswith("scenario quickstart: 200 nodes, 20min simulated, seed 1\n")
    assert "wall time: " in stdout
    # only the run directory is left under --out
    assert [p.name for p in out.iterdir()] == [directory.name]


def test_quiet_run_prints_only_the_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    directory, stdout = run_cli(capsys, tmp_path / "runs", "-q")
    assert stdout == f"{directory}\n"
    assert is_complete_run(directory)


def test_run_directory_contents(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    directory, _ = run_cli(capsys, tmp_path / "runs", "-q")
    manifest = read_manifest(directory)
    assert manifest["status"] == "complete"
    assert manifest["seed"] == 1
    assert manifest["scenario_name"] == "quickstart"
    assert manifest["simulated_seconds"] == 1200.0
    assert manifest["netsim_version"] == netsim.__version__
    tables = manifest["tables"]
    assert {"samples", "churn", "broadcasts"} <= set(tables)
    parquet = {p.stem for p in directory.glob("*.parquet")}
    assert parquet == set(tables)
    for name, rows in tables.items():
        assert pq.read_metadata(directory / f"{name}.parquet").num_rows == rows, name
    # 20 min sampled every minute, plus the sample at the end
    assert tables["samples"] == 21
    files = {p.name for p in directory.iterdir()}
    assert files == {"scenario.yaml", "manifest.json"} | {f"{t}.parquet" for t in tables}
    resolved = yaml.safe_load((directory / "scenario.yaml").read_text(encoding="utf-8"))
    assert resolved["seed"] == 1
    assert resolved["nodes"] == 200
    assert resolved["duration"] == 1200.0


def test_load_run_tags_rows_with_run_id(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    directory, _ = run_cli(capsys, tmp_path / "runs", "-q")
    manifest = read_manifest(directory)
    frames = load_run(directory)
    assert set(frames) == set(manifest["tables"])
    for name, frame in frames.items():
        assert frame.columns[0] == "run_id", name
        assert len(frame) == manifest["tables"][name], name
        assert (frame["run_id"] == manifest["run_id"]).all(), name
    assert len(frames["samples"]) > 0


def test_seed_option_changes_run_id_and_recorded_seed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    default, _ = run_cli(capsys, tmp_path / "runs", "-q")
    seeded, _ = run_cli(capsys, tmp_path / "runs", "-q", "--seed", "7")
    assert seeded != default
    assert default.name.startswith("quickstart-seed1-")
    assert seeded.name.startswith("quickstart-seed7-")
    assert read_manifest(seeded)["seed"] == 7
    assert read_manifest(seeded)["run_id"] == seeded.name
    resolved = yaml.safe_load((seeded / "scenario.yaml").read_text(encoding="utf-8"))
    assert resolved["seed"] == 7
    # both runs are kept side by side
    assert is_complete_run(default)
    assert is_complete_run(seeded)


def test_same_command_twice_gives_identical_tables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    first, _ = run_cli(capsys, out, "-q")
    before = {p.name: p.read_bytes() for p in sorted(first.glob("*.parquet"))}
    scenario_before = (first / "scenario.yaml").read_bytes()
    second, _ = run_cli(capsys, out, "-q")
    assert second == first
    after = {p.name: p.read_bytes() for p in sorted(second.glob("*.parquet"))}
    assert before.keys() == after.keys()
    assert len(before) > 0
    for name, data in before.items():
        assert after[name] == data, name
    assert (second / "scenario.yaml").read_bytes() == scenario_before
    # the second run replaced the first: nothing retired or staged is left behind
    assert [p.name for p in out.iterdir()] == [first.name]


def test_same_command_in_another_directory_gives_identical_tables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, _ = run_cli(capsys, tmp_path / "a", "-q")
    b, _ = run_cli(capsys, tmp_path / "b", "-q")
    assert a.name == b.name
    files_a = sorted(p.name for p in a.glob("*.parquet"))
    assert files_a == sorted(p.name for p in b.glob("*.parquet"))
    for name in files_a:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_python_m_netsim_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "netsim", "--version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_HANG_LIMIT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"netsim {netsim.__version__}\n"
    assert result.stdout.startswith("netsim 0.")


def test_interrupted_run_leaves_no_complete_looking_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_build_run = runner.build_run
    interrupted_at: list[float] = []

    def build_run_then_interrupt(scenario, log, **options):  # type: ignore[no-untyped-def]
        built = real_build_run(scenario, log, **options)
        real_run = built.sim.run

        def run(until: float, *, progress=None) -> None:  # type: ignore[no-untyped-def]
            real_run(until / 2, progress=progress)  # write some rows first
            interrupted_at.append(built.sim.now)
            raise KeyboardInterrupt

        built.sim.run = run  # type: ignore[method-assign]
        return built

    monkeypatch.setattr(runner, "build_run", build_run_then_interrupt)
    out = tmp_path / "runs"
    code = main(["run", str(QUICKSTART), "--out", str(out), *SMALL])
    captured = capsys.readouterr()
    assert code == EXIT_INTERRUPTED == 130
    assert interrupted_at == [600.0]
    assert captured.err == "netsim: interrupted; no partial run directory was kept\n"
    assert "Traceback" not in captured.err
    assert captured.out == ""
    children = list(out.iterdir()) if out.exists() else []
    assert not any(is_complete_run(child) for child in children)
    assert not any(PARTIAL_MARK in child.name for child in children)
    assert children == []


def test_sigterm_removes_the_staging_directory(tmp_path):
    import os
    import signal
    import time

    from netsim.storage import is_complete_run

    out = tmp_path / "runs"
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
    # a long run: the quickstart's 4 hours take a fraction of a second on the compiled core
    process = subprocess.Popen(
        [sys.executable, "-m", "netsim", "run", str(scenario), "--out", str(out),
         "--set", "duration=500h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while not (out.exists() and any(out.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # well inside the run
    os.kill(process.pid, signal.SIGTERM)
    _, err = process.communicate(timeout=SUBPROCESS_HANG_LIMIT)
    assert process.returncode == 143
    assert "terminated; no partial run directory was kept" in err
    assert list(out.iterdir()) == []
    assert not any(is_complete_run(p) for p in out.glob("*"))


TRACES = Path(__file__).resolve().parents[1] / "traces"


def test_trace_info_convert_and_synth(tmp_path, capsys):
    from netsim.cli import main
    from netsim.traces.intervals import read_canonical_trace

    shipped = TRACES / "stunner-synthetic.csv"
    assert main(["trace", "info", str(shipped), "--plot", str(tmp_path / "fig1.png")]) == 0
    out = capsys.readouterr().out
    assert "nodes: 2000" in out and "online share of node-time" in out
    assert (tmp_path / "fig1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["trace", "convert", str(shipped), str(tmp_path / "t.tab")]) == 0
    assert main(["trace", "convert", str(tmp_path / "t.tab"), str(tmp_path / "back.csv")]) == 0
    original, back = read_canonical_trace(shipped), read_canonical_trace(tmp_path / "back.csv")
    assert np.allclose(np.sort(original.end - original.start), np.sort(back.end - back.start))
    params = TRACES / "stunner-synthetic-params.json"
    assert (
        main(
            [
                "trace",
                "synth",
                "--params",
                str(params),
                "--out",
                str(tmp_path / "s.csv"),
                "--nodes",
                "50",
                "--duration",
                "1d",
            ]
        )
        == 0
    )
    assert read_canonical_trace(tmp_path / "s.csv").node_count == 50


def test_trace_commands_reject_bad_input(tmp_path, capsys):
    from netsim.cli import main

    assert main(["trace", "info", str(tmp_path / "absent.csv")]) == 2
    assert "absent.csv" in capsys.readouterr().err
    assert main(["trace", "synth", "--nodes", "5"]) == 2
    assert "give --like FILE" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("node,start,end\na,5,1\n")
    assert main(["trace", "info", str(tmp_path / "bad.csv")]) == 2
    assert "line 2: interval end 1.0 is not after its start 5.0" in capsys.readouterr().err


# --- file-system faults ----------------------------------------------------------------------


def test_a_full_disk_ends_in_one_message_and_leaves_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import netsim.log

    def full_disk(path):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(netsim.log, "fsync_file", full_disk)
    out = tmp_path / "runs"
    code = main(["run", str(QUICKSTART), "--out", str(out), *SMALL])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("netsim: error:") == 1 and "Traceback" not in err
    assert "the run failed on a file operation (No space left on device); nothing was kept" in err
    assert list(out.iterdir()) == []


def test_a_run_removes_what_killed_runs_of_it_left_behind(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = runner.run_scenario(runner.with_seed(_small_quickstart()), out=out)
    dead, alive = 2**22 + 12345, 1  # no such process; init (always running)
    for pid in (dead, alive):
        (out / f".{first.run_id}{PARTIAL_MARK}{pid}").mkdir()
        (out / f".{first.run_id}.old-{pid}-0").mkdir()
    runner.run_scenario(first.scenario, out=out)
    left = sorted(child.name for child in out.iterdir())
    assert left == sorted(
        [first.run_id, f".{first.run_id}{PARTIAL_MARK}{alive}", f".{first.run_id}.old-{alive}-0"]
    )


def test_publishing_over_a_run_published_meanwhile_keeps_one_complete_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of one scenario and seed into one --out: the rename onto a directory the other
    process just published fails (ENOTEMPTY); the move is retried, and if the other keeps
    winning its identical complete run stands."""
    import errno
    import os
    import shutil

    import netsim.storage as storage

    out = tmp_path / "runs"
    first = runner.run_scenario(runner.with_seed(_small_quickstart()), out=out)
    final = first.directory
    theirs = tmp_path / "the other process's run"
    shutil.copytree(final, theirs)
    real_replace = os.replace
    losses = {"left": 2}

    def contested(src, dst):  # type: ignore[no-untyped-def]
        if Path(dst) == final and PARTIAL_MARK in Path(src).name and losses["left"] > 0:
            losses["left"] -= 1
            if not final.exists():  # the other process published just before us
                shutil.copytree(theirs, final)
            raise OSError(errno.ENOTEMPTY, "Directory not empty")
        real_replace(src, dst)

    monkeypatch.setattr(storage.os, "replace", contested)
    runner.run_scenario(first.scenario, out=out)  # wins on the third attempt
    assert [child.name for child in out.iterdir()] == [first.run_id]
    losses["left"] = 10**6  # the other process always wins: ours is dropped
    runner.run_scenario(first.scenario, out=out)
    assert [child.name for child in out.iterdir()] == [first.run_id]
    assert is_complete_run(final)


def _small_quickstart():  # type: ignore[no-untyped-def]
    from netsim.scenario import load_scenario

    return load_scenario(QUICKSTART, [item for item in SMALL if item != "--set"])


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("a-file/out.csv", "a-file/out.csv: Not a directory"),
        ("missing/sub/out.csv", "missing/sub/out.csv: No such file or directory"),
        ("a-directory.csv", "a-directory.csv: Is a directory"),
    ],
)
def test_trace_convert_onto_a_bad_target_ends_in_one_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, expected: str
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    (tmp_path / "a-directory.csv").mkdir()
    source = REPO / "traces" / "stunner-synthetic.csv"
    code = main(["trace", "convert", str(source), str(tmp_path / target)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err == f"netsim: error: {tmp_path / expected}\n"
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no temporary file left


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every sub-command parser below it, by their command lines."""
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_parsers(sub))
    return found


def test_every_command_and_argument_has_help_text() -> None:
    missing = []
    for prog, parser in _parsers(build_parser()):
        if not parser.description:
            missing.append(f"{prog}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if not choice.help:
                        missing.append(f"{prog} {choice.dest}: no help")
            elif not action.help:
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def on_a_terminal(command: list[str], cwd: Path) -> tuple[int, list[str]]:
    """Run ``command`` with stderr on a pseudo-terminal of 100 × 24; its exit status and the
    frames it drew there (split at carriage returns)."""
    import fcntl
    import os
    import select
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave
    )
    os.close(slave)
    drawn = b""
    while True:
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    status = process.wait(timeout=SUBPROCESS_HANG_LIMIT)
    return status, [f for f in drawn.decode(errors="replace").split("\r") if f.strip()]


def percent(frame: str) -> int | None:
    found = re.search(r"(\d+)%\|", frame)
    return int(found.group(1)) if found else None


def test_progress_on_a_terminal_shows_the_simulated_clock_and_sweeps_advance_within_runs(
    tmp_path,
):
    scenario = yaml.safe_load((REPO / "scenarios" / "quickstart.yaml").read_text())
    # 2,000 nodes gossiping every second: on the compiled exact core the quickstart's own
    # size runs in a fraction of a second, too fast for the bar to be seen mid-run
    scenario.update(nodes=2000, duration="2h")
    scenario["gossip"]["period"] = "1s"
    scenario["churn"]["path"] = str(REPO / "traces" / "stunner-synthetic.csv")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(scenario))
    status, frames = on_a_terminal(
        [sys.executable, "-m", "netsim", "run", "run.yaml", "--out", "runs"], tmp_path
    )
    assert status == 0, frames
    running = [f for f in frames if "of 2h simulated" in f and 0 < (percent(f) or 0) < 100]
    assert running and all("sim s/s" in f for f in running), frames
    # runs long enough (a few seconds each) for the bar to be read while the first one runs,
    # also on a loaded machine
    scenario["duration"] = "8h"
    scenario["sweep"] = {"grid": {"nodes": [2000]}, "repetitions": 2}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(scenario))
    status, frames = on_a_terminal(
        [sys.executable, "-m", "netsim", "sweep", "sweep.yaml", "--workers", "1", "--out", "s"],
        tmp_path,
    )
    assert status == 0
    # the bar moves while the first run is still running, and ends at both runs
    within = [f for f in frames if "0/2 runs, 1 running" in f and (percent(f) or 0) > 0]
    assert within, frames
    assert any("2/2 runs" in f and percent(f) == 100 for f in frames), frames
    assert not (tmp_path / "s" / "quickstart" / "runs" / ".progress").exists()
