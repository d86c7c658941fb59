"""Load-Aware Shedding (Rivetti et al., DEBS 2016): sketches, operator side, shedder side,
the baselines of its §5.1, Redis transport and the shedding simulator."""
