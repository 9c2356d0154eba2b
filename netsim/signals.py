"""Stopping on SIGTERM or Ctrl-C, also when the signal lands inside compiled code.

Python runs a signal handler in the main thread at the next bytecode it executes, and that may
be a callback that numba's compiled code makes into the interpreter: a kernel returning a tuple
of arrays calls ``numba.core.serialize._numba_unpickle`` several times a round. An exception a
handler raises there does not propagate; numba reports ``SystemError: ... returned a result
with an exception set`` instead, an ordinary ``Exception``. A sweep worker then recorded its run
as failed and went back for the next task, and its pool, which sends SIGTERM once, waited for it
forever (an interrupted paper-grid sweep hung that way). So every handler here also *records*
the stop, and :func:`raise_if_stopping`, called where a run's exception is caught or where it
ends, raises the stop that was asked for instead of whatever the run ended with.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

#: The stop asked for (an exception to raise), or None.
_requested: Callable[[], BaseException] | None = None


class Terminated(BaseException):
    """SIGTERM arrived: unwind like an interrupt, so staging directories are removed."""


def request_stop(make: Callable[[], BaseException]) -> None:
    """Record the stop ``make()`` and raise it here (in the handler's frame)."""
    global _requested
    _requested = make
    raise make()


def raise_if_stopping() -> None:
    """Raise the stop a signal asked for, if one did (see the module docstring)."""
    if _requested is not None:
        raise _requested() from None


def clear_stop() -> None:
    """Forget a recorded stop (a new command in the same process, e.g. in tests)."""
    global _requested
    _requested = None


def _terminate(signum: int, frame: FrameType | None) -> None:
    request_stop(Terminated)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    request_stop(KeyboardInterrupt)


def install_stop_handlers() -> dict[int, object]:
    """SIGTERM raises :class:`Terminated` and Ctrl-C ``KeyboardInterrupt``, both recorded; a
    signal the process ignores (Ctrl-C in a background job) stays ignored. Returns the
    previous handlers for :func:`restore_handlers`."""
    clear_stop()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    return previous


def restore_handlers(previous: dict[int, object]) -> None:
    """Put back the handlers :func:`install_stop_handlers` replaced."""
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]
