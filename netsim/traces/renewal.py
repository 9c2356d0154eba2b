"""The alternating on/off renewal process behind every synthetic availability model.

A node alternates online and offline periods whose lengths a caller draws
(:func:`alternating_renewal`): the synthetic churn model of the network
(:func:`netsim.network.churn.synthetic`, a diurnal modulation of two distributions) and the
trace model fitted to STUNner (:func:`netsim.traces.synth.generate_trace`, empirical lengths
with a per-user copula) differ only in that draw. It lives with the traces, below the network,
so that a trace model needs nothing of the network package.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

#: ``draw(nodes, online, begin)``: the lengths of the periods ``nodes`` begin at ``begin``.
LengthDraw = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class RenewalLimitError(Exception):
    """The processes drew more periods than the caller's bound before reaching the horizon."""


def alternating_renewal(
    n: int,
    horizon: float,
    *,
    warmup: float,
    p_online: float,
    draw: LengthDraw,
    rng: np.random.Generator,
    max_rounds: float = math.inf,
    max_draws: float = math.inf,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n independent on/off processes from ``−warmup`` to ``horizon``, all nodes at once.

    Each node starts online with probability ``p_online``; ``draw(nodes, online, begin)``
    returns the lengths of the periods those nodes begin at times ``begin`` (online where
    ``online``). Returns (node, start, end) of every online period that ends after time 0,
    unclipped: the warm-up's earlier periods are dropped as they are drawn (at 10⁶ nodes and
    ten warm-up cycles they would be 10⁷ periods, 480 MB with their concatenation).

    :class:`RenewalLimitError` when some node needs more than ``max_rounds`` periods or all
    of them together more than ``max_draws``.
    """
    t = np.full(n, -warmup)
    is_on = rng.random(n) < p_online
    nodes_out: list[np.ndarray] = []
    starts_out: list[np.ndarray] = []
    ends_out: list[np.ndarray] = []
    active = np.arange(n)
    rounds = draws = 0
    while active.size:
        rounds += 1
        draws += active.size
        if rounds > max_rounds or draws > max_draws:
            raise RenewalLimitError
        on_now = is_on[active]
        begin = t[active]
        finish = begin + draw(active, on_now, begin)
        kept = on_now & (finish > 0)
        nodes_out.append(active[kept])
        starts_out.append(begin[kept])
        ends_out.append(finish[kept])
        t[active] = finish
        is_on[active] = ~on_now
        active = active[finish < horizon]
    return np.concatenate(nodes_out), np.concatenate(starts_out), np.concatenate(ends_out)
