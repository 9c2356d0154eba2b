"""Draw Hegedűs et al. (2016) Fig. 2 / Fig. 3 panels from random-walk run directories.

    python analysis/walk_figure.py RUN_OR_SWEEP_DIR [...] --out fig2.png [--columns 3]

Each panel: walks propagating concurrently over time (green dots, jittered), the step count of
the oldest walk coloured by walk id, the maximum progress t/δ_rw (dashed), and the mean number
of concurrent walks in the title. This script runs no simulation: give it run directories
(``netsim run``) or sweep directories (``netsim sweep``, e.g. of
``scenarios/walk/reduced-sweep.yaml``), whose complete runs are drawn in plan order.
"""

import argparse
import sys
from pathlib import Path

from experiments import run_directories

from netsim.analysis.figures import walk_figure
from netsim.errors import NetsimError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run or sweep directories")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--columns", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        print(walk_figure(run_directories(args.runs), args.out, columns=args.columns))
    except NetsimError as exc:
        print(f"walk_figure: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
