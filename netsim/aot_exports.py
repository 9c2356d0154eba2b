"""The kernels a rounds-mode walk run calls from Python, and the argument types they are
compiled ahead of time for (:mod:`netsim.compiled`, :mod:`netsim.aot`).

A run of ``scenarios/walk/paper-drw1-d10-kill5.yaml`` with ``gossip.mode: rounds`` calls seven
compiled kernels from Python (found by listing the numba dispatchers with a compiled
signature after such a run): the peer choice, the online-neighbour index's partition,
in-links and boundary moves (:mod:`netsim.network.links`), and the round's exchange, timeout
scan and a node's timeout circle (:mod:`netsim.protocols.walk.kernels`). The other options of
the exchange (the authors' replace rule, age errors) and the re-adoption rule are compiled
too, and so are the kernels the authors' cycle (``walk.cycle: authors``) and the broadcast
protocol (``scenarios/quickstart.yaml``) call in rounds mode. Every other kernel, or a call
with other argument types (a compact index's narrower entries, say), runs on numba's JIT.

Each entry names the kernel (``module:attribute``, a key into a dict attribute after a
``[``) and gives sample arguments: numba types the exported function from them
(``numba.typeof``), and a call is sent to it only if its arrays have the same dtype, the same
number of dimensions and are C-contiguous, and its scalars are of a type the JIT would compile
the same way (:func:`call_checks`, :class:`netsim.compiled.Kernel`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.format import dtype_to_descr

from netsim.compiled import ARRAY, SCALAR, TUPLE, Check

#: A kernel's name -> its sample arguments (built on call: the dtypes come from the modules).
Samples = Callable[[], tuple[Any, ...]]


def _array(dtype: Any) -> np.ndarray:
    return np.empty(0, dtype=dtype)


def _links() -> Any:
    from netsim.network import links

    return links


def _walk() -> Any:
    from netsim.protocols.walk import kernels

    return kernels


def _pair_online() -> tuple[Any, ...]:
    segment = _links().SEGMENT_RECORD
    return (_array(np.bool_), _array(np.uint64), _array(segment), _array(np.int32),
            _array(np.int32))  # fmt: skip


def _partition() -> tuple[Any, ...]:
    i32 = _array(np.int32)
    return (_array(np.int64), i32, _array(np.bool_), i32, i32, True)


def _in_links() -> tuple[Any, ...]:
    return (_array(np.int64), _array(np.int32), _array(np.int32))


def _move() -> tuple[Any, ...]:
    i32 = _array(np.int32)
    segment = _array(_links().SEGMENT_RECORD)
    return (i32, segment, i32, _array(np.int64), i32, i32, i32, 1, True)


def _exchange() -> tuple[Any, ...]:
    i64 = _array(np.int64)
    prop = _array(_walk().PROP_RECORD)
    return (i64, i64, _array(np.bool_), 0.5, 0.5, prop, _array(np.float64))


def _due_timeouts() -> tuple[Any, ...]:
    return (_array(np.int64), _array(_walk().PROP_RECORD), 0.5, 0.5)


def _authors_cycle() -> tuple[Any, ...]:
    i64 = _array(np.int64)
    walk = _walk()
    prop, buffer = _array(walk.PROP_RECORD), _array(walk.BUFFER_RECORD)
    return (i64, i64, prop, i64, buffer, i64, _array(np.bool_), _array(np.float64), 0.5, 0.5)


def _authors_merge() -> tuple[Any, ...]:
    prop = _array(_walk().PROP_RECORD)
    return (prop, _array(np.int64), 1, 1, 1, 0.5, 1, True, 0.5, 0.5, 0.5)


def _broadcast_state() -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """:meth:`Broadcast.compiled_state` and :class:`AdoptionRows`' arrays."""
    i64, f64 = _array(np.int64), _array(np.float64)
    state = (i64, i64, f64, np.empty((0, 0)), i64, f64)
    rows = (f64, np.empty((0, 0), dtype=np.int64), i64)
    return state, rows


def _broadcast_round() -> tuple[Any, ...]:
    i64, flags = _array(np.int64), _array(np.bool_)
    state, rows = _broadcast_state()
    return (i64, i64, flags, 0.5, flags, 1, 1, state, rows, i64)


def _adopt() -> tuple[Any, ...]:
    state, rows = _broadcast_state()
    return (1, 1, 1, 1, 0.5, _array(np.bool_), 1, 1, state, rows)


def _coverage_check() -> tuple[Any, ...]:
    i64, f64 = _array(np.int64), _array(np.float64)
    return (i64, f64, np.empty((0, 0)), i64, f64, 1, 1, 0.5)


#: The exported kernels: name in the compiled module -> (kernel, sample arguments).
EXPORTS: dict[str, tuple[str, Samples]] = {
    "pair_online": ("netsim.network.links:pair_online", _pair_online),
    "partition_online_first": ("netsim.network.links:partition_online_first", _partition),
    "in_links": ("netsim.network.links:in_links", _in_links),
    "move_across_boundary": ("netsim.network.links:move_across_boundary", _move),
    **{
        f"exchange_{int(authors)}{int(noisy)}": (
            f"netsim.protocols.walk.kernels:EXCHANGE_KERNELS[{authors},{noisy}]",
            _exchange,
        )
        for authors in (False, True)
        for noisy in (False, True)
    },
    "due_timeouts": ("netsim.protocols.walk.kernels:due_timeouts", _due_timeouts),
    "timeout_circle": ("netsim.protocols.walk.kernels:timeout_circle", lambda: (0.5, 0.5)),
    "adopted_circles": (
        "netsim.protocols.walk.kernels:adopted_circles",
        lambda: (True, 1, 0.5, 0.5),
    ),
    "in_index_order": (
        "netsim.protocols.walk.kernels:in_index_order",
        lambda: (_array(np.int64),) * 3,
    ),
    "authors_cycle": ("netsim.protocols.walk.kernels:authors_cycle", _authors_cycle),
    "authors_merge_visible": (
        "netsim.protocols.walk.kernels:authors_merge_visible",
        _authors_merge,
    ),
    "broadcast_round": ("netsim.protocols.broadcast:broadcast_round", _broadcast_round),
    "adopt_from_python": ("netsim.protocols.broadcast:adopt_from_python", _adopt),
    "coverage_check": ("netsim.protocols.broadcast:coverage_check", _coverage_check),
}


def call_checks(samples: tuple[Any, ...]) -> list[Check]:
    """What each argument of a call must match for the call to run the exported function
    (:class:`netsim.compiled.Kernel`), from the sample arguments it was compiled for, as the
    manifest keeps it (:data:`netsim.compiled.Check`): an array its dtype (numpy's ``.npy``
    description) and number of dimensions (and C order, checked by the caller), a tuple its
    length and its arrays', a scalar the name of its type (a key of
    :data:`~netsim.compiled.SCALAR_TYPES`)."""
    checks: list[Check] = []
    for position, value in enumerate(samples):
        if isinstance(value, np.ndarray):
            checks.append((position, ARRAY, dtype_to_descr(value.dtype), value.ndim))
        elif isinstance(value, tuple):
            checks.append((position, TUPLE, None, len(value)))
            checks.extend(
                (position, k, dtype_to_descr(item.dtype), item.ndim) for k, item in enumerate(value)
            )
        else:
            checks.append((position, SCALAR, type(value).__name__, 0))
    return checks


__all__ = ["EXPORTS", "call_checks"]
