"""A plug-in that owns a scenario section, for ``tests/test_sections.py``: ``tally``, a round
learner that counts the online nodes each round, declared after the ``learning`` section; and
classes whose declarations clash (a second ``tally``, an ``after`` naming no section, two
sections each after the other)."""

from __future__ import annotations

from pydantic import Field

from netsim.api import BuildContext, RoundLearner, RoundsConfig, Section
from netsim.log import F64, I64, TableSchema

TALLY_TABLE = TableSchema(
    name="tally",
    columns=(("round", I64), ("time", F64), ("online", F64)),
    description="After each round: the online nodes, times scale.",
    role="rounds",
    time="time",
    round="round",
)


class TallyConfig(RoundsConfig):
    scale: float = Field(default=1.0, gt=0.0)


class Tally(RoundLearner):
    """Counts the online nodes every round (times ``scale``)."""

    Config = TallyConfig
    tables = (TALLY_TABLE,)
    section = Section("tally", after=("learning",))

    def __init__(self, config: TallyConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.table = ctx.table(TALLY_TABLE)

    def round(self, t: int) -> None:
        assert self.ctx.network is not None and self.ctx.sim is not None
        online = int(self.ctx.network.nodes.online.sum())
        self.table.append(t, self.ctx.sim.now, online * self.config.scale)


class SecondTally(Tally):
    """Declares the ``tally`` section too: a clash."""

    section = Section("tally")


class Misplaced(Tally):
    """Puts its section after one no class declares."""

    section = Section("misplaced", after=("lerning",))


class Egg(Tally):
    section = Section("egg", after=("hen",))


class Hen(Tally):
    section = Section("hen", after=("egg",))


class NoSection(Tally):
    """A round learner of no section of its own (an entry of components)."""

    section = None


class FakeLinks(Tally):
    """Declares the built-in ``links`` section: a clash."""

    section = Section("links")
