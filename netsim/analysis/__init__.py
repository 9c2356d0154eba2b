"""Loading run directories into pandas, and standard summaries."""

from netsim.analysis.runs import load_manifest, load_run, load_run_scenario, summarize_run

__all__ = ["load_manifest", "load_run", "load_run_scenario", "summarize_run"]
