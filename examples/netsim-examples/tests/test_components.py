"""The package's tests, as a plugin author writes them: netsim's own component contract
(``netsim.testing``) on every component, and what each one is for.

Run them after installing the package (``pip install ./examples/netsim-examples``) with
``python -m pytest examples/netsim-examples/tests``.
"""

from __future__ import annotations

import numpy as np
import pytest

import netsim
from netsim.testing import assert_component_contract, check_component

#: Every component of the package (its entry points), with the keys the contract's small
#: scenario (12 nodes in a ring, two minutes) needs beyond the defaults.
COMPONENTS = {
    "push_sum": {},
    "max_value": {},
    "daily_sleep": {"bedtime": "30s", "spread": "10s", "sleep": "1min"},
    "metropolis_hastings": {},
    "circulant": {"offsets": [1, 3]},
    "coordinate_laplace": {},
    "fixed_gaussian": {"sigma": 6.0},
    "xor": {},
    "round_average": {"period": "10s"},
    "partitioned_links": {"split": 6, "start": "30s", "end": "1min"},
    "push_only": {"period": "2s"},
    "online_degree": {"every": "20s"},
}


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_every_component_keeps_the_netsim_contract(name):
    assert_component_contract(name, keys=COMPONENTS[name])


def test_push_sum_in_rounds_agrees_with_its_exact_mode():
    results = check_component("push_sum", agreement=("push_sum_error", "mean_error", 0.02))
    assert [r.check for r in results if not r.ok] == []
    assert any(r.check.startswith("its rounds agree") for r in results)


def test_a_component_by_module_and_class_keeps_the_contract_too():
    assert_component_contract("netsim_examples.mh_walk:MetropolisHastingsWalk")


def test_the_metropolis_hastings_walk_visits_every_node_equally_often():
    """On a scale-free overlay a simple random walk visits hubs far more often; the
    Metropolis-Hastings walk visits every node equally often in the long run."""
    result = netsim.run(
        {
            "seed": 3,
            "nodes": 40,
            "duration": "30000s",
            "topology": {"kind": "barabasi_albert", "m": 2},
            "walk": {"kind": "metropolis_hastings", "step_time": "1s"},
        }
    )
    visits = result["walk_visits"]["visits"].to_numpy()
    steps = result["mh_walk_steps"]
    assert len(steps) > 29_000
    # the agent (visit_counter) saw every step the walk's table records
    assert (np.bincount(steps["node"], minlength=40) == visits).all()
    # uniform: every node within 30 % of the mean 750 (a degree-biased walk gives hubs 3-5x)
    assert np.abs(visits / visits.mean() - 1).max() < 0.3
    assert 0.2 < steps["accepted"].mean() < 1.0  # moves to hubs are refused at times
