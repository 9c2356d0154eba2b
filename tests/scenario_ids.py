"""The run ids of the shipped scenarios, recorded, so a change that alters one is seen.

A run's id ends in the hash of its resolved scenario, in which each data file stands for its
content (:func:`netsim.scenario.loader.content_digest`), not for where it lives: the recorded
ids hold in any checkout, whether ``../shared`` is a directory or a symlink. Recorded again
when run ids stopped hashing absolute paths (every other scenario kept its id)::

    python -m tests.scenario_ids            # compare with tests/scenario_ids.json
    python -m tests.scenario_ids --write    # record (only when a change is meant)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).with_name("scenario_ids.json")


def scenario_ids() -> dict[str, str | None]:
    """Shipped scenario file → its hash (``None`` when it needs absent data)."""
    from netsim.errors import NetsimError
    from netsim.scenario.loader import load_scenario, scenario_hash

    ids: dict[str, str | None] = {}
    for path in sorted(REPO.glob("scenarios/**/*.yaml")):
        try:
            scenario = load_scenario(path)
        except NetsimError:
            ids[str(path.relative_to(REPO))] = None
            continue
        ids[str(path.relative_to(REPO))] = scenario_hash(scenario)
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
