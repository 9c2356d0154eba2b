"""Shared machine-learning building blocks: losses and the sensitivity of their gradients,
linear models, data sets and example streams, and the hindsight solver the regret is measured
against."""
