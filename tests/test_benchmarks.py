"""Every benchmark still runs: its smallest mode, to the end, with its figures printed (a smoke
test, not a timing: the figures are docs/performance.md's, measured with the full commands), and
docs/performance.md names every benchmark by the command that runs it."""

from __future__ import annotations

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
    "broadcast_rounds": (["--quick", "--repeat", "1"], "PeerSim CD"),
    "gossip_learning_rounds": (["--quick"], "× exact mode"),
    "event_queue": (["--live", "100", "--steps", "20000"], '"same_order": true'),
    "linear_accountant": (["--quick"], "s CPU per observer"),
    "jax_models": (["--quick"], "s per cycle"),
}


def run_benchmark(module: str, arguments: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *arguments],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"{module} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_benchmark_has_a_smoke_test():
    modules = {path.stem for path in (REPO / "benchmarks").glob("*.py")}
    assert modules - {"__init__", "workloads"} == {*SMOKE, "compare", "gossip_learning_exact"}


@pytest.mark.parametrize("module", sorted(SMOKE))
def test_the_benchmark_runs_in_its_smallest_mode(module):
    arguments, shown = SMOKE[module]
    assert shown in run_benchmark(module, arguments)


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
    modules -= {"__init__", "workloads", "plain_simpy"}
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
