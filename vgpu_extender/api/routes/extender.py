"""kube-scheduler's extender verbs: decode, call the service, encode. Nothing else.

kube-scheduler calls filter and prioritize once per pod with every candidate node,
so per-request overhead counts: the app answers the verbs before any of FastAPI's and
Starlette's machinery (middleware, routing, dependencies) runs; a request is one table
lookup, a body read and one call. FastAPI serves everything else and documents the
verbs (``document``).

filter and prioritize with names (``nodeCacheCapable: true``) are pure in-memory work
of well under a millisecond and run on the event loop; with Node objects they may
write inventory to the store, bind always writes, and preempt searches per candidate
node, so those run in the thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from vgpu_extender.api import store_errors, wire
from vgpu_extender.api.verbs import JSON, error_body, read_body
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome
from vgpu_extender.services.store_health import STORE_FAILURES, classify

logger = logging.getLogger(__name__)
_JSON_BYTES = JSON.encode()

Handler = Callable[[Runtime, bytes], Awaitable[bytes]]


async def _filter(runtime: Runtime, body: bytes, *, decisive: bool) -> bytes:
    args = wire.decode_args(body, what="filter")
    service = runtime.scheduling.filter_one if decisive else runtime.scheduling.filter
    if args.cache_mode or not runtime.scheduling.admits_nodes:
        # Nothing to register: answered on the loop, like names.
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
    if args.cache_mode or not runtime.scheduling.admits_nodes:
        scores = runtime.scheduling.prioritize(args.pod, args.names)
    else:
        scores = await run_in_threadpool(
            runtime.scheduling.prioritize, args.pod, args.names, nodes=args.nodes
        )
    return wire.encode_priorities(scores)


async def bind(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_bind(body)
    # The device choice happens here, on the loop, so the filters that follow see it.
    claim = runtime.binding.claim(args)
    if claim.final:
        return wire.encode_bind(runtime.binding.bind(args, claim))
    loop = asyncio.get_running_loop()
    error = await loop.run_in_executor(runtime.binds, runtime.binding.bind, args, claim)
    return wire.encode_bind(error)


async def preempt(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_preempt(body)
    # One scratch index per candidate node, and the node's pods read from the API
    # server or the store: off the event loop.
    outcome = await run_in_threadpool(runtime.preemption.preempt, args.pod, args.candidates)
    return wire.encode_preempt(outcome, full_pods=args.full_pods)


async def noop(runtime: Runtime, body: bytes) -> bytes:
    args = wire.decode_args(body, what="filter")
    return wire.encode_filter(args, FilterOutcome(feasible=list(args.names)))


@dataclass(frozen=True, slots=True)
class Verb:
    """One endpoint: the verb whose error form it answers in, and what it does."""

    name: str
    handler: Handler
    summary: str
    #: Observed in the verb latency histogram (not the benchmarks' decode-only floor).
    timed: bool = True
    #: Listed in the OpenAPI schema (not the benchmarks' floor: no client's business).
    documented: bool = True
    #: Answered in its error form until the runtime places pods (``not_serving``);
    #: not the benchmarks' floor, which places nothing.
    gated: bool = True
    #: Holds up kube-scheduler's scheduling cycle, so the background passes give way
    #: while it is answered (``Foreground``); not bind, which kube-scheduler waits for
    #: apart and which waits on its store and API server, off the event loop.
    foreground: bool = True


#: Every path kube-scheduler may be configured to call (``priority`` is HAMi's name,
#: ``noop`` decodes the body as filter does and keeps every node: the benchmarks' floor).
VERBS: dict[str, Verb] = {
    "/filter": Verb("filter", filter_nodes, "Feasible nodes and a reason for every other one."),
    "/filter_onlyone": Verb("filter", filter_only_one, "Decisive mode: only the best node stays."),
    "/prioritize": Verb("prioritize", prioritize, "Integer scores 0..10 per candidate."),
    "/priority": Verb("prioritize", prioritize, "Integer scores 0..10 per candidate (alias)."),
    "/bind": Verb(
        "bind",
        bind,
        "Reserve the devices; create the Binding with HAMi's annotations.",
        foreground=False,
    ),
    "/preempt": Verb(
        "preempt", preempt, "Per candidate node, the fewest victims whose devices make the pod fit."
    ),
    "/noop": Verb(
        "filter",
        noop,
        "Decode the body as filter does and keep every node.",
        timed=False,
        documented=False,
        gated=False,
    ),
}


async def answer(verb: Verb, app: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one verb request for ``app`` (its ``state`` holds the runtime and the
    operations); always HTTP 200: kube-scheduler treats any other status as a failure
    of the extender itself, so bad input and errors take the verb's own error form."""
    start = time.perf_counter()
    runtime: Runtime | None = getattr(app.state, "runtime", None) if verb.foreground else None
    if runtime is not None:
        runtime.foreground.enter()  # the background passes give way meanwhile
    try:
        content = await _content(verb, app.state, scope, receive)
        if content is None:
            return  # the client went away
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", _JSON_BYTES),
                    (b"content-length", str(len(content)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})
    finally:
        if runtime is not None:
            runtime.foreground.leave()
        operations = getattr(app.state, "operations", None)
        if verb.timed and operations is not None:
            operations.metrics.verb_seconds[verb.name].observe(time.perf_counter() - start)


async def _content(verb: Verb, state: State, scope: Scope, receive: Receive) -> bytes | None:
    runtime: Runtime | None = getattr(state, "runtime", None)
    if runtime is None:
        return error_body(verb.name, f"{verb.name}: the extender is still starting")
    if verb.gated:
        waiting = runtime.not_serving()
        if waiting:  # filter: Error, prioritize: [], bind: Error, preempt: no victims
            return error_body(verb.name, f"{verb.name}: {waiting}")
    try:
        body = await read_body(scope, receive, runtime.settings, verb.name)
        if body is None:
            return None
        return await verb.handler(runtime, body)
    except wire.WireError as exc:
        logger.info("%s: bad request: %s", verb.name, exc)
        return error_body(verb.name, str(exc))
    except RecursionError:  # the decoder's depth: a body no Kubernetes object needs
        message = f"{verb.name}: malformed JSON: nested too deeply"
        logger.info("%s: bad request: %s", verb.name, message)
        return error_body(verb.name, message)
    except STORE_FAILURES as exc:  # classified, logged once per kind
        error = classify(exc)
        store_errors.report(state, error, where=verb.name)
        return error_body(verb.name, f"{verb.name}: {error}")
    except Exception as exc:  # never a 5xx for kube-scheduler
        logger.exception("%s failed", verb.name)
        message = f"{verb.name}: internal error: {type(exc).__name__}: {exc}"
        return error_body(verb.name, message)


def verb_of(scope: Scope) -> Verb | None:
    """The verb a request is for; None for anything else (FastAPI serves it)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    return VERBS.get(scope["path"])


def document(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the verbs to an OpenAPI schema, so they are listed (and fuzzed) with the rest."""
    paths = schema.setdefault("paths", {})
    for path, verb in VERBS.items():
        if not verb.documented:
            continue
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
