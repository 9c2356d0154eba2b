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

import ctypes
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


# --- the wall-clock limit of a run -----------------------------------------------------------

#: Seconds between two raises of :class:`RunTimedOut` once a limit has passed, in case code
#: under the limit caught the first (e.g. a plugin's bare ``except:`` in its loop).
TIMEOUT_REPEAT_SECONDS = 1.0


class RunTimedOut(BaseException):
    """Raised inside a run that went past its time limit: not an ``Exception``, so a
    component's ``except Exception`` cannot swallow it."""


@dataclass
class TimeLimit:
    """A wall-clock limit of ``seconds`` (None: none), and whether it has passed."""

    seconds: float | None
    passed: bool = False


@contextmanager
def wall_clock_limit(limit: TimeLimit) -> Iterator[None]:
    """Raise :class:`RunTimedOut` in the block once it has run ``limit.seconds`` of wall
    time, and every :data:`TIMEOUT_REPEAT_SECONDS` after that until it ends; set
    ``limit.passed`` first, so a caller that sees what the raise turned into (compiled code
    makes a ``SystemError`` of it, see the module docstring) knows it was the limit.

    In the main thread a SIGALRM timer raises it (it also ends a blocking call); in another
    thread (a Dask worker's) a watcher thread raises it there asynchronously, which takes
    effect at the thread's next bytecode.
    """
    if limit.seconds is None:
        yield
        return

    def expire() -> None:
        limit.passed = True
        raise RunTimedOut

    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGALRM, lambda signum, frame: expire())
        signal.setitimer(signal.ITIMER_REAL, limit.seconds, TIMEOUT_REPEAT_SECONDS)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    target = threading.get_ident()
    done = threading.Event()

    def watch() -> None:
        wait = limit.seconds
        while not done.wait(wait):
            limit.passed = True
            _set_async_exception(target, RunTimedOut)
            wait = TIMEOUT_REPEAT_SECONDS

    watcher = threading.Thread(target=watch, name="netsim-run-timeout", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        _discard_async_exception()  # one the watcher scheduled just before it stopped


class _AsyncExceptionDiscarded(BaseException):
    """Raised in a thread by :func:`_discard_async_exception` on purpose, and caught there."""


def _set_async_exception(thread_id: int, exception: type[BaseException]) -> int:
    """Schedule ``exception`` to be raised in thread ``thread_id`` at its next bytecode;
    returns how many threads it was scheduled in (1, or 0 for a thread that has ended)."""
    return int(
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread_id), ctypes.py_object(exception)
        )
    )


def _discard_async_exception() -> None:
    """Drop an asynchronous exception scheduled for this thread and not raised yet.

    ``PyThreadState_SetAsyncExc(id, NULL)``, the documented way, drops it but also flags the
    whole interpreter as having one pending, and CPython lowers that flag only when a thread
    raises one; with the flag left up, the next function called under ``sys.settrace`` or
    ``sys.setprofile`` (a debugger, a profiler, coverage) loops for ever (CPython 3.11
    re-enters the call's first instruction to handle it, again and again). So a marker
    exception replaces the pending one and is raised here at once, at the loop's backward
    jump; raising it lowers the flag.
    """
    try:
        if _set_async_exception(threading.get_ident(), _AsyncExceptionDiscarded) != 1:
            return  # pragma: no cover - this thread runs, so it is found
        while True:
            pass
    except _AsyncExceptionDiscarded:
        pass
