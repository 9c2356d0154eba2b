"""Run a scenario in exact and in rounds mode over several seeds and compare what the papers
measure (used by tests/test_rounds.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.scenario.loader import validate_scenario
from netsim.scenario.runner import run_in_memory

METRICS = ("t90", "mean_walks", "restarts_per_hour", "progress")


def scenario_data(
    nodes: int, duration: str, mode: str, seed: int, walk: dict | None = None
) -> dict:
    """Churn, gossip with Δ = 0.5 s, a broadcast every 2 min and the walk service with
    δ_rw = Δ, δ = δ_rw + 10Δ and a 5% kill probability (so that restarts happen); ``walk``
    adds walk options (e.g. ``{"preset": "authors"}``)."""
    return {
        "name": f"equivalence-{mode}",
        "seed": seed,
        "nodes": nodes,
        "duration": duration,
        "topology": {"kind": "k_out", "k": 20},
        "links": {"delay": {"dist": "uniform", "low": "10ms", "high": "50ms"}},
        "churn": {
            "kind": "synthetic",
            "online": {"dist": "exponential", "mean": "10min"},
            "offline": {"dist": "exponential", "mean": "10min"},
        },
        "gossip": {"period": "500ms", "mode": mode},
        "broadcast": {"interval": "2min", "start": "30s"},
        "walk": {
            "kind": "service",
            "transfer_time": "500ms",
            "timeout": "5.5s",
            "kill_probability": 0.05,
            "sample_every": "10s",
            **(walk or {}),
        },
        "metrics": {"sample_every": "1min"},
    }


def measure(
    nodes: int, duration: str, mode: str, seed: int, walk: dict | None = None
) -> dict[str, float]:
    scenario = validate_scenario(
        scenario_data(nodes, duration, mode, seed, walk), source="<eq>", base_dir=None
    )
    _, tables = run_in_memory(scenario)
    summary = tables["walk_summary"].iloc[0]
    hours = scenario.duration / 3600
    return {
        "t90": float(tables["broadcasts"]["t90"].median()),
        "mean_walks": float(summary["mean_propagating"]),
        "restarts_per_hour": float(summary["restarts"]) / hours,
        "progress": float(summary["max_steps"]) * 0.5 / scenario.duration,  # of t/δ_rw
    }


@dataclass(frozen=True)
class Comparison:
    metric: str
    exact: float
    rounds: float
    tolerance: float

    @property
    def agrees(self) -> bool:
        return abs(self.exact - self.rounds) <= self.tolerance


def compare(
    exact: list[dict[str, float]], rounds: list[dict[str, float]], slack: dict[str, float]
) -> list[Comparison]:
    """Means over seeds agree within 4 standard errors of their difference plus ``slack``
    (the allowance for the documented approximations of rounds mode)."""
    out = []
    for metric in METRICS:
        a = np.array([run[metric] for run in exact])
        b = np.array([run[metric] for run in rounds])
        se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        out.append(Comparison(metric, float(a.mean()), float(b.mean()), 4 * se + slack[metric]))
    return out
