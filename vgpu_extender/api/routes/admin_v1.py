"""The admin API under ``/api/v1``: what the scheduler holds, a dry run, and changes.

Reads need the bearer token when one is configured, and a loopback client when none
is (``security.require_reader``); the changes (inventory, cordon) need the token. Bad
input is a 4xx whose ``detail`` names the field and value; a store that cannot be
reached is a 503. Handlers that touch the store are plain ``def``: they run in the thread pool.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, status

from vgpu_extender.api.schemas import (
    AllocationOut,
    AllocationPageOut,
    ConflictOut,
    CordonOut,
    ErrorOut,
    InventoryChangeOut,
    InventoryIn,
    NodeOut,
    PodOut,
    SummaryOut,
    WhatIfIn,
    WhatIfOut,
)
from vgpu_extender.api.security import AdminDep, ReaderDep
from vgpu_extender.api.verbs import RuntimeDep
from vgpu_extender.domain import RequestError
from vgpu_extender.services import admin, admin_actions
from vgpu_extender.services.allocation_queries import (
    AllocationFilter,
    allocation_page,
    pod_allocations,
)
from vgpu_extender.services.inventory import parse_inventory_document

router = APIRouter(prefix="/api/v1", tags=["admin"], dependencies=[ReaderDep])

_ERRORS: dict[int | str, dict[str, Any]] = {
    **{code: {"model": ErrorOut} for code in (400, 404, 409, 503)},
    401: {"model": ErrorOut, "description": "Missing or wrong bearer token."},
    403: {
        "model": ErrorOut,
        "description": "No admin_token configured and the client is not on loopback.",
    },
}
_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    403: {"model": ErrorOut, "description": "No admin_token configured: changes are off."},
}
Name = Annotated[str, Path(min_length=1, max_length=253)]


# --------------------------------------------------------------------------- reading
@router.get("/nodes", response_model=list[NodeOut], responses=_ERRORS)
def list_nodes(
    runtime: RuntimeDep,
    devices: Annotated[bool, Query(description="Include every GPU and its pods.")] = False,
) -> list[NodeOut]:
    """Every node: GPUs, memory and cores total / used / free, pods, fragmentation."""
    reports, _pods = admin.live_reports(runtime.cluster, runtime.sessions)
    return [NodeOut.of(report, devices=devices) for report in reports]


@router.get("/nodes/{name}", response_model=NodeOut, responses=_ERRORS)
def get_node(name: Name, runtime: RuntimeDep) -> NodeOut:
    """One node with its GPUs and the pods holding each."""
    reports, _pods = admin.live_reports(runtime.cluster, runtime.sessions, name)
    if not reports:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"node {name!r} is not registered")
    return NodeOut.of(reports[0], devices=True)


@router.get("/summary", response_model=SummaryOut, responses=_ERRORS)
def summary(runtime: RuntimeDep) -> SummaryOut:
    """The cluster at a glance: utilisation, fragmentation, reservations, bad GPUs."""
    reports, pods = admin.live_reports(runtime.cluster, runtime.sessions)
    return SummaryOut.model_validate(
        admin.summarize(reports, pods, conflicts=len(runtime.conflicts))
    )


@router.get("/conflicts", response_model=list[ConflictOut], responses=_ERRORS)
def list_conflicts(runtime: RuntimeDep) -> list[ConflictOut]:
    """Running pods whose allocation could not be recorded without over-committing a GPU
    (a node deleted and registered again, a Binding whose answer was lost, another
    scheduler): the pods holding those GPUs, and since when. Their GPUs take no new pod
    until the conflict is resolved: the pods holding them go, or the conflicting pod
    does."""
    return [ConflictOut.model_validate(conflict) for conflict in runtime.conflicts.open()]


@router.get("/allocations", response_model=AllocationPageOut, responses=_ERRORS)
def list_allocations(
    runtime: RuntimeDep,
    namespace: Annotated[str | None, Query(max_length=253)] = None,
    pod: Annotated[str | None, Query(max_length=253, description="Pod name.")] = None,
    node: Annotated[str | None, Query(max_length=253)] = None,
    device: Annotated[str | None, Query(max_length=128, description="GPU UUID.")] = None,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AllocationPageOut:
    """Reserved and bound allocations (one per container and GPU), one page at a time."""
    where = AllocationFilter(namespace=namespace, pod=pod, node=node, device=device)
    page = allocation_page(runtime.sessions, where, offset=offset, limit=limit)
    return AllocationPageOut(
        items=[AllocationOut.of(a) for a in page.items],
        total=page.total,
        offset=page.offset,
        limit=page.limit,
    )


@router.get("/pods/{namespace}/{name}", response_model=PodOut, responses=_ERRORS)
def get_pod(namespace: Name, name: Name, runtime: RuntimeDep) -> PodOut:
    """The GPUs one pod holds, per container."""
    rows = pod_allocations(runtime.sessions, namespace=namespace, name=name)
    if not rows:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"pod {namespace}/{name} holds no GPU allocation"
        )
    return PodOut.of(rows)


@router.post("/whatif", response_model=WhatIfOut, responses=_ERRORS)
def what_if(body: WhatIfIn, runtime: RuntimeDep) -> WhatIfOut:
    """Where the pod would go and with which GPUs, and why not elsewhere. Reserves
    nothing."""
    try:
        result = admin_actions.what_if(
            runtime.cluster, body.pod, candidates=body.nodes, detail=body.detail
        )
    except RequestError as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"pod: {exc}") from None
    return WhatIfOut.of(result)


# --------------------------------------------------------------------------- changing
@router.put(
    "/inventory",
    response_model=InventoryChangeOut,
    responses=_AUTH_ERRORS,
    dependencies=[AdminDep],
)
def put_inventory(body: InventoryIn, runtime: RuntimeDep) -> InventoryChangeOut:
    """Standalone mode: replace the whole inventory (the ``--inventory`` file's format).

    Nodes left out are forgotten, unless pods still hold their GPUs (409). With a
    cluster, inventory comes from the device plugin's node annotations: 409.
    """
    try:
        nodes = parse_inventory_document(
            body.model_dump(),
            runtime.cluster.vendors,
            split_count=runtime.settings.split_count,
            where="body",
        )
        change = admin_actions.replace_inventory(
            runtime.cluster, runtime.inventory, nodes, kube=runtime.kube, sessions=runtime.sessions
        )
    except admin_actions.TooLong as exc:  # as the store's columns hold, on every backend
        raise HTTPException(422, str(exc)) from None
    except admin_actions.INVALID as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    except admin_actions.CONFLICTS as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    return InventoryChangeOut(registered=change.registered, removed=change.removed)


def _cordon(runtime: RuntimeDep, uuid: str, cordon: bool) -> CordonOut:
    try:
        state = admin_actions.set_cordon(
            cluster=runtime.cluster,
            sessions=runtime.sessions,
            kube=runtime.kube,
            device=uuid,
            cordon=cordon,
        )
    except admin_actions.NotFoundError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except admin_actions.CONFLICTS as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    return CordonOut(node=state.node, device=state.device, cordoned=state.cordoned)


@router.post(
    "/devices/{uuid}/cordon",
    response_model=CordonOut,
    responses=_AUTH_ERRORS,
    dependencies=[AdminDep],
)
def cordon_device(uuid: Name, runtime: RuntimeDep) -> CordonOut:
    """The GPU takes no new pod; the pods it holds stay (HAMi's hami.io/device-cordon)."""
    return _cordon(runtime, uuid, True)


@router.post(
    "/devices/{uuid}/uncordon",
    response_model=CordonOut,
    responses=_AUTH_ERRORS,
    dependencies=[AdminDep],
)
def uncordon_device(uuid: Name, runtime: RuntimeDep) -> CordonOut:
    """The GPU takes new pods again."""
    return _cordon(runtime, uuid, False)
