"""The learning algorithms of the papers netsim reproduces, one sub-package each: its config,
process, kernels, privacy calibration, tables and figure helpers."""
