"""The noise policies of decentralised SGD (``docs/explanation/linear-accountant.md``, "The
protocol model"): what each node adds to its gradient, and to each message, in one round.

Every policy draws from its own named streams — ``noise`` (independent and temporally
correlated draws), ``secrets`` (DECOR's pair secrets), ``zip`` (Zip-DL's message shares) — in a
fixed order, so a run at one seed is the same run, and one policy's draws never move
another's:

- independent draws: one row per node that steps, in node order;
- DECOR's secrets: one v per topology link per round, in the links' (smaller id, larger id)
  order, drawn whoever is online, so the pair's value does not depend on who is (the stream
  stands for the seed the pair shares: both ends read the same v);
- Zip-DL's shares: one row per message sent, in the order sent.

Gradient noise is in gradient units (a multiple of C/b, multiplied by the step size η_t when
the step is taken); message noise is in model units. Sources: Muffliato-SGD (Cyffers, Even,
Bellet, Massoulié 2022), DECOR (Allouah et al. 2024, the code of ``elfirdoussilab1/DECOR``),
Zip-DL (Biswas et al. 2025, ``decentralizepy`` ``ZeroSumSharing.send_all``), MFDL /
MAFALDA-SGD (Bellet et al. 2026, ``dimiarbre/MFDL``). Where a paper and its code differ, the
code is followed, the class says so, and ``docs/papers.md`` ("Decentralised SGD, correlated
noise and trust models") lists the choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from netsim.algorithms.dsgd.config import (
    CorrelatedNoise,
    DecorNoise,
    LocalNoise,
    NoiseConfig,
    NoNoise,
    ZipNoise,
)
from netsim.algorithms.dsgd.mafalda import StepPlan, mafalda_matrix
from netsim.lazy import lazy_module

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

Streams = Callable[[str], np.random.Generator]


@dataclass
class RoundNoise:
    """One round's noise in the nodes' gradient inputs (gradient units, (n, d); zero rows for
    the nodes that did not step): ``independent`` (temporally correlated included),
    ``pairwise`` (DECOR: Σ_j v_ij of each node that stepped; None for other kinds) and
    ``secrets`` (DECOR: the round's v, one row per link; None for other kinds)."""

    independent: np.ndarray
    pairwise: np.ndarray | None = None
    secrets: np.ndarray | None = None

    @property
    def total(self) -> np.ndarray:
        return self.independent if self.pairwise is None else self.independent + self.pairwise


class NoisePolicy:
    """Base of the policies: independent Gaussian noise of standard deviation σ·C/b on every
    step (σ = 0: none), no secrets, no message noise."""

    kind: ClassVar[str] = ""

    def __init__(
        self,
        config: NoiseConfig,
        *,
        n: int,
        dimension: int,
        scale: float,
        link_a: np.ndarray,
        link_b: np.ndarray,
        rounds: int,
        streams: Streams,
        plan: StepPlan | None = None,
    ) -> None:
        self.config = config
        #: The planned steps (MAFALDA's workload; None where no policy needs it).
        self.plan = plan
        self.n, self.dimension = n, dimension
        #: σ·C/b: the independent noise's standard deviation in gradient units.
        self.std = float(config.noise_multiplier) * scale
        self.scale = scale
        self.link_a, self.link_b = link_a, link_b
        self.rounds = rounds
        self._streams = streams
        self._rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        """The ``noise`` stream (created at its first draw)."""
        if self._rng is None:
            self._rng = self._streams("noise")
        return self._rng

    #: The temporal correlation M of the independent noise (None: independent steps).
    temporal: np.ndarray | None = None
    #: The standard deviation of each pair's secret in gradient units (0: no secrets).
    secret_std: float = 0.0

    def independent(self, stepped: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """(n, d): N(0, std² I) for each node of ``stepped`` (sorted ids), zero rows else."""
        out = np.zeros((self.n, self.dimension))
        if self.std > 0 and stepped.size:
            out[stepped] = self.rng.normal(0.0, self.std, (stepped.size, self.dimension))
        return out

    def gradient_noise(self, stepped: np.ndarray, steps: np.ndarray) -> RoundNoise:
        """The round's gradient noise of the nodes ``stepped`` (sorted ids), whose previous
        step counts are ``steps[stepped]`` (so this is their step ``steps[stepped]``,
        0-based)."""
        return RoundNoise(self.independent(stepped, steps))

    def message_noise(self, src: np.ndarray, std: float) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-message noise ξ (messages × d, model units) for messages from ``src`` at base
        standard deviation ``std``, and each message's scale (the accountant's
        ``message_std``); None: the messages carry none."""
        return None

    def message_std(self, rate: float) -> float:
        """The base standard deviation of the message noise at step size ``rate`` (model
        units; 0: none)."""
        return 0.0


class Silent(NoisePolicy):
    """``none``: nothing is added."""

    kind = "none"


class Local(NoisePolicy):
    """``local``: independent N(0, (σ·C/b)² I) on every step (Muffliato-SGD; local DP)."""

    kind = "local"


class Decor(NoisePolicy):
    """``decor`` (Allouah et al. 2024): independent N(0, (σ·C/b)² I) plus, for every
    topology link {a < b}, one v ~ N(0, (σ_cor·C/b)² I) per round, added by a and subtracted
    by b when they step. Both ends add their share whether or not the other is online (a node
    does not know), so a link with one end offline leaves v in the network's sum.

    Like DECOR's quadratic experiments (and its abstract, "at every communication round"),
    the secrets are drawn afresh every round; its ``train.py`` draws them once. v is not
    scaled by W_ij (its ``to_antisymmetric`` does, its accountant does not): the standard
    deviation is σ_cor·C/b, as the accountant here assumes."""

    kind = "decor"

    def __init__(self, config: NoiseConfig, **kwargs: object) -> None:
        super().__init__(config, **kwargs)  # type: ignore[arg-type]
        assert isinstance(config, DecorNoise)
        self.secret_std = config.correlated_multiplier * self.scale
        count = self.link_a.size
        links = np.arange(count)
        #: (n × links) incidence: +1 at (a, k), −1 at (b, k).
        self.incidence = sp.csr_matrix(
            (
                np.concatenate([np.ones(count), -np.ones(count)]),
                (np.concatenate([self.link_a, self.link_b]), np.concatenate([links, links])),
            ),
            shape=(self.n, count),
        )
        self.secret_rng = self._streams("secrets")

    def gradient_noise(self, stepped: np.ndarray, steps: np.ndarray) -> RoundNoise:
        independent = self.independent(stepped, steps)
        secrets = self.secret_rng.normal(0.0, self.secret_std, (self.link_a.size, self.dimension))
        pairwise = np.asarray(self.incidence @ secrets).reshape(self.n, self.dimension)
        keep = np.zeros(self.n, dtype=bool)
        keep[stepped] = True
        pairwise[~keep] = 0.0
        return RoundNoise(independent, pairwise, secrets)


class Zip(NoisePolicy):
    """``zip`` (Zip-DL, Biswas et al. 2025): a sender's m messages of the round carry shares
    s·√(m/(m−1))·(z − mean z), z i.i.d. N(0, 1), which sum to zero and each have standard
    deviation s, as ``decentralizepy``'s ``ZeroSumSharing.send_all`` draws them (the
    m/(m−1) factor since its commit "noise adjustment"; without a share for the sender's own
    copy, its default ``self_noise=False``). One message alone carries no share (its zero-sum
    share is 0). Zip-DL adds the shares to the model after the local step, in model units:
    s = ``message_multiplier``·C/b·η_t. The zero sum is over the messages sent, not weighted
    by the averaging weights (which depend on which messages arrive): with unequal weights, or
    a lost message, part of the shares stays in the network's sum (the ``uncancelled``
    column)."""

    kind = "zip"

    def __init__(self, config: NoiseConfig, **kwargs: object) -> None:
        super().__init__(config, **kwargs)  # type: ignore[arg-type]
        assert isinstance(config, ZipNoise)
        self.multiplier = config.message_multiplier
        self.zip_rng = self._streams("zip")

    def message_std(self, rate: float) -> float:
        return self.multiplier * self.scale * rate

    def message_noise(self, src: np.ndarray, std: float) -> tuple[np.ndarray, np.ndarray] | None:
        return zero_sum_shares(src, self.n, self.dimension, std, self.zip_rng)


def zero_sum_shares(
    src: np.ndarray, n: int, dimension: int, std: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Zip-DL's shares for messages from ``src``: per sender with m messages,
    std·√(m/(m−1))·(z − mean z) (0 when m = 1), and each message's scale std·√(m/(m−1))."""
    z = rng.normal(size=(src.size, dimension))
    counts = np.bincount(src, minlength=n)
    sums = np.zeros((n, dimension))
    np.add.at(sums, src, z)
    centred = z - sums[src] / counts[src, None]
    factor = np.zeros(n)
    many = counts > 1
    factor[many] = np.sqrt(counts[many] / (counts[many] - 1.0))
    scale = std * factor[src]
    return centred * scale[:, None], scale


class Correlated(NoisePolicy):
    """``correlated`` (MFDL / MAFALDA-SGD, Bellet et al. 2026): a node's k-th step adds
    Σ_m M[k, m] z_m with z_m i.i.d. N(0, (σ·C/b)² I) drawn at the node's m-th step (MFDL's
    ``MFDLSGD``: C⁻¹ times the draws, C⁻¹ = M). Only the draws M reaches back to are kept (a
    ring of the matrix's bandwidth + 1 per node). ``mafalda``: M optimised for the planned
    graph and steps (:mod:`netsim.algorithms.dsgd.mafalda`), the same M for every node."""

    kind = "correlated"

    def __init__(self, config: NoiseConfig, **kwargs: object) -> None:
        super().__init__(config, **kwargs)  # type: ignore[arg-type]
        assert isinstance(config, CorrelatedNoise)
        if config.matrix == "mafalda":
            if self.plan is None:
                raise ValueError("MAFALDA's correlation needs the planned steps (plan=)")
            self.temporal = mafalda_matrix(self.n, self.link_a, self.link_b, self.plan)
        else:
            self.temporal = config.temporal(self.rounds)
        if self.temporal is None:
            self.depth = 1
        else:
            rows, columns = np.nonzero(self.temporal)
            self.depth = int((rows - columns).max(initial=0)) + 1
        self.history = np.zeros((self.n, self.depth, self.dimension))

    def independent(self, stepped: np.ndarray, steps: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, self.dimension))
        if not stepped.size:
            return out
        draws = self.rng.normal(0.0, self.std, (stepped.size, self.dimension))
        if self.temporal is None:
            out[stepped] = draws
            return out
        k = steps[stepped]
        self.history[stepped, k % self.depth] = draws
        back = np.arange(self.depth)
        source = k[:, None] - back[None, :]  # (nodes, depth): the draw index m = k − j
        valid = source >= 0
        coefficients = np.where(
            valid, self.temporal[k[:, None], np.maximum(source, 0)], 0.0
        )  # M[k, k − j]
        slots = self.history[stepped[:, None], np.maximum(source, 0) % self.depth]
        out[stepped] = np.einsum("sj,sjd->sd", coefficients, slots)
        return out


POLICIES: dict[str, type[NoisePolicy]] = {
    cls.kind: cls for cls in (Silent, Local, Decor, Zip, Correlated)
}


def noise_policy(config: NoiseConfig, **kwargs: object) -> NoisePolicy:
    """The policy of a ``dsgd.noise`` config."""
    assert isinstance(config, NoNoise | LocalNoise | DecorNoise | ZipNoise | CorrelatedNoise)
    return POLICIES[config.kind](config, **kwargs)  # type: ignore[arg-type]
