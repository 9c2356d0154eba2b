"""Every benchmark still runs: its smallest mode, to the end, with its figures printed (a smoke
test, not a timing: the figures are docs/performance.md's, measured with the full commands), and
docs/performance.md names every benchmark by the command that runs it. A ratio to PeerSim or to
the C hold model is measured in the same call, never taken through a constant."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The page of the benchmarks' figures, and the one page that holds a benchmark's figures itself.
PERFORMANCE = REPO / "docs" / "performance.md"
JAX_MODELS = REPO / "docs" / "jax-models.md"

#: Each benchmark's smallest mode, and what its output must show.
SMOKE = {
    "plain_simpy": (["--rounds", "5", "--nodes", "300"], "µs CPU per round"),
    "exact": (["--quick"], "× the plain loop"),
    "kernel_returns": (["walk", "--nodes", "500", "--rounds", "20"], "returns to Python"),
    "walk_rounds": (["--smoke"], "ns per online node"),
    "dola_rounds": (["--quick"], "ms/round"),
    "memory": (["gossip-learning", "--hours", "0.002", "--every", "2"], "peak"),
    "scale": (["--nodes", "20000", "--rounds", "5"], "maximum resident set"),
    "private_learning": (["--quick"], "µs CPU per visit"),
    "broadcast_rounds": (["--quick", "--repeat", "1"], "the plain loop"),
    "gossip_learning_rounds": (["--quick"], "× exact mode"),
    "event_queue": (["--live", "100", "--steps", "20000"], '"same_order": true'),
    "linear_accountant": (["--quick"], "s CPU per observer"),
    "jax_models": (["--quick"], "s per cycle"),
}
#: The benchmarks that measure an outside anchor (../shared/bench: PeerSim and Java, the C hold
#: model and cc), their smallest mode and what their output must show: skipped, with the
#: reason, where the anchor cannot run.
ANCHORED = {
    "peersim": (["--quick"], ("× PeerSim ED", "× PeerSim CD", "load average")),
    "hold": (["--quick"], ("× the C heap", "load average")),
}
#: Modules of benchmarks/ that are not benchmarks.
HELPERS = {"__init__", "workloads", "anchors"}


def run_benchmark(module: str, arguments: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *arguments],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"{module} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_benchmark_has_a_smoke_test():
    modules = {path.stem for path in (REPO / "benchmarks").glob("*.py")}
    assert modules - HELPERS == {*SMOKE, *ANCHORED, "compare", "gossip_learning_exact"}


@pytest.mark.parametrize("module", sorted(SMOKE))
def test_the_benchmark_runs_in_its_smallest_mode(module):
    arguments, shown = SMOKE[module]
    assert shown in run_benchmark(module, arguments)


def skip_without_anchor(module: str):
    """The anchored benchmark's module, or a skip naming what is missing."""
    benchmark = importlib.import_module(f"benchmarks.{module}")
    reason = benchmark.why_not()
    if reason is not None:
        pytest.skip(f"benchmarks.{module} cannot measure its anchor here: {reason}")
    return benchmark


@pytest.mark.parametrize("module", sorted(ANCHORED))
def test_the_anchored_benchmark_runs_in_its_smallest_mode(module):
    """The PeerSim and C hold benchmarks build their anchor outside the repository and measure
    it against netsim alternately, printing the ratios and the machine's load."""
    skip_without_anchor(module)
    arguments, shown = ANCHORED[module]
    out = run_benchmark(module, arguments)
    for text in shown:
        assert text in out, out
    assert "not measured" not in out


def test_peersims_result_line_is_parsed():
    from benchmarks.peersim import PeerSimError, parse_result

    output = (
        "EDSimulator: queue is empty, quitting at time 29999970\n"
        "RESULT mode=ED n=10000 online=3000 init_s=0.206 loop_s=1.706 exchanges=900000 "
        "messages=1797284 counter=300 lag_max=8 lag_mean=5.50 cover50=6 cover99=8 cover100=9 "
        "heap_used_mb=27 loop_cpu_s=1.454\n"
    )
    fields = parse_result(output)
    assert fields["mode"] == "ED"
    assert fields["loop_cpu_s"] == 1.454
    assert fields["online"] == 3000 and fields["exchanges"] == 900000
    with pytest.raises(PeerSimError, match="no RESULT line"):
        parse_result("CDSimulator: cycle 2999 done\n")
    with pytest.raises(PeerSimError, match="no loop_cpu_s"):
        parse_result("RESULT mode=CD n=10 loop_s=1.0\n")


def test_no_ratio_goes_through_a_constant():
    """No benchmark holds a speed ratio to PeerSim (or between PeerSim and the plain loop) as
    a constant: such a figure was measured on another day under another load."""
    constant = re.compile(r"^[A-Z_]*(PEERSIM|PLAIN)[A-Z_]*_PER_[A-Z_]*\s*[:=]", re.M)
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        found = [m.group(0) for m in constant.finditer(path.read_text(encoding="utf-8"))]
        assert not found, f"{path.name} holds a ratio constant: {found}"


def test_the_peersim_ratios_are_the_quotients_of_each_pair(monkeypatch, capsys):
    """benchmarks.peersim divides each netsim figure by the PeerSim figure measured in the
    same pair: with made-up measurements, the printed ratios are their quotients."""
    from benchmarks import peersim

    # the kernels' warm-up (unmeasured), then pair 1: ED 1000, broadcast 400, walk 300, CD 200,
    # rounds 40; pair 2: ED 2000, broadcast 400, walk 1000, CD 100, rounds 40
    figures = iter([0.0, 1000.0, 400.0, 300.0, 200.0, 40.0, 2000.0, 400.0, 1000.0, 100.0, 40.0])

    def fake_peersim(classes, engine, rounds, nodes):
        return {"cpu_us_per_round": next(figures), "online": 3000.0}

    def fake_measure(name, quick=False):
        return {"cpu_us_per_round": next(figures)}

    monkeypatch.setattr(peersim, "why_not", lambda: None)
    monkeypatch.setattr(peersim, "compile_bench", lambda: Path("."))
    monkeypatch.setattr(peersim, "java_version", lambda: "java")
    monkeypatch.setattr(peersim, "run_peersim", fake_peersim)
    monkeypatch.setattr(peersim, "measure", fake_measure)
    monkeypatch.setattr(sys, "argv", ["peersim", "--pairs", "2"])
    peersim.main()
    out = capsys.readouterr().out
    assert "0.30 [0.20–0.40]× PeerSim ED" in out  # broadcast: 0.40 and 0.20
    assert "0.40 [0.30–0.50]× PeerSim ED" in out  # walk: 0.30 and 0.50
    assert "0.30 [0.20–0.40]× PeerSim CD" in out  # rounds: 0.20 and 0.40


def test_the_hold_ratios_are_the_quotients_of_each_triple(monkeypatch, capsys):
    from benchmarks import hold

    c_figures = iter([100.0, 200.0])
    netsim_figures = iter([0.0, 0.0, 150.0, 30.0, 500.0, 40.0])
    monkeypatch.setattr(hold, "why_not", lambda: None)
    monkeypatch.setattr(hold, "build_hold", lambda: Path("hold"))
    monkeypatch.setattr(hold, "run_c", lambda binary, steps: next(c_figures))
    monkeypatch.setattr(hold, "run_netsim", lambda path, steps: next(netsim_figures))
    monkeypatch.setattr(sys, "argv", ["hold", "--pairs", "2"])
    hold.main()
    out = capsys.readouterr().out
    assert "2.00 [1.50–2.50]× the C heap" in out  # heap: 1.5 and 2.5
    assert "0.25 [0.20–0.30]× the C heap" in out  # lanes: 0.3 and 0.2


def test_the_page_quotes_peersim_and_c_ratios_only_from_their_benchmarks():
    """Every ratio to PeerSim or to the C heap on docs/performance.md is inside the block the
    measuring benchmark writes, whose lines state the load under which it was measured."""
    from benchmarks import generated_block

    text = PERFORMANCE.read_text(encoding="utf-8")
    ratio = re.compile(r"\d×[^|\n]*(PeerSim|the C heap)")
    for name, shown in (("peersim", "PeerSim ED"), ("hold", "the C heap")):
        block = generated_block(text, name)
        text = text.replace(block, "")
        if block.startswith("machine:"):
            assert "load average (1, 5, 15 min) before:" in block
            assert "load average (1, 5, 15 min) after:" in block
            assert f"× {shown}" in block
    assert not ratio.search(text), ratio.search(text)


@pytest.mark.slow  # about a minute idle, two on a loaded machine; the gossip-learning
# comparison below keeps the alternating checkout in the default run
def test_the_commit_comparison_runs_alternately_against_another_checkout():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the comparison checks out another commit")
    out = run_benchmark("compare", ["HEAD", "--quick", "--pairs", "2", "exact-walk", "dola"])
    lines = [line for line in out.splitlines() if "this/other" in line]
    assert [line.split()[0] for line in lines] == ["exact-walk", "dola"]
    assert all("n = 2" in line for line in lines)


def test_exact_gossip_learning_is_compared_alternately_against_another_checkout():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the comparison checks out another commit")
    out = run_benchmark("gossip_learning_exact", ["HEAD", "--quick"])
    lines = [line for line in out.splitlines() if "this/other" in line]
    assert [line.split()[0] for line in lines] == ["sgd", "dp-sgd-1"]


def test_the_performance_page_names_every_benchmark_by_its_command():
    """Every benchmark's figures are on docs/performance.md (the JAX models' on their own page,
    which it links), under the command that measures them; every command it gives names a
    benchmark that exists. The plain SimPy loop is the yardstick the others run."""
    modules = {path.stem for path in (REPO / "benchmarks").glob("*.py")}
    modules -= {*HELPERS, "plain_simpy"}
    command = re.compile(r"python -m benchmarks\.(\w+)")
    text = PERFORMANCE.read_text(encoding="utf-8")
    named = set(command.findall(text)) | set(command.findall(JAX_MODELS.read_text("utf-8")))
    assert named == modules
    assert "(jax-models.md)" in text


def test_the_quoted_gossip_learning_output_is_what_the_benchmark_prints():
    """The page quotes ``benchmarks.gossip_learning_rounds``'s output in the block its
    ``--write-docs`` writes: its lines have the form the benchmark prints (a change to the
    benchmark's output shows here), one line per case."""
    from benchmarks import generated_block
    from benchmarks import gossip_learning_rounds as benchmark

    block = generated_block(PERFORMANCE.read_text(encoding="utf-8"), benchmark.DOCS_BLOCK)
    machine, header, *cases = block.splitlines()
    assert re.fullmatch(r"machine: \S+, .+, \d+ cores, Python [\d.]+; BLAS threads: .+", machine)
    assert re.fullmatch(
        r"gossip learning, Spambase, 4,140 nodes, Δ = 1 s: CPU per cycle, median \[range\] of "
        r"\d+ alternating pairs",
        header,
    )
    spread = r"[\d.]+ \[[\d.]+–[\d.]+\]"
    assert [line.split()[0] for line in cases] == list(benchmark.CASES)
    for line in cases:
        assert re.fullmatch(
            rf"  [\w-]+ +exact {spread} ms, rounds {spread} ms: "
            rf"rounds {spread}× exact mode's speed",
            line,
        ), line


def test_a_benchmark_writes_its_output_into_its_block_only(tmp_path):
    """``write_output`` replaces the named block's quote and nothing else of the page; a page
    without the block is refused, naming it."""
    from benchmarks import generated_block, write_output

    page = tmp_path / "performance.md"
    text = PERFORMANCE.read_text(encoding="utf-8")
    page.write_text(text, encoding="utf-8")
    assert write_output("gossip-learning-rounds", "machine: new\nline two\n", page)
    written = page.read_text(encoding="utf-8")
    assert generated_block(written, "gossip-learning-rounds") == "machine: new\nline two"
    old = generated_block(text, "gossip-learning-rounds")
    assert written.replace("machine: new\nline two", old) == text
    assert not write_output("gossip-learning-rounds", "machine: new\nline two", page)
    with pytest.raises(KeyError, match="no-such-block"):
        write_output("no-such-block", "x", page)
