"""What every scheduler verb shares: reading the body, and answering errors with 200.

kube-scheduler treats any status other than 200 as a failure of the extender itself,
so bad input and unexpected errors are answered with HTTP 200 and the verb's own way
of saying so (``Error`` for filter and bind, an empty list for prioritize, no victims
for preempt), never a 4xx or 5xx.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec

from fastapi import Depends, Request, Response

from vgpu_extender.api import wire
from vgpu_extender.services.preemption import PreemptOutcome
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome

logger = logging.getLogger(__name__)

JSON = "application/json"
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

_P = ParamSpec("_P")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def ok(content: bytes) -> Response:
    return Response(content=content, media_type=JSON)


def error_body(verb: str, message: str) -> bytes:
    """The verb's answer for a failure, in its own wire type."""
    if verb == "prioritize":
        return b"[]"
    if verb == "bind":
        return wire.encode_bind(message)
    if verb == "preempt":
        return wire.encode_preempt(PreemptOutcome({}, error=message))
    return wire.encode_filter(None, FilterOutcome(error=message))


async def read_body(request: Request, runtime: Runtime, verb: str) -> bytes:
    """The raw body, refused (``WireError``) when too large or from a non-loopback
    client while the verbs are served to localhost only."""
    settings = runtime.settings
    if settings.verbs_localhost_only:
        host = request.client.host if request.client is not None else ""
        if host not in _LOOPBACK:
            raise wire.WireError(
                f"{verb}: the scheduler verbs are served to loopback clients only "
                f"(verbs_localhost_only); client {host!r}"
            )
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise wire.WireError(f"{verb}: body of {declared} bytes exceeds max_body_bytes={limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise wire.WireError(f"{verb}: body exceeds max_body_bytes={limit}")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        raise wire.WireError(f"{verb}: the body is empty; expected a JSON object")
    return body


def verb(
    name: str,
) -> Callable[[Callable[_P, Awaitable[Response]]], Callable[_P, Awaitable[Response]]]:
    """Answer bad input and unexpected errors of a verb with 200 and the verb's error."""

    def decorate(handler: Callable[_P, Awaitable[Response]]) -> Callable[_P, Awaitable[Response]]:
        @functools.wraps(handler)
        async def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> Response:
            try:
                return await handler(*args, **kwargs)
            except wire.WireError as exc:
                logger.info("%s: bad request: %s", name, exc)
                return ok(error_body(name, str(exc)))
            except Exception as exc:  # never a 5xx for kube-scheduler
                logger.exception("%s failed", name)
                return ok(error_body(name, f"{name}: internal error: {type(exc).__name__}: {exc}"))

        return wrapped

    return decorate


def verb_of_path(path: str) -> str | None:
    """The verb a request path names (``/scheduler/filter`` -> ``filter``)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    aliases = {"priority": "prioritize", "filter_onlyone": "filter", "noop": "filter"}
    last = aliases.get(last, last)
    return last if last in ("filter", "prioritize", "bind", "preempt") else None


async def exception_handler(request: Request, exc: Exception) -> Response:
    """The backstop for errors raised outside a verb's own handler."""
    name = verb_of_path(request.url.path)
    if name is None:
        logger.exception("request to %s failed", request.url.path, exc_info=exc)
        return Response(
            content=wire.encode_bind(f"internal error: {type(exc).__name__}"),
            status_code=500,
            media_type=JSON,
        )
    logger.exception("%s failed", name, exc_info=exc)
    return ok(error_body(name, f"{name}: internal error: {type(exc).__name__}: {exc}"))
