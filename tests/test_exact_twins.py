"""Exact mode is written twice where the compiled core runs a component's events: the Python
method (SimPy's path, the reference) and its compiled twin (the core's path). The pairs are
listed here; each side names the other in its docstring, and the digest of each side's code
(its syntax tree without docstrings, so a reworded comment or a reformatting changes nothing)
is recorded in ``tests/exact_twins.json``. When one side of a pair changes and the other does
not, this test fails and says what to re-check; the table-digest tests on both engines
(``tests/test_exact_core.py``, ``python -m tests.table_digests --engine simpy``) then check
the behaviour. Record the new digests with ``python -m tests.test_exact_twins`` once both
sides agree again.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
import textwrap
from pathlib import Path

import pytest

RECORD = Path(__file__).with_name("exact_twins.json")

#: Each Python method (``module:Class.method``, one or more) and its compiled twins
#: (``module:function``).
TWINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "transport send": (
        ("netsim.network.links:Network.send",),
        (
            "netsim.network.links_exact:send",
            "netsim.network.links_exact:send_for",
            "netsim.network.links_exact:place",
        ),
    ),
    "transport completion": (
        ("netsim.network.links:Network._complete",),
        ("netsim.network.links_exact:complete", "netsim.network.links_exact:loss_reason"),
    ),
    "online neighbour": (
        ("netsim.network.links:Network.random_online_neighbour",),
        ("netsim.network.links:online_neighbour",),
    ),
    "gossip tick": (
        ("netsim.protocols.gossip:PushPullGossip._tick",),
        ("netsim.protocols.gossip_exact:tick",),
    ),
    "gossip first tick": (
        ("netsim.protocols.gossip:PushPullGossip._schedule_tick",),
        ("netsim.protocols.gossip_exact:schedule_tick",),
    ),
    "gossip delivery": (
        (
            "netsim.protocols.gossip:PushPullGossip._on_push",
            "netsim.protocols.gossip:PushPullGossip._on_pull",
        ),
        ("netsim.protocols.gossip_exact:deliver",),
    ),
    "walk merge": (
        ("netsim.protocols.walk.cycle_exact:ExactCycle.incoming",),
        ("netsim.protocols.walk.compiled:merge",),
    ),
    "walk store": (
        ("netsim.protocols.walk.cycle_exact:ExactCycle.store",),
        ("netsim.protocols.walk.compiled:store",),
    ),
    "walk timeout timer": (
        ("netsim.protocols.walk.cycle_exact:ExactCycle.schedule_timeout",),
        ("netsim.protocols.walk.compiled:schedule_timeout",),
    ),
    "walk step": (
        (
            "netsim.protocols.walk.service:RandomWalkService.on_receive_random_walk",
            "netsim.protocols.walk.cycle:WalkCycle.receive",
            "netsim.protocols.walk.agents:VisitCounter.visit",
            "netsim.protocols.walk.ledger:WalkLedger.step",
        ),
        ("netsim.protocols.walk.steps:arrive",),
    ),
    "walk forward": (
        ("netsim.protocols.walk.service:RandomWalkService.send",),
        ("netsim.protocols.walk.steps:forward",),
    ),
    "gossip learning's model carried": (
        ("netsim.algorithms.gossip_learning.application:GossipLearningRule.outgoing",),
        ("netsim.learning.compiled_visit:carry_model",),
    ),
    "gossip learning's visit": (
        (
            "netsim.learning.sgd_agent:SGDAgent.visit",
            "netsim.learning.private_sgd:PrivateSGD._step_one",
            "netsim.algorithms.gossip_learning.application:GossipLearningRule.merged",
        ),
        ("netsim.learning.compiled_visit:visit_model",),
    ),
    "a visit's gradient and step": (
        (
            "netsim.learning.losses:record_gradient",
            "netsim.learning.private_sgd:PrivateSGD._updated",
        ),
        (
            "netsim.learning.compiled_visit:record_gradient",
            "netsim.learning.compiled_visit:sgd_update",
        ),
    ),
    "walk timer": (
        ("netsim.protocols.walk.cycle_exact:ExactCycle._on_timer",),
        ("netsim.protocols.walk.compiled:timer",),
    ),
}


def resolve(reference: str) -> object:
    """The function ``module:qualified.name`` names (a numba dispatcher's Python function)."""
    module_name, _, qualified = reference.partition(":")
    value: object = importlib.import_module(module_name)
    for part in qualified.split("."):
        value = getattr(value, part)
    return getattr(value, "py_func", value)


def code_digest(references: tuple[str, ...]) -> str:
    """The digest of the functions' code: their syntax trees without docstrings."""
    digest = hashlib.sha256()
    for reference in references:
        tree = ast.parse(textwrap.dedent(inspect.getsource(resolve(reference))))
        function = tree.body[0]
        assert isinstance(function, ast.FunctionDef), reference
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            function.body = body[1:]
        digest.update(ast.dump(function).encode())
    return digest.hexdigest()[:16]


def current() -> dict[str, dict[str, str]]:
    """Each pair's digests now: ``python`` and ``compiled``."""
    return {
        name: {"python": code_digest(python), "compiled": code_digest(compiled)}
        for name, (python, compiled) in TWINS.items()
    }


def short(reference: str) -> str:
    """``Class.method`` or ``function``: how a docstring names it."""
    return reference.partition(":")[2]


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_side_names_its_twin(name):
    python, compiled = TWINS[name]
    for method in python:
        doc = inspect.getdoc(resolve(method)) or ""
        for twin in compiled:
            assert f"{twin.partition(':')[0]}.{short(twin)}" in doc.replace("\n", " "), (
                f"{method}'s docstring does not name its compiled twin {twin}"
            )
    for function in compiled:
        doc = (inspect.getdoc(resolve(function)) or "").replace("\n", " ")
        assert any(short(method) in doc for method in python), (
            f"{function}'s docstring does not name the Python method it is the twin of"
        )


@pytest.mark.parametrize("name", sorted(TWINS))
def test_no_twin_changed_alone(name):
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    assert name in recorded, f"no digests recorded for {name}: python -m tests.test_exact_twins"
    now = current()[name]
    python, compiled = TWINS[name]
    python_changed = now["python"] != recorded[name]["python"]
    compiled_changed = now["compiled"] != recorded[name]["compiled"]
    what = "; ".join(python) + " ↔ " + "; ".join(compiled)
    assert not (python_changed and not compiled_changed), (
        f"{name}: the Python side changed and its compiled twin did not ({what}). Make the "
        "compiled twin do the same, run tests/test_exact_core.py and the table digests on both "
        "engines, then record the digests (python -m tests.test_exact_twins)."
    )
    assert not (compiled_changed and not python_changed), (
        f"{name}: the compiled side changed and its Python twin did not ({what}). Make the "
        "Python method (the reference) do the same, run tests/test_exact_core.py and the table "
        "digests on both engines, then record the digests (python -m tests.test_exact_twins)."
    )
    assert not (python_changed and compiled_changed), (
        f"{name}: both sides changed ({what}): once tests/test_exact_core.py and the table "
        "digests on both engines agree, record the digests (python -m tests.test_exact_twins)."
    )


def test_every_recorded_pair_is_listed():
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    assert sorted(recorded) == sorted(TWINS)


if __name__ == "__main__":  # record the digests
    RECORD.write_text(json.dumps(current(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded {len(TWINS)} pairs in {RECORD}", file=sys.stderr)
