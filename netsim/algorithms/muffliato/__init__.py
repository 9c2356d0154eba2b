"""Muffliato: Gaussian noise once, then gossip averaging, accounted per observer (Cyffers, Even,
Bellet, Massoulié, NeurIPS 2022)."""
