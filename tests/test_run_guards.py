"""Runs that cannot lose each other, hang, or fail without saying which component failed:
concurrent writers of one run name, the run time limit (``--run-timeout``) of ``netsim run``
and ``netsim sweep``, and a plugin's exception named by its component and scenario key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

from netsim.cli import main
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
    ended = [
        (process.wait(timeout=SUBPROCESS_HANG_LIMIT), *process.communicate()) for process in runs
    ]
    codes = sorted(code for code, _, _ in ended)
    assert codes == [0, 2], ended
    (winner,) = [seed for seed, (code, _, _) in zip((1, 2), ended, strict=True) if code == 0]
    ((_, _, err),) = [e for e in ended if e[0] == 2]
    assert err.count("netsim: error:") == 1 and "Traceback" not in err, err
    final = out / "same"
    # the holder's pid is named once it has written it (a run that has just taken the lock
    # has not yet: then the message names no pid)
    assert err in (
        f"netsim: error: {final}: another netsim run (pid {runs[winner - 1].pid}) is writing a "
        "run of this name now; choose another --name, or wait for it to finish\n",
        f"netsim: error: {final}: another netsim run is writing a "
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

    scenario = write(tmp_path / "s.yaml", TINY.replace("duration: 10min", "duration: 2h"))
    out = tmp_path / "runs"
    first = netsim_process("run", scenario, "--out", out, "--name", "same", "-q", cwd=tmp_path)
    deadline = time.monotonic() + SUBPROCESS_HANG_LIMIT
    while time.monotonic() < deadline and not (out / ".same.claim").exists():
        time.sleep(0.05)
    assert (out / ".same.claim").exists()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=SUBPROCESS_HANG_LIMIT)
    again = subprocess.run(
        [sys.executable, "-m", "netsim", "run", str(scenario), "--out", str(out), "--name",
         "same", "-q", "--set", "duration=1min"],
        capture_output=True, text=True, cwd=tmp_path, timeout=SUBPROCESS_HANG_LIMIT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "same" / "manifest.json").read_text())["simulated_seconds"] == 60


# --- a plugin that loops or raises ---------------------------------------------------------

PLUGIN = '''\
"""Walk agents that misbehave once the simulated clock passes ``after`` seconds."""

from netsim.api import ComponentConfig, WalkAgent


class AgentConfig(ComponentConfig):
    after: float = 30.0


class LoopingAgent(WalkAgent):
    Config = AgentConfig

    def visit(self, node, state, steps, walk, now):
        while now > self.config.after:
            pass
        return state


class RaisingAgent(WalkAgent):
    Config = AgentConfig

    def visit(self, node, state, steps, walk, now):
        if now > self.config.after:
            raise ValueError(f"no model for node {node}")
        return state


from netsim.api import Mechanism  # noqa: E402


class RaisingMechanism(Mechanism):
    """A noise mechanism with a bug: its first release divides by zero."""

    def release(self, value, *, sensitivity, epsilon, rng):
        return value * (1 / 0), None
'''
MODULE = "netsim_guard_plugins"


@pytest.fixture
def plugin(tmp_path_factory, monkeypatch) -> str:
    """The plugin module, importable here and in the worker processes this test starts."""
    directory = tmp_path_factory.getbasetemp() / "plugins"
    directory.mkdir(exist_ok=True)
    write(directory / f"{MODULE}.py", PLUGIN)
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(directory), str(REPO)]))
    return MODULE


def with_agent(kind: str, after: float = 30.0) -> str:
    agent = f"  agent: {{kind: '{kind}', after: {after}}}\n"
    return TINY.replace("  sample_every: 10s\n", "  sample_every: 10s\n" + agent)


def test_a_plugin_that_loops_for_ever_is_stopped_by_the_run_timeout(tmp_path, plugin, capsys):
    """A walk agent looping for ever hung netsim run: there was no time limit."""
    scenario = write(tmp_path / "s.yaml", with_agent(f"{plugin}:LoopingAgent"))
    out = tmp_path / "runs"
    started = time.monotonic()
    code = main(["run", str(scenario), "--out", str(out), "-q", "--run-timeout", "1s"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == (
        f"netsim: error: {scenario}: the run did not finish within its time limit of 1 s of "
        "wall time; it was stopped at 35 s of 600 s simulated, in walk.agent "
        f"({plugin}:LoopingAgent)\n"
    )  # its first visit after 30 s (at the seed's 35 s) never returned
    assert err.count("\n") == 1 and "Traceback" not in err
    assert elapsed < 30  # the limit, not the loop, ended it
    assert not out.exists() or list(out.iterdir()) == []  # no staging directory left


def test_a_plugin_that_raises_is_one_message_naming_its_key(tmp_path, plugin, capsys):
    """A plugin's exception ended netsim run in the plugin's own traceback, naming neither
    the component nor its key."""
    scenario = write(tmp_path / "s.yaml", with_agent(f"{plugin}:RaisingAgent"))
    out = tmp_path / "runs"
    code = main(["run", str(scenario), "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert re.fullmatch(
        rf"netsim: error: {re.escape(str(scenario))}: walk\.agent \({plugin}:RaisingAgent\) "
        r"raised ValueError: no model for node \d+ \(netsim run --traceback prints its "
        r"traceback\)\n",
        err,
    ), err
    assert not out.exists() or list(out.iterdir()) == []
    # --traceback: the plugin's traceback for its author, then the one message
    code = main(["run", str(scenario), "--out", str(out), "-q", "--traceback"])
    err = capsys.readouterr().err
    assert code == 2
    traceback, message = err.rsplit("netsim: error: ", 1)
    assert traceback.startswith("Traceback (most recent call last):\n")
    assert f'{plugin}.py", line 24, in visit\n' in traceback
    assert traceback.endswith(f"ValueError: {message.split('raised ValueError: ')[1]}")
    assert message.startswith(f"{scenario}: walk.agent ({plugin}:RaisingAgent) raised ")


def test_a_plugin_mechanism_that_raises_is_one_message_naming_its_key(tmp_path, plugin, capsys):
    """A noise mechanism named inside the learning section (not a section itself) ended the run
    in a traceback: SimPy re-raises a copy of the exception, whose frames are netsim's; the
    original's name the plugin."""
    scenario = write(tmp_path / "s.yaml", f"""\
name: mechanism
seed: 1
nodes: 50
duration: 60s
topology: {{kind: ring, k: 2}}
walk: {{kind: ideal, sampling: without_replacement, agent: {{kind: sgd}}}}
learning:
  dataset: {{name: spambase}}
  noise: {plugin}:RaisingMechanism
  evaluate_every: 20
""")
    code = main(["run", str(scenario), "--out", str(tmp_path / "runs"), "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == (
        f"netsim: error: {scenario}: learning.noise ({plugin}:RaisingMechanism) raised "
        "ZeroDivisionError: division by zero (netsim run --traceback prints its traceback)\n"
    ), err


def test_a_sweep_records_a_run_past_its_time_limit_as_failed_and_goes_on(tmp_path, plugin, capsys):
    """A run that loops for ever hung the whole sweep; now it fails with the reason, and the
    other runs complete."""
    sweep = "sweep:\n  grid:\n    walk.agent.after: [1.0e9, 30.0]\n"
    scenario = write(tmp_path / "s.yaml", with_agent(f"{plugin}:LoopingAgent") + sweep)
    out = tmp_path / "out"
    argv = ["sweep", str(scenario), "--out", str(out), "--workers", "1", "--run-timeout", "1"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "2 runs: 1 ran, 0 were already complete, 1 failed" in err
    (record,) = (out / "tiny-walk" / "failures").iterdir()
    failure = json.loads(record.read_text())
    assert failure["run"] == 1
    assert failure["error"] == (
        "RunTimeoutError: the run did not finish within its time limit of 1 s of wall time; "
        f"it was stopped at 31 s of 600 s simulated, in walk.agent ({plugin}:LoopingAgent)"
    )
    assert f"  run 1 ({failure['run_id']}): {failure['error']}\n" in err
    assert "in visit\n" in failure["traceback"]  # where the plugin was when it was stopped


def test_the_time_limit_stops_a_loop_in_another_thread():
    """A Dask worker runs its tasks in threads, where no signal handler runs: the limit is
    raised there by a watcher thread."""
    from netsim.signals import RunTimedOut, TimeLimit, wall_clock_limit

    ended: list[object] = []

    def loop() -> None:
        limit = TimeLimit(0.2)
        try:
            with wall_clock_limit(limit):
                while True:
                    pass
        except RunTimedOut:
            ended.append(limit.passed)

    worker = threading.Thread(target=loop)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and ended == [True]


#: A run under a time limit in a thread, then one function called under a tracer.
TRACED_AFTER_A_LIMITED_RUN = """\
import sys, threading
from netsim.signals import RunTimedOut, TimeLimit, wall_clock_limit

def run(loops: bool) -> None:
    try:
        with wall_clock_limit(TimeLimit(0.2)):
            while loops:
                pass
    except RunTimedOut:
        pass

worker = threading.Thread(target=run, args=({loops},))
worker.start()
worker.join()
sys.{hook}(lambda *event: None)
(lambda: None)()
sys.{hook}(None)
print("returned")
"""


@pytest.mark.parametrize("hook", ["settrace", "setprofile"])
@pytest.mark.parametrize("loops", [True, False], ids=["stopped-by-the-limit", "in-time"])
def test_a_limited_run_in_a_thread_leaves_no_pending_exception_flag(hook, loops):
    """Once a run under a time limit had ended in a thread (a Dask worker's), the next
    function called under a tracer or profiler (a debugger, coverage; a test's tracer) never
    returned: clearing the exception the watcher might have scheduled left the interpreter
    flagged as having one pending. Run in a process of its own: that process hangs."""
    script = TRACED_AFTER_A_LIMITED_RUN.format(loops=loops, hook=hook)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=SUBPROCESS_HANG_LIMIT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"a function called under sys.{hook} never returned")
    assert (done.returncode, done.stdout, done.stderr) == (0, "returned\n", "")


def test_a_run_timeout_must_be_a_positive_duration(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "s.yaml", "--run-timeout", "0"])
    assert stop.value.code == 2
    assert "argument --run-timeout: '0': a time limit is a duration > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["run", "s.yaml", "--run-timeout", "1e300"])
    assert stop.value.code == 2
    assert "'1e300': a time limit is at most 1e+09 s" in capsys.readouterr().err
