"""The simulator: the fluid and event models, the engine's calibration, run metrics,
the paper's scenario."""
