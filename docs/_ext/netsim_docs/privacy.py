"""The table of privacy guarantees, read from the events the mechanisms return.

A mechanism states its guarantee in the :class:`~netsim.privacy.events.PrivacyEvent` of each
release, not as a constant, and the guarantee may depend on the release (the paper's L2 noise
is ε-DP in one dimension only; DOLA's printed Gaussian calibration records the ε it really
gives). So every release function is called here on zeros of one and of five dimensions, and
the table shows what its events say. A release function without a probe below stops the build,
so a new mechanism cannot be left out of the page.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from netsim.privacy.events import PrivacyEvent
from netsim_docs.markdown import code, table

#: Modules whose functions return privacy events; each such function needs a probe.
RELEASE_MODULES = (
    "netsim.privacy.mechanisms",
    "netsim.algorithms.dola.calibration",
    "netsim.algorithms.mi_ogd.calibration",
)
#: The dimensions every probe is called with: the guarantee may differ for d > 1.
DIMENSIONS = (1, 5)
#: DOLA's printed Gaussian calibration: T, δ, L and ε of the table of ε′ against α_t.
DOLA_ROUNDS, DOLA_DELTA, DOLA_EPSILON = 1000, 1e-5, 1.0
DOLA_STEPS = (1.0, 0.1, 0.01, 0.001)

Release = Callable[[np.ndarray, np.random.Generator], PrivacyEvent]


@dataclass(frozen=True)
class Probe:
    """One call of a release function: what it is called with, and how."""

    function: str  # module.function
    asked: str  # the parameters, as the table shows them
    call: Release


def probes() -> list[Probe]:
    """A call of every release function, with a budget it accepts."""
    from netsim.algorithms.dola import calibration as dola
    from netsim.algorithms.mi_ogd import calibration as mi
    from netsim.privacy import mechanisms as m

    unit = {"sensitivity": 1.0, "epsilon": 1.0}
    dola_args = {"alpha": 0.1, "lipschitz": 1.0, "epsilon": 1.0}
    gauss = {"rounds": DOLA_ROUNDS, "delta": DOLA_DELTA}
    rows = lambda x: x[None, :].copy()  # noqa: E731 - the row functions take (releases, d)
    return [
        Probe("netsim.privacy.mechanisms.laplace", "Δ₁ = 1, ε = 1",
              lambda x, rng: m.laplace(x, **unit, rng=rng)[1]),
        Probe("netsim.privacy.mechanisms.l2_laplace_radius", "Δ₂ = 1, ε = 1",
              lambda x, rng: m.l2_laplace_radius(x, **unit, rng=rng)[1]),
        Probe("netsim.privacy.mechanisms.k_norm_l2", "Δ₂ = 1, ε = 1",
              lambda x, rng: m.k_norm_l2(x, **unit, rng=rng)[1]),
        Probe("netsim.privacy.mechanisms.gaussian", "classic, Δ₂ = 1, ε = 0.5, δ = 10⁻⁵",
              lambda x, rng: m.gaussian(x, sensitivity=1.0, epsilon=0.5, delta=1e-5, rng=rng,
                                        calibration="classic")[1]),
        Probe("netsim.privacy.mechanisms.gaussian", "analytic, Δ₂ = 1, ε = 1, δ = 10⁻⁵",
              lambda x, rng: m.gaussian(x, **unit, delta=1e-5, rng=rng)[1]),
        Probe("netsim.privacy.mechanisms.gaussian_at_multiplier", "Δ₂ = 1, σ/Δ = 4, δ = 10⁻⁵",
              lambda x, rng: m.gaussian_at_multiplier(x, sensitivity=1.0, noise_multiplier=4.0,
                                                      delta=1e-5, rng=rng)[1]),
        Probe("netsim.privacy.mechanisms.no_noise", "",
              lambda x, rng: m.no_noise(x)[1]),
        Probe("netsim.algorithms.dola.calibration.dola_laplace", "α_t = 0.1, L = 1, ε = 1",
              lambda x, rng: dola.dola_laplace(x, **dola_args, rng=rng)[1]),
        Probe("netsim.algorithms.dola.calibration.dola_laplace_rows", "α_t = 0.1, L = 1, ε = 1",
              lambda x, rng: dola.dola_laplace_rows(rows(x), **dola_args, rng=rng)),
        Probe("netsim.algorithms.dola.calibration.dola_gaussian",
              "J² as printed, α_t = 0.1, L = 1, T = 1000, ε = 1, δ = 10⁻⁵",
              lambda x, rng: dola.dola_gaussian(x, **dola_args, **gauss, rng=rng)[1]),
        Probe("netsim.algorithms.dola.calibration.dola_gaussian_sigma",
              "analytic, α_t = 0.1, L = 1, T = 1000, ε = 1, δ = 10⁻⁵",
              lambda x, rng: dola.dola_gaussian_sigma(dimension=x.size, **dola_args, **gauss,
                                                      calibration="analytic")[1]),
        Probe("netsim.algorithms.dola.calibration.dola_gaussian_rows_at_multiplier",
              "Δ₂ = 1, σ/Δ = 4, δ = 10⁻⁵, rdp",
              lambda x, rng: dola.dola_gaussian_rows_at_multiplier(
                  rows(x), sensitivity=1.0, noise_multiplier=4.0, delta=1e-5, accounting="rdp",
                  rng=rng)),
        Probe("netsim.algorithms.dola.calibration.dola_gaussian_rows",
              "J² as printed, α_t = 0.1, L = 1, T = 1000, ε = 1, δ = 10⁻⁵",
              lambda x, rng: dola.dola_gaussian_rows(rows(x), **dola_args, **gauss, rng=rng)),
        Probe("netsim.algorithms.mi_ogd.calibration.mutual_information_report",
              "report power P = 1, σ = 1",
              lambda x, rng: mi.mutual_information_report(x, power_bound=1.0, sigma=1.0,
                                                          rng=rng)[1]),
    ]  # fmt: skip


def release_functions() -> Iterator[str]:
    """Every function of :data:`RELEASE_MODULES` that returns a privacy event."""
    for module_name in RELEASE_MODULES:
        module = importlib.import_module(module_name)
        for name, function in vars(module).items():
            if inspect.isfunction(function) and function.__module__ == module_name:
                returns = str(inspect.signature(function).return_annotation)
                if "PrivacyEvent" in returns:
                    yield f"{module_name}.{name}"


def registered_mechanisms() -> list[tuple[str, Release]]:
    """(name, release) of every noise mechanism netsim registers for ``learning.noise``."""
    from netsim.registry import REGISTRY, named_component

    found = []
    for slot, name, _, origin in REGISTRY.entries():
        if slot == "mechanism" and origin == "netsim":
            mechanism = named_component("mechanism", name)

            def release(x: np.ndarray, rng: np.random.Generator, m: object = mechanism) -> object:
                return m.spend(  # type: ignore[attr-defined]
                    x, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=rng
                )[1]

            found.append((name, release))
    return found


def guarantees(release: Release) -> list[PrivacyEvent]:
    """The events of one release per dimension in :data:`DIMENSIONS`."""
    rng = np.random.default_rng(0)
    return [release(np.zeros(d), rng) for d in DIMENSIONS]


def by_dimension(texts: list[str]) -> str:
    """One text per dimension, shown once when they agree."""
    if len(set(texts)) == 1:
        return texts[0]
    return "; ".join(f"d = {d}: {text}" for d, text in zip(DIMENSIONS, texts, strict=True))


def guarantee_cell(events: list[PrivacyEvent]) -> str:
    """The guarantee the events state."""
    return by_dimension([code(event.guarantee) for event in events])


def spent_cell(events: list[PrivacyEvent]) -> str:
    """What the events record as spent: ε (and δ), or the mutual-information bound."""
    texts = []
    for event in events:
        if event.guarantee == "mutual-information":
            texts.append(f"{event.mutual_information:.4g} nats")
        elif event.guarantee == "non-private":
            texts.append("nothing")
        else:
            delta = f", δ = {event.delta:g}" if event.delta else ""
            texts.append(f"ε = {event.epsilon:.4g}{delta}")
    return by_dimension(texts)


def accounting_cell(events: list[PrivacyEvent]) -> str:
    """The ``dp_accounting`` event the releases declare (none: basic composition only)."""
    texts = []
    for event in events:
        declared = event.accounting
        if declared is None:
            texts.append("none (basic composition)")
        else:
            multiplier = getattr(declared, "noise_multiplier", None)
            shown = "" if multiplier is None else f"{multiplier:.4g}"
            texts.append(code(f"{type(declared).__name__}({shown})"))
    return by_dimension(texts)


def check_coverage(found: list[Probe]) -> None:
    missing = sorted(set(release_functions()) - {probe.function for probe in found})
    if missing:
        raise RuntimeError(
            "docs/_ext/netsim_docs/privacy.py has no probe for the release functions "
            + ", ".join(missing)
        )


def dola_printed_epsilons() -> list[list[str]]:
    """ε′ recorded by DOLA's printed Gaussian calibration as the step size α_t falls."""
    from netsim.algorithms.dola.calibration import dola_gaussian_sigma

    rows = []
    for alpha in DOLA_STEPS:
        sigma, event = dola_gaussian_sigma(
            alpha=alpha, dimension=10, lipschitz=1.0, rounds=DOLA_ROUNDS,
            epsilon=DOLA_EPSILON, delta=DOLA_DELTA,
        )  # fmt: skip
        rows.append([f"{alpha:g}", f"{sigma:.4g}", code(event.guarantee), f"{event.epsilon:.4g}"])
    return rows


def function_link(function: str) -> str:
    """A link to the function's API documentation, named without the leading ``netsim.``."""
    return f"{{py:func}}`{function.removeprefix('netsim.')} <{function}>`"


def render() -> str:
    """The guarantee table and the ε′ table, as a fragment for the privacy explanation."""
    found = probes()
    check_coverage(found)
    rows = []
    for probe in found:
        events = guarantees(probe.call)
        rows.append([
            function_link(probe.function), code(events[0].mechanism), probe.asked,
            guarantee_cell(events), spent_cell(events),
        ])  # fmt: skip
    header = ["function", "event mechanism", "called with", "guarantee", "recorded"]
    mechanisms = [
        [code(name), code(events[0].mechanism), guarantee_cell(events), accounting_cell(events)]
        for name, release in registered_mechanisms()
        for events in [guarantees(release)]
    ]
    return "\n".join([
        "Each release function called on zeros of d = "
        + " and d = ".join(str(d) for d in DIMENSIONS)
        + " dimensions when the site was built; the columns show what its events say.\n",
        table(header, rows),
        "The noise mechanisms a scenario names in `learning.noise`, `dola.mechanism` and "
        "`mi_ogd.mechanism` (Δ = 1, ε = 1, and δ = 10⁻⁵ for a mechanism that spends δ), with "
        "the `dp_accounting` event each declares for tight composition:\n",
        table(
            ["`learning.noise`", "event mechanism", "guarantee", "dp_accounting event"],
            mechanisms,
        ),
        f"The ε′ that DOLA's printed Gaussian calibration records per release (n = 10, "
        f"L = 1, T = {DOLA_ROUNDS}, δ = 10⁻⁵, asked for ε = {DOLA_EPSILON:g}) as the step "
        "size α_t falls:\n",
        table(["α_t", "σ", "guarantee", "ε′ recorded"], dola_printed_epsilons()),
    ])  # fmt: skip
