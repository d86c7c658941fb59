"""The benchmarks' shared harness: starting each engine (``engines``), reading a run's
output (``collector``), running and summing up the comparisons (``runs``, ``summary``),
the processes and their CPU (``processes``), and the rigs, operators and checks the
benchmarks run (``capacity``, ``cpu_work``, ``keyed_ops``, ``orders_check``,
``recorded``). Benchmarks import from here, never from ``tests``; tests may import it."""
