"""The admin API: node inventory for standalone mode (no cluster to watch).

``PUT /admin/nodes`` takes the inventory-file document, ``DELETE /admin/nodes/{name}``
forgets a node, ``GET /admin/nodes`` lists them. With ``admin_token`` set, every call
needs ``Authorization: Bearer <token>``; without one, only loopback clients are served.
Unlike the scheduler verbs these are for people and scripts, so bad input is a 4xx
with a message naming the field.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

import dataclasses
import hmac
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from vgpu_extender import store
from vgpu_extender.api.verbs import RuntimeDep, get_runtime
from vgpu_extender.domain import InventoryError
from vgpu_extender.engine import AllocationError
from vgpu_extender.services.inventory import parse_inventory_document, summarize
from vgpu_extender.services.runtime import Runtime

_LOOPBACK = frozenset({"127.0.0.1", "::1"})


def require_admin(request: Request, runtime: Annotated[Runtime, Depends(get_runtime)]) -> None:
    token = runtime.settings.admin_token
    if token is None:
        host = request.client.host if request.client is not None else ""
        if host not in _LOOPBACK:
            raise HTTPException(403, f"admin API: no admin_token set, loopback only (not {host})")
        return
    given = request.headers.get("authorization", "")
    expected = f"Bearer {token.get_secret_value()}"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, "admin API: missing or wrong bearer token")


router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)])


@router.get("/nodes")
def list_nodes(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Every node the extender knows, with its devices, pods and problem."""
    return [dataclasses.asdict(summary) for summary in summarize(runtime.cluster)]


@router.put("/nodes")
async def put_nodes(request: Request, runtime: RuntimeDep) -> dict[str, list[str]]:
    """Register or replace nodes, all or nothing (the inventory-file document)."""
    try:
        document = msgspec.json.decode(await request.body())
        nodes = parse_inventory_document(
            document, runtime.cluster.vendor, split_count=runtime.settings.split_count, where="body"
        )
        await run_in_threadpool(runtime.inventory.register, nodes, source="api")
    except msgspec.DecodeError as exc:
        raise HTTPException(400, f"body: malformed JSON: {exc}") from None
    except (InventoryError, store.StoreInputError) as exc:
        raise HTTPException(422, str(exc)) from None
    except (store.StoreConflict, AllocationError) as exc:
        raise HTTPException(409, str(exc)) from None
    return {"registered": [node.name for node in nodes]}


@router.delete("/nodes/{name}")
def delete_node(name: str, runtime: RuntimeDep) -> dict[str, bool]:
    """Forget a node and every allocation on it."""
    if name not in runtime.cluster.index:
        raise HTTPException(404, f"node {name!r} is not registered")
    return {"removed": runtime.inventory.remove(name)}
