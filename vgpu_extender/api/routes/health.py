"""Liveness and readiness for the kubelet's probes.

``/healthz`` answers while the process serves HTTP. ``/readyz`` is 200 only once the
index is loaded from the store (and, with a cluster, reconciled with it once), while
the store answers (``services.store_health``: failing after a few failures in a row,
passing again only after a few good probes in a row) and, with leader election on,
only while this replica leads; otherwise 503, naming the check that failed. HAMi's
scheduler answers ready always, which sent traffic to replicas that could not serve
it. Readiness itself never touches the store: it reads what the probe last found.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from vgpu_extender.api.operations import OperationsDep
from vgpu_extender.api.schemas import CheckOut, HealthOut, ReadyOut

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut)
async def healthz() -> HealthOut:
    """The process is up and serving HTTP."""
    return HealthOut(status="ok")


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: {"model": ReadyOut, "description": "Not ready; see the failing check."}},
)
async def readyz(operations: OperationsDep) -> JSONResponse:
    """Ready for traffic: index loaded, cluster reconciled, leading (when elected)."""
    checks = {
        name: CheckOut(ok=check.ok, detail=check.detail)
        for name, check in operations.readiness().items()
    }
    ready = all(check.ok for check in checks.values())
    body = ReadyOut(ready=ready, checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
