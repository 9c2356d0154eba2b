"""A change moves no number beyond the reproducibility contract: a fast subset of the shipped
scenarios' tables against the recorded references (``tests/table_digests.py`` checks them
all), computed here and as another machine computes them (another OpenBLAS kernel, no AVX-512
loops in numpy, numba for a generic CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from netsim.analysis.reproducibility import (
    RELATIVE_TOLERANCE,
    float_column_excess,
    frames_identical,
    table_differences,
)
from tests.table_digests import (
    DIGESTS,
    FAST_CASES,
    REPO,
    compare,
    run_case,
    second_machine_environment,
)

RECORDED = json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("case", FAST_CASES)
def test_tables_match_the_recorded_references(case: str) -> None:
    problems, _ = compare(case, RECORDED[case], run_case(case))
    assert problems == []


def test_tables_match_the_references_as_another_machine_computes_them() -> None:
    """The contract across machines, tried on this one: the fast cases in a child process
    with another BLAS kernel, numpy's narrower vector loops and numba's generic code."""
    env = second_machine_environment()
    result = subprocess.run(
        [sys.executable, "-m", "tests.table_digests", "--only", *FAST_CASES],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("\n") == len(FAST_CASES)


def test_the_second_machine_differs_from_this_one() -> None:
    """The second-machine profile really computes differently: BLAS under another kernel
    gives other last bits for a product whose order of additions it chooses."""
    code = (
        "import numpy as np; r = np.random.default_rng(0); a = r.standard_normal((300, 300)); "
        "print((a @ a).tobytes().hex()[:4000])"
    )
    if "OPENBLAS_CORETYPE" not in second_machine_environment():
        pytest.skip("not an x86-64 machine: no second OpenBLAS kernel to choose")
    # this machine as it is, whatever the test run's own environment chose
    chosen = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "NUMBA_CPU_NAME")
    native = {key: value for key, value in os.environ.items() if key not in chosen}
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=native)
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env=second_machine_environment(),
    )  # fmt: skip
    assert here.returncode == there.returncode == 0
    if here.stdout == there.stdout and native_openblas_core() == "sandybridge":
        pytest.skip("this machine's own OpenBLAS kernel is the second profile's (Sandybridge)")
    assert here.stdout != there.stdout


def native_openblas_core() -> str | None:
    """The OpenBLAS kernel numpy uses on this machine by default (None if unknown)."""
    code = (
        "import numpy, threadpoolctl; print(next((i.get('architecture') or '' for i in "
        "threadpoolctl.threadpool_info() if i.get('internal_api') == 'openblas'), ''))"
    )
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return done.stdout.strip().lower() or None if done.returncode == 0 else None


def test_floats_within_the_tolerance_agree_and_beyond_it_do_not() -> None:
    reference = np.array([1.0, 1e6, 0.0, np.nan, np.inf, -2.5])
    close = reference * (1 + 0.5 * RELATIVE_TOLERANCE)
    close[2] = 1e-13  # absolute tolerance at zero
    assert (float_column_excess(reference, close) <= 1).all()
    far = reference.copy()
    far[1] = 1e6 * (1 + 3 * RELATIVE_TOLERANCE)
    assert float_column_excess(reference, far)[1] > 1
    swapped = reference.copy()
    swapped[3] = 0.0  # NaN must stay NaN
    assert np.isinf(float_column_excess(reference, swapped)[3])
    assert np.isinf(float_column_excess(reference, -reference)[4])


def test_a_gap_is_compared_at_the_scale_of_what_it_is_the_difference_of() -> None:
    reference = pd.DataFrame({"loss": [3600.0, 3700.0], "gap": [1e-9, 2e-9]})
    moved = reference.assign(gap=[1e-9 + 5e-11, 2e-9])  # far below the loss's 1e-9 share
    assert table_differences("t", reference, moved, {"gap": "loss"}) == []
    assert table_differences("t", reference, moved) != []  # on its own scale: far beyond


def test_integer_columns_must_be_identical() -> None:
    reference = pd.DataFrame({"node": np.array([1, 2, 3], dtype=np.int32), "x": [0.1, 0.2, 0.3]})
    assert frames_identical(reference, reference.copy())
    changed = reference.assign(node=np.array([1, 2, 4], dtype=np.int32))
    assert not frames_identical(reference, changed)
    problems = table_differences("t", reference, changed)
    assert len(problems) == 1 and "column node: 1 of 3 values differ" in problems[0]
