"""Logging for every service, configured in one place: one line per record on stderr
(the supervisor keeps each service's stream in its log file), level from SPS_LOG_LEVEL,
plain text or, with SPS_LOG_FORMAT=json, one JSON object a line (for a log collector)."""

from __future__ import annotations

import json
import logging


class JsonFormatter(logging.Formatter):
    """``{"time", "service", "level", "logger", "message"}`` (and ``exception``) a line."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "service": self.service,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def configure_logging(service: str) -> None:
    from elastic_sps.settings import LocalSettings

    settings = LocalSettings()
    handler = logging.StreamHandler()
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")
        )
    logging.basicConfig(level=settings.log_level.upper(), handlers=[handler], force=True)
