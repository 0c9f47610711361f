"""What every scheduler verb shares: reading the body, and answering errors with 200.

kube-scheduler treats any status other than 200 as a failure of the extender itself,
so bad input and unexpected errors are answered with HTTP 200 and the verb's own way
of saying so (``Error`` for filter and bind, an empty list for prioritize, no victims
for preempt), never a 4xx or 5xx.
"""

from __future__ import annotations

import functools
import logging
from typing import Annotated

from fastapi import Depends, Request, Response
from starlette.types import Receive, Scope

from vgpu_extender.api import wire
from vgpu_extender.api.security import is_loopback
from vgpu_extender.services.preemption import PreemptOutcome
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome
from vgpu_extender.settings import Settings

logger = logging.getLogger(__name__)

JSON = "application/json"
#: Asked once per verb request, of few distinct peers.
_loopback = functools.lru_cache(maxsize=1024)(is_loopback)


async def get_runtime(request: Request) -> Runtime:
    """``async`` on purpose, like every dependency here: FastAPI runs a plain ``def``
    dependency in the thread pool, a hop that costs more than a whole filter."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def error_body(verb: str, message: str) -> bytes:
    """The verb's answer for a failure, in its own wire type."""
    if verb == "prioritize":
        return b"[]"
    if verb == "bind":
        return wire.encode_bind(message)
    if verb == "preempt":
        return wire.encode_preempt(PreemptOutcome({}, error=message))
    return wire.encode_filter(None, FilterOutcome(error=message))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def read_body(scope: Scope, receive: Receive, settings: Settings, verb: str) -> bytes | None:
    """The raw body (None when the client went away), refused (``WireError``) when too
    large or from a non-loopback client while the verbs are served to localhost only."""
    if settings.verbs_localhost_only:
        client = scope.get("client")
        host = client[0] if client else ""
        if not _loopback(host):
            raise wire.WireError(
                f"{verb}: the scheduler verbs are served to loopback clients only "
                f"(VGPU_VERBS_LOCALHOST_ONLY=true); client {host!r} is not on loopback"
            )
    limit = settings.max_body_bytes
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise wire.WireError(f"{verb}: body of {declared} bytes exceeds max_body_bytes={limit}")
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise wire.WireError(f"{verb}: body exceeds max_body_bytes={limit}")
        chunks.append(chunk)
        more = message.get("more_body", False)
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if not body.strip():
        raise wire.WireError(f"{verb}: the body is empty; expected a JSON object")
    return body


async def exception_handler(request: Request, exc: Exception) -> Response:
    """The backstop for errors of the other endpoints (the verbs answer their own)."""
    logger.exception("request to %s failed", request.url.path, exc_info=exc)
    return Response(
        content=wire.encode_bind(f"internal error: {type(exc).__name__}"),
        status_code=500,
        media_type=JSON,
    )
