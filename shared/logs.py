"""Logging for every service, configured in one place: one line per record on stderr
(the supervisor keeps each service's stream in its log file), level from SPS_LOG_LEVEL."""

from __future__ import annotations

import logging


def configure_logging(service: str) -> None:
    from shared.settings import LocalSettings

    logging.basicConfig(
        level=LocalSettings().log_level.upper(),
        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s",
        force=True,
    )
