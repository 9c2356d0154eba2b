"""Scenario files: schema, loading and validation, building and running."""

from netsim.scenario.loader import load_scenario, scenario_hash, scenario_to_yaml
from netsim.scenario.schema import Scenario

__all__ = ["Scenario", "load_scenario", "scenario_hash", "scenario_to_yaml"]
