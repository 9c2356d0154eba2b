"""Availability traces: the canonical interval format and the STUNner reader, conversion
between formats and segmenting, the synthetic trace model, and trace statistics."""
