"""kube-scheduler's extender verbs: decode, call the service, encode. Nothing else.

kube-scheduler calls filter and prioritize once per pod with every candidate node,
so per-request overhead counts: the verbs are served by a plain ASGI layer ahead of
FastAPI's routing, where a request is one table lookup, a body read and one call.
FastAPI serves everything else and documents the verbs (``document``).

filter and prioritize with names (``nodeCacheCapable: true``) are pure in-memory work
of well under a millisecond and run on the event loop; with Node objects they may
write inventory to the store, bind always writes, and preempt searches per candidate
node, so those run in the thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from vgpu_extender.api import wire
from vgpu_extender.api.verbs import JSON, error_body, read_body
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome

logger = logging.getLogger(__name__)

Handler = Callable[[Runtime, bytes], Awaitable[bytes]]


async def _filter(runtime: Runtime, body: bytes, *, decisive: bool) -> bytes:
    args = wire.decode_args(body, what="filter")
    service = runtime.scheduling.filter_one if decisive else runtime.scheduling.filter
    if args.cache_mode:
        outcome = service(args.pod, args.names)
    else:
        outcome = await run_in_threadpool(service, args.pod, args.names, nodes=args.nodes)
    return wire.encode_filter(args, outcome)


async def filter_nodes(runtime: Runtime, body: bytes) -> bytes:
    return await _filter(runtime, body, decisive=False)


async def filter_only_one(runtime: Runtime, body: bytes) -> bytes:
    return await _filter(runtime, body, decisive=True)


async def prioritize(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_args(body, what="prioritize")
    if args.cache_mode:
        scores = runtime.scheduling.prioritize(args.pod, args.names)
    else:
        scores = await run_in_threadpool(
            runtime.scheduling.prioritize, args.pod, args.names, nodes=args.nodes
        )
    return wire.encode_priorities(scores)


async def bind(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_bind(body)
    return wire.encode_bind(await run_in_threadpool(runtime.binding.bind, args))


async def preempt(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_preempt(body)
    # One scratch index per candidate node: off the event loop.
    outcome = await run_in_threadpool(runtime.preemption.preempt, args.pod, args.candidates)
    return wire.encode_preempt(outcome)


async def noop(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_args(body, what="filter")
    return wire.encode_filter(args, FilterOutcome(feasible=list(args.names)))


@dataclass(frozen=True, slots=True)
class Verb:
    """One endpoint: the verb whose error form it answers in, and what it does."""

    name: str
    handler: Handler
    summary: str


#: Every path kube-scheduler may be configured to call (``priority`` is HAMi's name,
#: ``noop`` decodes the body as filter does and keeps every node: the benchmarks' floor).
VERBS: dict[str, Verb] = {
    "/filter": Verb("filter", filter_nodes, "Feasible nodes and a reason for every other one."),
    "/filter_onlyone": Verb("filter", filter_only_one, "Decisive mode: only the best node stays."),
    "/prioritize": Verb("prioritize", prioritize, "Integer scores 0..10 per candidate."),
    "/priority": Verb("prioritize", prioritize, "Integer scores 0..10 per candidate (alias)."),
    "/bind": Verb("bind", bind, "Reserve the devices; create the Binding with HAMi's annotations."),
    "/preempt": Verb(
        "preempt", preempt, "Per candidate node, the fewest victims whose devices make the pod fit."
    ),
    "/noop": Verb("filter", noop, "Decode the body as filter does and keep every node."),
}


class SchedulerVerbs:
    """ASGI middleware answering ``POST`` on the verb paths; anything else goes on.

    Every answer is HTTP 200: kube-scheduler treats any other status as a failure of
    the extender itself, so bad input and errors take the verb's own error form.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        verb = VERBS.get(scope["path"]) if scope["type"] == "http" else None
        if verb is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        content = await self._answer(verb, scope, receive)
        if content is None:
            return  # the client went away
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", JSON.encode()),
                    (b"content-length", str(len(content)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})

    @staticmethod
    async def _answer(verb: Verb, scope: Scope, receive: Receive) -> bytes | None:
        runtime: Runtime | None = getattr(scope["app"].state, "runtime", None)
        if runtime is None:
            return error_body(verb.name, f"{verb.name}: the extender is still starting")
        try:
            body = await read_body(scope, receive, runtime.settings, verb.name)
            if body is None:
                return None
            return await verb.handler(runtime, body)
        except wire.WireError as exc:
            logger.info("%s: bad request: %s", verb.name, exc)
            return error_body(verb.name, str(exc))
        except Exception as exc:  # never a 5xx for kube-scheduler
            logger.exception("%s failed", verb.name)
            message = f"{verb.name}: internal error: {type(exc).__name__}: {exc}"
            return error_body(verb.name, message)


def document(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the verbs to an OpenAPI schema, so they are listed (and fuzzed) with the rest."""
    paths = schema.setdefault("paths", {})
    for path, verb in VERBS.items():
        paths.setdefault(
            path,
            {
                "post": {
                    "tags": ["extender"],
                    "summary": verb.summary,
                    "operationId": f"{path.strip('/')}_verb",
                    "requestBody": {
                        "required": True,
                        "content": {JSON: {"schema": {"type": "object"}}},
                    },
                    "responses": {
                        "200": {
                            "description": f"The {verb.name} answer; errors in its own form.",
                            "content": {JSON: {"schema": {}}},
                        }
                    },
                }
            },
        )
    return schema
