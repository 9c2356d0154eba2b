"""netsim's reproducibility contract, as code: when two tables count as the same result.

The contract (``docs/reproducibility.md``):

* **Same platform and library versions**: the same scenario and seed give byte-identical
  tables.
* **Another machine** (another CPU, BLAS kernel, SIMD level, or library versions): row counts,
  column names and types, and every non-floating-point column (counts, node ids, events,
  labels, flags) are identical; every floating-point column is equal within
  :data:`RELATIVE_TOLERANCE` of the larger magnitude (or of the magnitude of the column a table
  schema names in ``scaled_by``, for small differences of large numbers such as a solver's
  certified gap), plus :data:`ABSOLUTE_TOLERANCE` for values at zero. NaN must be NaN and
  infinities equal on both sides.

Why those numbers. Machines differ in the last bits of floating-point results: BLAS kernels
add products in other orders, and numpy computes ``exp``, ``log``, ``pow`` and sums with
vector instructions whose width depends on the CPU. Measured on the shipped scenarios under a
second machine profile (another OpenBLAS kernel, no AVX-512, numba compiled for a generic
x86-64), the largest difference was 5e-16 relative (a few units in the last place); 1e-9 leaves
six orders of magnitude for long runs to accumulate such differences, and is still far below
any difference a reader of a table or figure can see, or a change of the code would make.
Where last-bit differences could be amplified — the hindsight solver's iterates and stopping
point, a sign that decides a label — netsim computes in a fixed order
(:mod:`netsim.learning.ordered`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: Floating-point columns agree within this fraction of the larger magnitude.
RELATIVE_TOLERANCE = 1e-9
#: ... plus this absolute amount (for values at or near zero).
ABSOLUTE_TOLERANCE = 1e-12


def frames_identical(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether two tables are byte-identical: same columns, types and exact values."""
    if list(a.columns) != list(b.columns) or list(a.dtypes) != list(b.dtypes) or len(a) != len(b):
        return False
    hashes_a = pd.util.hash_pandas_object(a, index=False).to_numpy()
    hashes_b = pd.util.hash_pandas_object(b, index=False).to_numpy()
    return bool(np.array_equal(hashes_a, hashes_b))


def float_column_excess(
    reference: np.ndarray, value: np.ndarray, scale: np.ndarray | None = None
) -> np.ndarray:
    """Per row, how far ``value`` is from ``reference`` in units of the contract's allowance
    (≤ 1 is within the contract); a NaN or infinity that is not matched counts as ∞."""
    reference = np.asarray(reference, dtype=np.float64)
    value = np.asarray(value, dtype=np.float64)
    magnitude = np.maximum(np.abs(reference), np.abs(value))
    if scale is not None:
        magnitude = np.maximum(magnitude, np.abs(np.asarray(scale, dtype=np.float64)))
    finite = np.isfinite(reference) & np.isfinite(value)
    allowed = RELATIVE_TOLERANCE * np.where(finite, magnitude, 0.0) + ABSOLUTE_TOLERANCE
    with np.errstate(invalid="ignore"):
        excess = np.where(finite, np.abs(reference - value), 0.0) / allowed
    same_special = (np.isnan(reference) & np.isnan(value)) | (
        ~finite & ~np.isnan(reference) & (reference == value)
    )
    return np.where(finite | same_special, excess, np.inf)


def table_differences(
    name: str,
    reference: pd.DataFrame,
    table: pd.DataFrame,
    scaled_by: Mapping[str, str] | None = None,
) -> list[str]:
    """What makes ``table`` differ from ``reference`` beyond the contract (empty: they agree).

    ``scaled_by`` maps a column to the column whose magnitude it is compared against (the
    table schema's ``scaled_by``)."""
    scaled_by = dict(scaled_by or {})
    problems: list[str] = []
    if list(reference.columns) != list(table.columns):
        return [f"table {name}: columns {list(table.columns)}, expected {list(reference.columns)}"]
    if len(reference) != len(table):
        return [f"table {name}: {len(table)} rows, expected {len(reference)}"]
    for column in reference.columns:
        expected, got = reference[column].to_numpy(), table[column].to_numpy()
        if expected.dtype.kind == "f" or got.dtype.kind == "f":
            if expected.dtype.kind != got.dtype.kind:
                problems.append(
                    f"table {name}: column {column} is {got.dtype}, not {expected.dtype}"
                )
                continue
            basis = scaled_by.get(column)
            scale = reference[basis].to_numpy() if basis is not None else None
            excess = float_column_excess(expected, got, scale)
            bad = np.flatnonzero(excess > 1.0)
            if bad.size:
                row = int(bad[np.argmax(excess[bad])])
                problems.append(
                    f"table {name}: column {column}: {bad.size} of {len(expected)} values differ "
                    f"by more than the contract allows (worst at row {row}: {got[row]!r}, "
                    f"expected {expected[row]!r})"
                )
        else:
            differs = np.flatnonzero(pd.Series(expected).ne(pd.Series(got)).to_numpy())
            if differs.size:
                row = int(differs[0])
                problems.append(
                    f"table {name}: column {column}: {differs.size} of {len(expected)} values "
                    f"differ (first at row {row}: {got[row]!r}, expected {expected[row]!r})"
                )
    return problems
