"""The test API server in a process of its own, as a cluster's API server is.

:class:`FakeApiServer` runs its HTTP server in threads of the process that starts it;
a caller that is busy itself (a benchmark client) would then share one GIL with it.
``ApiServerProcess.start(nodes=..., pods=...)`` runs ``python -m
tests.support.apiserver_process`` instead: the parent sends the objects to hold as
one JSON line on the child's stdin, the child answers its URL on one line of stdout,
and serves until its stdin closes (``stop``, or the parent dying).
"""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import msgspec

from tests.support.apiserver import FakeApiServer

STOP_TIMEOUT_S = 15.0


class Seed(msgspec.Struct, frozen=True):
    """What the child holds before it serves."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    history_limit: int


class ApiServerProcess:
    """A running child API server: its URL, a way to read it, and ``stop``."""

    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self.url = url

    @classmethod
    def start(
        cls,
        *,
        nodes: Sequence[dict[str, Any]] = (),
        pods: Sequence[dict[str, Any]] = (),
        history_limit: int = 10_000,
    ) -> ApiServerProcess:
        """Start a child holding ``nodes`` and ``pods``; returns once it serves."""
        seed = Seed(nodes=list(nodes), pods=list(pods), history_limit=history_limit)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.apiserver_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],  # where ``tests`` imports from
        )
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(msgspec.json.encode(seed) + b"\n")
            process.stdin.flush()
            url = process.stdout.readline().decode().strip()
        except BaseException:
            process.kill()
            process.wait()
            raise
        if not url:
            process.stdin.close()
            raise RuntimeError(
                f"the API server process exited with {process.wait()} before serving "
                "(its error is on stderr above)"
            )
        return cls(process, url)

    def get(self, path: str) -> Any:
        """GET ``path`` and decode the JSON answer; any status but 200 raises."""
        address = urlsplit(self.url)
        connection = http.client.HTTPConnection(address.hostname or "", address.port)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:500]!r}")
        return msgspec.json.decode(body)

    def pods(self) -> list[dict[str, Any]]:
        """Every pod, in every namespace, as the server holds it now."""
        items: list[dict[str, Any]] = self.get("/api/v1/pods")["items"]
        return items

    def stop(self) -> None:
        """Close the child's stdin (its signal to stop) and wait; kill it if it hangs."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ApiServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> int:
    """The child: read the seed line, serve, print the URL, stop when stdin closes."""
    seed = msgspec.json.decode(sys.stdin.buffer.readline(), type=Seed)
    with FakeApiServer(history_limit=seed.history_limit) as api:
        for node in seed.nodes:
            api.add_node(node)
        for pod in seed.pods:
            api.add_pod(pod)
        sys.stdout.write(api.url + "\n")
        sys.stdout.flush()
        sys.stdin.buffer.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
