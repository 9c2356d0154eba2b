"""DOLA, differentially private distributed online learning (Li et al.): the learner and its
compiled round kernels, the mixing matrices, the privacy calibration, the round component and
its figures (the ``dola`` section)."""
