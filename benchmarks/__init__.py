"""Benchmarks (not part of the test run): ``python -m benchmarks.walk_rounds``."""
