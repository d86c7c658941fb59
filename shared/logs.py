"""Logging for every service, configured in one place: one line per record on stderr
(the supervisor keeps each service's stream in its log file), level from SPS_LOG_LEVEL."""

from __future__ import annotations

import logging
import os


def configure_logging(service: str) -> None:
    logging.basicConfig(
        level=os.environ.get("SPS_LOG_LEVEL", "INFO").upper(),
        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s",
        force=True,
    )
