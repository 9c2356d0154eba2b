"""Privacy: calibrated mechanisms, privacy events, per-record accounting, sensitivity bounds."""
