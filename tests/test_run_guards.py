"""Runs that cannot lose each other, hang, or fail without saying which component failed:
concurrent writers of one run name, the run time limit (``--run-timeout``) of ``netsim run``
and ``netsim sweep``, and a plugin's exception named by its component and scenario key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netsim.storage import complete_manifest
from tests.test_bad_input import write

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "traces" / "stunner-synthetic.csv"

TINY = f"""\
name: tiny-walk
seed: 7
nodes: 40
duration: 10min
topology: {{kind: k_out, k: 5}}
links:
  delay: {{dist: uniform, low: 10ms, high: 50ms}}
churn: {{kind: trace, path: {TRACE}}}
gossip: {{period: 1s}}
walk:
  kind: service
  transfer_time: 1s
  timeout: 11s
  sample_every: 10s
metrics: {{sample_every: 10s}}
"""


def netsim_process(*argv: object, cwd: Path, env: dict[str, str] | None = None):
    """``python -m netsim *argv`` started in the background (this checkout's netsim)."""
    return subprocess.Popen(
        [sys.executable, "-m", "netsim", *map(str, argv)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )  # fmt: skip


# --- one name, one writer ------------------------------------------------------------------


@pytest.mark.parametrize("pair", range(3))
def test_two_concurrent_runs_of_one_name_never_both_succeed(tmp_path, pair):
    """Two ``netsim run --name same`` with different seeds into one --out at once: both
    passed the check that the name was free, both exited 0 printing the same directory, and
    the first run was replaced by the second."""
    scenario = write(tmp_path / "s.yaml", TINY)
    out = tmp_path / "runs"
    runs = [
        netsim_process("run", scenario, "--out", out, "--name", "same", "--seed", seed, "-q",
                       cwd=tmp_path)
        for seed in (1, 2)
    ]  # fmt: skip
    ended = [(process.wait(timeout=120), *process.communicate()) for process in runs]
    codes = sorted(code for code, _, _ in ended)
    assert codes == [0, 2], ended
    (winner,) = [seed for seed, (code, _, _) in zip((1, 2), ended, strict=True) if code == 0]
    ((_, _, err),) = [e for e in ended if e[0] == 2]
    assert err.count("netsim: error:") == 1 and "Traceback" not in err, err
    final = out / "same"
    assert err in (
        f"netsim: error: {final}: another netsim run (pid {runs[winner - 1].pid}) is writing a "
        "run of this name now; choose another --name, or wait for it to finish\n",
        f"netsim: error: {final}: holds another run (scenario 'tiny-walk', seed {winner}); "
        "choose another --name or remove it\n",
    )
    manifest = complete_manifest(final)
    assert manifest is not None and manifest["seed"] == winner
    assert sorted(p.name for p in out.iterdir()) == ["same"]  # no claim, no staging left


def test_a_named_run_takes_its_claim_back_after_a_kill(tmp_path):
    """The claim is a lock the kernel drops with its process: a run killed half-way does not
    keep its name from the next one."""
    import signal
    import time

    scenario = write(tmp_path / "s.yaml", TINY.replace("duration: 10min", "duration: 2h"))
    out = tmp_path / "runs"
    first = netsim_process("run", scenario, "--out", out, "--name", "same", "-q", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / ".same.claim").exists():
        time.sleep(0.05)
    assert (out / ".same.claim").exists()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    again = subprocess.run(
        [sys.executable, "-m", "netsim", "run", str(scenario), "--out", str(out), "--name",
         "same", "-q", "--set", "duration=1min"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "same" / "manifest.json").read_text())["simulated_seconds"] == 60
