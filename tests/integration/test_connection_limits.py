"""Connections cannot starve kube-scheduler (the extender's caps and read timeouts).

The extender and the hostile clients are ``tests.support.limited_extender``'s: a process
whose open-file limit is 1,024, hostile clients from loopback addresses other than
127.0.0.1, the scheduler's client on 127.0.0.1. The scheduler's latency under the flood is
``benchmarks/connection_flood.py``'s to measure; here every request must be answered.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.limited_extender import (
    BODY_TIMEOUT_S,
    FILE_LIMIT,
    HEADER_TIMEOUT_S,
    HEADROOM,
    KEEPALIVE_TIMEOUT_S,
    PER_CLIENT,
    filter_body,
    port_of,
    spawn_limited,
    start_flood,
)
from tests.support.server import ExtenderProcess
from vgpu_extender.serving.limits import reserved_files
from vgpu_extender.settings import Settings

pytestmark = pytest.mark.slow

#: What the extender derives from the file limit with the default pool and bind workers.
TOTAL = FILE_LIMIT - reserved_files(Settings()) - HEADROOM


#: The header timeout of the extender that ``test_connections_past_the_caps_get_503``
#: fills: connecting the total takes longer than ``HEADER_TIMEOUT_S`` on a slow machine,
#: and a held connection closed by it would free a place before the refusal is asked for.
PATIENT_HEADER_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderProcess]:
    running = spawn_limited(tmp_path_factory.mktemp("limits"), HEADER_TIMEOUT_S)
    yield running
    running.stop()
    assert "Too many open files" not in running.log.read_text()


@pytest.fixture(scope="module")
def patient_extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderProcess]:
    """The same, but whose header timeout outlasts connecting the total."""
    running = spawn_limited(tmp_path_factory.mktemp("limits-patient"), PATIENT_HEADER_TIMEOUT_S)
    yield running
    running.stop()
    assert "Too many open files" not in running.log.read_text()


def _connect(port: int, source: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(5.0)
    sock.connect(("127.0.0.1", port))
    return sock


def _read_until_close(sock: socket.socket, timeout_s: float) -> bytes:
    """What the server sends before it closes; fails if it does not close in time."""
    sock.settimeout(timeout_s)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_the_file_limit_and_caps_are_logged(extender: ExtenderProcess) -> None:
    log = extender.log.read_text()
    assert f"open-file limit {FILE_LIMIT};" in log, log
    assert f"connections: {TOTAL} in all, {PER_CLIENT} per client address" in log, log


def _filter_window(port: int, body: bytes, count: int, failures: list[str]) -> int:
    """kube-scheduler: ``count`` filters on one keep-alive connection, opened anew for
    the window (while the others fill the total); how many were answered."""
    answered = 0
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5.0)
    try:
        for index in range(count):
            try:
                connection.request(
                    "POST", "/filter", body, headers={"Content-Type": "application/json"}
                )
                response = connection.getresponse()
                answer = response.read()
            except OSError as exc:
                failures.append(f"request {index}: {exc!r}")
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5.0)
                continue
            answered += 1
            if response.status != 200 or json.loads(answer)["Error"] != "":
                failures.append(f"request {index}: {response.status} {answer[:200]!r}")
            time.sleep(0.03)
    finally:
        connection.close()
    return answered


def test_silent_and_slowloris_clients_never_reach_the_scheduler(
    extender: ExtenderProcess, tmp_path: Path
) -> None:
    """1,100 silent and 100 slowloris clients, while kube-scheduler filters: 300 filters
    over about 10 s, each answered 200 without error, and the hostile connections
    refused past the total or closed by the header timeout. (The scheduler's latency
    under the same flood: ``python -m benchmarks.connection_flood``.)"""
    port = port_of(extender)
    errors = (tmp_path / "flood.err").open("w")
    flood = start_flood(port, silent=1100, slowloris=100, duration_s=300, errors=errors)
    body = filter_body()
    failures: list[str] = []
    answered = 0
    try:
        for window in range(3):
            # The flood runs until told to stop: a window without it would pass.
            assert flood.poll() is None, f"the flood ended before window {window}"
            answered += _filter_window(port, body, 100, failures)
        assert flood.poll() is None, "the flood ended during the last window"
        flood.send_signal(signal.SIGTERM)
        out, _ = flood.communicate(timeout=30)
    finally:
        if flood.poll() is None:
            flood.kill()
            flood.wait()
        errors.close()
        print((tmp_path / "flood.err").read_text()[-2000:])
    seen = json.loads(out.strip().splitlines()[-1])

    assert failures == [], failures[:10]
    assert answered == 300
    # The flood filled the total: past it the others were refused with 503.
    assert seen["silent"]["refused"].get("total", 0) > 0, seen
    assert seen["silent"]["errors"] == {} and seen["slowloris"]["errors"] == {}, seen
    # Admitted hostile connections were closed by the header timeout, slowloris too,
    # although it kept sending.
    for kind in ("silent", "slowloris"):
        assert seen[kind]["closed"] > 0, seen
        assert seen[kind]["longest_open_s"] < HEADER_TIMEOUT_S + 1.5, seen
    assert seen["slowloris"]["bytes_before_close"] >= 1, seen
    print(f"hostile clients: {seen}")


def test_connections_past_the_caps_get_503(patient_extender: ExtenderProcess) -> None:
    port = port_of(patient_extender)
    held: list[socket.socket] = []
    try:
        # One address: its own cap.
        held.extend(_connect(port, "127.0.0.40") for _ in range(PER_CLIENT))
        # A request sent before the refusal is read is not answered with a reset.
        over = _connect(port, "127.0.0.40")
        over.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        refused = _read_until_close(over, 3.0)
        assert refused.startswith(b"HTTP/1.1 503 "), refused
        assert b"connection: close" in refused and b"x-vgpu-refused: per_client" in refused
        # Many addresses, none past its own cap: the total.
        for index in range(TOTAL):
            held.append(_connect(port, f"127.0.0.{41 + index // 60}"))
        refused = _read_until_close(_connect(port, "127.0.0.90"), 3.0)
        assert refused.startswith(b"HTTP/1.1 503 ") and b"x-vgpu-refused: total" in refused
        # kube-scheduler's address still gets in, within its headroom.
        scheduler = http.client.HTTPConnection("127.0.0.1", port, timeout=5.0)
        scheduler.request("POST", "/filter", filter_body())
        response = scheduler.getresponse()
        assert response.status == 200, response.read()
        assert json.loads(response.read())["Error"] == ""
        scheduler.close()
    finally:
        for sock in held:
            sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(
    extender: ExtenderProcess,
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port_of(extender), timeout=5.0)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    assert response.status == 200 and response.read()
    assert connection.sock is not None
    started = time.monotonic()
    assert _read_until_close(connection.sock, KEEPALIVE_TIMEOUT_S + 3.0) == b""
    # The keep-alive timeout closed it, not the (shorter) header timeout.
    assert time.monotonic() - started > HEADER_TIMEOUT_S + 0.5
    connection.close()


def test_a_body_that_does_not_arrive_in_time_closes_the_connection(
    extender: ExtenderProcess,
) -> None:
    sock = _connect(port_of(extender), "127.0.0.1")
    sock.sendall(b'POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"Pod":')
    started = time.monotonic()
    assert _read_until_close(sock, BODY_TIMEOUT_S + 3.0) == b""
    assert time.monotonic() - started > BODY_TIMEOUT_S - 0.5
    sock.close()
