"""Differentially private SGD carried by a random walk (the ``learning`` section and the
``sgd`` walk agent)."""
