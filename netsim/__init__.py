"""netsim: a discrete-event network simulator for decentralised, privacy-preserving learning."""

import os
from pathlib import Path

# numba writes a compiled kernel's cache beside its source by default: inside site-packages
# for an installed netsim, where ``pip uninstall`` leaves it (it is not in the wheel's RECORD)
# and the leftover ``netsim/`` folder, without its ``__init__.py``, shadows a later editable
# install. The caches go to the user's cache folder instead (set before numba is imported;
# a NUMBA_CACHE_DIR the user set wins).
os.environ.setdefault(
    "NUMBA_CACHE_DIR",
    str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netsim" / "numba"),
)

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
