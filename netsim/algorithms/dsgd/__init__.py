"""Decentralised SGD with gossip averaging (Lian et al. 2017; Muffliato-SGD, Cyffers et al.
2022; DECOR, Allouah et al. 2024; Zip-DL, Biswas et al. 2025; temporally correlated noise,
Bellet et al. 2026): the ``dsgd`` section's config, its noise policies and the round learner,
which records the run's linear view for :mod:`netsim.privacy.linear`."""
