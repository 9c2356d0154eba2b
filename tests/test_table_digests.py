"""A refactor changes no number: a fast subset of the shipped scenarios' tables against the
digests recorded before the component refactor (``tests/table_digests.py`` checks them all)."""

from __future__ import annotations

import json

import pytest

from tests.table_digests import DIGESTS, FAST_CASES, compare, run_case

RECORDED = json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("case", FAST_CASES)
def test_tables_match_the_recorded_digests(case: str) -> None:
    assert compare(case, RECORDED[case], run_case(case)) == []
