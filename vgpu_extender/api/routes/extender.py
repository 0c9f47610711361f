"""kube-scheduler's extender verbs: decode, call the service, encode. Nothing else.

filter and prioritize with names (``nodeCacheCapable: true``) are pure in-memory work
of about a millisecond and run on the event loop; with Node objects they may write
inventory to the store, bind always writes, and preempt searches per candidate node,
so those run in the thread pool.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from vgpu_extender.api import wire
from vgpu_extender.api.verbs import RuntimeDep, ok, read_body, verb
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome

router = APIRouter(tags=["extender"])


async def _filter(request: Request, runtime: Runtime, *, decisive: bool) -> Response:
    body = await read_body(request, runtime, "filter")
    args = wire.decode_args(body, what="filter")
    service = runtime.scheduling.filter_one if decisive else runtime.scheduling.filter
    if args.cache_mode:
        outcome = service(args.pod, args.names)
    else:
        outcome = await run_in_threadpool(service, args.pod, args.names, nodes=args.nodes)
    return ok(wire.encode_filter(args, outcome))


@router.post("/filter")
@verb("filter")
async def filter_nodes(request: Request, runtime: RuntimeDep) -> Response:
    """Feasible nodes and a stable reason for every other one."""
    return await _filter(request, runtime, decisive=False)


@router.post("/filter_onlyone")
@verb("filter")
async def filter_only_one(request: Request, runtime: RuntimeDep) -> Response:
    """Decisive mode: only the best node survives."""
    return await _filter(request, runtime, decisive=True)


@router.post("/prioritize")
@router.post("/priority")
@verb("prioritize")
async def prioritize(request: Request, runtime: RuntimeDep) -> Response:
    """Integer scores 0..10 per candidate."""
    body = await read_body(request, runtime, "prioritize")
    args = wire.decode_args(body, what="prioritize")
    if args.cache_mode:
        scores = runtime.scheduling.prioritize(args.pod, args.names)
    else:
        scores = await run_in_threadpool(
            runtime.scheduling.prioritize, args.pod, args.names, nodes=args.nodes
        )
    return ok(wire.encode_priorities(scores))


@router.post("/bind")
@verb("bind")
async def bind(request: Request, runtime: RuntimeDep) -> Response:
    """Reserve the devices, annotate the pod, create the Binding."""
    body = await read_body(request, runtime, "bind")
    args = wire.decode_bind(body)
    error = await run_in_threadpool(runtime.binding.bind, args)
    return ok(wire.encode_bind(error))


@router.post("/preempt")
@verb("preempt")
async def preempt(request: Request, runtime: RuntimeDep) -> Response:
    """Per candidate node, the fewest victims whose devices make the pod fit."""
    body = await read_body(request, runtime, "preempt")
    args = wire.decode_preempt(body)
    # One scratch index per candidate node: off the event loop.
    outcome = await run_in_threadpool(runtime.preemption.preempt, args.pod, args.candidates)
    return ok(wire.encode_preempt(outcome))


@router.post("/noop")
@verb("filter")
async def noop(request: Request, runtime: RuntimeDep) -> Response:
    """Decode the body as filter does and keep every node: the benchmarks' floor."""
    body = await read_body(request, runtime, "filter")
    args = wire.decode_args(body, what="filter")
    return ok(wire.encode_filter(args, FilterOutcome(feasible=list(args.names))))
