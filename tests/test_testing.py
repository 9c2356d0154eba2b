"""The public contract check (``netsim.testing``, ``netsim check``): it passes a component that
keeps the contract, names the check a broken one fails, and is what plugin packages run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from netsim.api import ComponentConfig, GossipApplication, Walk, WalkAgent
from netsim.errors import ComponentError, ScenarioError
from netsim.log import F64, TableSchema
from netsim.testing import ContractError, assert_component_contract, check_component
from tests.test_components import EXAMPLE, REPO, example_paths  # noqa: F401  (a fixture)

DECLARED = TableSchema(
    name="declared_values", columns=(("time", F64), ("value", F64)), description="values",
    role="samples", time="time",
)  # fmt: skip
UNDECLARED = TableSchema(
    name="undeclared_values", columns=(("time", F64),), description="not declared",
    role="samples", time="time",
)  # fmt: skip

_GLOBAL_DRAWS = np.random.default_rng()  # global state: what principle 2 forbids


class Quiet(GossipApplication):
    """Keeps the contract: sends nothing, writes its declared table at the end."""

    tables = (DECLARED,)

    def outgoing(self, node):
        return None

    def incoming(self, node, value, sender, transfer):
        return None

    def finish(self):
        self.ctx.table(DECLARED).append(self.ctx.sim.now, float(self.ctx.stream().random()))


class WritesUndeclared(Quiet):
    def finish(self):
        self.ctx.table(UNDECLARED).append(self.ctx.sim.now)


class Unseeded(Quiet):
    def finish(self):
        self.ctx.table(DECLARED).append(self.ctx.sim.now, float(_GLOBAL_DRAWS.random()))


class FinishesTwice(Quiet):
    def start(self):
        self.ctx.sim.at_end(self.finish)  # netsim calls finish() itself: now twice


class CrashesWhenBuilt(Quiet):
    def __init__(self, config, ctx):
        raise RuntimeError("no such array")


class NeedsKey(Quiet):
    class Config(ComponentConfig):
        size: int


class NoAgentWalkConfig(ComponentConfig):
    step_time: float = 1.0


class NoAgentWalk(Walk):
    """A walk whose Config forgot the agent key (netsim reads walk.agent of every walk)."""

    Config = NoAgentWalkConfig


class Idle(WalkAgent):
    def visit(self, node, state, steps, walk, now):
        return state


def failed(component, **options) -> dict[str, str]:
    return {r.check: r.detail for r in check_component(component, **options) if not r.ok}


def test_a_component_that_keeps_the_contract_passes_every_check():
    results = check_component(Quiet)
    assert [r.check for r in results] == [
        f"{Quiet.__module__}:Quiet is a usable gossip application",
        "a small scenario with it validates",
        "it builds on a small network and runs",
        "finish() is called exactly once per built component",
        "it writes only the tables its components declare",
        "the same seed gives identical tables",
    ]
    assert all(r.ok for r in results)
    assert_component_contract("tests.test_testing:Quiet")
    assert_component_contract("tests.test_testing:Idle")


@pytest.mark.parametrize(
    ("cls", "check", "detail"),
    [
        (WritesUndeclared, "it writes only the tables its components declare",
         "undeclared: undeclared_values"),
        (Unseeded, "the same seed gives identical tables", "declared_values"),
        (FinishesTwice, "finish() is called exactly once per built component",
         "components.x: 2 calls"),
        (CrashesWhenBuilt, "it builds on a small network and runs", "RuntimeError: no such array"),
        (NeedsKey, "a small scenario with it validates", "components.x.size: required key"),
        (NoAgentWalk, f"{__name__}:NoAgentWalk is a usable walk",
         "Config without the 'agent' key every walk has"),
    ],
)  # fmt: skip
def test_each_broken_component_fails_the_check_it_breaks(cls, check, detail):
    problems = failed(cls)
    assert list(problems) == [check] and detail in problems[check]
    with pytest.raises(ContractError, match=r"does not keep the component contract"):
        assert_component_contract(cls)


def test_the_keys_a_component_requires_can_be_given():
    assert failed(NeedsKey, keys={"size": 3}) == {}


def test_an_unknown_name_or_module_is_a_component_error():
    with pytest.raises(ComponentError, match=r"unknown value 'nope'; registered components"):
        check_component("nope")
    with pytest.raises(ComponentError, match=r"cannot import module 'nowhere'"):
        check_component("nowhere:Thing")


def test_a_walk_without_an_agent_key_is_a_validation_message_not_an_attribute_error():
    scenario = {
        "nodes": 10, "duration": "10s", "topology": {"kind": "ring"},
        "walk": {"kind": "tests.test_testing:NoAgentWalk"},
    }  # fmt: skip
    import netsim

    with pytest.raises(ScenarioError, match=r"walk\.kind: .*derive its Config from netsim\.api"):
        netsim.run(scenario)


def run_cli(*args: str, paths: list[str] = ()) -> subprocess.CompletedProcess:
    # imported here: `netsim check tests.test_testing:…` imports this module in a process
    # where conftest is not importable by that name
    from conftest import SUBPROCESS_HANG_LIMIT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO)])}
    return subprocess.run(
        [sys.executable, "-m", "netsim", *args], capture_output=True, text=True, env=env,
        check=False, timeout=SUBPROCESS_HANG_LIMIT,
    )  # fmt: skip


def test_netsim_check_prints_each_check_and_exits_0_1_or_2(example_paths):  # noqa: F811
    done = run_cli("check", "k_out", "--set", "k=3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ok      k_out is a usable topology" and len(lines) == 6
    assert all(line.startswith("ok      ") for line in lines)
    # a required key left out: the check that fails, and how to give it
    done = run_cli("check", "k_out")
    assert done.returncode == 1
    assert "failed  a small scenario with it validates:" in done.stdout
    assert "topology.k: required key is missing" in done.stdout and "--set KEY=VALUE" in done.stdout
    done = run_cli("check", "tests.test_testing:WritesUndeclared")
    assert done.returncode == 1 and "1 of 6 checks failed" in done.stderr
    assert "failed  it writes only the tables its components declare" in done.stdout
    for bad in ("nope", "nowhere:Thing", "k_out --set k"):
        done = run_cli("check", *bad.split())
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("netsim: error: ")
    # a plugin by its entry-point name: a mechanism is audited
    done = run_cli("check", "coordinate_laplace", paths=example_paths)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "ok      a claim of epsilon-DP passes the privacy audit (noise() and release(), "
        "dimensions 1, 2)" in done.stdout
    )


def test_the_example_package_runs_the_contract_in_its_own_tests(example_paths):  # noqa: F811
    """The example package's tests (examples/netsim-examples/tests) pass, run as its author
    would: netsim.testing's contract on each of its components."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*example_paths, str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        capture_output=True, text=True, env=env, cwd=EXAMPLE, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "passed" in done.stdout and "failed" not in done.stdout
    tested = textwrap.dedent((EXAMPLE / "tests" / "test_components.py").read_text())
    import tomllib

    points = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["entry-points"]
    for name in points["netsim.components"]:
        assert f'"{name}":' in tested, f"{name} is not in the package's contract test"


# --- every slot, near names, and the agreement of rounds mode with exact mode ---------------


def test_netsim_check_help_lists_every_slot_of_the_registry(capsys):
    from netsim.cli import main
    from netsim.registry import SLOT_NAMES

    with pytest.raises(SystemExit) as stop:
        main(["check", "--help"])
    assert stop.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    listed = shown.split("registered in several: ")[1].split(" --")[0]
    assert listed.split(", ") == list(SLOT_NAMES)
    assert {"model", "transport", "gossip", "observer"} <= set(SLOT_NAMES)
    assert "--agreement TABLE.METRIC" in shown and "--within ALLOWANCE" in shown


def test_unknown_names_and_slots_get_the_nearest_ones(capsys):
    from netsim.cli import main

    with pytest.raises(ComponentError, match=r"unknown value 'k_ou' \(did you mean 'k_out'\?\); "
                       r"registered components: 'k_out',"):  # fmt: skip
        check_component("k_ou")
    with pytest.raises(ComponentError, match=r"unknown slot 'topolgy' \(did you mean 'topology'"):
        check_component("k_out", slot="topolgy")
    with pytest.raises(SystemExit) as stop:
        main(["check", "k_out", "--slot", "walk_agnt"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "unknown slot 'walk_agnt' (did you mean 'walk_agent'" in err and "observer" in err
    # a slot the old hard-coded list lacked
    assert main(["check", "links", "--slot", "transport"]) == 0


def test_agreement_asked_of_a_component_without_rounds_mode_fails_that_check():
    problems = failed(Quiet, agreement=("declared_values", "value", 0.1))
    assert list(problems) == ["its rounds agree with its exact mode (declared_values.value "
                              "within 0.1)"]  # fmt: skip
    assert "it has no rounds mode to compare" in problems[next(iter(problems))]


AGREEMENT_SCENARIO = """\
name: agreement
seed: 4
nodes: 60
duration: 4min
topology: {kind: k_out, k: 6}
links: {delay: {dist: uniform, low: 10ms, high: 50ms}}
gossip: {period: 1s}
broadcast: {interval: 30s, start: 10s}
"""


def test_a_scenarios_rounds_mode_is_checked_against_its_exact_mode(tmp_path, capsys):
    from netsim.cli import main
    from netsim.testing import check_agreement

    path = tmp_path / "scenario.yaml"
    path.write_text(AGREEMENT_SCENARIO)
    results = check_agreement(path, "broadcasts", "t90", 1.5)
    assert [r.check for r in results] == [
        "it runs with gossip.mode exact and rounds (seeds 4 to 6)",
        "its rounds agree with its exact mode (broadcasts.t90 within 1.5)",
    ]
    assert all(r.ok for r in results), results
    assert "over 3 seeds" in results[1].detail
    # from the shell: 0 when it agrees, 1 when not, 2 for a name that names nothing
    assert main(["check", str(path), "--agreement", "broadcasts.t90", "--within", "1.5",
                 "--seeds", "2"]) == 0  # fmt: skip
    assert "ok      its rounds agree" in capsys.readouterr().out
    assert main(["check", str(path), "--agreement", "broadcasts.t90", "--within", "0",
                 "--seeds", "2"]) == 1  # fmt: skip
    captured = capsys.readouterr()
    assert "failed  its rounds agree with its exact mode (broadcasts.t90 within 0)" in captured.out
    assert "1 of 2 checks failed" in captured.err
    for args, message in [
        (["--agreement", "broadcasts.t9", "--within", "1"], "(did you mean 't99' or 't90'?)"),
        (["--agreement", "broadcast.t90", "--within", "1"], "(did you mean 'broadcasts' or"),
        (["--agreement", "broadcasts.t90"], "--agreement needs --within"),
        ([], "give --agreement TABLE.METRIC --within ALLOWANCE"),
    ]:
        assert main(["check", str(path), "--seeds", "2", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("netsim: error: ") and message in err, err


def test_the_agreement_check_fails_a_broken_rounds_mode(tmp_path, monkeypatch):
    """Negative control (as tests/test_rounds.py's): every pull of rounds mode lost spreads
    news more slowly, and the check says so."""
    from netsim.protocols.broadcast import Broadcast
    from netsim.testing import check_agreement

    path = tmp_path / "scenario.yaml"
    path.write_text(AGREEMENT_SCENARIO)
    fused = Broadcast.round_exchange
    monkeypatch.setattr(
        Broadcast, "round_exchange",
        lambda self, initiators, peers, pull_lost: fused(
            self, initiators, peers, np.ones(initiators.size, dtype=bool)
        ),
    )  # fmt: skip
    runs, agreement = check_agreement(path, "broadcasts", "t90", 1.5)
    assert runs.ok and not agreement.ok, agreement
