"""Which failures leave a request's outcome unknown (it may have been applied), and
which are the server's definite refusal."""

from __future__ import annotations

import http.client
import socket
from typing import Any

import pytest
import urllib3

from vgpu_extender.kube import AlreadyBound, KubeError, OutcomeUnknown
from vgpu_extender.kube.connections import ConnectFailed
from vgpu_extender.kube.errors import error_from_status, with_context
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.kube.real import transport_error

TIMEOUT = "Timeout: request did not complete within requested timeout - context deadline exceeded"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (504, "Timeout", TIMEOUT),
        (504, "", "gateway timeout"),
        (502, "", "bad gateway"),
        (500, "ServerTimeout", "the server cannot complete the requested operation at this time"),
        (500, "InternalError", "Internal error occurred: etcdserver: request timed out"),
        (500, "InternalError", "context deadline exceeded"),
        (503, "ServiceUnavailable", "request did not complete"),
    ],
    ids=["504", "504-bare", "502", "server-timeout", "etcd-timed-out", "deadline", "503-timeout"],
)
def test_the_servers_timeouts_leave_the_outcome_unknown(
    code: int, reason: str, message: str
) -> None:
    error = error_from_status(_status(code, reason, message), http_status=code, context="bind pod")
    assert isinstance(error, OutcomeUnknown)
    assert error.status == code
    assert error.message == f"bind pod: {message}"


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (409, "Conflict", 'pod web is already assigned to node "gpu-2"'),
        (409, "Conflict", "Precondition failed: UID in precondition: a, UID in object meta: b"),
        (404, "NotFound", 'pods "web" not found'),
        (422, "Invalid", "target.name: Required value"),
        (403, "Forbidden", "pods/binding is forbidden"),
        (429, "TooManyRequests", "too many requests, retry later"),
        (500, "InternalError", "etcd is down"),
        (503, "ServiceUnavailable", "the server is shutting down"),
    ],
    ids=["409", "uid-409", "404", "422", "403", "429", "500", "503"],
)
def test_definite_refusals_are_failures(code: int, reason: str, message: str) -> None:
    error = error_from_status(_status(code, reason, message), http_status=code, context="bind pod")
    assert not isinstance(error, OutcomeUnknown)
    assert isinstance(error, KubeError)


def test_a_status_less_answer_is_classified_by_its_http_code() -> None:
    assert isinstance(error_from_status(None, http_status=504, context="c"), OutcomeUnknown)
    assert not isinstance(error_from_status(None, http_status=500, context="c"), OutcomeUnknown)


def test_context_keeps_an_unknown_outcome_without_a_status() -> None:
    error = with_context(OutcomeUnknown("connection reset"), "bind pod default/web")
    assert isinstance(error, OutcomeUnknown)
    assert error.status is None
    assert error.message == "bind pod default/web: connection reset"


_POOL = urllib3.HTTPConnectionPool("127.0.0.1", 1)


@pytest.mark.parametrize(
    "exc",
    [
        ConnectFailed("cannot connect to http://127.0.0.1:1: refused"),
        ConnectionRefusedError(111, "Connection refused"),
        socket.gaierror(-2, "Name or service not known"),
        urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection"),
        urllib3.exceptions.ConnectTimeoutError(None, "connect timed out"),
        urllib3.exceptions.MaxRetryError(
            _POOL, "/x", urllib3.exceptions.NewConnectionError(None, "refused")
        ),
    ],
    ids=["connect-failed", "refused", "dns", "new-connection", "connect-timeout", "retries"],
)
def test_no_connection_is_a_definite_failure(exc: BaseException) -> None:
    error = transport_error(exc, "bind pod default/web")
    assert not isinstance(error, OutcomeUnknown)
    assert error.status is None
    assert error.message.startswith("bind pod default/web: ")


@pytest.mark.parametrize(
    "exc",
    [
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
        BrokenPipeError(32, "Broken pipe"),
        urllib3.exceptions.ReadTimeoutError(_POOL, "/x", "Read timed out."),
        urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)),
        urllib3.exceptions.MaxRetryError(
            _POOL, "/x", urllib3.exceptions.ReadTimeoutError(_POOL, "/x", "Read timed out.")
        ),
    ],
    ids=["closed", "reset", "read-timeout", "broken-pipe", "urllib3-read", "aborted", "retries"],
)
def test_no_answer_once_sent_leaves_the_outcome_unknown(exc: BaseException) -> None:
    error = transport_error(exc, "bind pod default/web")
    assert isinstance(error, OutcomeUnknown)
    assert error.status is None
    assert "no answer to a request sent" in error.message


def test_the_fake_applies_a_binding_then_loses_its_answer() -> None:
    kube = FakeKubeClient()
    kube.add_pod({"metadata": {"name": "web", "namespace": "default", "uid": "u-1"}, "spec": {}})
    kube.lose_answer_next()
    with pytest.raises(OutcomeUnknown, match="bind pod default/web to node gpu-1"):
        kube.bind_pod("default", "web", "u-1", "gpu-1", annotations={"a": "b"})
    pod = kube.get_pod("default", "web")
    assert pod is not None
    assert pod["spec"]["nodeName"] == "gpu-1"
    assert pod["metadata"]["annotations"] == {"a": "b"}
    # Sent again, the Binding finds the pod bound (the loss was used up).
    with pytest.raises(AlreadyBound) as refused:
        kube.bind_pod("default", "web", "u-1", "gpu-1")
    assert refused.value.node == "gpu-1"


@pytest.mark.parametrize(("window", "accepted"), [(0.0, True), (10.0, True), (10.5, False)])
def test_the_read_back_window_stays_within_kube_schedulers_timeout(
    window: float, accepted: bool
) -> None:
    """15 s of Binding read timeout plus the window must stay under the 30 s httpTimeout."""
    from pydantic import ValidationError

    from vgpu_extender.settings import Settings

    if accepted:
        assert Settings(bind_check_window_s=window).bind_check_window_s == window
    else:
        with pytest.raises(ValidationError, match="bind_check_window_s"):
            Settings(bind_check_window_s=window)
