"""netsim: a discrete-event network simulator for decentralised, privacy-preserving learning."""

from netsim.version import DISTRIBUTION as DISTRIBUTION
from netsim.version import __version__

__all__ = ["__version__"]


#: The facade's functions, ``netsim.run`` etc. (:mod:`netsim.api`, the top layer).
_FACADE = ("run", "load_run", "collect")


def __getattr__(name: str) -> object:
    """``netsim.run``, ``netsim.load_run`` and ``netsim.collect`` are :mod:`netsim.api`'s,
    imported on first use (``import netsim`` stays light)."""
    if name in _FACADE:
        from netsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'netsim' has no attribute {name!r}")


__all__ += list(_FACADE)
