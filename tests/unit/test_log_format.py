"""The process's one log format: text or JSON lines, passwords hidden, uvicorn's
loggers through the root's handler; levels in any case."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from vgpu_extender import log_format
from vgpu_extender.settings import Settings


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_message_and_the_traceback(
    restore_root: None,
) -> None:
    out = io.StringIO()
    log_format.configure("INFO", "json", stream=out)
    logging.getLogger("vgpu_extender.x").info("store %s", "postgresql://u:pw1@h/d")
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("uvicorn.error").exception("startup")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["level"] == "INFO" and first["logger"] == "vgpu_extender.x"
    assert first["message"] == "store postgresql://u:***@h/d"
    assert first["time"].endswith("+00:00")
    assert second["logger"] == "uvicorn.error" and second["level"] == "ERROR"
    assert "ValueError: bad" in second["exc_info"]


def test_text_lines_and_a_second_configure_replaces_the_first(restore_root: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    log_format.configure("INFO", "text", stream=first)
    log_format.configure("WARNING", "text", stream=second)
    log = logging.getLogger("vgpu_extender.y")
    log.info("hidden")
    log.warning("shown")
    assert first.getvalue() == ""
    assert second.getvalue().rstrip().endswith("WARNING vgpu_extender.y: shown")


@pytest.mark.parametrize(
    ("given", "level"),
    [("debug", "DEBUG"), ("Info", "INFO"), ("warn", "WARNING"), ("CRITICAL", "CRITICAL")],
)
def test_levels_in_any_case(given: str, level: str) -> None:
    assert log_format.parse_level(given) == level
    assert Settings(log_level=given).log_level == level  # type: ignore[arg-type]


def test_an_unknown_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        log_format.parse_level("loud")
    with pytest.raises(ValueError, match="unknown log format"):
        log_format.parse_format("xml")
    assert Settings(log_format="JSON").log_format == "json"  # type: ignore[arg-type]
