"""DOLA, differentially private distributed online learning (Li et al.): the learner and its
compiled round kernels, the mixing matrices, the privacy calibration, and the round component
with its report figures (the ``dola`` section). The papers' figures, drawn from finished runs,
are analysis: :mod:`netsim.analysis.dola_figures`."""
