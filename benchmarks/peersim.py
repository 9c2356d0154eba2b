"""Benchmark: netsim against PeerSim 1.0.5 itself, measured side by side on PeerSim's push-pull
workload.

    python -m benchmarks.peersim                 # 3 alternating pairs, N = 10,000 (~2 minutes)
    python -m benchmarks.peersim --pairs 5
    python -m benchmarks.peersim --quick         # N = 500, a few rounds: a smoke test
    python -m benchmarks.peersim --write-docs    # and quote the output in docs/performance.md

Needs the anchors' folder (``../shared/bench/peersim``: PeerSim's four jars and its benchmark
sources ``src/bench/*.java`` with ``ed.cfg`` and ``cd.cfg``; :mod:`benchmarks.anchors`) and a
JDK (``javac``, ``java``); without them it prints why and measures nothing. The sources are
compiled once into ``~/.cache/netsim/bench/peersim-<digest>`` (outside the repository; again
when a source changes).

Each pair measures, one after the other and each in a fresh process: PeerSim's event-driven
engine (ED, ``ed.cfg``, :data:`ED_ROUNDS` rounds), netsim in exact mode on the same workload —
the broadcast (``exact-broadcast-peersim`` of :mod:`benchmarks.workloads`) and the walk
service (``exact-walk-peersim``) — PeerSim's cycle-driven engine (CD, ``cd.cfg``,
:data:`CD_ROUNDS` cycles) and netsim's broadcast in rounds mode (``rounds-broadcast-every``).
Printed: CPU µs per simulated round of each (median [min–max] over the pairs) and each netsim
figure's ratio to the PeerSim figure of its own pair (median [min–max] of the per-pair
quotients), with the load average before and after. PeerSim's CPU is its ``RESULT`` line's
``loop_cpu_s`` (:func:`parse_result`) divided by its rounds; netsim's is the workload child's
(:func:`benchmarks.workloads.measure`). No figure is taken through a constant.

The workload, as ``src/bench/*.java`` and the configurations define it and as netsim runs it:
N = 10⁴ nodes, 50 random distinct out-neighbours other than the node (``WireKOut``; netsim's
``k_out``), a fixed random 30% online (PeerSim's ``Online``: exactly round(0.3·N) = 3,000; netsim:
synthetic churn whose on and off periods, 3,000 and 7,000 days, outlast the run, at seed
:data:`~benchmarks.workloads.PEERSIM_SEED`, whose online set has exactly 3,000 nodes too), every
online node gossiping once per Δ = 100 ms at its own random phase, push-pull with a uniform
random online out-neighbour, and in ED every message delayed uniformly in [10, 50] ms. Where
they differ:

- the broadcast: PeerSim's is one source incrementing a counter every round, merged by max;
  netsim's starts a new update every round at a random online node and records every adoption
  (a table row) and each update's coverage. netsim does more per message, not less;
- the walk service has no PeerSim counterpart: its figure is divided by the same ED run (the
  gossip underneath is the same; each message carries a walk's ``rwprop`` instead of a value);
- delays and phases: PeerSim draws whole microseconds (``UniformRandomTransport``, the
  timers' ``nextLong(Δ)``), netsim continuous seconds; the peer choice: PeerSim rejection-samples
  the neighbour list, netsim draws from its index of online neighbours (both uniform);
- the measured span: PeerSim's ``loop_cpu_s`` is the main thread's CPU from the end of
  initialisation to the end of the run (its JIT warm-up included, the JIT compiler's and the
  garbage collector's threads not counted); netsim's is the process's CPU after
  10 untimed rounds (which load the compiled kernels). PeerSim runs ED for :data:`ED_ROUNDS`
  rounds, netsim exact mode for 300 (CD and rounds mode both for 3,000).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from benchmarks import PERFORMANCE_PAGE, REPO, write_output
from benchmarks.anchors import (
    anchors_folder,
    build_root,
    load_average,
    machine_line,
    missing,
    paired_ratios,
    sources_digest,
    spread,
)
from benchmarks.workloads import WORKLOADS, measure

#: The block of docs/performance.md that quotes this benchmark's output.
DOCS_BLOCK = "peersim"
JARS = ("peersim.jar", "peersim-extras.jar", "djep-1.0.0.jar", "jep-2.3.0.jar")
#: PeerSim's Δ in its time unit (µs, ``ed.cfg``'s ``protocol.gossip.delta``).
DELTA_TICKS = 100_000
#: Rounds PeerSim runs in each engine (the anchors' README's ED run, and the CD run's 3,000
#: cycles, netsim's rounds-mode 3,000 rounds); and at smoke-test scale.
ED_ROUNDS, CD_ROUNDS = 1000, 3000
QUICK_NODES, QUICK_ED_ROUNDS, QUICK_CD_ROUNDS = 500, 20, 50
#: netsim's workload matched to each PeerSim engine, and its label.
EXACT = {"exact-broadcast-peersim": "broadcast", "exact-walk-peersim": "walk service"}
ROUNDS = "rounds-broadcast-every"


class PeerSimError(RuntimeError):
    """PeerSim did not build or run, or printed no RESULT line."""


def peersim_folder() -> Path:
    return anchors_folder() / "peersim"


def why_not() -> str | None:
    """Why PeerSim cannot be measured here, or None."""
    folder = peersim_folder()
    needed = [folder / jar for jar in JARS] + [folder / "src" / "bench", folder / "ed.cfg"]
    return missing(needed, ("javac", "java"))


def classpath(classes: Path) -> str:
    return os.pathsep.join([str(classes), *(str(peersim_folder() / jar) for jar in JARS)])


def compile_bench() -> Path:
    """The compiled benchmark sources' folder (under :func:`build_root`), compiled if absent."""
    sources = sorted((peersim_folder() / "src" / "bench").glob("*.java"))
    target = build_root() / f"peersim-{sources_digest(sources)}"
    if (target / "bench" / "Main.class").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix="peersim-build-"))
    done = subprocess.run(
        ["javac", "-d", str(scratch), "-cp", classpath(scratch), *map(str, sources)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise PeerSimError(f"javac failed:\n{done.stderr[-3000:]}")
    try:
        scratch.rename(target)
    except OSError:  # built meanwhile by another run: keep that one
        pass
    return target


def parse_result(output: str) -> dict[str, float | str]:
    """The ``key=value`` fields of the ``RESULT`` line ``bench.Main`` prints (numbers as
    floats, ``mode`` as text); a :class:`PeerSimError` if there is none."""
    for line in output.splitlines():
        if line.startswith("RESULT "):
            fields: dict[str, float | str] = {}
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                try:
                    fields[key] = float(value)
                except ValueError:
                    fields[key] = value
            if "loop_cpu_s" not in fields:
                raise PeerSimError(f"the RESULT line has no loop_cpu_s: {line}")
            return fields
    raise PeerSimError(f"no RESULT line in PeerSim's output:\n{output[-2000:]}")


def run_peersim(classes: Path, engine: str, rounds: int, nodes: int | None) -> dict:
    """One PeerSim run (``ED`` or ``CD``) of ``rounds`` rounds in a fresh JVM: its RESULT
    fields, plus ``cpu_us_per_round``."""
    config, length = (
        ("ed.cfg", f"simulation.endtime={rounds * DELTA_TICKS}")
        if engine == "ED"
        else ("cd.cfg", f"simulation.cycles={rounds}")
    )
    command = ["java", "-cp", classpath(classes), "bench.Main", config, length]
    if nodes is not None:
        command.append(f"network.size={nodes}")
    done = subprocess.run(command, capture_output=True, text=True, cwd=peersim_folder())
    if done.returncode != 0:
        raise PeerSimError(f"PeerSim {engine} failed:\n{done.stderr[-3000:]}")
    fields = parse_result(done.stdout)
    fields["cpu_us_per_round"] = 1e6 * float(fields["loop_cpu_s"]) / rounds
    return fields


def java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True)
    lines = (done.stderr or done.stdout).splitlines()
    return lines[0].strip() if lines else "java"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="alternating pairs (3)")
    parser.add_argument("--quick", action="store_true", help="N = 500, 1 pair: a smoke test")
    parser.add_argument(
        "--write-docs", action="store_true",
        help=f"also write the output into docs/performance.md's block {DOCS_BLOCK!r}",
    )  # fmt: skip
    args = parser.parse_args()
    if args.write_docs and args.quick:
        parser.error("--write-docs quotes the full benchmark: not with --quick")
    reason = why_not()
    if reason is not None:
        print(f"PeerSim not measured: {reason}")
        return
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    classes = compile_bench()
    pairs = 1 if args.quick else args.pairs
    nodes = QUICK_NODES if args.quick else None
    ed_rounds = QUICK_ED_ROUNDS if args.quick else ED_ROUNDS
    cd_rounds = QUICK_CD_ROUNDS if args.quick else CD_ROUNDS
    say(f"{machine_line()}; {java_version()}")
    say(f"load average (1, 5, 15 min) before: {load_average()}")
    measure(ROUNDS, quick=True)  # unmeasured: loads (or compiles) the kernels
    cpu: dict[str, list[float]] = {"ED": [], "CD": [], **{name: [] for name in (*EXACT, ROUNDS)}}
    online: list[float] = []
    for _ in range(pairs):
        ed = run_peersim(classes, "ED", ed_rounds, nodes)
        cpu["ED"].append(ed["cpu_us_per_round"])
        online.append(float(ed["online"]))
        for name in EXACT:
            cpu[name].append(measure(name, quick=args.quick)["cpu_us_per_round"])
        cpu["CD"].append(run_peersim(classes, "CD", cd_rounds, nodes)["cpu_us_per_round"])
        cpu[ROUNDS].append(measure(ROUNDS, quick=args.quick)["cpu_us_per_round"])
    say(f"load average (1, 5, 15 min) after: {load_average()}")
    size = f"{QUICK_NODES}" if args.quick else "10,000"
    say(
        f"PeerSim 1.0.5 against netsim, N = {size} ({online[0]:.0f} online), 50 out-neighbours, "
        f"Δ = 100 ms: CPU µs per round, median [min–max] of {pairs} alternating pairs"
    )

    def row(label: str, values: list[float], versus: str = "") -> None:
        line = f"  {label:44s}{spread(values, 0):>22s}"
        if versus:
            ratio = spread(paired_ratios(values, cpu[versus]))
            line += f": {ratio}× PeerSim {versus}"
        say(line)

    def netsim_rounds(name: str) -> int:
        return WORKLOADS[name].quick[1] if args.quick else WORKLOADS[name].full[1]

    row(f"PeerSim ED, {ed_rounds} rounds (loop_cpu_s)", cpu["ED"])
    for name, label in EXACT.items():
        row(f"netsim exact, {label}, {netsim_rounds(name)} rounds", cpu[name], "ED")
    row(f"PeerSim CD, {cd_rounds} cycles (loop_cpu_s)", cpu["CD"])
    row(f"netsim rounds, broadcast, {netsim_rounds(ROUNDS)} rounds", cpu[ROUNDS], "CD")
    if args.write_docs and write_output(DOCS_BLOCK, "\n".join(lines)):
        print(f"wrote the output into {PERFORMANCE_PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
