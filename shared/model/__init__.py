"""The model: topologies, per-interval statistics, the PA-SPS equations, execution times, traces."""
