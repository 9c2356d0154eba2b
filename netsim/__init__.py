"""netsim: a discrete-event network simulator for decentralised, privacy-preserving learning."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("netsim")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]


def run(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Run a scenario from Python: see :func:`netsim.api.run`."""
    from netsim.api import run as run_scenario

    return run_scenario(*args, **kwargs)


__all__ += ["run"]
