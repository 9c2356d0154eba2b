"""A data set: 400 points in [−1, 1]², labelled by the sign of x·y (the XOR pattern, which no
linear model separates: a yardstick for what a linear learner cannot do).

A loader only reads: netsim splits the rows, numbers the classes and pre-processes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netsim.api import DatasetLoader, LoadedData


class XorData(DatasetLoader):
    """The XOR pattern, generated (no file: ``needs_path = False``)."""

    needs_path = False

    def load(self, path: Path | None, label: str | int | None) -> LoadedData:
        x = np.random.default_rng(2024).uniform(-1.0, 1.0, (400, 2))
        labels = np.where(x[:, 0] * x[:, 1] > 0, "same sign", "opposite signs")
        return LoadedData(x, labels, "400 points in [-1, 1]^2 labelled by the sign of x*y")
