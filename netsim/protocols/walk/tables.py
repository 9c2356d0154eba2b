"""The random walk service's tables and its figure (Hegedűs, Berta, Jelasity 2016, §5.2).

Every walk event the service logs (steps, restarts, ends), its periodic sample of the walks
propagating, and its one-row summary; :data:`WALK_FIGURE` draws the sample's counts
(Figs. 2–3 of the paper). The ideal walk writes the steps and samples tables too.
"""

from __future__ import annotations

from netsim.contracts import Curve, FigureSpec
from netsim.log import F64, I32, I64, STR, TableSchema

STEPS_TABLE = TableSchema(
    name="walk_steps",
    columns=(("time", F64), ("walk", I64), ("steps", I64), ("node", I32)),
    description="Every step a walk made: arrival time, walk id, its step count there, node.",
    time="time",
)
RESTARTS_TABLE = TableSchema(
    name="walk_restarts",
    columns=(
        ("time", F64),
        ("node", I32),
        ("walk", I64),
        ("reason", STR),
        ("i", I64),
        ("update", I64),
        ("update_steps", I64),
        ("steps", I64),
    ),
    description=(
        "Walks started: reason 'bootstrap' (the first walk) or 'timeout' (onUpdateTimeout(i) "
        "with rwprop.steps - rw.steps <= i); the timed-out update's id and step count, and "
        "the new walk's step count (negative copies restart at 0)."
    ),
    time="time",
)
ENDS_TABLE = TableSchema(
    name="walk_ends",
    columns=(("time", F64), ("node", I32), ("walk", I64), ("steps", I64), ("reason", STR)),
    description=(
        "Walks that stopped: 'dropped' (line 30: a fresher live walk is known), 'superseded' "
        "(forwarding no longer necessary after a failed transfer), 'killed' (kill "
        "probability), 'abandoned' (its holder rejoined and it was no longer the leader)."
    ),
    time="time",
)
SAMPLES_TABLE = TableSchema(
    name="walk_samples",
    columns=(
        ("time", F64),
        ("propagating", I64),
        ("suspended", I64),
        ("oldest_walk", I64),
        ("oldest_steps", I64),
    ),
    description=(
        "Periodic sample: walks propagating (in transfer or held by an online node), walks "
        "suspended (holder offline), and the propagating walk with the largest step count "
        "(-1 when none)."
    ),
    role="samples",
    time="time",
    # oldest_walk is a walk id (-1: none), not a quantity to average
    metrics=("propagating", "suspended", "oldest_steps"),
)
SUMMARY_TABLE = TableSchema(
    name="walk_summary",
    columns=(
        ("mean_propagating", F64),
        ("time_without_walk", F64),
        ("time_with_several", F64),
        ("steps", I64),
        ("restarts", I64),
        ("dropped", I64),
        ("superseded", I64),
        ("killed", I64),
        ("abandoned", I64),
        ("max_steps", I64),
    ),
    description=(
        "One row at the end: the exact time average of the number of propagating walks, the "
        "fractions of time with none and with more than one, and event counts."
    ),
    role="summary",
)

#: The walk counts figure of ``netsim report`` (Hegedűs et al. 2016, Figs. 2–3).
WALK_FIGURE = FigureSpec(
    file="walk_counts.png",
    caption="random walks over time",
    sentence=(
        "The number of random walks propagating at once (top) and the step count of the "
        "oldest propagating walk (bottom) against simulated time."
    ),
    title="Random walks",
    panels=(
        Curve("walk_samples", "propagating", "time", "walks propagating (number of walks)"),
        Curve("walk_samples", "oldest_steps", "time", "oldest walk (number of steps)"),
    ),
)
