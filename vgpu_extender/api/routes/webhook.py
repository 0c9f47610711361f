"""``POST /webhook``: the mutating admission webhook (AdmissionReview v1).

Every review gets HTTP 200 and the decision inside the review, as the API server
expects, malformed ones too: bytes that are not JSON, a wrong ``kind`` or
``apiVersion``, no ``request`` or ``uid`` are refused (``allowed: false``, status
400 naming the field), with the review's ``uid`` when it can be read and ``""``
otherwise. A 4xx would tell the API server nothing more, and its own error text
would replace ours in what the user sees.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from vgpu_extender.api.schemas import AdmissionReviewIn, AdmissionReviewOut
from vgpu_extender.api.verbs import RuntimeDep
from vgpu_extender.services import admission
from vgpu_extender.services.largest import largest

DEFAULT_API_VERSION = "admission.k8s.io/v1"
_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
#: How many validation errors the refusal names (a hostile body can carry thousands).
_SHOWN_ERRORS = 5


class AdmissionRoute(APIRoute):
    """A route whose malformed requests are answered as a refused AdmissionReview."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return JSONResponse(refusal(await request.body(), exc.errors()))
            except HTTPException as exc:
                # FastAPI's answer to a body its JSON parser gave up on (deep nesting).
                if exc.status_code != status.HTTP_400_BAD_REQUEST:
                    raise
                unreadable = {"loc": ("body",), "msg": f"cannot be parsed ({exc.detail})"}
                return JSONResponse(refusal(await request.body(), [unreadable]))

        return answer


def refusal(body: bytes, errors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The AdmissionReview refusing a review that could not be read."""
    uid, api_version = _identity(body)
    problems = "; ".join(_describe(error) for error in errors[:_SHOWN_ERRORS])
    more = len(errors) - _SHOWN_ERRORS
    if more > 0:
        problems += f"; and {more} more"
    decision = admission.Decision(False, f"malformed AdmissionReview: {problems}")
    return admission.response(uid, decision, api_version=api_version, code=400)


def _identity(body: bytes) -> tuple[str, str]:
    """The review's ``request.uid`` and ``apiVersion``, where the body has them."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return "", DEFAULT_API_VERSION
    if not isinstance(document, dict):
        return "", DEFAULT_API_VERSION
    version = document.get("apiVersion")
    request = document.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    return (
        uid if isinstance(uid, str) else "",
        version if version in _API_VERSIONS else DEFAULT_API_VERSION,
    )


def _describe(error: Mapping[str, Any]) -> str:
    location = [str(part) for part in error.get("loc", ()) if part != "body"]
    where = ".".join(location) or "body"
    return f"{where}: {error.get('msg', 'invalid')}"[:300]


router = APIRouter(tags=["webhook"], route_class=AdmissionRoute)


@router.post(
    "/webhook",
    response_model=AdmissionReviewOut,
    response_model_exclude_none=True,
    responses={
        200: {
            "description": (
                "The decision, always in an AdmissionReview. A review that cannot be read "
                "(bytes that are not JSON, a wrong kind or apiVersion, no request or uid) "
                "is refused the same way: allowed false, status.code 400 and a message "
                "naming the field, uid the review's where it can be read and empty "
                "otherwise. No 422 is ever answered."
            )
        },
        "default": {"description": "An unexpected error (HTTP 500)."},
    },
)
def webhook(review: AdmissionReviewIn, runtime: RuntimeDep) -> dict[str, Any]:
    """Set schedulerName and HAMi's defaults on GPU pods; deny what can never run (a
    request no node could hold, even empty) or would see every GPU of its node (a
    privileged container in a GPU pod)."""
    request = review.request
    cluster = runtime.cluster
    # Until the first sync with the API server is done the index holds only some nodes:
    # a pod the nodes still to come could hold must not be refused as too big.
    syncing = bool(runtime.not_serving())
    decision = admission.decide(
        request.object,
        vendor=cluster.vendors,
        scheduler_name=runtime.settings.scheduler_name,
        operation=request.operation,
        largest=None if syncing else lambda: largest(cluster),
    )
    return admission.response(request.uid, decision, api_version=review.apiVersion)
