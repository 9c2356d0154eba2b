"""The run ids of the shipped scenarios, recorded, so a change that alters one is seen.

A run's id ends in the hash of its resolved scenario, whose file paths are absolute; here each
path below the checkout is written ``<repo>/...`` and each below ``../shared`` ``<shared>/...``
before hashing, so the recorded ids hold in any checkout. Recorded from commit b5bc1e0 (before
the scenario became named instances, issue 28), with that commit's code::

    python -m tests.scenario_ids            # compare with tests/scenario_ids.json
    python -m tests.scenario_ids --write    # record (only when a change is meant)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
RECORD = Path(__file__).with_name("scenario_ids.json")


def portable(value: Any) -> Any:
    """``value`` with absolute paths of this checkout and of ``../shared`` made portable."""
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item) for item in value]
    if isinstance(value, str):
        for root, name in ((SHARED, "<shared>"), (REPO, "<repo>")):
            if value == str(root) or value.startswith(f"{root}/"):
                return name + value[len(str(root)) :]
    return value


def scenario_ids() -> dict[str, str | None]:
    """Shipped scenario file → its portable hash (``None`` when it needs absent data)."""
    from netsim.errors import NetsimError
    from netsim.scenario.loader import data_hash, identity_data, load_scenario

    ids: dict[str, str | None] = {}
    for path in sorted(REPO.glob("scenarios/**/*.yaml")):
        try:
            scenario = load_scenario(path)
        except NetsimError:
            ids[str(path.relative_to(REPO))] = None
            continue
        ids[str(path.relative_to(REPO))] = data_hash(portable(identity_data(scenario)))
    return ids


def main() -> None:
    ids = scenario_ids()
    if "--write" in sys.argv:
        RECORD.write_text(json.dumps(ids, indent=1) + "\n", encoding="utf-8")
        print(f"{len(ids)} scenario ids recorded")
        return
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    for name, value in ids.items():
        state = (
            "absent data"
            if value is None
            else ("same" if value == recorded.get(name) else "CHANGED")
        )
        print(f"{name}: {state}")


if __name__ == "__main__":
    main()
