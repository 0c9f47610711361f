"""gpushare-scheduler-extender's inspect API, for the tools built on it.

``GET /gpushare-scheduler/inspect`` and ``/gpushare-scheduler/inspect/{node}`` answer
in gpushare's shape (``totalGPU`` and ``usedGPU`` in MiB of GPU memory, devices by
index). An unknown node is a 404 carrying gpushare's ``error`` field, where gpushare
itself crashes.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from typing import Annotated

from fastapi import APIRouter, Path, status
from fastapi.responses import JSONResponse

from vgpu_extender.api.schemas import ErrorOut, GpushareInspectOut, GpushareNodeOut
from vgpu_extender.api.security import ReaderDep
from vgpu_extender.api.verbs import RuntimeDep
from vgpu_extender.services import admin

router = APIRouter(prefix="/gpushare-scheduler", tags=["gpushare"], dependencies=[ReaderDep])


def _inspect(runtime: RuntimeDep, node: str | None) -> JSONResponse:
    # A store error reaches the app's store error handler (``api/store_errors.py``).
    reports, _pods = admin.live_reports(runtime.cluster, runtime.sessions, node)
    if node is not None and not reports:
        body = GpushareInspectOut(nodes=[], error=f"node {node!r} is not registered")
        return JSONResponse(body.model_dump(), status_code=status.HTTP_404_NOT_FOUND)
    body = GpushareInspectOut(nodes=[GpushareNodeOut.of(r) for r in reports])
    return JSONResponse(body.model_dump(exclude_none=True))


@router.get(
    "/inspect",
    response_model=GpushareInspectOut,
    responses={503: {"model": ErrorOut}},
)
def inspect_all(runtime: RuntimeDep) -> JSONResponse:
    """Every node and GPU with the pods on it."""
    return _inspect(runtime, None)


@router.get(
    "/inspect/{node}",
    response_model=GpushareInspectOut,
    responses={
        404: {"model": GpushareInspectOut, "description": "Unknown node."},
        503: {"model": ErrorOut},
    },
)
def inspect_node(
    node: Annotated[str, Path(min_length=1, max_length=253)], runtime: RuntimeDep
) -> JSONResponse:
    """One node."""
    return _inspect(runtime, node)
