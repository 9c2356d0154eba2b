"""The model a random walk or a gossip message carries: its parameters and how many visits and
updates made it (Hegedűs, Berta, Jelasity 2016 §3: "visits" is the x-axis of Figs. 4–7).

Shared by every algorithm that moves models between nodes (the ``sgd`` walk agent, gossip
learning), so it lives with the learning building blocks rather than in one algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ModelState:
    """What a walk carries: the model's flat parameter vector and how many visits and updates
    made it.

    Never modified in place (nodes' local copies share these objects, see ``WalkAgent``).
    """

    parameters: np.ndarray
    updates: int
    visits: int
    #: Its index in the run's lineage of models (:class:`~netsim.privacy.lineage.Lineage`),
    #: kept only when privacy is accounted per observer (−1 otherwise).
    serial: int = -1
