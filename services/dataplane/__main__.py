"""python -m elastic_sps.services.dataplane [--topology NAME|FILE]: the PySpark streaming job."""

from __future__ import annotations

import argparse
import os
import signal

from elastic_sps.services.dataplane.job import run
from elastic_sps.services.dataplane.stopping import StopRequest
from elastic_sps.settings import DataplaneSettings, settings_or_exit


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m elastic_sps.services.dataplane")
    ap.add_argument("--topology", help="built-in name or YAML file (default SPS_TOPOLOGY)")
    args = ap.parse_args()
    if args.topology:
        os.environ["SPS_TOPOLOGY"] = args.topology
    settings = settings_or_exit(DataplaneSettings)
    # SIGTERM: the queries' epochs end and commit, then they stop (``stopping.py``)
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop)
    run(settings, stop)


if __name__ == "__main__":
    main()
