"""The ``netsim`` command line: a thin layer over library functions.

User errors (:class:`~netsim.errors.NetsimError`) print one message and exit with status 2;
an interrupt exits with 130 and leaves no partial run directory behind.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from netsim.errors import (
    InstallationError,
    NetsimError,
    PluginFailure,
    RunDirectoryError,
    RunTimeoutError,
    ScenarioError,
)
from netsim.installation import check_installation
from netsim.signals import (
    Terminated,
    install_stop_handlers,
    raise_if_stopping,
    restore_handlers,
)
from netsim.version import __version__

if TYPE_CHECKING:
    from netsim.sweep.execute import SweepResult

#: The subcommands of a parser (``add_subparsers``), to which each ``_add_*`` adds one.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class _Slots(Sequence[str]):
    """The slots ``netsim check --slot`` takes: every slot of the registry
    (:data:`netsim.registry.SLOT_NAMES`), read when ``--help`` lists them or a value is checked
    (so that a command other than ``check`` does not import the contract layer)."""

    def _names(self) -> tuple[str, ...]:
        from netsim.registry import SLOT_NAMES

        return tuple(SLOT_NAMES)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()


#: The slots ``netsim check --slot`` takes.
SLOT_CHOICES: Sequence[str] = _Slots()

EXIT_USER_ERROR = 2
#: ``netsim verify``: some run is damaged, unverified, failed or missing (2: not a run at all).
EXIT_NOT_VERIFIED = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


@contextmanager
def _naming_the_scenario(path: Path) -> Iterator[None]:
    """Errors found while building a scenario name its key; prefix the scenario file, so the
    one message says where to look (errors about the run directory name that instead)."""
    try:
        yield
    except RunDirectoryError:
        raise
    except NetsimError as exc:
        text = str(exc)
        if text.startswith((str(path), "/")):  # it names its file already (a trace, data)
            raise
        if isinstance(exc, PluginFailure | RunTimeoutError):  # keep the plugin's traceback
            raise type(exc)(f"{path}: {text}") from exc.__cause__
        raise ScenarioError(f"{path}: {text}") from None


def _cmd_validate(args: argparse.Namespace) -> int:
    from netsim.scenario import load_scenario
    from netsim.scenario.build import check_inputs
    from netsim.sweep.spec import has_sweep, plan_sweep

    scenario = load_scenario(args.scenario, args.set or ())
    with _naming_the_scenario(args.scenario):
        warnings = check_inputs(scenario)
    for warning in warnings:
        print(f"netsim: warning: {warning}", file=sys.stderr)
    print(
        f"{args.scenario}: valid scenario {scenario.name!r} "
        f"({scenario.nodes} nodes, {scenario.duration:g} s)"
    )
    if has_sweep(args.scenario):
        plan = plan_sweep(args.scenario)
        select = plan.spec.select
        runs = (
            f"{len(plan.runs)} random trials of {plan.spec.points} points"
            if select is not None and select.privacy == "random_trials"
            else f"{plan.spec.points} points x {plan.spec.repetitions} repetitions = "
            f"{len(plan.runs)} runs"
        )
        print(
            f"{args.scenario}: valid sweep {plan.spec.name!r}: {runs} over "
            f"{', '.join(plan.spec.parameters)}"
            + (f"; selects by {select.metric} ({select.privacy})" if select else "")
        )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from netsim.analysis import load_run, summarize_run
    from netsim.progress import RunProgressBar
    from netsim.scenario import load_scenario
    from netsim.scenario.build import tell_fallbacks
    from netsim.scenario.loader import override_parameters
    from netsim.scenario.runner import check_run_name, run_scenario, with_seed
    from netsim.sweep.spec import has_sweep

    if args.name is not None:
        check_run_name(args.name)
    scenario = with_seed(load_scenario(args.scenario, args.set or ()), args.seed)
    parameters = override_parameters(scenario, args.set or ())
    if has_sweep(args.scenario) and not args.quiet:
        print(
            f"netsim: note: {args.scenario} has a sweep section; netsim run runs its base "
            "scenario (netsim sweep runs the grid)",
            file=sys.stderr,
        )
    progress: Callable[[float], None] | None = None
    bar = None
    if sys.stderr.isatty() and not args.quiet:
        bar = RunProgressBar(scenario.duration, sys.stderr)
        progress = bar
    telling = tell_fallbacks(not args.quiet)  # -q: the run directory, or one error message
    try:
        with _naming_the_scenario(args.scenario):
            result = run_scenario(
                scenario, out=args.out, progress=progress, parameters=parameters, name=args.name,
                time_limit=args.run_timeout, engine=args.engine,
            )  # fmt: skip
    finally:
        tell_fallbacks(telling)  # a quiet run called in-process leaves the process as it was
        if bar is not None:
            bar.close()
    for warning in result.warnings:
        print(f"netsim: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        for line in summarize_run(load_run(result.directory, parameters=False), result.scenario):
            print(line)
        print(f"wall time: {result.manifest['wall_time_seconds']:.1f} s")
    print(result.directory)
    return 0


def _tell_sweep_outcome(result: SweepResult) -> None:
    """A finished sweep's counts of runs, its failures, each reason its runs' exact mode ran
    on SimPy (once, with how many runs), and where its tables are (standard error)."""
    from netsim.storage import SWEEP_RESULTS

    state = result.progress
    print(
        f"{state.total} runs: {state.complete} ran, {state.already_done} were already "
        f"complete, {state.failed} failed ({state.elapsed:.1f} s)",
        file=sys.stderr,
    )
    for failure in result.failures:
        print(f"  run {failure.run} ({failure.run_id}): {failure.error}", file=sys.stderr)
    for why, runs in state.fallbacks.items():
        print(
            f"netsim: exact mode ran on SimPy, not the compiled core, in {runs} of the "
            f"{state.complete} runs: {why}",
            file=sys.stderr,
        )
    print(f"tables: {result.directory / SWEEP_RESULTS}", file=sys.stderr)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from netsim.analysis.collect import collect
    from netsim.progress import PROGRESS_DIR, SweepProgressBar
    from netsim.storage import SWEEP_FAILURES, SWEEP_RUNS
    from netsim.sweep.execute import backend_for, is_done, run_sweep, sweep_directory
    from netsim.sweep.spec import plan_sweep

    if args.scheduler is not None and args.workers is not None:
        raise NetsimError(
            "--workers sets the local process pool; with --scheduler the cluster's workers "
            "run the runs (give one of them)"
        )
    plan = plan_sweep(args.scenario)  # every point is checked before any run starts
    if args.out.exists() and not args.out.is_dir():
        raise NetsimError(f"--out {args.out}: exists and is not a directory")
    backend = backend_for(args.scheduler, args.workers)
    directory = sweep_directory(plan, args.out)
    if not args.quiet:
        print(
            f"sweep {plan.spec.name}: {plan.spec.points} points x {plan.spec.repetitions} "
            f"repetitions = {len(plan.runs)} runs on {backend.description}"
            if plan.spec.select is None or plan.spec.select.privacy != "random_trials"
            else f"sweep {plan.spec.name}: {len(plan.runs)} random trials of "
            f"{plan.spec.points} points on {backend.description}",
            file=sys.stderr,
        )
    bar = None
    if sys.stderr.isatty() and not args.quiet:
        bar = SweepProgressBar(sys.stderr, directory.resolve() / SWEEP_RUNS / PROGRESS_DIR)
    try:
        try:
            result = run_sweep(
                plan, out=args.out, backend=backend, progress=bar, time_limit=args.run_timeout
            )
        finally:
            if bar is not None:
                bar.close()
    except KeyboardInterrupt:
        runs_dir = directory / SWEEP_RUNS
        done = sum(is_done(run, runs_dir) for run in plan.runs)
        print(
            f"netsim: interrupted after {done} of {len(plan.runs)} runs; no partial run "
            f"directory was kept. Run the same command again to resume: {directory}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    state = result.progress
    collect(result.directory)
    if not args.quiet:
        _tell_sweep_outcome(result)
    print(result.directory)
    if state.failed:
        print(
            f"netsim: error: {state.failed} of {state.total} runs failed; their errors are in "
            f"{result.directory / SWEEP_FAILURES}"
            + ("; no selection was made (it needs every run)" if plan.spec.select else ""),
            file=sys.stderr,
        )
        return 1
    if plan.spec.select is not None:
        from netsim.analysis import load_run
        from netsim.sweep.selection import select_sweep, write_selection

        selection = select_sweep(
            plan, result.directory, lambda path: load_run(path, parameters=False)
        )
        written = write_selection(result.directory, selection)
        for line in selection.lines():
            print(line, file=sys.stderr)
        if not args.quiet:
            print(f"selection: {written}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from netsim.analysis.report import write_report

    # one path is read as what it is (its report goes into it); several as their runs together
    paths = args.directory[0] if len(args.directory) == 1 else args.directory
    if len(args.directory) > 1 and args.out is None:
        print("netsim report: several directories need --out (where the report goes)",
              file=sys.stderr)  # fmt: skip
        return 2
    print(write_report(paths, args.out, allow_unverified=args.allow_unverified, x_axis=args.x_axis))
    return 0


def _allow_unverified_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-unverified",
        action="store_true",
        help="read runs whose manifests record no checksums (written before manifests recorded "
        "them, or stripped of them) instead of refusing them; their bytes cannot be checked",
    )


#: The files ``netsim collect --out`` writes, by suffix.
COLLECT_FORMATS = (".parquet", ".csv")


def _cmd_collect(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from netsim.analysis.collect import collect
    from netsim.storage import SWEEP_RESULTS, SWEEP_SUMMARY, atomic_write_bytes

    out: Path | None = args.out
    if out is not None:
        if out.is_dir():
            raise NetsimError(f"--out {out}: is a directory; give a file name")
        if out.suffix.lower() not in COLLECT_FORMATS:
            raise NetsimError(
                f"--out {out}: write the table to a .parquet or a .csv file (the suffix chooses "
                "the format)"
            )
        if not out.parent.is_dir():
            raise NetsimError(f"--out {out}: the directory {out.parent} does not exist")
    long = collect(args.directory, write=out is None, allow_unverified=args.allow_unverified)
    if out is None:
        print(
            f"{len(long)} rows; summary over repetitions: {args.directory / SWEEP_SUMMARY}",
            file=sys.stderr,
        )
        print(args.directory / SWEEP_RESULTS)
        return 0
    table = pa.Table.from_pandas(long, preserve_index=False)
    sink = pa.BufferOutputStream()
    if out.suffix.lower() == ".csv":
        pacsv.write_csv(table, sink)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
    atomic_write_bytes(out, sink.getvalue().to_pybytes())
    print(f"{len(long)} rows", file=sys.stderr)
    print(out)
    return 0


def _run_timeout(text: str) -> float:
    """``--run-timeout``: a duration (``90``, ``30s``, ``2h``) greater than zero, in seconds."""
    from netsim.units import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a time limit is a duration > 0")
    if seconds > MAX_RUN_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a time limit is at most {MAX_RUN_TIMEOUT_SECONDS:.0e} s (about 30 "
            "years; the operating system's timer holds no more); leave the option out for none"
        )
    return seconds


#: The longest ``--run-timeout`` (the interval timer's range holds it on every platform).
MAX_RUN_TIMEOUT_SECONDS = 1e9


RUN_TIMEOUT_HELP = (
    "stop a run still going after this much wall time (e.g. 90, 30s, 2h): netsim run ends "
    "in one message; a sweep records the run as failed and goes on (default: no limit)"
)


def _parse_keys(pairs: Sequence[str]) -> dict[str, object]:
    """``KEY=VALUE`` pairs (values read as YAML, as scenario files are: no base-60 numbers;
    dotted keys nested) as a mapping."""
    import yaml

    from netsim.scenario.yamlfile import load_yaml

    keys: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise NetsimError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set k=3")
        try:
            parsed = load_yaml(value) if value.strip() else ""
        except yaml.YAMLError as exc:
            raise NetsimError(f"--set {pair!r}: the value is not YAML ({exc})") from None
        *parents, last = key.strip().split(".")
        target = keys
        for part in parents:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise NetsimError(f"--set {pair!r}: {part} is set to a value already")
            target = nested
        target[last] = parsed
    return keys


def _slot(text: str) -> str:
    """``--slot``: one of the registry's slots; else the nearest ones and every slot."""
    from netsim.errors import did_you_mean

    if text not in SLOT_CHOICES:
        raise argparse.ArgumentTypeError(
            f"unknown slot {text!r}{did_you_mean(text, SLOT_CHOICES)}; the slots: "
            f"{', '.join(SLOT_CHOICES)}"
        )
    return text


def _agreement_metric(text: str) -> tuple[str, str]:
    """``--agreement TABLE.METRIC``: the table (which may itself hold a dot, as an entry's
    ``<name>.<table>`` does) and the column."""
    table, _, metric = text.rpartition(".")
    if not table or not metric:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected TABLE.METRIC, e.g. broadcasts.t90 or walk_samples.propagating"
        )
    return table, metric


def _allowance(text: str) -> float:
    """``--within``: a finite number >= 0."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: an allowance is a finite number >= 0")
    return value


def _seed_count(text: str) -> int:
    """``--seeds``: an integer >= 2 (a standard error needs two runs per mode)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: the agreement check needs 2 or more seeds")
    return value


def _is_scenario_file(name: str) -> bool:
    """Whether ``netsim check``'s argument names a scenario file rather than a component."""
    return name.endswith((".yaml", ".yml")) or (":" not in name and Path(name).is_file())


def _check_results(args: argparse.Namespace) -> list:
    """The checks ``netsim check`` runs: the agreement of a scenario file, or the contract of
    a component (with its agreement when ``--agreement`` is given)."""
    from netsim.testing import check_agreement, check_component

    if args.agreement is not None and args.within is None:
        raise NetsimError(
            "--agreement needs --within ALLOWANCE: how far the two modes' means may differ "
            "(rounds mode's approximations: news spreads in whole rounds, messages take no time)"
        )
    if _is_scenario_file(args.component):
        if args.agreement is None:
            raise NetsimError(
                f"{args.component}: a scenario file is checked for the agreement of rounds mode "
                "with exact mode: give --agreement TABLE.METRIC --within ALLOWANCE"
            )
        if args.slot is not None or args.no_audit:
            raise NetsimError("--slot and --no-audit are options of a component, not a scenario")
        table, metric = args.agreement
        return check_agreement(
            Path(args.component), table, metric, args.within, seeds=args.seeds,
            overrides=args.set or (),
        )  # fmt: skip
    agreement = None if args.agreement is None else (*args.agreement, args.within)
    return check_component(
        args.component, slot=args.slot, keys=_parse_keys(args.set or ()),
        audit_mechanism=not args.no_audit, agreement=agreement, agreement_seeds=args.seeds,
    )  # fmt: skip


def _cmd_check(args: argparse.Namespace) -> int:
    results = _check_results(args)
    if not results:
        raise NetsimError(f"{args.component}: nothing to check")
    for result in results:
        print(result.line())
    failed = sum(not result.ok for result in results)
    if failed:
        print(
            f"netsim: {args.component}: {failed} of {len(results)} checks failed",
            file=sys.stderr,
        )
        return EXIT_NOT_VERIFIED
    print(f"{args.component}: all {len(results)} checks passed", file=sys.stderr)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from netsim.analysis.verify import verdict_lines, verify

    verdicts = verify(args.directory)
    for line in verdict_lines(verdicts):
        print(line)
    bad = sum(verdict.state != "ok" for verdict in verdicts)
    if bad:
        print(
            f"netsim: {bad} of {len(verdicts)} runs are not ok; running a sweep again redoes "
            "its damaged and missing runs",
            file=sys.stderr,
        )
        return EXIT_NOT_VERIFIED
    return 0


def _read_for_cli(path: Path, fmt: str | None, whole: bool):
    from netsim.traces.formats import detect_format, read_trace

    kind = fmt or detect_format(path)
    # a STUNner file is shown as the 2-day segments the simulator replays, unless --whole
    return read_trace(path, kind, segment=kind == "stunner" and not whole)


def _cmd_trace_info(args: argparse.Namespace) -> int:
    import json

    from netsim.traces.stats import (
        format_statistics,
        statistics_dict,
        trace_figure,
        trace_statistics,
    )

    trace = _read_for_cli(args.file, args.format, args.whole)
    stats = trace_statistics(trace)
    if args.json:
        print(json.dumps(statistics_dict(stats), indent=2))
    else:
        print(f"{args.file}:")
        for line in format_statistics(stats):
            print(f"  {line}")
    if args.plot is not None:
        print(trace_figure(trace, args.plot, title=str(args.file.name)))
    return 0


def _cmd_trace_convert(args: argparse.Namespace) -> int:
    from netsim.traces.formats import convert_trace

    trace = convert_trace(
        args.source,
        args.target,
        from_format=args.source_format,
        to_format=args.target_format,
        segment=args.segment,
    )
    print(f"{args.target}: {trace.node_count} trace nodes, {trace.start.size} online intervals")
    return 0


def _cmd_trace_synth(args: argparse.Namespace) -> int:
    import numpy as np

    from netsim.traces.formats import detect_format, read_trace
    from netsim.traces.intervals import MAX_TRACE_SECONDS, write_canonical_trace
    from netsim.traces.synth import (
        MAX_SYNTH_NODES,
        fit_churn_model,
        fit_stunner,
        generate_trace,
        load_params,
        save_params,
    )
    from netsim.units import parse_duration

    if args.like is None and args.params is None:
        raise NetsimError("trace synth: give --like FILE (fit to a trace) or --params FILE")
    if args.out is not None:  # the options are checked before anything is fitted or read
        try:
            duration = parse_duration(args.duration)
        except ValueError as exc:
            raise NetsimError(f"--duration: {exc}") from None
        if not 0 < duration <= MAX_TRACE_SECONDS:
            raise NetsimError(
                f"--duration {args.duration}: a trace lasts more than 0 s and at most "
                f"{MAX_TRACE_SECONDS:.0e} s (about 317 years)"
            )
        if not 1 <= args.nodes <= MAX_SYNTH_NODES:
            raise NetsimError(
                f"--nodes {args.nodes}: a synthetic trace has 1 to {MAX_SYNTH_NODES:,} nodes"
            )
        if not 0 <= args.seed < 2**63:
            raise NetsimError(f"--seed {args.seed}: a seed is an integer in [0, 2^63)")
    if args.params is not None:
        params = load_params(args.params)
    else:
        kind = args.format or detect_format(args.like)
        if kind == "stunner":
            params = fit_stunner(args.like, local_time=args.local_time)
        else:
            params = fit_churn_model(read_trace(args.like, kind))
    if args.fit_params is not None:
        save_params(params, args.fit_params)
        print(f"{args.fit_params}: fitted parameters")
    print(
        f"fitted: online fraction {params.online_fraction:.3f}, user correlation online "
        f"{params.online_user_correlation:.2f} / offline {params.offline_user_correlation:.2f}"
    )
    if args.out is not None:
        trace = generate_trace(
            params, nodes=args.nodes, duration=duration, rng=np.random.default_rng(args.seed)
        )
        write_canonical_trace(trace, args.out)
        print(f"{args.out}: {trace.node_count} nodes, {trace.start.size} online intervals")
    return 0


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    from netsim.learning.yardstick_cache import CACHE_DIR_VARIABLE, cache_directory, clear_directory

    directory = cache_directory()
    if directory is None:
        print(f"the cache is off ({CACHE_DIR_VARIABLE} is off or empty): nothing to clear")
        return 0
    print(f"{directory}: {clear_directory(directory)} cached yardsticks deleted")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from netsim.aot import compile_kernels
    from netsim.aot_exports import EXPORTS

    folder, cpu = compile_kernels()
    print(f"{folder}: {len(EXPORTS)} kernels compiled ahead of time ({cpu:.1f} s CPU)")
    return 0


def _command(
    commands: Subcommands, name: str, summary: str, details: str
) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` line is ``summary`` and whose description is ``summary``
    (capitalised) followed by ``details``."""
    return commands.add_parser(
        name, help=summary, description=f"{summary[0].upper()}{summary[1:]}{details}"
    )


def _scenario_command(commands: Subcommands, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand that reads a scenario file, with ``--set`` overrides; its ``--help`` line
    and description are ``help_text``."""
    command = commands.add_parser(name, help=help_text, description=help_text)
    command.add_argument("scenario", type=Path, help="scenario YAML file")
    command.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set nodes=500 --set gossip.period=1s",
    )
    return command


def _add_validate(commands: Subcommands) -> None:
    """``netsim validate``: check a scenario file."""
    validate = _scenario_command(
        commands, "validate", "check a scenario file and report every problem"
    )
    validate.set_defaults(handler=_cmd_validate)


def _add_run(commands: Subcommands) -> None:
    """``netsim run``: run a scenario."""
    run = _scenario_command(
        commands, "run", "run a scenario; prints the run directory as its last line"
    )
    run.add_argument("--out", type=Path, default=Path("runs"), help="parent directory of runs")
    run.add_argument("--seed", type=int, default=None, help="root seed (overrides the file)")
    run.add_argument(
        "--name",
        help="readable run id (the run directory's name) instead of <scenario>-seed<N>-<hash>",
    )
    run.add_argument("--run-timeout", type=_run_timeout, metavar="DURATION", help=RUN_TIMEOUT_HELP)
    run.add_argument(
        "--engine",
        choices=("auto", "simpy"),
        default="auto",
        help="what runs exact mode's events: the compiled core where every component has a "
        "compiled form (auto), or SimPy for all of them (the reference); the tables are the same",
    )
    run.add_argument(
        "--traceback",
        action="store_true",
        help="when a plugin component raised, print its traceback before the message",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="print only the run directory")
    run.set_defaults(handler=_cmd_run)


def _add_sweep(commands: Subcommands) -> None:
    """``netsim sweep``: run (or resume) a sweep."""
    sweep = commands.add_parser(
        "sweep",
        help="run every grid point x repetition of a sweep file; resumes where it stopped",
        description=(
            "Run the sweep section of a scenario file: one run directory per grid point and "
            "repetition, on local processes or a Dask cluster. Runs already complete are "
            "skipped, so the same command resumes an interrupted sweep."
        ),
    )
    sweep.add_argument("scenario", type=Path, help="scenario YAML file with a sweep section")
    sweep.add_argument(
        "--workers", type=int, default=None, help="local worker processes (default: the cores)"
    )
    sweep.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on a Dask cluster, e.g. tcp://host:8786"
    )
    sweep.add_argument("--out", type=Path, default=Path("runs"), help="parent of the sweep dir")
    sweep.add_argument(
        "--run-timeout", type=_run_timeout, metavar="DURATION", help=RUN_TIMEOUT_HELP
    )
    sweep.add_argument("-q", "--quiet", action="store_true", help="print only the sweep dir")
    sweep.set_defaults(handler=_cmd_sweep)


def _add_report(commands: Subcommands) -> None:
    """``netsim report``: the standard figures and report.md."""
    report_help = "draw the standard figures of a sweep or run directory, with a Markdown summary"
    report = _command(
        commands,
        "report",
        report_help,
        (
            ": the figures the run's components "
            "declare (e.g. walk counts, accuracy over time), averaged over repetitions for a "
            "sweep, and report.md listing them with the parameters and the run summaries."
        ),
    )
    report.add_argument(
        "directory",
        type=Path,
        nargs="+",
        help="a sweep directory, a run directory or a folder of runs; several are compared "
        "in one report (their lines named by run name, or by the scenario keys that differ)",
    )
    report.add_argument(
        "--out", type=Path, default=None, help="default: DIRECTORY/report (needed for several)"
    )
    report.add_argument(
        "--x-axis",
        default="time",
        metavar="AXES",
        help="the x axes of the comparison of learning runs, comma-separated: time (simulated "
        "time), passes (gradient updates in the network over the training records), messages "
        "(messages sent); one figure each (default: time). Any but time draws the comparison "
        "for learning runs of one kind too",
    )
    _allow_unverified_option(report)
    report.set_defaults(handler=_cmd_report)


def _add_verify(commands: Subcommands) -> None:
    """``netsim verify``: check runs against their manifests."""
    verify_help = "check every run of a sweep, run directory or folder of runs against its manifest"
    verify = _command(
        commands,
        "verify",
        verify_help,
        (
            ": each table's SHA-256, size and row "
            "count. Prints one line per run: ok, unverified (no checksums in its manifest: "
            "written before manifests recorded them, or stripped of them), damaged (and what "
            "is wrong), failed or missing. Exit status 0 if "
            "every run is ok, 1 if not, 2 if the directory is not a run, folder or sweep."
        ),
    )
    verify.add_argument(
        "directory", type=Path, help="a sweep directory, a run directory or a folder of runs"
    )
    verify.set_defaults(handler=_cmd_verify)


def _add_collect(commands: Subcommands) -> None:
    """``netsim collect``: the tidy long table of runs."""
    collect_help = "write the tidy long table of a sweep, run directory or folder of runs"
    collect_command = _command(
        commands,
        "collect",
        collect_help,
        (
            ": one row per run and metric sample "
            "(run_id, run, point, repetition, seed, one column per parameter, table, metric, "
            "time, round, series, value), from every table the runs' components declare as "
            "samples, rounds or summary. Without --out it is written to DIRECTORY/"
            "results.parquet with the statistics over repetitions in DIRECTORY/"
            "summary.parquet. Damaged runs are refused (exit 2), and so are unverified ones "
            "(no checksums in their manifests) unless --allow-unverified."
        ),
    )
    collect_command.add_argument(
        "directory", type=Path, help="a sweep directory, a run directory or a folder of runs"
    )
    collect_command.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the table to FILE.parquet or FILE.csv instead (the suffix picks the format)",
    )
    _allow_unverified_option(collect_command)
    collect_command.set_defaults(handler=_cmd_collect)


def _add_check(commands: Subcommands) -> None:
    """``netsim check``: check a component against the component contract, or a scenario's
    rounds mode against its exact mode."""
    check_help = (
        "check that a component keeps netsim's component contract, or that a scenario's "
        "rounds mode agrees with its exact mode"
    )
    check = _command(
        commands,
        "check",
        check_help,
        (
            ". A component gets the checks of netsim's own contract "
            "test (netsim.testing.check_component): hosted in a small scenario, it validates, "
            "builds and runs, finish() is called once, it writes only declared tables, the "
            "same seed gives identical tables, round support runs, and a mechanism claiming "
            "epsilon-DP passes the privacy audit. With --agreement TABLE.METRIC --within X it "
            "also runs gossip.mode exact and rounds over a few seeds and checks that the "
            "metric's means differ by at most X; given a scenario file instead of a component, "
            "that agreement is checked on the scenario as it is (netsim.testing."
            "check_agreement). Prints each check with ok or failed. Exit status 0 if every "
            "check passed, 1 if one failed, 2 if COMPONENT names nothing."
        ),
    )
    check.add_argument(
        "component",
        help="a registered name (e.g. push_sum), a class as package.module:Class, or a "
        "scenario file (.yaml) to check with --agreement",
    )
    check.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a key of the component's config its defaults lack, e.g. --set k=3 (YAML value); "
        "for a scenario file, a scenario key as netsim run --set takes it",
    )
    check.add_argument(
        "--slot",
        type=_slot,
        choices=SLOT_CHOICES,
        metavar="SLOT",
        help="the slot, when the name is registered in several: %(choices)s",
    )
    check.add_argument(
        "--agreement",
        type=_agreement_metric,
        metavar="TABLE.METRIC",
        help="also check that rounds mode agrees with exact mode on this metric (a column of "
        "a table the run writes, e.g. broadcasts.t90); needs --within",
    )
    check.add_argument(
        "--within",
        type=_allowance,
        metavar="ALLOWANCE",
        help="how far the mean of --agreement's metric may differ between the modes",
    )
    check.add_argument(
        "--seeds",
        type=_seed_count,
        default=3,
        metavar="N",
        help="runs per mode of the agreement check (default 3; a scenario file's from its seed on)",
    )
    check.add_argument(
        "--no-audit",
        action="store_true",
        help="skip the privacy audit of a mechanism (a few seconds)",
    )
    check.set_defaults(handler=_cmd_check)


def _add_trace_info(trace_commands: Subcommands, formats: list[str]) -> None:
    """``netsim trace info``: a trace's statistics."""
    info_help = "statistics of a trace (and the paper's Fig. 1)"
    info = trace_commands.add_parser("info", help=info_help, description=info_help)
    info.add_argument("file", type=Path, help="trace file (.csv, .parquet, or a STUNner/FTA file)")
    info.add_argument("--format", choices=formats, help="trace format (default: from the file)")
    info.add_argument(
        "--whole",
        action="store_true",
        help="STUNner: whole user records instead of the 2-day segments",
    )
    info.add_argument("--plot", type=Path, metavar="OUT.png", help="draw Fig. 1 to this PNG")
    info.add_argument("--json", action="store_true", help="print the figures as JSON")
    info.set_defaults(handler=_cmd_trace_info)


def _add_trace_convert(trace_commands: Subcommands, formats: list[str]) -> None:
    """``netsim trace convert``: convert between trace formats."""
    convert_help = "convert between trace formats (canonical CSV/Parquet, STUNner, FTA)"
    convert = trace_commands.add_parser("convert", help=convert_help, description=convert_help)
    convert.add_argument("source", type=Path, help="trace file to read")
    convert.add_argument(
        "target", type=Path, help="file to write: .csv or .parquet (canonical), .tab, .txt"
    )
    convert.add_argument(
        "--from", dest="source_format", choices=formats, help="default: from the file"
    )
    convert.add_argument(
        "--to", dest="target_format", choices=formats, help="default: from the extension"
    )
    convert.add_argument(
        "--segment",
        action="store_true",
        help="cut 2-day segments with a one-day overlap (Hegedűs et al. §5.1)",
    )
    convert.set_defaults(handler=_cmd_trace_convert)


def _add_trace_synth(trace_commands: Subcommands, formats: list[str]) -> None:
    """``netsim trace synth``: synthetic churn fitted to a trace."""
    synth_help = "synthetic churn fitted to a trace (or generated from saved parameters)"
    synth = trace_commands.add_parser("synth", help=synth_help, description=synth_help)
    synth.add_argument("--like", type=Path, help="trace to fit")
    synth.add_argument("--format", choices=formats, help="format of --like (default: from it)")
    synth.add_argument(
        "--local-time",
        action="store_true",
        help="STUNner: fit the daily rhythm in the users' local time",
    )
    synth.add_argument("--params", type=Path, help="generate from saved parameters instead")
    synth.add_argument(
        "--fit-params", type=Path, metavar="OUT.json", help="save the fitted parameters"
    )
    synth.add_argument("--out", type=Path, help="write a canonical trace (.csv or .parquet)")
    synth.add_argument("--nodes", type=int, default=1000, help="nodes to generate (default 1000)")
    synth.add_argument("--duration", default="2d", help="trace length, e.g. 6h (default 2d)")
    synth.add_argument("--seed", type=int, default=1, help="seed of the generator (default 1)")
    synth.set_defaults(handler=_cmd_trace_synth)


def _add_trace(commands: Subcommands) -> None:
    """``netsim trace``: inspect, convert and synthesise churn traces (its subcommands)."""
    trace_help = "inspect, convert and synthesise churn traces"
    trace = commands.add_parser("trace", help=trace_help, description=trace_help)
    trace_commands = trace.add_subparsers(dest="trace_command", required=True)
    formats = ["canonical", "stunner", "fta"]
    _add_trace_info(trace_commands, formats)
    _add_trace_convert(trace_commands, formats)
    _add_trace_synth(trace_commands, formats)


def _add_cache(commands: Subcommands) -> None:
    """``netsim cache clear``: delete the learning yardsticks cached on disk."""
    cache = _command(
        commands, "cache", "the disk cache of the learning yardsticks",
        " ($NETSIM_CACHE_DIR, else $XDG_CACHE_HOME/netsim or ~/.cache/netsim; "
        "NETSIM_CACHE_DIR=off turns it off)",
    )  # fmt: skip
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    clear = _command(
        cache_commands, "clear", "delete the cached yardsticks",
        ": the majority-class, centralised and central-DP accuracies of the data sets run so "
        "far; the next run of each data set computes them again",
    )  # fmt: skip
    clear.set_defaults(handler=_cmd_cache_clear)


def _add_compile(commands: Subcommands) -> None:
    """``netsim compile``: the rounds-mode kernels compiled ahead of time (netsim.aot)."""
    compile_command = _command(
        commands, "compile", "compile the rounds-mode kernels ahead of time",
        ", into an extension module in the user's cache ($NETSIM_AOT_DIR, else "
        "$XDG_CACHE_HOME/netsim/aot or ~/.cache/netsim/aot): a rounds run then does not import "
        "numba (some 120 MiB less resident memory); without it, or after an edit of a kernel, "
        "runs compile with numba's JIT as before. NETSIM_AOT=0 turns the module off",
    )  # fmt: skip
    compile_command.set_defaults(handler=_cmd_compile)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``netsim``."""
    parser = argparse.ArgumentParser(
        prog="netsim",
        description="Discrete-event network simulator for decentralised private learning.",
    )
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_command in (
        _add_validate,
        _add_run,
        _add_sweep,
        _add_report,
        _add_verify,
        _add_collect,
        _add_check,
        _add_trace,
        _add_cache,
        _add_compile,
    ):
        add_command(commands)
    return parser


def _traceback_hint(exc: NetsimError, args: argparse.Namespace) -> str:
    """Where a plugin's author finds the traceback of what their component raised."""
    if not isinstance(exc, PluginFailure) or getattr(args, "traceback", True):
        return ""
    return " (netsim run --traceback prints its traceback)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``netsim`` console script (and of ``python -m netsim``). It first
    checks that the ``netsim`` Python imports is a complete install (a leftover folder can hide
    it: :mod:`netsim.installation`), before any import below this module can fail."""
    try:
        check_installation()
    except InstallationError as exc:
        print(f"netsim: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    args = build_parser().parse_args(argv)
    previous = install_stop_handlers()
    try:
        try:
            return int(args.handler(args))
        except Exception:
            raise_if_stopping()  # a stop that compiled code turned into another error
            raise
    except NetsimError as exc:
        if getattr(args, "traceback", False) and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(f"netsim: error: {exc}{_traceback_hint(exc, args)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as exc:  # a file the command writes or reads: full disk, read-only, …
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"netsim: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("netsim: interrupted; no partial run directory was kept", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("netsim: terminated; no partial run directory was kept", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        restore_handlers(previous)


if __name__ == "__main__":
    sys.exit(main())
