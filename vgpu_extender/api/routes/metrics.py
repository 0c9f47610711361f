"""``/metrics`` in Prometheus' text format, from this app's own registry."""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from fastapi import APIRouter, Response

from vgpu_extender.api.operations import OperationsDep
from vgpu_extender.api.security import ReaderDep
from vgpu_extender.metrics import CONTENT_TYPE

#: Guarded as every read: the gauges name each pod, namespace and GPU UUID.
router = APIRouter(tags=["metrics"], dependencies=[ReaderDep])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus metrics."}},
)
def metrics(operations: OperationsDep) -> Response:
    """HAMi's allocation gauges (zone="vGPU") and the extender's own counters.

    A plain ``def``: the per-pod gauges read the store (it alone knows the pods' names),
    so this runs in the thread pool, off the event loop the verbs share. While the store
    cannot be reached it is not tried: the device gauges come from the index, the
    per-pod ones from the last rows read, and ``vgpu_extender_store_available`` is 0; a
    scrape never fails for want of the store.
    """
    return Response(content=operations.metrics.render(), media_type=CONTENT_TYPE)
