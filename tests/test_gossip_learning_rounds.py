"""Gossip learning in exact and in rounds mode agree on what the papers measure: the accuracy
curve, the spread across models, the updates, the refusals and the ε spent (Hegedűs et al.
2016 Alg. 1; what rounds mode approximates is listed in netsim/protocols/rounds.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import netsim

SEEDS = (1, 2, 3)
NODES = 300


def _run(mode: str, seed: int, algorithm: str, merge: str = "none") -> dict:
    data = {
        "name": f"gl-{mode}", "seed": seed, "nodes": NODES, "duration": "20s",
        "topology": {"kind": "k_out", "k": 20},
        "links": {"delay": {"dist": "uniform", "low": "10ms", "high": "50ms"}},
        "gossip_learning": {"period": "1s", "mode": mode, "merge": merge},
        "learning": {"dataset": {"name": "spambase"}, "algorithm": algorithm,
                     "noise": "k_norm_l2", "epsilon": 1.0, "evaluate_every": 5},
        "metrics": {"sample_every": "5s"},
    }  # fmt: skip
    tables = netsim.run(data).tables
    summary = tables["learning_summary"].iloc[0]
    spread = tables["gossip_learning_accuracy"]
    return {
        "accuracy": spread["accuracy_mean"].to_numpy(),
        "range": float(spread["accuracy_max"].iloc[-1] - spread["accuracy_min"].iloc[-1]),
        "updates": int(summary["updates"]),
        "refused": int(summary["refused"]),
        "visits": int(summary["visits"]),
        "epsilon": float(summary["epsilon"]),
    }


MERGE_GAP = pytest.mark.xfail(
    strict=True,
    reason="rounds merges with the start-of-round model and drops earlier arrivals: mean "
    "accuracy 0.727 against exact 0.777 at 300 nodes, 20 s (not yet faithful)",
)


@pytest.mark.parametrize(
    ("algorithm", "merge"),
    [("sgd", "none"), ("dp-sgd-1", "none"), ("dp-sgd-inf", "none"),
     pytest.param("sgd", "average", marks=MERGE_GAP)],
)  # fmt: skip
def test_exact_and_rounds_agree(algorithm: str, merge: str) -> None:
    exact = [_run("exact", s, algorithm, merge) for s in SEEDS]
    rounds = [_run("rounds", s, algorithm, merge) for s in SEEDS]
    for key in ("visits", "updates", "refused"):
        e = np.array([r[key] for r in exact], dtype=float)
        o = np.array([r[key] for r in rounds], dtype=float)
        # one period's messages (N) of slack: exact mode's first ticks fall anywhere in [0, Δ)
        assert abs(e.mean() - o.mean()) <= NODES + 4 * math.sqrt(e.var() + o.var() + 1), key
    assert [r["epsilon"] for r in exact] == pytest.approx([r["epsilon"] for r in rounds])
    # the final mean accuracy: within 4 standard errors of the difference of the seed means,
    # floored at the binomial error of one model's accuracy on Spambase's test split (461 rows)
    e = np.array([r["accuracy"][-1] for r in exact])
    o = np.array([r["accuracy"][-1] for r in rounds])
    floor = math.sqrt(0.25 / 461)
    assert abs(e.mean() - o.mean()) <= 4 * math.sqrt((e.var() + o.var()) / len(SEEDS)) + floor
    spread_e = np.mean([r["range"] for r in exact])
    spread_o = np.mean([r["range"] for r in rounds])
    assert abs(spread_e - spread_o) <= 0.15 + 4 * floor
