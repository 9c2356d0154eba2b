"""The import floor: what importing netsim, checking a scenario and running one in rounds mode
load. pandas, scipy.stats, networkx and dp-accounting (some 120 MiB resident between them),
matplotlib, dask, scikit-learn and JAX are imported where a run, a figure or an analysis calls
them (``netsim.lazy``), not by ``import netsim.cli``; a rounds run writing its tables loads none
of them (``docs/performance.md``, the footprint figures). Each check runs in a fresh child, so
that what this test process imported does not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What no command-line import, scenario check or rounds run may load.
HEAVY = (
    "pandas",
    "matplotlib",
    "dask",
    "sklearn",
    "scipy.stats",
    "scipy.optimize",
    "jax",
    "networkx",
    "dp_accounting",
    "torch",
)

PROBE = r"""
import json, sys
{body}
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def _heavy_loaded(body: str, heavy: tuple[str, ...] = HEAVY, **env_vars: str) -> list[str]:
    """The ``heavy`` modules in ``sys.modules`` after a child process ran ``body`` (with the
    environment variables ``env_vars`` set; ``NETSIM_AOT=""`` unsets it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_vars}
    env = {key: value for key, value in env.items() if value != ""}
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body, heavy=heavy)],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_command_line_loads_no_heavy_module():
    assert _heavy_loaded("import netsim.cli") == []
    # scipy itself too: numba, which a run needs, is what imports it
    assert _heavy_loaded("import netsim.cli; assert 'scipy' not in sys.modules") == []


def test_validating_the_quickstart_loads_no_heavy_module():
    body = (
        "from netsim.cli import main\n"
        f"assert main(['validate', {str(ROOT / 'scenarios' / 'quickstart.yaml')!r}]) == 0"
    )
    assert _heavy_loaded(body) == []


def test_a_rounds_run_writing_its_tables_loads_no_heavy_module(tmp_path):
    scenario = ROOT / "scenarios" / "walk" / "reduced-drw1-d10-kill5.yaml"
    body = (
        "from netsim.cli import main\n"
        f"assert main(['run', {str(scenario)!r}, '--set', 'gossip.mode=rounds', '--set', "
        f"'duration=2min', '--out', {str(tmp_path)!r}, '-q']) == 0"
    )
    assert _heavy_loaded(body) == []
    assert list(tmp_path.glob("*/*.parquet"))  # it wrote its tables


def test_a_rounds_run_with_the_compiled_kernels_loads_no_numba(aot_kernels, tmp_path):
    # the kernels compiled ahead of time (netsim compile): numba, llvmlite and the scipy numba
    # imports stay out, some 120 MiB (docs/performance.md, "Footprint")
    scenario = ROOT / "scenarios" / "walk" / "reduced-drw1-d10-kill5.yaml"

    def body(out: Path) -> str:
        return (
            "from netsim.cli import main\n"
            f"assert main(['run', {str(scenario)!r}, '--set', 'gossip.mode=rounds', '--set', "
            f"'duration=2min', '--out', {str(out)!r}, '-q']) == 0"
        )

    unwanted = (*HEAVY, "numba", "llvmlite", "scipy")
    aot = {"NETSIM_AOT": "", "NETSIM_AOT_DIR": str(aot_kernels)}
    assert _heavy_loaded(body(tmp_path / "aot"), unwanted, **aot) == []
    assert list(tmp_path.glob("aot/*/*.parquet"))  # it wrote its tables
    # the same run on numba's JIT imports it: the check sees numba where it is
    assert _heavy_loaded(body(tmp_path / "jit"), ("numba",), NETSIM_AOT="0") == ["numba"]


def test_a_lazy_module_is_imported_on_first_use():
    body = (
        "from netsim.lazy import lazy_module\n"
        "colours = lazy_module('colorsys')\n"
        "assert 'colorsys' not in sys.modules\n"
        "assert colours.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)\n"
        "assert 'colorsys' in sys.modules"
    )
    assert _heavy_loaded(body) == []


def test_the_rdp_orders_are_dp_accountings_default_grid():
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    from netsim.privacy.composition import RDP_ORDERS

    assert np.array_equal(RDP_ORDERS, np.array(DEFAULT_RDP_ORDERS, dtype=np.float64))


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        (np.arange(5, dtype=np.int64), pa.int64()),
        (np.arange(5, dtype=np.int64), pa.int32()),
        (np.array([0.5, np.nan, -np.inf]), pa.float64()),
        (np.arange(4, dtype=np.int32), pa.float64()),
        (np.array([True, False, True] * 5), pa.bool_()),
        ([1, 2, 3], pa.int32()),
        ([1, 2, 3], pa.float64()),
        ([0.25, 1e300], pa.float64()),
        ([True, False], pa.bool_()),
        (["push", "", "pull ü"], pa.string()),
        ([], pa.int64()),
        ([], pa.string()),
        ([], pa.bool_()),
        (np.arange(10, dtype=np.int64)[::2], pa.int64()),
    ],
)
def test_a_column_from_its_buffers_is_the_column_pyarrow_makes(values, dtype):
    from netsim.log import _arrow_column

    built = _arrow_column(values, dtype)
    expected = pa.array(values, type=dtype)
    assert built.type == expected.type and built.null_count == 0 and len(built) == len(expected)
    # byte for byte: the buffers a Parquet writer reads (NaN included)
    assert [_bytes(buffer) for buffer in built.buffers()] == [
        _bytes(buffer) for buffer in expected.buffers()
    ]


def _bytes(buffer: pa.Buffer | None) -> bytes | None:
    return None if buffer is None else buffer.to_pybytes()


@pytest.mark.parametrize(
    ("values", "dtype"),
    [(np.array([2**40]), pa.int32()), ([2**60 + 1], pa.float64()), ([2**40], pa.int32())],
)
def test_a_column_out_of_its_types_range_is_refused_as_pyarrow_refuses_it(values, dtype):
    from netsim.log import _arrow_column

    with pytest.raises(pa.ArrowInvalid):
        _arrow_column(values, dtype)


def test_the_in_links_are_built_at_the_first_transition():
    from netsim.network import topology as t
    from netsim.network.links import OnlineNeighbourIndex
    from netsim.network.nodes import NodeStates

    rng = np.random.default_rng(3)
    topology = t.k_out(200, 8, rng)
    nodes = NodeStates(rng.random(200) < 0.5)
    index = OnlineNeighbourIndex(topology, nodes, compact=True)
    before = index.nbytes()
    assert before == index.order.nbytes + index.segments.nbytes  # no in-links yet
    nodes.set_online(int(np.flatnonzero(~nodes.online)[0]), 0.0)
    in_sources = index.in_links()[1]
    assert in_sources.size == topology.indices.size
    assert index.nbytes() > before
