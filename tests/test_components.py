"""Components from a package of their own: the example package's entry points, ``module:Class``
references, the errors a bad plugin gets, and one run → sweep → collect → report path.

The example package (``examples/netsim-examples``) is made importable the way ``pip install``
would: its ``src`` on ``sys.path`` and a ``.dist-info`` with the entry points its
``pyproject.toml`` declares, which :mod:`importlib.metadata` finds like an installed one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import netsim
from netsim.analysis.collect import collect
from netsim.api import (
    ComponentConfig,
    DatasetLoader,
    GossipApplication,
    LoadedData,
    Mechanism,
    RoundLearner,
    RoundsConfig,
)
from netsim.errors import ScenarioError
from netsim.log import F64, I64, TableSchema
from netsim.privacy.mechanisms import gaussian, k_norm_l2
from netsim.registry import REGISTRY
from netsim.testing import check_component
from tests.test_contract import check_declared_noise

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "netsim-examples"


def install_example(target: Path) -> None:
    """Write the example package's distribution metadata (with its entry points) to
    ``target``, as an installer would."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = target / f"netsim_examples-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    points = project["entry-points"]["netsim.components"]
    lines = ["[netsim.components]", *(f"{k} = {v}" for k, v in points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def example_paths(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    site = tmp_path_factory.mktemp("site")
    install_example(site)
    paths = [str(site), str(EXAMPLE / "src")]
    sys.path[:0] = paths
    REGISTRY.refresh_entry_points()
    yield paths
    for path in paths:
        sys.path.remove(path)


def averaging(mode: str = "exact", kind: str = "push_sum", **extra: object) -> dict:
    scenario = {
        "name": "averaging",
        "seed": 3,
        "nodes": 60,
        "duration": 40.0,
        "topology": {"kind": "k_out", "k": 6},
        "gossip": {"period": 1.0, "mode": mode},
        "components": {"avg": {"kind": kind, "sample_every": 5.0}},
    }
    scenario.update(extra)
    return scenario


def test_the_example_components_are_registered_through_their_entry_points(example_paths):
    assert "push_sum" in REGISTRY.names("application")
    assert "max_value" in REGISTRY.names("walk_agent")
    assert "daily_sleep" in REGISTRY.names("churn")
    origins = {name: origin for _, name, _, origin in REGISTRY.entries()}
    assert origins["push_sum"] == "netsim-examples" and origins["k_out"] == "netsim"


@pytest.mark.parametrize("mode", ["exact", "rounds"])
def test_push_sum_converges_to_the_average_in_both_gossip_modes(example_paths, mode):
    result = netsim.run(averaging(mode))
    error = result["push_sum_error"]
    assert error["time"].tolist() == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    assert error["max_error"].iloc[0] > 0.3
    # mass is conserved (no losses), so the estimates converge geometrically: after 40
    # periods of push-pull on 60 nodes the worst node is within 1e-6 of the average
    assert error["max_error"].iloc[-1] < 1e-6
    assert (error["online"] == 60).all()


def test_a_class_can_be_named_by_module_and_class(example_paths):
    by_name = netsim.run(averaging())["push_sum_error"]
    by_class = netsim.run(averaging(kind="netsim_examples.push_sum:PushSum"))["push_sum_error"]
    pd.testing.assert_frame_equal(by_name, by_class)


def test_same_seed_same_tables_and_its_own_streams(example_paths):
    first = netsim.run(averaging())
    again = netsim.run(averaging())
    for name, frame in first.tables.items():
        pd.testing.assert_frame_equal(frame, again.tables[name])
    # the application draws from its own stream: the network's tables do not change with it
    plain = netsim.run({**averaging(), "components": {}})
    pd.testing.assert_frame_equal(first["samples"], plain["samples"])


def test_a_walk_agent_and_a_churn_model_from_the_package(example_paths):
    scenario = {
        "name": "max-walk",
        "seed": 5,
        "nodes": 30,
        "duration": 2 * 3600.0,
        "topology": {"kind": "k_out", "k": 5},
        "churn": {"kind": "daily_sleep", "bedtime": 1800.0, "spread": 0.0, "sleep": 3600.0},
        "gossip": {"period": 1.0},
        "walk": {
            "kind": "service",
            "transfer_time": 1.0,
            "timeout": 30.0,
            "agent": {"kind": "max_value", "record_every": 1},
        },
        "metrics": {"sample_every": 600.0},
    }
    result = netsim.run(scenario)
    online = result["samples"].set_index("time")["online"]
    # everybody sleeps from 30 min to 90 min (spread 0), and is up otherwise
    assert online[0.0] == 30 and online[3600.0] == 0 and online[6600.0] == 30
    walk = result["max_value_walk"]
    assert len(walk) > 100 and (walk["gap"] >= 0).all()
    assert walk["gap"].is_monotonic_decreasing and walk["gap"].iloc[-1] == 0.0


def test_an_unknown_kind_lists_the_registered_names(example_paths, tmp_path):
    with pytest.raises(ScenarioError) as error:
        netsim.run(averaging(kind="push_some"))
    message = str(error.value)
    assert "components.avg.kind: unknown value 'push_some' (did you mean 'push_sum'" in message
    assert "?); allowed values: " in message
    assert "'broadcast'" in message and "'push_sum'" in message


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("nowhere.mod:Thing", "cannot import module 'nowhere.mod'"),
        ("netsim_examples.push_sum:Nothing", "has no attribute 'Nothing'"),
        ("collections:OrderedDict", "is not a netsim component"),
        ("netsim_examples.daily_sleep:DailySleep", "is a churn model; here a gossip"),
        ("tests.test_components:Incomplete", "does not implement incoming()"),
    ],
)
def test_validate_names_a_class_that_cannot_be_used(example_paths, tmp_path, kind, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            nodes: 10
            duration: 10s
            topology: {{kind: k_out, k: 3}}
            gossip: {{period: 1s}}
            components:
              avg: {{kind: "{kind}"}}
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*example_paths, str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-m", "netsim", "validate", str(path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "components.avg.kind" in done.stderr and expected in done.stderr


class ExactOnly(GossipApplication):
    """An application without round methods (for the round-mode check)."""

    class Config(ComponentConfig):
        pass

    def outgoing(self, node: int) -> None:
        return None

    def incoming(self, node: int, value: object, sender: int, transfer: object) -> None:
        return None


class Incomplete(GossipApplication):
    """Implements half the interface."""

    def outgoing(self, node: int) -> None:
        return None


def test_rounds_mode_with_an_exact_only_application_is_a_validation_error():
    scenario = averaging("rounds", kind="tests.test_components:ExactOnly")
    scenario["components"]["avg"] = {"kind": "tests.test_components:ExactOnly"}
    with pytest.raises(ScenarioError, match=r"does not support gossip\.mode rounds"):
        netsim.run(scenario)
    scenario["gossip"]["mode"] = "exact"
    assert "push_sum_error" not in netsim.run(scenario).tables


def test_an_application_without_gossip_says_what_it_needs(example_paths):
    scenario = averaging()
    del scenario["gossip"]
    with pytest.raises(ScenarioError, match=r"components.avg \(kind push_sum\) needs a gossip"):
        netsim.run(scenario)


def test_run_sweep_collect_and_report_a_third_party_component(example_paths, tmp_path):
    path = tmp_path / "avg-sweep.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: avg
            seed: 1
            nodes: 40
            duration: 20s
            topology: {kind: k_out, k: 4}
            gossip: {period: 1s}
            components:
              avg: {kind: push_sum, sample_every: 2s}
            sweep:
              name: avg-sweep
              grid:
                gossip.mode: [exact, rounds]
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*example_paths, str(REPO)])}

    def netsim_cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "netsim", *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    netsim_cli("sweep", str(path), "--workers", "2", "--out", str(tmp_path / "runs"), "-q")
    sweep = tmp_path / "runs" / "avg-sweep"
    long = collect(sweep)
    errors = long[(long["table"] == "push_sum_error") & (long["metric"] == "max_error")]
    assert sorted(errors["gossip.mode"].unique()) == ["exact", "rounds"]
    assert len(errors) == 2 * 11 and np.isfinite(errors["time"]).all()
    netsim_cli("report", str(sweep))
    report = (sweep / "report" / "report.md").read_text()
    # the component's own figure (it declares one), not the generic table figure
    assert "push_sum_error.png" in report and "table_push_sum_error.png" not in report
    assert (sweep / "report" / "push_sum_error.png").stat().st_size > 10_000
    # and its line in the summary netsim run prints
    single = tmp_path / "avg.yaml"
    single.write_text(path.read_text().split("sweep:")[0])
    out = netsim_cli("run", str(single), "--out", str(tmp_path / "single"))
    assert "push-sum: largest error" in out


def _plugin_sweep(tmp_path: Path, by: str) -> Path:
    """A sweep of three plugin components with settings (a gossip application, a churn model
    and a walk agent), named by their registered names or as ``module:Class``."""
    kinds = {
        "name": ("push_sum", "daily_sleep", "max_value"),
        "class": (
            "netsim_examples.push_sum:PushSum",
            "netsim_examples.daily_sleep:DailySleep",
            "netsim_examples.max_value:MaxValue",
        ),
    }[by]
    path = tmp_path / f"plugins-{by}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: plugins
            seed: 4
            nodes: 30
            duration: 1h
            topology: {{kind: k_out, k: 4}}
            churn: {{kind: "{kinds[1]}", bedtime: 20min, spread: 10min, sleep: 15min}}
            gossip: {{period: 10s}}
            components:
              avg: {{kind: "{kinds[0]}", sample_every: 5min}}
            walk:
              kind: ideal
              step_time: 30s
              agent: {{kind: "{kinds[2]}", record_every: 5}}
            metrics: {{sample_every: 10min}}
            sweep:
              name: plugins-{by}
              grid:
                gossip.mode: [exact, rounds]
                components.avg.high: [1.0, 3.0]
            """
        )
    )
    return path


def _run_tables(sweep: Path) -> dict[str, bytes]:
    """Every table file of every run of a sweep, by run id and name."""
    return {
        f"{run.name}/{table.name}": table.read_bytes()
        for run in sorted((sweep / "runs").iterdir())
        for table in sorted(run.glob("*.parquet"))
    }


def test_plugin_components_with_settings_run_in_every_sweep_backend(example_paths, tmp_path):
    """Parallel workers get the scenario pickled: the config classes the registry makes for
    plugin components (with their ``kind``) must pickle, by name and by ``module:Class``.
    Every backend gives the tables of the in-process run, byte for byte."""
    distributed = pytest.importorskip("distributed")
    from netsim.cli import main

    paths = {by: _plugin_sweep(tmp_path, by) for by in ("name", "class")}
    backends = {
        "one": ["--workers", "1"],
        "pool": ["--workers", "2"],
        "pool3": ["--workers", "3"],
    }
    for by, path in paths.items():
        for backend, args in backends.items():
            out = tmp_path / backend
            assert main(["sweep", str(path), "--out", str(out), "-q", *args]) == 0, (by, backend)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        for by, path in paths.items():
            args = ["--scheduler", cluster.scheduler_address]
            out = tmp_path / "dask"
            assert main(["sweep", str(path), "--out", str(out), "-q", *args]) == 0, by
    for by in paths:
        expected = _run_tables(tmp_path / "one" / f"plugins-{by}")
        names = {key.split("/")[1] for key in expected}
        assert len({key.split("/")[0] for key in expected}) == 4  # runs
        assert {"push_sum_error.parquet", "max_value_walk.parquet", "churn.parquet"} <= names
        for backend in ("pool", "pool3", "dask"):
            assert _run_tables(tmp_path / backend / f"plugins-{by}") == expected, (by, backend)


def test_a_scenario_that_cannot_be_pickled_is_one_message_before_any_run(
    example_paths, tmp_path, capsys, monkeypatch
):
    from netsim.cli import main

    def refuse(self, protocol):
        raise TypeError("cannot pickle '_io.BufferedReader' object")

    _, config = REGISTRY.lookup(("application",), "push_sum")
    monkeypatch.setattr(config, "__reduce_ex__", refuse)
    path = _plugin_sweep(tmp_path, "name")
    out = tmp_path / "out"
    code = main(["sweep", str(path), "--out", str(out), "--workers", "2", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "cannot be sent to a worker process: its scenario does not pickle" in err
    assert "_io.BufferedReader" in err
    assert not list((out / "plugins-name" / "runs").glob("*/manifest.json"))


ONLINE_TABLE = TableSchema(
    name="online_by_round",
    columns=(("round", I64), ("time", F64), ("online", I64)),
    description="Online nodes at each round of the test learner.",
    role="rounds",
    time="time",
    round="round",
)


class OnlineCounter(RoundLearner):
    """A round learner that only records how many nodes are online at each round."""

    class Config(RoundsConfig):
        pass

    tables = (ONLINE_TABLE,)

    def round(self, t: int) -> None:
        sim, network = self.ctx.sim, self.ctx.network
        assert sim is not None and network is not None
        self.ctx.table(ONLINE_TABLE).append(t, sim.now, network.nodes.online_count)


def test_a_round_learner_runs_its_rounds_from_time_zero():
    scenario = {
        "nodes": 20,
        "duration": 10.0,
        "topology": {"kind": "ring"},
        "churn": {"kind": "synthetic", "online": {"dist": "exponential", "mean": 5.0},
                  "offline": {"dist": "exponential", "mean": 5.0}},
        "components": {"count": {"kind": "tests.test_components:OnlineCounter", "period": 2.0}},
        "seed": 1,
    }  # fmt: skip
    result = netsim.run(scenario)
    rows = result["online_by_round"]
    assert rows["round"].tolist() == [1, 2, 3, 4, 5]
    assert rows["time"].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    samples = result["samples"].set_index("time")["online"]
    assert rows.set_index("time")["online"][0.0] == samples[0.0]
    scenario["components"]["count"]["rounds"] = 3
    assert netsim.run(scenario)["online_by_round"]["round"].tolist() == [1, 2, 3]


# --- mechanisms and data-set loaders named by module:Class ---------------------------------


class TinyLoader(DatasetLoader):
    """A data set of 60 points in the unit square labelled by the side of a line."""

    needs_path = False
    test_fraction = 0.25

    def load(self, path, label):
        x = np.random.default_rng(0).random((60, 2))
        labels = np.where(x[:, 0] > x[:, 1], "above", "below")
        return LoadedData(x, labels, "60 points in the unit square")


class RenamedKNorm(Mechanism):
    """The K-norm mechanism under another name (its events say which)."""

    def release(self, value, *, sensitivity, epsilon, rng):
        noisy, event = k_norm_l2(value, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        return noisy, dataclasses.replace(event, mechanism="renamed_k_norm")


def learning_with(**learning: object) -> dict:
    return {
        "name": "plugin-learning",
        "seed": 2,
        "nodes": 30,
        "duration": "2min",
        "topology": {"kind": "ring", "k": 2},
        "learning": {"dataset": {"name": "spambase"}, "evaluate_every": 10, **learning},
        "walk": {"kind": "ideal", "agent": {"kind": "sgd"}},
    }


def test_a_data_set_loader_and_a_mechanism_by_module_and_class():
    result = netsim.run(
        learning_with(
            dataset={"name": "tests.test_components:TinyLoader"},
            noise="tests.test_components:RenamedKNorm",
            algorithm="dp-sgd-inf",
        )
    )
    ledger = result["privacy_ledger"]
    assert len(ledger) > 0 and set(ledger["mechanism"]) == {"renamed_k_norm"}
    assert set(ledger["guarantee"]) == {"epsilon-DP"}
    assert len(result["accuracy"]) > 0
    summary = result["learning_summary"].iloc[0]
    assert summary["guarantee"] == "epsilon-DP"


def test_bad_data_set_and_mechanism_names_list_what_is_allowed():
    with pytest.raises(ScenarioError, match=r"learning.noise: unknown value 'gauss'.*'k_norm_l2'"):
        netsim.run(learning_with(noise="gauss"))
    with pytest.raises(ScenarioError, match=r"learning.dataset.name: .*'spambase'"):
        netsim.run(learning_with(dataset={"name": "iris"}))
    with pytest.raises(ScenarioError, match=r"is a noise mechanism; here a data-set loader"):
        netsim.run(learning_with(dataset={"name": "tests.test_components:RenamedKNorm"}))


# --- an (ε, δ) mechanism with settings from a package of its own ----------------------------


def fixed_gaussian_run(tmp_path: Path, **learning: object) -> netsim.api.RunOutcome:
    scenario = learning_with(
        noise={"kind": "fixed_gaussian", "sigma": 6.0}, algorithm="dp-sgd-2", epsilon=4.0,
        **learning,
    )  # fmt: skip
    return netsim.run(scenario, out=tmp_path)


def test_an_epsilon_delta_mechanism_with_settings_spends_and_reports_delta(example_paths, tmp_path):
    """The example package's fixed_gaussian (entry point, setting sigma) under DP-SGD-2 with
    a δ budget: every use spends δ/2 and the ε that σ gives at δ/2 (exact profile), the
    ledger, the records, the summary and the manifest report them, and tight accounting
    reads the declared GaussianDpEvent."""
    from netsim.learning.sgd_agent import mechanism
    from netsim.privacy.mechanisms import gaussian_epsilon

    assert "fixed_gaussian" in REGISTRY.names("mechanism")
    outcome = fixed_gaussian_run(tmp_path, delta=1e-5)
    ledger, records = outcome["privacy_ledger"], outcome["privacy_records"]
    assert len(ledger) > 0 and set(ledger["mechanism"]) == {"fixed_gaussian"}
    assert set(ledger["guarantee"]) == {"(epsilon,delta)-DP"}
    assert np.allclose(ledger["delta"], 1e-5 / 2) and (ledger["noise_scale"] == 6.0).all()
    sensitivity = ledger["sensitivity"].iloc[0]
    assert sensitivity > 0 and (ledger["sensitivity"] == sensitivity).all()
    assert np.allclose(ledger["epsilon"], gaussian_epsilon(6.0, sensitivity, 1e-5 / 2))
    assert records["delta_spent"].max() == pytest.approx(1e-5)
    assert records["refused"].sum() == outcome["learning_summary"]["refused"].iloc[0] > 0
    summary = outcome["learning_summary"].iloc[0]
    assert summary["guarantee"] == "(epsilon,delta)-DP" and summary["delta"] == pytest.approx(1e-5)
    privacy = outcome.manifest["privacy"]["learning"]
    assert privacy["stated_delta"] == 1e-5 and privacy["spent_delta"] == pytest.approx(1e-5)
    assert privacy["spent_epsilon"] == pytest.approx(float(records["epsilon_spent"].max()))
    assert privacy["refused"] == records["refused"].sum()
    # the event the mechanism declares is the one tight accounting composes
    built = mechanism(outcome.scenario.learning.noise)
    _, event = built.spend(
        np.zeros(3), sensitivity=2.0, epsilon=1.0, delta=1e-6, rng=np.random.default_rng(0)
    )
    assert event.dp_event().noise_multiplier == 3.0
    check_declared_noise(built)  # the declared event is the noise it adds, and its claim holds


def test_an_epsilon_delta_mechanism_without_a_delta_budget_is_refused(example_paths, tmp_path):
    with pytest.raises(
        ScenarioError,
        match=r"learning\.noise fixed_gaussian is \(epsilon,delta\)-DP.*learning\.delta .*is 0"
        r".*set learning\.delta",
    ):
        fixed_gaussian_run(tmp_path)
    with pytest.raises(ScenarioError, match=r"learning\.noise\.sigma: Input should be greater"):
        netsim.run(learning_with(noise={"kind": "fixed_gaussian", "sigma": 0}, delta=1e-5))


class UndeclaredGaussian(Mechanism):
    """A mechanism written before δ budgets: it spends δ without declaring it."""

    def release(self, value, *, sensitivity, epsilon, rng):
        return gaussian(value, sensitivity=sensitivity, epsilon=epsilon, delta=1e-5, rng=rng)


def test_a_run_whose_mechanism_is_refused_on_every_use_says_so(tmp_path):
    """A run that once went silently: a Gaussian that does not declare its δ, under DP-SGD with
    no δ budget, makes no update; the manifest counts every refusal and the run warns."""
    outcome = netsim.run(
        learning_with(noise="tests.test_components:UndeclaredGaussian"), out=tmp_path
    )
    summary = outcome["learning_summary"].iloc[0]
    assert summary["updates"] == 0 and summary["refused"] > 0
    assert outcome.manifest["privacy"]["learning"]["refused"] == summary["refused"]
    assert outcome["privacy_records"]["refused"].sum() == summary["refused"]
    (warning,) = [w for w in outcome.warnings if "refused on every use" in w]
    assert "δ 1e-05" in warning and "does not declare it" in warning
    assert warning in outcome.manifest["warnings"]


def test_a_plugin_walk_and_an_epsilon_delta_mechanism_with_settings_sweep_in_parallel(
    example_paths, tmp_path
):
    """The example package's Metropolis–Hastings walk carrying DP-SGD
    with its fixed_gaussian mechanism (a setting, σ, swept) runs on 2 worker processes and on
    a Dask LocalCluster, gives the tables of the in-process sweep, and every run spends and
    reports δ in its manifest."""
    distributed = pytest.importorskip("distributed")
    from netsim.cli import main

    path = tmp_path / "private-walk.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: private-walk
            seed: 3
            nodes: 30
            duration: 2min
            topology: {kind: k_out, k: 4}
            walk: {kind: metropolis_hastings, step_time: 1s, agent: {kind: sgd}}
            learning:
              dataset: {name: spambase}
              algorithm: dp-sgd-2
              noise: {kind: fixed_gaussian, sigma: 6.0}
              epsilon: 4.0
              delta: 1.0e-5
              evaluate_every: 10
            sweep:
              name: private-walk
              grid:
                learning.noise.sigma: [6.0, 12.0]
            """
        )
    )
    for backend, args in (("one", ["--workers", "1"]), ("pool", ["--workers", "2"])):
        assert main(["sweep", str(path), "--out", str(tmp_path / backend), "-q", *args]) == 0
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        args = ["--scheduler", cluster.scheduler_address]
        assert main(["sweep", str(path), "--out", str(tmp_path / "dask"), "-q", *args]) == 0
    expected = _run_tables(tmp_path / "one" / "private-walk")
    assert "mh_walk_steps.parquet" in {key.split("/")[1] for key in expected}
    for backend in ("pool", "dask"):
        assert _run_tables(tmp_path / backend / "private-walk") == expected, backend
    for manifest in sorted((tmp_path / "pool" / "private-walk" / "runs").glob("*/manifest.json")):
        privacy = json.loads(manifest.read_text())["privacy"]["learning"]
        assert privacy["stated_delta"] == 1e-5
        assert privacy["spent_delta"] == pytest.approx(1e-5)  # a record's two uses, δ/2 each


# --- round support is declared by the component type ------------------------------------------


def test_round_support_is_declared_by_the_type_or_read_from_its_methods_once():
    from netsim.contracts import round_form, supports_rounds
    from netsim.protocols.broadcast import Broadcast
    from netsim.protocols.walk import IdealWalk, RandomWalkService

    assert (RandomWalkService.round_form, Broadcast.round_form) == ("fused", "fused")
    assert IdealWalk.round_form is None and not supports_rounds(IdealWalk)

    class Undeclared(GossipApplication):  # a plugin written before round_form existed
        def outgoing(self, node):
            return None

        def incoming(self, node, value, sender, transfer):
            return None

        def round_exchange(self, *args):
            return None

        def round_tick(self, active):
            return None

    assert Undeclared.round_form == "fused" and supports_rounds(Undeclared)
    assert round_form(object()) is None


def test_a_declared_round_form_without_its_methods_is_refused_when_the_class_is_made():
    with pytest.raises(TypeError, match="declares round_form 'batched' but does not implement"):

        class Claims(GossipApplication):
            round_form = "batched"

            def outgoing(self, node):
                return None

            def incoming(self, node, value, sender, transfer):
                return None


def test_one_function_decides_the_gossip_mode():
    from netsim.protocols.gossip import GossipConfig, round_mode

    assert not round_mode(None)
    assert not round_mode(GossipConfig(period=1.0))
    assert round_mode(GossipConfig(period=1.0, mode="rounds"))


# --- a plugin model: runs in a walk and in gossip learning, sweeps, and passes its check -------


def xor_learning(model: str, **learning: object) -> dict:
    """The example package's XOR data set learned by an ideal walk (10 passes)."""
    return {
        "name": "xor",
        "seed": 1,
        "nodes": 320,
        "duration": "3200s",
        "topology": {"kind": "ring", "k": 2},
        "walk": {"kind": "ideal", "sampling": "without_replacement", "step_time": "1s",
                 "agent": {"kind": "sgd"}},
        "learning": {"dataset": {"name": "xor"}, "normalisation": "global", "model": model,
                     "learning_rate": 5.0, "algorithm": "sgd", "evaluate_every": 320,
                     **learning},
        "metrics": {"sample_every": "10min"},
    }  # fmt: skip


def final_accuracy(result: netsim.api.RunOutcome) -> float:
    accuracy = result["accuracy"]
    return float(accuracy[accuracy["visits"] == accuracy["visits"].max()]["accuracy"].mean())


def test_a_plugin_model_passes_its_check(example_paths):
    results = check_component("quadratic_logistic")
    assert [r.line() for r in results if not r.ok] == []
    assert any("finite differences" in r.check for r in results)


def test_a_plugin_model_learns_xor_in_a_walk_where_a_linear_model_cannot(example_paths):
    quadratic = final_accuracy(netsim.run(xor_learning("quadratic_logistic")))
    linear = final_accuracy(netsim.run(xor_learning("logreg")))
    assert quadratic == pytest.approx(0.8375) and linear == pytest.approx(0.4125)
    # privately it needs clipping, named in one message
    with pytest.raises(ScenarioError, match=r"learning\.clip"):
        netsim.run(xor_learning("quadratic_logistic", algorithm="dp-sgd-1"))
    private = netsim.run(xor_learning("quadratic_logistic", algorithm="dp-sgd-5", clip=1.0))
    assert private["learning_summary"]["updates"].iloc[0] == 5 * 320


def test_a_plugin_model_trains_gossip_learning(example_paths):
    def gossip(model: str) -> float:
        scenario = {**xor_learning(model), "nodes": 100, "duration": "300s",
                    "topology": {"kind": "k_out", "k": 10}, "gossip_learning": {"period": "1s"}}
        scenario.pop("walk")
        scenario["learning"] = {**scenario["learning"], "learning_rate": 10.0}
        return float(netsim.run(scenario)["gossip_learning_accuracy"]["accuracy_mean"].iloc[-1])

    assert gossip("quadratic_logistic") > gossip("logreg") + 0.1


def test_a_plugin_model_sweeps_and_reports_like_a_built_in_one(example_paths, tmp_path):
    """A sweep over the model key, on two worker processes, then ``netsim report``: the plugin
    model's runs are collected and drawn beside the built-in one's, labelled by the key."""
    from netsim.cli import main

    scenario = xor_learning("logreg")
    scenario["duration"] = "640s"  # two passes
    scenario["sweep"] = {"name": "xor-models",
                         "grid": {"learning.model": ["logreg", "quadratic_logistic"]}}
    path = tmp_path / "xor-sweep.yaml"
    path.write_text(yaml.safe_dump(scenario, allow_unicode=True), encoding="utf-8")
    assert main(["sweep", str(path), "--out", str(tmp_path / "runs"), "-q", "--workers", "2"]) == 0
    sweep = tmp_path / "runs" / "xor-models"
    long = collect(sweep)
    final = long[(long["table"] == "learning_summary") & (long["metric"] == "updates")]
    assert sorted(final["learning.model"]) == ["logreg", "quadratic_logistic"]
    assert main(["report", str(sweep)]) == 0
    report = (sweep / "report" / "report.md").read_text(encoding="utf-8")
    assert "quadratic_logistic" in report
