"""The ``netsim`` command line: a thin layer over library functions.

User errors (:class:`~netsim.errors.NetsimError`) print one message and exit with status 2;
an interrupt exits with 130 and leaves no partial run directory behind.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from netsim import __version__
from netsim.errors import NetsimError

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """SIGTERM arrived: unwind like an interrupt, so staging directories are removed."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


class ProgressBar:
    """A one-line progress bar on simulated time, drawn only on a terminal."""

    def __init__(self, total: float, stream: TextIO, width: int = 30) -> None:
        self.total = total
        self.stream = stream
        self.width = width
        self.started = time.perf_counter()

    def __call__(self, now: float) -> None:
        fraction = min(now / self.total, 1.0) if self.total > 0 else 1.0
        filled = int(fraction * self.width)
        elapsed = time.perf_counter() - self.started
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {fraction:4.0%} simulated  {elapsed:6.1f}s wall")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r" + " " * (self.width + 40) + "\r")
        self.stream.flush()


def _cmd_validate(args: argparse.Namespace) -> int:
    from netsim.scenario import load_scenario
    from netsim.scenario.build import check_inputs

    scenario = load_scenario(args.scenario, args.set or ())
    for warning in check_inputs(scenario):
        print(f"netsim: warning: {warning}", file=sys.stderr)
    print(
        f"{args.scenario}: valid scenario {scenario.name!r} "
        f"({scenario.nodes} nodes, {scenario.duration:g} s)"
    )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from netsim.analysis import load_run, summarize_run
    from netsim.scenario import load_scenario
    from netsim.scenario.runner import run_scenario, with_seed

    scenario = with_seed(load_scenario(args.scenario, args.set or ()), args.seed)
    progress: Callable[[float], None] | None = None
    bar = None
    if sys.stderr.isatty() and not args.quiet:
        bar = ProgressBar(scenario.duration, sys.stderr)
        progress = bar
    try:
        result = run_scenario(scenario, out=args.out, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    for warning in result.warnings:
        print(f"netsim: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        for line in summarize_run(load_run(result.directory), result.scenario):
            print(line)
        print(f"wall time: {result.manifest['wall_time_seconds']:.1f} s")
    print(result.directory)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``netsim``."""
    parser = argparse.ArgumentParser(
        prog="netsim",
        description="Discrete-event network simulator for decentralised private learning.",
    )
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def scenario_command(name: str, help_text: str) -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=help_text, description=help_text)
        command.add_argument("scenario", type=Path, help="scenario YAML file")
        command.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a scenario key, e.g. --set nodes=500 --set gossip.period=1s",
        )
        return command

    validate = scenario_command("validate", "check a scenario file and report every problem")
    validate.set_defaults(handler=_cmd_validate)

    run = scenario_command("run", "run a scenario; prints the run directory as its last line")
    run.add_argument("--out", type=Path, default=Path("runs"), help="parent directory of runs")
    run.add_argument("--seed", type=int, default=None, help="root seed (overrides the file)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the run directory")
    run.set_defaults(handler=_cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``netsim`` console script."""
    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return int(args.handler(args))
    except NetsimError as exc:
        print(f"netsim: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("netsim: interrupted; no partial run directory was kept", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("netsim: terminated; no partial run directory was kept", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
