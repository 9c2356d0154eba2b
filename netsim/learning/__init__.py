"""Shared machine-learning building blocks: losses, linear models, data sets and example
streams, and the hindsight solver the regret is measured against."""
