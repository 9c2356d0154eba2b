"""netsim: a discrete-event network simulator for decentralised, privacy-preserving learning."""

from importlib.metadata import PackageNotFoundError, version

#: The distribution name on the package index (the import name is ``netsim``).
DISTRIBUTION = "netsim-ppml"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]


def __getattr__(name: str) -> object:
    """``netsim.run`` is :func:`netsim.api.run`, imported on first use (``import netsim``
    stays light)."""
    if name == "run":
        from netsim.api import run

        return run
    raise AttributeError(f"module 'netsim' has no attribute {name!r}")


__all__ += ["run"]
