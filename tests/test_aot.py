"""The kernels compiled ahead of time (``netsim compile``, :mod:`netsim.aot`, the seam
:mod:`netsim.compiled`): a rounds run that finds the compiled module loads no numba and writes
the tables numba's JIT writes, byte for byte; a stale module, or a call with other argument
types, falls back to the JIT and says why (docs/performance.md, "Footprint"). Each run is a
child process with the module turned on or off (``NETSIM_AOT``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"

RUN = r"""
import json, sys
from netsim.cli import main
assert main(["run", sys.argv[1], "--out", sys.argv[2], "-q", *sys.argv[3:]]) == 0
print(json.dumps({"numba": "numba" in sys.modules, "llvmlite": "llvmlite" in sys.modules}))
"""


def _child(code: str, args: list[str], aot_dir: Path | None) -> str:
    """Run ``code`` in a child process with the compiled module in ``aot_dir`` (None: off);
    its standard output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if aot_dir is None:
        env["NETSIM_AOT"] = "0"
    else:
        env.pop("NETSIM_AOT", None)
        env["NETSIM_AOT_DIR"] = str(aot_dir)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _run(scenario: Path, out: Path, overrides: list[str], aot_dir: Path | None) -> dict:
    """A run's manifest, its tables' bytes, and whether numba was imported."""
    sets = [word for pair in overrides for word in ("--set", pair)]
    loaded = json.loads(_child(RUN, [str(scenario), str(out), *sets], aot_dir).splitlines()[-1])
    (run,) = [path for path in out.iterdir() if path.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    tables = {path.name: path.read_bytes() for path in sorted(run.glob("*.parquet"))}
    return {"manifest": manifest, "tables": tables, **loaded}


CASES = {
    "walk": (SCENARIOS / "walk" / "reduced-drw1-d10-kill5.yaml", ["duration=3min"]),
    "quickstart": (SCENARIOS / "quickstart.yaml", ["duration=20min"]),
    "authors-cycle": (
        SCENARIOS / "walk" / "reduced-drw100-d20-kill5.yaml",
        ["duration=3min", "walk.preset=authors", "walk.cycle=authors"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_compiled_kernels_write_the_jits_tables_without_numba(case, aot_kernels, tmp_path):
    scenario, overrides = CASES[case]
    overrides = ["gossip.mode=rounds", *overrides]
    compiled = _run(scenario, tmp_path / "aot", overrides, aot_kernels)
    jit = _run(scenario, tmp_path / "jit", overrides, None)
    assert compiled["manifest"]["kernels"] == "compiled ahead of time"
    assert not compiled["numba"] and not compiled["llvmlite"]
    assert jit["manifest"]["kernels"] == "numba: NETSIM_AOT=0"
    assert jit["numba"]
    assert len(compiled["tables"]) >= 3
    assert compiled["tables"] == jit["tables"]  # byte for byte


def test_a_stale_module_is_bypassed_and_says_which_source_changed(aot_kernels, tmp_path):
    stale = tmp_path / "stale"
    shutil.copytree(aot_kernels, stale)
    (manifest_path,) = stale.glob("*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert "netsim/network/links.py" in manifest["sources"]  # derived from the kernels' code
    manifest["sources"]["netsim/network/links.py"] = "0" * 64  # as after an edit of links.py
    manifest_path.write_text(json.dumps(manifest))
    scenario, overrides = CASES["walk"]
    run = _run(scenario, tmp_path / "run", ["gossip.mode=rounds", *overrides], stale)
    assert run["manifest"]["kernels"] == (
        "numba: the compiled kernels are stale: netsim/network/links.py changed"
    )
    assert run["numba"]


def test_a_missing_module_says_how_to_build_it(tmp_path):
    code = "from netsim.compiled import kernels_engine, STATE; print(kernels_engine())"
    said = _child(code, [], tmp_path).strip()
    assert said.startswith(f"numba: no compiled kernels in {tmp_path}")
    assert said.endswith("(netsim compile builds them)")


CALLS = r"""
import json, sys
import numpy as np
from netsim import compiled
from netsim.network import links
indptr = np.array([0, 2, 3, 3], dtype=np.int64)
indices = np.array([1, 2, 0], dtype=np.int32)
slots = np.array([0, 1, 2], dtype=np.int32)
results = {"first": [a.tolist() for a in links.in_links(indptr, indices, slots)],
           "numba_after_first": "numba" in sys.modules}
wide = np.array([1, 9, 2, 9, 0, 9], dtype=np.int32)[::2]  # not contiguous: the JIT's call
results["strided"] = [a.tolist() for a in links.in_links(indptr, wide, slots)]
results["numba"] = "numba" in sys.modules
results["kernels"] = compiled.kernels_engine()
results["dispatcher"] = type(links.in_links).__name__
print(json.dumps(results))
"""


def test_a_call_with_other_types_runs_on_the_jit(aot_kernels):
    results = json.loads(_child(CALLS, [], aot_kernels).splitlines()[-1])
    expected = [[0, 1, 2, 3], [1, 0, 0], [2, 0, 1], [1, 2, 0]]
    assert results["first"] == expected and not results["numba_after_first"]
    assert results["strided"] == expected  # the exported function would read 1, 9, 2
    assert results["numba"]
    assert results["kernels"] == (
        "compiled ahead of time, numba: netsim.network.links:in_links was called with other types"
    )
    assert results["dispatcher"] == "CPUDispatcher"  # the module now binds numba's dispatcher


def test_netsim_compile_says_where_and_how_long(monkeypatch, capsys, tmp_path):
    from netsim import aot
    from netsim.aot_exports import EXPORTS
    from netsim.cli import main

    monkeypatch.setattr(aot, "compile_kernels", lambda: (tmp_path, 12.34))
    assert main(["compile"]) == 0
    said = capsys.readouterr().out
    assert said == f"{tmp_path}: {len(EXPORTS)} kernels compiled ahead of time (12.3 s CPU)\n"
    assert len(EXPORTS) == 17


def test_a_failed_compile_raises_and_keeps_the_module_there(monkeypatch, tmp_path):
    from netsim import aot

    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    with pytest.raises(aot.CompileError, match="compiling the kernels ahead of time failed"):
        aot.compile_kernels(folder)
    assert (folder / "manifest.json").read_text() == "{}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kernels"]  # no staging left


SWEEP = r"""
import json, sys
from netsim import compiled
from netsim.privacy import linear
from netsim.protocols.walk import kernels
stand_in = type(linear.prange).__name__
compiled.use_jit("asked for")
import numba
print(json.dumps({
    "stand_in": stand_in,
    "prange": linear.prange is numba.prange and compiled.prange is numba.prange,
    "exchange": sorted({type(k).__name__ for k in kernels.EXCHANGE_KERNELS.values()}),
    "kernels": compiled.kernels_engine(),
}))
"""


def test_bringing_in_the_jit_gives_every_module_numbas_objects(aot_kernels):
    # compiled code calling compiled code must see numba's dispatchers and prange, in a
    # module's globals and in the dicts it binds (the exchange kernels by option set)
    results = json.loads(_child(SWEEP, [], aot_kernels).splitlines()[-1])
    assert results == {
        "stand_in": "_PRange",
        "prange": True,
        "exchange": ["CPUDispatcher"],
        "kernels": "compiled ahead of time, numba: asked for",
    }


@pytest.fixture(scope="module")
def exported(aot_kernels: Path):
    """The compiled module's functions by export name, loaded into this process (whose
    kernels are numba's: the tests run with ``NETSIM_AOT=0``)."""
    from netsim.compiled import _load

    (folder,) = [path for path in aot_kernels.iterdir() if (path / "manifest.json").exists()]
    module, exports, reason = _load(folder)
    assert reason is None, reason
    return {name: getattr(module, name) for name in exports.values()}


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """A directed graph as CSR (indptr int64, indices int32), its online nodes, and one random
    64-bit word per node."""
    n = draw(st.integers(1, 12))
    lists = [draw(st.lists(st.integers(0, n - 1), max_size=6, unique=True)) for _ in range(n)]
    indptr = np.cumsum([0, *map(len, lists)]).astype(np.int64)
    indices = np.array([v for neighbours in lists for v in neighbours], dtype=np.int32)
    online = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    raw = np.array(
        draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype=np.uint64
    )
    return indptr, indices, online, raw


@settings(max_examples=60)
@given(graph=_graphs())
def test_the_exported_index_kernels_return_what_numbas_return(exported, graph):
    from netsim.network import links

    indptr, indices, online, raw = graph
    names = ("partition_online_first", "pair_online", "in_links")
    results = {}
    for engine, functions in (
        ("jit", {name: getattr(links, name) for name in names}),
        ("aot", exported),
    ):
        order = np.empty(indices.size, dtype=np.int32)
        slots = np.empty(indices.size, dtype=np.int32)
        call = functions.__getitem__
        counts = call("partition_online_first")(indptr, indices, online, order, slots, False)
        segments = np.zeros(indptr.size - 1, dtype=links.SEGMENT_RECORD)
        segments["start"], segments["online"] = indptr[:-1], counts
        empty = np.empty(0, dtype=np.int32)
        pairs = call("pair_online")(online, raw[: int(online.sum())], segments, order, empty)
        in_links = call("in_links")(indptr, indices, slots)
        results[engine] = [counts, order, slots, *pairs, *in_links]
    assert [(a.dtype, a.tolist()) for a in results["aot"]] == [
        (a.dtype, a.tolist()) for a in results["jit"]
    ]


@given(
    age=st.floats(-10, 1e6, allow_nan=False),
    delta=st.floats(1e-3, 1e3, allow_nan=False),
)
def test_the_exported_timeout_circle_is_numbas(exported, age, delta):
    from netsim.protocols.walk import kernels

    assert exported["timeout_circle"](age, delta) == kernels.timeout_circle(age, delta)


SCALARS = r"""
import json, sys
import numpy as np
from netsim import compiled
from netsim.protocols.walk import kernels
results = {"float": kernels.timeout_circle(2.5, 1.0), "int": kernels.timeout_circle(3, 1),
           "numba_after": "numba" in sys.modules}
results["float32"] = kernels.timeout_circle(np.float32(2.5), 1.0)  # the JIT's float32 kernel
results["kernels"] = compiled.kernels_engine()
print(json.dumps(results))
"""


def test_a_scalar_the_jit_types_otherwise_runs_on_the_jit(aot_kernels):
    results = json.loads(_child(SCALARS, [], aot_kernels).splitlines()[-1])
    assert results == {
        "float": 2,
        "int": 3,
        "numba_after": False,  # a Python int for a float is converted exactly
        "float32": 2,
        "kernels": "compiled ahead of time, numba: "
        "netsim.protocols.walk.kernels:timeout_circle was called with other types",
    }


def test_without_the_compiled_module_the_kernels_get_numbas_prange():
    """With numba running the kernels (here ``NETSIM_AOT=0``), a module importing ``prange``
    gets numba's: a parallel kernel compiled with the stand-in fails to type (the linear
    accountant's Gram kernel did, in a fresh checkout whose kernels were not in numba's cache)."""
    import numba

    from netsim import compiled
    from netsim.compiled import prange
    from netsim.privacy import linear

    assert compiled.STATE["module"] is None
    assert prange is numba.prange and linear.prange is numba.prange


def test_every_kernel_module_compiles_through_the_seam():
    """numba is imported only by the seam (``netsim.compiled``) and the build (``netsim.aot``):
    a module importing it directly loads it into a run that has the compiled module (the
    walk's compiled steps did, and every rounds run imported numba)."""
    direct = re.compile(r"^\s*(from numba\b|import numba\b)", re.MULTILINE)
    allowed = {"netsim/compiled.py", "netsim/aot.py"}
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "netsim").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in allowed
        and direct.search(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"import njit and prange from netsim.compiled instead: {found}"
