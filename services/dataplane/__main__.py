"""python -m elastic_sps.services.dataplane [--topology NAME|FILE]: the PySpark streaming job."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from elastic_sps.services.dataplane.job import run
from elastic_sps.settings import DataplaneSettings, settings_or_exit


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m elastic_sps.services.dataplane")
    ap.add_argument("--topology", help="built-in name or YAML file (default SPS_TOPOLOGY)")
    args = ap.parse_args()
    if args.topology:
        os.environ["SPS_TOPOLOGY"] = args.topology
    settings = settings_or_exit(DataplaneSettings)
    # SIGTERM: stop the queries cleanly (the finally in run), keeping checkpoints whole.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(settings)


if __name__ == "__main__":
    main()
