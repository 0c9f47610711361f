"""``/metrics`` in Prometheus' text format, from this app's own registry."""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from vgpu_extender.api.compression import accepts_gzip, gzip_pieces
from vgpu_extender.api.operations import OperationsDep
from vgpu_extender.api.security import ReaderDep
from vgpu_extender.metrics import CONTENT_TYPE

#: Guarded as every read: the gauges name each pod, namespace and GPU UUID.
router = APIRouter(tags=["metrics"], dependencies=[ReaderDep])


@router.get(
    "/metrics",
    response_class=StreamingResponse,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus metrics."}},
)
def metrics(request: Request, operations: OperationsDep) -> StreamingResponse:
    """HAMi's allocation gauges (zone="vGPU") and the extender's own counters.

    A plain ``def``: the per-pod gauges read the names of pods not seen before from the
    store (it alone knows them), so this runs in the thread pool, off the event loop
    the verbs share. While the store cannot be reached it is not tried: the gauges come
    from the index, pods not named before are left out, and
    ``vgpu_extender_store_available`` is 0; a scrape never fails for want of the store.

    The text (about 60 MB at 5,000 nodes, most of it HAMi's per-GPU gauges) goes out a
    piece at a time, each written once the one before is taken: one write of it all
    would copy it whole on the event loop, with every verb waiting. It is gzipped when
    the client accepts it, as Prometheus does (here, in the thread pool).
    """
    pieces = operations.metrics.render_pieces()
    headers = {"vary": "Accept-Encoding"}
    if accepts_gzip(request.headers.get("accept-encoding")):
        pieces = gzip_pieces(pieces)
        headers["content-encoding"] = "gzip"
    headers["content-length"] = str(sum(len(piece) for piece in pieces))
    return StreamingResponse(_each(pieces), media_type=CONTENT_TYPE, headers=headers)


async def _each(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece
