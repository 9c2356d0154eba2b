"""Differentially private SGD carried by a random walk: the ``sgd`` walk agent (the ``learning``
section it trains with is a shared building block, :mod:`netsim.learning.sgd_agent`)."""
