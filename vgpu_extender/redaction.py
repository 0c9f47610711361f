"""Secrets out of anything shown: passwords in URLs, and secret settings.

Every message that may carry a setting's value (a settings error, a store error, a
start-up log line) goes through :func:`hide_passwords` first, so a database URL's
password never reaches a terminal or a log.
"""

from __future__ import annotations

import logging
import re

HIDDEN = "***"

#: ``scheme://user:password@``: the password runs to the last ``@`` before the host
#: (a raw ``@`` inside a password is still hidden whole).
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):[^\s/'\"]*@")
#: libpq's ``password=`` in a URL's query or a keyword/value connection string.
_PASSWORD_PARAM = re.compile(r"(?P<head>\bpassword\s*=\s*)(?:'[^']*'|[^&\s'\"]*)", re.IGNORECASE)


def hide_passwords(text: str) -> str:
    """``text`` with every URL password and ``password=`` value replaced by ``***``."""
    text = _USERINFO.sub(rf"\g<head>:{HIDDEN}@", text)
    return _PASSWORD_PARAM.sub(rf"\g<head>{HIDDEN}", text)


def shown_url(url: str) -> str:
    """A database URL fit to print: SQLAlchemy's rendering with the password hidden,
    or the text with its passwords hidden when it is no URL SQLAlchemy reads."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return hide_passwords(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return hide_passwords(url)


class RedactingFormatter(logging.Formatter):
    """Formats as ``inner`` does, then hides passwords in the whole record, traceback
    included: a driver's error text may quote the URL it was given."""

    def __init__(self, inner: logging.Formatter | None = None) -> None:
        super().__init__()
        self._inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return hide_passwords(self._inner.format(record))


def redact_logging(logger: logging.Logger | None = None) -> None:
    """Every handler of ``logger`` (the root logger by default) hides passwords."""
    for handler in (logger or logging.getLogger()).handlers:
        if not isinstance(handler.formatter, RedactingFormatter):
            handler.setFormatter(RedactingFormatter(handler.formatter))
