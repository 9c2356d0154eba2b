"""Privacy, paper-agnostic: calibrated mechanisms, privacy events, per-record accounting and
composition, the audit (a loss's gradient bounds live with the losses, in netsim.learning)."""
