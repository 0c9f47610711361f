"""Store failures of the HTTP endpoints: 503 with the reason, one log line per kind.

Every endpoint but the verbs (which answer their own errors, with HTTP 200) reaches
here with a ``StoreError`` or a driver error: both are classified once
(``services.store_health.classify``) and answered ``503 Service Unavailable`` with
``{"detail": "store unavailable: ..."}`` (or the store's refusal) and ``Retry-After``.
Never a traceback, in the body or the log: the log gets one line per kind of failure
per interval, through the store health monitor that readiness reads.
"""

from __future__ import annotations

import logging
import math

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.datastructures import State

from vgpu_extender.log_throttle import ThrottledLog
from vgpu_extender.services.store_health import STORE_FAILURES, StoreError, classify

__all__ = ["STORE_FAILURES", "report", "store_error_handler"]

logger = logging.getLogger(__name__)
#: For an app whose runtime has not started (or has stopped): no health monitor then.
_FALLBACK = ThrottledLog(logger)


def report(state: State, error: StoreError, *, where: str) -> None:
    """Log ``error`` met by ``where``: one line per kind per interval, no traceback."""
    operations = getattr(state, "operations", None)
    health = getattr(operations, "store_health", None)
    if health is not None:
        health.report(error, where=where)
    else:
        _FALLBACK.warning(type(error).__name__, "%s: %s", where, error)


async def store_error_handler(request: Request, exc: Exception) -> JSONResponse:
    error = classify(exc)
    report(request.app.state, error, where=f"{request.method} {request.url.path}")
    settings = getattr(request.app.state, "settings", None)
    retry_s = settings.store_probe_interval_s if settings is not None else 5.0
    return JSONResponse(
        {"detail": str(error)},
        status_code=503,
        headers={"Retry-After": str(max(1, math.ceil(retry_s)))},
    )
