"""Running the whole ensemble on one machine: start, replay, watch, report."""
