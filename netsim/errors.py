"""The typed error hierarchy.

Every error a user can cause (a bad scenario, trace or data file) is a :class:`NetsimError`
whose message names the file, key path or line and what is allowed. The command line prints
that message alone, without a traceback, and exits non-zero.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest_names(name: str, allowed: Iterable[str]) -> list[str]:
    """The names of ``allowed`` closest to the unknown ``name``, best first (at most three;
    none when nothing is close), for an error's "did you mean …?" (difflib's ratio ≥ 0.6).
    Compared case-insensitively, so ``Dola`` finds ``dola``."""
    names = list(dict.fromkeys(allowed))
    by_folded = {candidate.lower(): candidate for candidate in reversed(names)}
    close = difflib.get_close_matches(name.lower(), list(by_folded), n=3, cutoff=0.6)
    return [by_folded[folded] for folded in close]


def did_you_mean(name: str, allowed: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` or ``" (did you mean 'x' or 'y'?)"`` naming the
    :func:`nearest_names` of ``name``, or ``""`` when none is close: for the end of a message
    that still lists every allowed name."""
    near = nearest_names(name, allowed)
    if not near:
        return ""
    quoted = [repr(n) for n in near]
    alternatives = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {alternatives}?)"


class NetsimError(Exception):
    """Base class of every error netsim raises on purpose."""


class ScenarioError(NetsimError):
    """A scenario file (or a ``--set`` override) is not valid."""


class TraceError(NetsimError):
    """A churn trace file is missing or malformed."""


class TopologyError(NetsimError):
    """A topology cannot be built as asked (bad edge list, impossible parameters)."""


class RunDirectoryError(NetsimError):
    """A run directory is missing, incomplete or unreadable."""


class SimulationError(NetsimError):
    """The simulation reached a state its configuration should have excluded."""


class SweepError(NetsimError):
    """A sweep specification is not valid, or its runs cannot be dispatched."""


class ComponentError(NetsimError):
    """A component named in a scenario cannot be used: unknown name, a ``module:Class``
    reference that does not import, or a class that does not implement its interface."""


class SectionError(ComponentError):
    """Declarations of scenario sections that cannot all hold
    (:mod:`netsim.component_sections`): one key declared by two classes, an ``after`` naming
    no section, sections each after another."""


class PluginFailure(ComponentError):
    """A component that is not netsim's own raised while its run was built or ran. The message
    names the component's scenario key and class and the exception; that exception is the
    ``__cause__``, its traceback kept for the plugin's author (``netsim run --traceback``, a
    sweep's failure record)."""


class RunTimeoutError(NetsimError):
    """A run went past its wall-clock time limit (``--run-timeout``) and was stopped."""


class InstallationError(NetsimError):
    """The ``netsim`` Python imports is not a complete install: a leftover folder without
    ``__init__.py`` hides the installed package, or the package is not where the installed
    distribution's metadata puts it (:mod:`netsim.installation`)."""


class DataError(NetsimError):
    """A data set is unknown, missing or malformed, or cannot be split or pre-processed as asked."""


class PrivacyError(NetsimError):
    """A privacy budget or guarantee problem."""


class BudgetExhausted(PrivacyError):
    """A release was refused: it would take a record past its budget."""

    def __init__(self, record: int, message: str) -> None:
        # args are the constructor's, so the error can be made again from them: SimPy re-raises
        # a process's exception as ``type(exc)(*exc.args)``, and pickle does the same
        super().__init__(record, message)
        self.record = record
        self.message = message

    def __str__(self) -> str:
        return f"record {self.record}: {self.message}"


class InvalidPrivacyEventError(PrivacyError, ValueError):
    """A :class:`~netsim.privacy.events.PrivacyEvent` that states an impossible guarantee: ε
    NaN or negative (or infinite under a DP claim), δ outside [0, 1), a negative or NaN
    sensitivity or noise scale. A ``ValueError`` too, as an invalid argument."""


class UnaccountableEventError(PrivacyError, ValueError):
    """The event has no DP guarantee that an RDP / PLD accountant could compose."""


class DolaConfigError(ScenarioError):
    """A DOLA run cannot be set up (raised before anything runs): e.g. a batch larger than a
    node's local data."""


class MiOgdConfigError(ScenarioError):
    """An MI-private OGD run cannot be set up (raised before anything runs)."""


class ReportError(NetsimError):
    """A report asked for what it cannot draw (an unknown x axis of the comparison figure)."""
