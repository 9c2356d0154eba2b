"""A walk's paths re-simulated on a churn schedule: the walks of the path-secret estimate
(``privacy.secret_paths``; ``docs/papers.md``, "Path secret under churn").

A re-simulated walk moves as the walk service forwards its token: at each visit the holder
sends the token to a uniform online neighbour, chosen by the transport's own rule
(:func:`netsim.network.links.online_neighbour`, the compiled form of
:meth:`~netsim.network.links.Network.random_online_neighbour`: the same tries, the same draws),
among the neighbours online at that visit. So a re-simulation given the walk's own draws and
visit times retraces the walk's path until the walk does something the re-simulation leaves
out — a lost transfer, a wait for an online neighbour, a restart from a local copy
(``tests/test_walk_resimulate.py`` holds it to a run). The walk hands this function, bound to
its overlay, to its agent (:meth:`~netsim.contracts.WalkAgent.resimulated_by`), and the
agent's privacy accounting re-simulates what the walk does without knowing the walk.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from netsim.compiled import njit
from netsim.contracts import OnlineSchedule
from netsim.kernel_cache import guard_kernels
from netsim.network.links import REJECTION_TRIES, online_neighbour

#: U[0, 1) draws per block handed to the kernel (the stream is read in order whatever the
#: block: the same draws as one ``rng.random()`` at a time).
DRAW_BLOCK = 1 << 16

#: The most draws one step of one path takes: the rule's tries and its pick, or a restart.
_DRAWS_PER_STEP = REJECTION_TRIES + 1


#: ``paths(schedule, step_times, count, rng)``: ``count`` re-simulated paths of a walk (see
#: :func:`resimulated_walk_paths`, bound to the walk's overlay).
PathResimulator = Callable[..., np.ndarray]


@njit(cache=True)
def _uniform_online(online: np.ndarray, count: int, draws: np.ndarray, at: int) -> tuple[int, int]:
    """A uniform online node by its rank among the online ones, and the next unread draw
    (−1 and no draw: nobody is online)."""
    if count == 0:
        return -1, at
    rank = int(draws[at] * count)
    for x in range(online.size):
        if online[x]:
            if rank == 0:
                return x, at + 1
            rank -= 1
    return -1, at + 1


@njit(cache=True)
def _resimulate(
    indptr: np.ndarray,
    indices: np.ndarray,
    online: np.ndarray,
    churn: tuple[np.ndarray, np.ndarray, np.ndarray],
    step_times: np.ndarray,
    start: int,
    draws: np.ndarray,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """Fill ``out`` (paths × steps) from ``state`` = (step, path, next draw, next churn
    change, online count) on, until the steps are done or fewer draws are left than one
    step may take (``state`` then says where to go on). Step k is chosen at the holder's
    visit, ``step_times[k − 1]`` (step 0 at ``step_times[0]``), among the nodes online then."""
    change_time, change_node, change_online = churn
    paths, steps = out.shape
    k, m, at, change, count = state[0], state[1], state[2], state[3], state[4]
    while k < steps:
        if m == 0:  # the churn up to this step's decision
            decided = step_times[k - 1] if k > 0 else step_times[0]
            while change < change_time.size and change_time[change] <= decided:
                node = change_node[change]
                if online[node] != change_online[change]:
                    count += 1 if change_online[change] else -1
                    online[node] = change_online[change]
                change += 1
        while m < paths:
            if draws.size - at < _DRAWS_PER_STEP:
                state[0], state[1], state[2], state[3], state[4] = k, m, at, change, count
                return
            here = -1
            if k > 0 and out[m, k - 1] >= 0:
                here, at = online_neighbour(indptr, indices, online, out[m, k - 1], draws, at)
            elif k == 0 and start >= 0:
                here = start
            if here < 0:
                here, at = _uniform_online(online, count, draws, at)
            out[m, k] = here
            m += 1
        m = 0
        k += 1
    state[0], state[1], state[2], state[3], state[4] = k, m, at, change, count


def resimulated_walk_paths(
    indptr: np.ndarray,
    indices: np.ndarray,
    schedule: OnlineSchedule,
    step_times: np.ndarray,
    paths: int,
    rng: np.random.Generator,
    *,
    start: int = -1,
) -> np.ndarray:
    """``paths`` walks of ``len(step_times)`` steps re-simulated on a churn schedule (a
    (paths × steps) array of the node each step visits; module docstring). Step k is a visit
    at ``step_times[k]`` (the run's own visit times); the holder of step k − 1 chose it at
    its visit, ``step_times[k − 1]``: a neighbour (CSR ``indptr``/``indices``) online then,
    by the transport's rule. A walk starts at ``start`` (or, when it is −1, at a uniform
    node online at ``step_times[0]``), and restarts at a uniform online node when its holder
    has no online neighbour (the service's wait, timeout and restart, simplified: no
    parking, no copies); −1 where nobody is online. The draws are ``rng``'s U[0, 1), in
    order: step by step, path by path within a step."""
    times = np.ascontiguousarray(step_times, dtype=np.float64)
    out = np.full((paths, times.size), -1, dtype=np.int64)
    online = np.asarray(schedule.initially_online, dtype=np.bool_).copy()
    churn = (
        np.ascontiguousarray(schedule.time, dtype=np.float64),
        np.ascontiguousarray(schedule.node, dtype=np.int64),
        np.ascontiguousarray(schedule.online, dtype=np.bool_),
    )
    state = np.array([0, 0, 0, 0, int(online.sum())], dtype=np.int64)
    draws = rng.random(DRAW_BLOCK)
    csr = (np.ascontiguousarray(indptr, np.int64), np.ascontiguousarray(indices, np.int64))
    while True:
        _resimulate(*csr, online, churn, times, start, draws, state, out)
        if state[0] >= times.size or paths == 0:
            return out
        draws = np.concatenate([draws[state[2] :], rng.random(DRAW_BLOCK)])
        state[2] = 0


def path_resimulator(indptr: np.ndarray, indices: np.ndarray) -> PathResimulator:
    """:func:`resimulated_walk_paths` on the overlay ``indptr``/``indices``: what a walk
    that forwards by the transport's rule hands its agent."""
    return partial(resimulated_walk_paths, indptr, indices)


guard_kernels(__name__)  # recompiled when a module these kernels inline changed
