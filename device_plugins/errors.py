"""The error an ``Allocate`` answers with; its ``code`` becomes the gRPC status."""

from __future__ import annotations

from typing import ClassVar


class AllocationError(Exception):
    """Kubelet's ``Allocate`` cannot be served; the message is what kubelet shows."""

    NOT_FOUND: ClassVar[str] = "not_found"
    INVALID: ClassVar[str] = "invalid"
    UNAVAILABLE: ClassVar[str] = "unavailable"
    FAILED: ClassVar[str] = "failed"

    def __init__(self, message: str, *, code: str = FAILED) -> None:
        super().__init__(message)
        self.code = code
