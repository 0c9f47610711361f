"""``POST /webhook``: the mutating admission webhook (AdmissionReview v1).

A malformed review is a 422 naming the field; every well-formed one gets HTTP 200 and
the decision inside the review, as the API server expects.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

from typing import Any

from fastapi import APIRouter

from vgpu_extender.api.schemas import AdmissionReviewIn, AdmissionReviewOut
from vgpu_extender.api.verbs import RuntimeDep
from vgpu_extender.services import admission

router = APIRouter(tags=["webhook"])


@router.post(
    "/webhook",
    response_model=AdmissionReviewOut,
    response_model_exclude_none=True,
)
def webhook(review: AdmissionReviewIn, runtime: RuntimeDep) -> dict[str, Any]:
    """Set schedulerName and HAMi's defaults on GPU pods; deny what can never run."""
    request = review.request
    decision = admission.decide(
        request.object,
        vendor=runtime.cluster.vendor,
        scheduler_name=runtime.settings.scheduler_name,
        operation=request.operation,
    )
    return admission.response(request.uid, decision, api_version=review.apiVersion)
