"""Loading run directories into pandas, and standard summaries."""

from netsim.analysis.collect import collect, collect_status, summarize
from netsim.analysis.runs import load_manifest, load_run, load_run_scenario, summarize_run

__all__ = [
    "collect",
    "collect_status",
    "load_manifest",
    "load_run",
    "load_run_scenario",
    "summarize",
    "summarize_run",
]
