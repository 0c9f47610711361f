"""One log format for the whole process: the extender's lines and uvicorn's alike.

Text by default (``time LEVEL logger: message``), or JSON, one object per line
(``time``, ``level``, ``logger``, ``message``, and ``exc_info`` with the traceback when
there is one) for a log collector. Every line goes through the redacting formatter, so
no password in a URL reaches the log. uvicorn is started with ``log_config=None`` and
its loggers only propagate to the root logger configured here.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

from vgpu_extender.redaction import RedactingFormatter

LogFormat = Literal["text", "json"]
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: uvicorn's loggers: they keep no handler of their own and go through the root's.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def parse_level(value: str) -> str:
    """``value`` as a level name (any case; ``warn`` for ``warning``); ValueError else."""
    level = value.strip().upper()
    level = "WARNING" if level == "WARN" else level
    if level not in LEVELS:
        raise ValueError(f"unknown log level {value!r}; use one of {', '.join(LEVELS).lower()}")
    return level


def parse_format(value: str) -> LogFormat:
    shown = value.strip().lower()
    if shown == "json":
        return "json"
    if shown == "text":
        return "text"
    raise ValueError(f"unknown log format {value!r}; use text or json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _OurHandler(logging.StreamHandler[TextIO]):
    """The handler ``configure`` installs (a second call replaces it). Without a
    stream of its own it writes to whatever ``sys.stderr`` is at the time, so a
    caller that swaps stderr (a test runner) never leaves it writing to a closed one."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._fixed = stream

    @property
    def stream(self) -> TextIO:
        return self._fixed if self._fixed is not None else sys.stderr

    @stream.setter
    def stream(self, value: TextIO | None) -> None:
        self._fixed = value


def formatter(fmt: LogFormat) -> logging.Formatter:
    inner = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    return RedactingFormatter(inner)


def configure(level: str = "INFO", fmt: LogFormat = "text", stream: TextIO | None = None) -> None:
    """The root logger writes ``fmt`` lines at ``level`` and up to ``stream`` (stderr)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _OurHandler):
            root.removeHandler(handler)
    handler = _OurHandler(stream)
    handler.setFormatter(formatter(fmt))
    root.addHandler(handler)
    root.setLevel(parse_level(level))
    # Alembic announces each plugin it loads at INFO: noise on every start.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    # urllib3 warns of each of its own retries of an API server that is down, three
    # lines per try of ours, which logs the outcome (throttled): kept for debug.
    debugging = root.level <= logging.DEBUG
    logging.getLogger("urllib3.connectionpool").setLevel(
        logging.NOTSET if debugging else logging.ERROR
    )
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
