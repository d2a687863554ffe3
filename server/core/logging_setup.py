"""The service's log output: text or JSON lines (TILEFORGE_LOG_FORMAT), each carrying the job
id and tenant of the request or job it was written for (server/core/log_context.py)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

from server.core.log_context import FIELDS, ContextFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [job=%(job_id)s tenant=%(tenant)s] %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, job_id, tenant, and the
    traceback where there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name, "message": record.getMessage(),
                "process": record.process}
        line.update({name: getattr(record, name, "-") for name in FIELDS})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def context_handler(log_format: str, stream: TextIO) -> logging.Handler:
    """A handler writing to `stream` in `log_format` (`text` or `json`), with the context fields."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter())
    return handler


def configure_logging(log_format: str, level: int | str = logging.INFO) -> None:
    """Send every logger's records (uvicorn's and Celery's propagate to the root) to stderr in
    `log_format`, with the context fields on each."""
    handler = context_handler(log_format, sys.stderr)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "celery"):
        logging.getLogger(name).handlers.clear()  # theirs would print every line a second time
        logging.getLogger(name).propagate = True
