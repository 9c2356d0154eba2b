"""The best fixed model in hindsight at a run's regret checkpoints, shared by DOLA and
MI-private OGD.

Both measure regret against the minimiser of the summed losses of the examples played so far
(Li et al., DOLA, Definition 2; Zhang & Venkitasubramaniam, MI-private OGD, §3): at each
checkpoint round t (:func:`~netsim.learning.hindsight.checkpoint_rounds`) the examples of
rounds 1..t become multiplicities c_k and :func:`~netsim.learning.hindsight.hindsight_minimum`
solves the comparator, warm-started at the previous checkpoint's minimiser. The algorithm
packages may not import each other, so the loop lives here, below both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from netsim.learning.hindsight import HindsightSolution, hindsight_minimum


@dataclass(frozen=True)
class CheckpointMinimum:
    """The comparator at one checkpoint: the round t (as the checkpoints hold it), how many
    examples rounds 1..t played, and the hindsight solution over them."""

    round: int | np.integer  # as the checkpoints hold it (regret / t keeps its type)
    played: int
    solution: HindsightSolution


def hindsight_at_checkpoints(
    checkpoints: Sequence[int] | np.ndarray,
    played: Sequence[int],
    examples: np.ndarray,
    x,
    y: np.ndarray,
    *,
    loss: str,
    radius: float,
    regularisation: float = 0.0,
    per_example: float = 1.0,
) -> Iterator[CheckpointMinimum]:
    """The best fixed w in hindsight at each checkpoint round that played an example.

    ``played[k]`` is how many examples rounds 1..``checkpoints[k]`` used, and ``examples`` the
    training rows they used in play order; the multiplicities are
    ``bincount(examples[:played[k]]) / per_example`` over every row of ``x`` (DOLA divides by
    its batch size: each round's loss is the mean over its batch). Checkpoints that played
    nothing are skipped; each solve is warm-started at the previous one's minimiser.
    """
    rows = x.shape[0]
    start = None
    for t, count in zip(checkpoints, played, strict=True):
        if count == 0:
            continue
        weights = np.bincount(examples[:count], minlength=rows) / per_example
        solution = hindsight_minimum(
            x, y, weights, loss=loss, radius=radius, regularisation=regularisation, start=start
        )
        start = solution.w
        yield CheckpointMinimum(t, int(count), solution)
