"""netsim's version, read from the installed distribution's metadata (a foundation module, so
that the runner and the command line read it without importing the root package, whose lazy
hook reaches the facade)."""

from importlib.metadata import PackageNotFoundError, version

#: The distribution name on the package index (the import name is ``netsim``).
DISTRIBUTION = "netsim-ppml"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
