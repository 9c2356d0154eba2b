"""Mutual-information-private online gradient descent (Zhang & Venkitasubramaniam): the
learner, its leakage calibration and the round component (the ``mi_ogd`` section)."""
