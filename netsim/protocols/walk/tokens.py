"""A walk's token (Hegedűs et al. 2016 Alg. 2): what moves from node to node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The kind of a walk's transfer through the network.
WALK = "walk"


@dataclass(eq=False)
class WalkToken:
    """One walk: its id, step count, state, and the update whose timeout restarted it."""

    walk: int
    steps: int
    state: Any
    restart_of: int
    holder: int
    status: str = "forwarding"  # forwarding | holding | transfer | suspended | ended
    retry_generation: int = 0  # invalidates a pending retry when the walk moves on
    update: int = -1  # the update its holder made when the walk arrived (-1: none)
    # the authors' forwarding (WalkVariant.cycle): the target chosen when a hold began, and
    # the hand-overs so far (a hold's end acts only on the hop it was started in)
    target: int = -1
    hop: int = 0
