"""matplotlib's pyplot for netsim's figures, with the Agg backend (no display needed), and
one clear error when matplotlib is not installed (it is the optional ``plot`` extra).

A foundation module: the trace statistics (building blocks) and the run reports (analysis)
both draw through it.
"""

from __future__ import annotations

from typing import Any

from netsim.errors import RunDirectoryError


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend; :class:`RunDirectoryError` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the installation
        raise RunDirectoryError(
            "figures need matplotlib: pip install 'netsim-ppml[plot]'"
        ) from None
    return plt
