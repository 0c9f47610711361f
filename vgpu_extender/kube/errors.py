"""Errors raised at the Kubernetes seam.

Every implementation of :class:`~vgpu_extender.kube.client.KubeClient` raises these and
nothing else, so callers never see the ``kubernetes`` package's exception types. The
HTTP status and reason of the API server's ``Status`` object are kept so a caller can
log what the server said. Names follow the server's ``Status.reason`` vocabulary
(``NotFound``, ``Conflict``) rather than an ``Error`` suffix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The API server's wording for a pod that already has spec.nodeName; the node is quoted.
_ALREADY_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')
_UID_PRECONDITION = "UID in precondition"
# What the API server says when it gave up waiting on a request it may still complete
# (its handler timeout, an etcd request that timed out, a deadline passed).
_TIMED_OUT = re.compile(r"did not complete|timed out|deadline exceeded|timeout", re.IGNORECASE)
#: Status reasons of a request the server stopped waiting for, not one it refused.
_TIMEOUT_REASONS = frozenset({"Timeout", "ServerTimeout"})


class KubeError(Exception):
    """A call to the Kubernetes API failed.

    ``status`` is the HTTP status (``None`` when no answer came: connection refused,
    timeout), ``reason`` the ``Status.reason`` word (``NotFound``, ``Conflict``...).
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class OutcomeUnknown(KubeError):  # noqa: N818
    """The request went out but no definite answer came back: it may have been applied.

    No answer at all once the request was sent (the connection reset or closed, the
    read timed out), or the server's own timeout (HTTP 504, ``Timeout`` or
    ``ServerTimeout``, "request did not complete"). A write that ends so must be read
    back before anything is undone: kube-scheduler's own rule, an unknown outcome is
    not a failure. A refusal with a definite status (403, 404, 409, 422...) is never
    this.
    """


class NotFound(KubeError):  # noqa: N818
    """The object does not exist (HTTP 404)."""


class Conflict(KubeError):  # noqa: N818
    """A precondition failed (HTTP 409): stale resourceVersion, UID mismatch, already exists."""


class AlreadyBound(Conflict):
    """The pod already has a node (HTTP 409 on ``pods/binding``).

    ``node`` is the node it is bound to, when the server said so; a caller that bound
    the pod itself and timed out can compare it with the node it asked for.
    """

    def __init__(
        self, message: str, *, node: str | None = None, status: int | None = 409, reason: str = ""
    ) -> None:
        super().__init__(message, status=status, reason=reason or "Conflict")
        self.node = node


class UidMismatch(Conflict):
    """The object by that name has another UID: the pod was deleted and created again."""


class WatchExpired(KubeError):  # noqa: N818
    """The watch's resourceVersion is too old (HTTP 410 Gone): list again, then watch."""


class NodeLockContention(KubeError):  # noqa: N818
    """Another pod holds one of the node's locks (``hami.io/mutex.lock``, or a vendor's own
    such as ``cambricon.com/dsmlu.lock``) and the lock is not stale."""


class MalformedObject(ValueError):  # noqa: N818
    """A Kubernetes object has a field of the wrong type; names the field and the value."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"field {field!r} should be {expected}, got {value!r}")
        self.field = field
        self.value = value


def error_from_status(
    status: Mapping[str, Any] | None, *, http_status: int | None, context: str
) -> KubeError:
    """Turn an API server ``Status`` body (or its absence) into the matching error.

    ``context`` says what was being done (``"bind pod default/web-0"``) and leads the
    message, so the error names the object even when the server's message does not.
    """
    status = status or {}
    code = status.get("code") if isinstance(status.get("code"), int) else http_status
    reason = str(status.get("reason") or "")
    server_message = str(status.get("message") or reason or f"HTTP {code}")
    message = f"{context}: {server_message}"
    if code == 404:
        return NotFound(message, status=code, reason=reason)
    if code == 410:
        return WatchExpired(message, status=code, reason=reason)
    if code == 409:
        if _UID_PRECONDITION in server_message:
            return UidMismatch(message, status=code, reason=reason)
        assigned = _ALREADY_ASSIGNED.search(server_message)
        if assigned is not None:
            return AlreadyBound(message, node=assigned.group(1), status=code, reason=reason)
        return Conflict(message, status=code, reason=reason)
    if outcome_unknown_status(code, reason, server_message):
        return OutcomeUnknown(message, status=code, reason=reason)
    return KubeError(message, status=code, reason=reason)


def outcome_unknown_status(code: int | None, reason: str, message: str) -> bool:
    """Whether an answer with this status leaves open whether the request was applied.

    504 always (the server's timeout, or a gateway's); 502 (a gateway that lost the
    server's answer); 500 and 503 only when the server says it timed out. Every other
    status is the server's definite word.
    """
    if code in (502, 504) or reason in _TIMEOUT_REASONS:
        return True
    return code in (500, 503) and _TIMED_OUT.search(message) is not None


def as_binding_error(error: KubeError) -> KubeError:
    """On ``pods/binding`` a bare 409 can only mean the pod is bound already."""
    if type(error) is Conflict:
        return AlreadyBound(error.message, node=None, status=error.status, reason=error.reason)
    return error


def with_context(error: KubeError, context: str) -> KubeError:
    """The same error as it reads through the real client: context first, then the server."""
    if error.status is None and isinstance(error, OutcomeUnknown):  # no answer: no Status
        return OutcomeUnknown(f"{context}: {error.message}", reason=error.reason)
    status = {"code": error.status, "reason": error.reason, "message": error.message}
    return error_from_status(status, http_status=error.status, context=context)
