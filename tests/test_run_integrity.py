"""A run directory proves itself: its manifest records each file's SHA-256, size and row count,
and a damaged run (a table deleted, swapped for another run's, corrupted, or a manifest that
lies about row counts) is named as damaged by ``load_run``, ``collect``, ``report`` and
``netsim verify``, and run again by a resumed sweep."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from netsim.analysis import collect, collect_status, load_run
from netsim.analysis.collect import _SWEEP_EXPECTED as EXPECTED
from netsim.cli import EXIT_NOT_VERIFIED, main
from netsim.errors import RunDirectoryError
from netsim.storage import (
    FILES,
    MANIFEST,
    MANIFEST_FORMAT_KEY,
    MAX_RECORD_DEPTH,
    SCENARIO,
    UNVERIFIED_REASON,
)
from netsim.sweep import ProcessPool, plan_sweep, run_sweep
from tests.test_bad_input import cli_error, netsim_subprocess
from tests.test_sweep import InterruptAfter, sweep_file

SWEEP = "sweep:\n  grid:\n    walk.kill_probability: [0, 0.05, 0.1]\n"
TABLE = "walk_steps"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sweep of three runs (copied by each test before it damages anything)."""
    root = tmp_path_factory.mktemp("pristine")
    plan = plan_sweep(sweep_file(root, SWEEP))
    run_sweep(plan, out=root / "out", backend=ProcessPool(1))
    return root


@pytest.fixture
def sweep(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the pristine sweep directory (``<tmp>/out/tiny-walk``); the sweep file is
    ``<tmp>/sweep.yaml``."""
    shutil.copy(pristine / "sweep.yaml", tmp_path / "sweep.yaml")
    shutil.copytree(pristine / "out", tmp_path / "out")
    return tmp_path / "out" / "tiny-walk"


def runs_of(sweep: Path) -> list[Path]:
    """The run directories of ``sweep``, in plan order."""
    plan = pq.read_table(sweep / "plan.parquet").to_pandas()
    return [sweep / "runs" / run_id for run_id in plan["run_id"]]


def manifest_of(run: Path) -> dict:
    return json.loads((run / MANIFEST).read_text())


def rewrite_manifest(run: Path, change: Callable[[dict], None]) -> None:
    manifest = manifest_of(run)
    change(manifest)
    (run / MANIFEST).write_text(json.dumps(manifest))


def test_the_manifest_records_each_files_sha256_size_and_rows(sweep: Path) -> None:
    for run in runs_of(sweep):
        manifest = manifest_of(run)
        records = manifest[FILES]
        assert set(records) == {f"{name}.parquet" for name in manifest["tables"]} | {SCENARIO}
        for file, record in records.items():
            data = (run / file).read_bytes()
            assert record["sha256"] == hashlib.sha256(data).hexdigest()
            assert record["bytes"] == len(data)
            if file != SCENARIO:
                rows = pq.read_metadata(run / file).num_rows
                assert record["rows"] == rows == manifest["tables"][file.removesuffix(".parquet")]


def test_verify_says_ok_for_intact_runs(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for target in (sweep, sweep / "runs", runs_of(sweep)[0]):
        assert main(["verify", str(target)]) == 0
        out = capsys.readouterr().out
        runs = 1 if target.parent.name == "runs" else 3
        assert out.endswith(f"{runs} run{'s' if runs > 1 else ''}: {runs} ok\n"), out
        assert all(line.startswith("ok  ") for line in out.splitlines()[:-1])


def delete_table(runs: list[Path]) -> str:
    (runs[0] / f"{TABLE}.parquet").unlink()
    return f"{TABLE}.parquet is missing"


def swap_table(runs: list[Path]) -> str:
    """The table of another run of the same sweep, under the same name."""
    shutil.copy(runs[1] / f"{TABLE}.parquet", runs[0] / f"{TABLE}.parquet")
    return (
        f"{TABLE}.parquet is the {TABLE}.parquet of run {runs[1].name} (its SHA-256 is the one "
        "that run's manifest records), not this run's"
    )


def swap_for_another_table(runs: list[Path]) -> str:
    """Another table of the same run in its place: collect used to raise KeyError."""
    shutil.copy(runs[0] / "samples.parquet", runs[0] / "walk_samples.parquet")
    return "walk_samples.parquet has the columns time, online"


def flip_data_bytes(runs: list[Path]) -> str:
    """64 bytes flipped inside the largest column chunk: the footer still reads, and the row
    counts and columns still match (the footer check alone took the run for complete)."""
    file = runs[0] / f"{TABLE}.parquet"
    group = pq.read_metadata(file).row_group(0)
    chunk = max(
        (group.column(i) for i in range(group.num_columns)),
        key=lambda column: column.total_compressed_size,
    )
    assert chunk.total_compressed_size > 128
    start = chunk.data_page_offset + chunk.total_compressed_size // 2 - 32
    data = bytearray(file.read_bytes())
    data[start : start + 64] = bytes(b ^ 0xFF for b in data[start : start + 64])
    file.write_bytes(bytes(data))
    assert pq.read_metadata(file).num_rows == manifest_of(runs[0])["tables"][TABLE]
    return f"{TABLE}.parquet does not match the SHA-256 the manifest records"


def lie_about_rows(runs: list[Path]) -> str:
    def change(manifest: dict) -> None:
        manifest["tables"][TABLE] += 5
        manifest[FILES][f"{TABLE}.parquet"]["rows"] += 5

    rows = manifest_of(runs[0])["tables"][TABLE]
    rewrite_manifest(runs[0], change)
    return f"{TABLE}.parquet has {rows} rows; the manifest says {rows + 5}"


def lie_about_rows_in_tables_only(runs: list[Path]) -> str:
    rows = manifest_of(runs[0])["tables"][TABLE]

    def change(manifest: dict) -> None:
        manifest["tables"][TABLE] = rows - 1

    rewrite_manifest(runs[0], change)
    return (
        f"the manifest contradicts itself about {TABLE}.parquet: {rows - 1} rows in its tables, "
        f"{rows} in its files"
    )


def swap_scenario_with_its_checksum(runs: list[Path]) -> str:
    """Another run's scenario.yaml in its place, the manifest's checksum of it recomputed:
    every file then matches its record, but not the manifest's scenario_hash."""
    shutil.copy(runs[1] / SCENARIO, runs[0] / SCENARIO)
    data = (runs[0] / SCENARIO).read_bytes()

    def change(manifest: dict) -> None:
        manifest[FILES][SCENARIO] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}

    rewrite_manifest(runs[0], change)
    return f"{SCENARIO} is not the scenario the run was made from"


DAMAGES = [
    pytest.param(swap_scenario_with_its_checksum, id="swapped-scenario-checksum-recomputed"),
    pytest.param(delete_table, id="deleted-table"),
    pytest.param(swap_table, id="another-runs-table"),
    pytest.param(swap_for_another_table, id="another-table"),
    pytest.param(flip_data_bytes, id="flipped-data-bytes"),
    pytest.param(lie_about_rows, id="manifest-lies-about-rows"),
    pytest.param(lie_about_rows_in_tables_only, id="manifest-contradicts-itself"),
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_run_is_named_and_refused_everywhere(
    sweep: Path, damage: Callable[[list[Path]], str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = runs_of(sweep)
    reason = damage(runs)
    damaged = runs[0]
    # report and collect over the sweep and over the folder of its runs: exit 2, naming it
    for target in (sweep, sweep / "runs"):
        err = cli_error(capsys, "report", target)
        assert f"{target}: 1 of 3 runs are damaged and were not read:\n" in err, err
        assert f"  - run {damaged.name} ({damaged}): " in err and reason in err, err
        assert f"'netsim verify {target}' checks every run" in err
        with pytest.raises(RunDirectoryError, match="1 of 3 runs are damaged"):
            collect(target, write=False)
    assert "netsim sweep" in err or "run them again" in err
    status = collect_status(sweep)
    assert status["status"].tolist() == ["damaged", "complete", "complete"]
    assert reason in status["error"].iloc[0]
    with pytest.raises(RunDirectoryError, match=r"damaged run directory: .*\.(parquet|yaml)"):
        load_run(damaged)  # alone, a run cannot tell whose table it holds
    # verify: one line per run, exit 1
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"damaged     {damaged.name}: ") and reason in lines[0]
    assert lines[1:] == [f"ok          {run.name}" for run in runs[1:]] + [
        "3 runs: 2 ok, 1 damaged"
    ]
    assert "running a sweep again redoes its damaged and missing runs" in captured.err


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_resumed_sweep_runs_a_damaged_run_again(
    sweep: Path, damage: Callable[[list[Path]], str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = runs_of(sweep)
    before = {file.name: file.read_bytes() for file in runs[0].glob("*.parquet")}
    damage(runs)
    again = InterruptAfter(99)
    run_sweep(plan_sweep(sweep.parents[1] / "sweep.yaml"), out=sweep.parent, backend=again)
    assert again.ran == [0]  # only the damaged run
    after = {file.name: file.read_bytes() for file in runs[0].glob("*.parquet")}
    assert after == before  # redone byte for byte
    assert main(["verify", str(sweep)]) == 0
    assert capsys.readouterr().out.endswith("3 runs: 3 ok\n")


def strip_checksums(manifest: dict) -> None:
    """The manifest as a version from before checksums wrote it: no ``files``, no format."""
    manifest.pop(FILES)
    manifest.pop(MANIFEST_FORMAT_KEY)


def test_a_run_from_before_checksums_is_unverified_and_read_only_when_asked(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = runs_of(sweep)[1]
    rewrite_manifest(old, strip_checksums)
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    out = capsys.readouterr().out
    assert f"unverified  {old.name}: written before manifests recorded checksums" in out
    assert out.endswith("3 runs: 2 ok, 1 unverified\n")
    with pytest.raises(RunDirectoryError) as refused:
        load_run(old)
    assert str(refused.value) == (
        f"{old}: unverified run directory: {UNVERIFIED_REASON}; it is not read unless asked "
        "(--allow-unverified, or allow_unverified=True in Python; or run it again)"
    )
    assert len(load_run(old, allow_unverified=True)[TABLE]) == manifest_of(old)["tables"][TABLE]
    with pytest.raises(RunDirectoryError, match="1 of 3 runs are unverified and were not read"):
        collect(sweep, write=False)
    everything = collect(sweep, write=False, allow_unverified=True)
    assert set(everything["run_id"]) == {run.name for run in runs_of(sweep)}
    assert main(["collect", str(sweep), "--allow-unverified"]) == 0
    capsys.readouterr()
    # an old run's footers are still checked
    rewrite_manifest(old, lambda manifest: manifest["tables"].update({TABLE: 1}))
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    assert f"damaged     {old.name}: {TABLE}.parquet has " in capsys.readouterr().out


def files_removed(runs: list[Path]) -> str:
    rewrite_manifest(runs[0], lambda manifest: manifest.pop(FILES))
    return (
        "the manifest has no 'files' (checksums), though a manifest of format 2 always records "
        "them (it was stripped of them)"
    )


def files_null_and_format_removed(runs: list[Path]) -> str:
    def change(manifest: dict) -> None:
        manifest[FILES] = None
        manifest.pop(MANIFEST_FORMAT_KEY)

    rewrite_manifest(runs[0], change)
    return UNVERIFIED_REASON


def checksums_stripped(runs: list[Path]) -> str:
    rewrite_manifest(runs[0], strip_checksums)
    return UNVERIFIED_REASON


def no_tables(runs: list[Path]) -> str:
    rewrite_manifest(runs[0], lambda manifest: manifest.update(tables={}))
    return "the manifest lists no tables (every run writes some)"


def table_dropped_everywhere_but_its_schema(runs: list[Path]) -> str:
    def change(manifest: dict) -> None:
        del manifest["tables"][TABLE], manifest[FILES][f"{TABLE}.parquet"]

    rewrite_manifest(runs[0], change)
    (runs[0] / f"{TABLE}.parquet").unlink()
    return f"table {TABLE} has a schema in the manifest but is not in its tables"


def table_dropped_from_the_manifest_only(runs: list[Path]) -> str:
    def change(manifest: dict) -> None:
        del manifest["tables"][TABLE], manifest[FILES][f"{TABLE}.parquet"]
        del manifest["schemas"][TABLE]

    rewrite_manifest(runs[0], change)
    return f"{TABLE}.parquet is in the run directory but not in the manifest's tables"


def another_runs_table_by_path(runs: list[Path]) -> str:
    """The table named ``../<other run>/walk_steps`` with that file's own checksum."""
    name = f"../{runs[1].name}/{TABLE}"
    theirs = manifest_of(runs[1])

    def change(manifest: dict) -> None:
        manifest["tables"][name] = manifest["tables"].pop(TABLE)
        manifest["schemas"][name] = manifest["schemas"].pop(TABLE)
        manifest[FILES].pop(f"{TABLE}.parquet")
        manifest[FILES][f"{name}.parquet"] = theirs[FILES][f"{TABLE}.parquet"]

    rewrite_manifest(runs[0], change)
    (runs[0] / f"{TABLE}.parquet").unlink()
    return f"the manifest names the table(s) '{name}'; a table's name is a plain name"


DOWNGRADES = [
    pytest.param(files_removed, id="files-removed"),
    pytest.param(files_null_and_format_removed, id="files-null-format-removed"),
    pytest.param(checksums_stripped, id="files-and-format-removed"),
    pytest.param(no_tables, id="tables-empty"),
    pytest.param(table_dropped_everywhere_but_its_schema, id="table-dropped"),
    pytest.param(table_dropped_from_the_manifest_only, id="table-dropped-from-manifest"),
    pytest.param(another_runs_table_by_path, id="table-named-by-path"),
]


def edit_samples(run: Path) -> None:
    """``samples`` edited keeping its shape (same rows and columns, other values)."""
    file = run / "samples.parquet"
    table = pq.read_table(file)
    online = pa.array(
        [v + 1 for v in table.column("online").to_pylist()], table.schema.field("online").type
    )
    pq.write_table(table.set_column(table.schema.get_field_index("online"), "online", online), file)


@pytest.mark.parametrize("downgrade", DOWNGRADES)
def test_a_stripped_or_truncated_manifest_with_an_edited_table_is_refused_and_run_again(
    sweep: Path, downgrade: Callable[[list[Path]], str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = runs_of(sweep)
    before = {file.name: file.read_bytes() for file in runs[0].glob("*.parquet")}
    reason = downgrade(runs)
    edit_samples(runs[0])
    state = "unverified" if reason == UNVERIFIED_REASON else "damaged"
    for target in (sweep, sweep / "runs"):
        err = cli_error(capsys, "report", target)
        assert f"{target}: 1 of 3 runs are {state} and were not read:\n" in err, err
        assert f"  - run {runs[0].name} ({runs[0]}): " in err and reason in err, err
        with pytest.raises(RunDirectoryError, match=f"1 of 3 runs are {state}"):
            collect(target, write=False)
        err = cli_error(capsys, "collect", target)
        assert reason in err
    with pytest.raises(RunDirectoryError, match=f"{state} run directory: ") as refused:
        load_run(runs[0])
    assert reason in str(refused.value)
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    assert capsys.readouterr().out.startswith(f"{state:<10}  {runs[0].name}: ")
    again = InterruptAfter(99)
    run_sweep(plan_sweep(sweep.parents[1] / "sweep.yaml"), out=sweep.parent, backend=again)
    assert again.ran == [0]  # only the downgraded run
    after = {file.name: file.read_bytes() for file in runs[0].glob("*.parquet")}
    assert after == before  # redone byte for byte
    assert main(["verify", str(sweep)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("depth", [100, 200_000])
def test_a_manifest_nested_too_deep_is_one_message(
    sweep: Path, depth: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs_of(sweep)[0]
    (run / MANIFEST).write_text("[" * depth + "]" * depth)
    why = (
        f"manifest.json nests lists or objects more than {MAX_RECORD_DEPTH} levels deep; a run "
        f"record nests at most {MAX_RECORD_DEPTH} (netsim refuses deeper records rather than "
        "read them)"
    )
    assert main(["verify", str(run)]) == EXIT_NOT_VERIFIED
    assert capsys.readouterr().out == f"damaged     {run.name}: {why}\n1 run: 1 damaged\n"
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    assert f"damaged     {run.name}: {why}\n" in capsys.readouterr().out
    for command in ("collect", "report"):
        err = cli_error(capsys, command, run)
        assert err == (
            f"netsim: error: {run}: not a complete run directory ({why}); expected {EXPECTED}\n"
        )
    with pytest.raises(RunDirectoryError, match="more than 64 levels deep"):
        load_run(run)


def test_verify_names_missing_and_failed_runs_and_refuses_what_is_not_a_run(
    sweep: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = runs_of(sweep)
    shutil.rmtree(runs[2])
    (sweep / "failures" / f"{runs[1].name}.json").write_text('{"error": "boom"}')
    shutil.rmtree(runs[1])
    assert main(["verify", str(sweep)]) == EXIT_NOT_VERIFIED
    assert capsys.readouterr().out.splitlines() == [
        f"ok          {runs[0].name}",
        f"failed      {runs[1].name}: boom",
        f"missing     {runs[2].name}: not run yet, or interrupted ('netsim sweep' runs it)",
        "3 runs: 1 ok, 1 failed, 1 missing",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    err = cli_error(capsys, "verify", empty)
    assert err == (
        f"netsim: error: {empty}: no run in it (no manifest.json, scenario.yaml or table); "
        "expected a run directory, a folder of runs or a sweep\n"
    )


def test_a_run_whose_manifest_is_gone_is_damaged_in_a_folder(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs_of(sweep)[0]
    (run / MANIFEST).unlink()
    assert main(["verify", str(sweep / "runs")]) == EXIT_NOT_VERIFIED
    out = capsys.readouterr().out
    assert f"damaged     {run.name}: no manifest.json with status 'complete'" in out


def test_a_table_that_is_a_fifo_is_damaged_and_read_without_waiting(sweep: Path) -> None:
    run = runs_of(sweep)[0]
    (run / f"{TABLE}.parquet").unlink()
    os.mkfifo(run / f"{TABLE}.parquet")
    done = netsim_subprocess("verify", sweep)
    assert done.returncode == EXIT_NOT_VERIFIED, done.stderr
    assert (
        f"damaged     {run.name}: {TABLE}.parquet is a FIFO (named pipe), not a regular file; a "
        "table must be a regular file" in done.stdout
    )
    done = netsim_subprocess("report", sweep)
    assert done.returncode == 2 and "1 of 3 runs are damaged" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_run_whose_data_file_is_absent_here_is_not_called_damaged(
    sweep: Path, tmp_path: Path
) -> None:
    """The scenario check hashes the data files a run's scenario names; one absent from this
    checkout (research-only data, another machine) cannot be judged, so the run is not
    called damaged for it — while a swapped scenario beside its data still is."""
    from netsim.scenario.loader import scenario_file_problem

    run = runs_of(sweep)[0]
    manifest = manifest_of(run)
    assert scenario_file_problem(run, manifest) is None
    text = (run / SCENARIO).read_text()
    trace = tmp_path / "elsewhere.csv"
    original = next(line.split(":", 1)[1].strip() for line in text.splitlines()
                    if line.strip().startswith("path:"))  # fmt: skip
    shutil.copy(original, trace)
    (run / SCENARIO).write_text(text.replace(original, str(trace)))
    assert scenario_file_problem(run, manifest) is None  # the same bytes elsewhere: the same run
    trace.unlink()
    assert scenario_file_problem(run, manifest) is None  # absent: not judged
    edited = text.replace("kill_probability: 0.0\n", "kill_probability: 0.5\n")
    assert edited != text
    (run / SCENARIO).write_text(edited)
    assert "is not the scenario the run was made from" in str(
        scenario_file_problem(run, manifest)
    )
