"""Hostile clients for the connection-limit test, in a process of their own.

``python -m tests.support.connection_flood HOST PORT --silent N --slowloris M
--duration S``: keeps N silent connections (they connect and send nothing) and M
slowloris ones (a header byte a second, the head never ends) open to HOST:PORT for S
seconds at most (SIGTERM stops it sooner), each from source addresses
127.0.0.2 and up, so none is 127.0.0.1. A connection the server closes is opened
again after ``--retry-s``, as an attacker would. It runs at a lower CPU priority:
the server's latency is what is measured.
Prints ``ready`` once every connection was attempted, and at the end one JSON line
of what it saw per kind: connections admitted then closed by the server, still
open at the end, refusals (503) by reason, the longest an admitted connection stayed
open, and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import uvloop

#: The slowloris head: a request line and headers that never end, one byte a second.
STILL_OPEN = b"<still open>"
SLOW_HEAD = b"POST /filter HTTP/1.1\r\nHost: extender\r\nX-Padding: " + b"a" * 4096


@dataclass
class Seen:
    #: Admitted, then closed by the server.
    closed: int = 0
    #: Admitted and still open when the run ended.
    still_open: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    longest_open_s: float = 0.0
    bytes_before_close: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def _source(kind_base: int, index: int, per_address: int) -> str:
    return f"127.0.0.{kind_base + index // per_address}"


async def _one(host: str, port: int, source: str, slow: bool, seen: Seen, retry_s: float) -> None:
    """One hostile client, connecting again whenever the server closes it, until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        opened: float | None = None
        try:
            sock.bind((source, 0))
            await asyncio.wait_for(loop.sock_connect(sock, (host, port)), 5.0)
            opened = time.monotonic()
            answer, sent = await _hold(loop, sock, slow)
            lived, opened = time.monotonic() - opened, None
            if answer.startswith(b"HTTP/1.1 503"):
                reason = b"?"
                for line in answer.split(b"\r\n"):
                    if line.lower().startswith(b"x-vgpu-refused:"):
                        reason = line.split(b":", 1)[1].strip()
                seen.refused[reason.decode()] += 1
            elif answer == b"":
                seen.closed += 1
                seen.longest_open_s = max(seen.longest_open_s, lived)
                seen.bytes_before_close = max(seen.bytes_before_close, sent)
            else:
                seen.errors[f"answer {answer[:40]!r}"] += 1
        except (OSError, TimeoutError) as exc:
            seen.errors[type(exc).__name__] += 1
        except asyncio.CancelledError:
            if opened is not None:
                seen.still_open += 1
            raise
        finally:
            if opened is not None:
                seen.longest_open_s = max(seen.longest_open_s, time.monotonic() - opened)
            sock.close()
        await asyncio.sleep(retry_s)


async def _hold(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, slow: bool
) -> tuple[bytes, int]:
    """Until the server answers or closes: what it sent, and the bytes sent to it."""
    sent = 0
    while True:
        try:
            if slow:
                data = await asyncio.wait_for(loop.sock_recv(sock, 4096), 1.0)
            else:
                data = await loop.sock_recv(sock, 4096)
        except TimeoutError:
            await loop.sock_sendall(sock, SLOW_HEAD[sent : sent + 1])
            sent += 1
            continue
        except ConnectionResetError:
            return b"", sent
        if not data:
            return b"", sent
        # An answer: read it to its end (the server closes after a refusal).
        while len(data) < 4096:
            try:
                more = await asyncio.wait_for(loop.sock_recv(sock, 4096), 2.0)
            except (TimeoutError, ConnectionResetError):
                break
            if not more:
                break
            data += more
        return data, sent


async def _run(options: argparse.Namespace) -> dict[str, object]:
    seen = {"slowloris": Seen(), "silent": Seen()}
    tasks = []
    # Slowloris first, so that they are admitted before the silent ones fill the total.
    for kind, count, base in (("slowloris", options.slowloris, 100), ("silent", options.silent, 2)):
        for index in range(count):
            source = _source(base, index, options.per_address)
            client = _one(
                options.host, options.port, source, kind == "slowloris", seen[kind], options.retry_s
            )
            tasks.append(asyncio.create_task(client))
            if index % 50 == 49:
                await asyncio.sleep(0)  # let the connects go out
    await asyncio.sleep(0.5)
    print("ready", flush=True)
    # Until the duration is over, or SIGTERM says stop (a signal reaches the loop itself,
    # whatever else the process is doing).
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), options.duration)
    # Cancelled until done: Python 3.11's ``wait_for`` drops a cancellation that comes
    # as the awaited receive completes, and that client would go on reconnecting.
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    return {
        kind: {
            "closed": s.closed,
            "still_open": s.still_open,
            "refused": dict(s.refused),
            "longest_open_s": round(s.longest_open_s, 3),
            "bytes_before_close": s.bytes_before_close,
            "errors": dict(s.errors),
        }
        for kind, s in seen.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--silent", type=int, default=1100)
    parser.add_argument("--slowloris", type=int, default=100)
    parser.add_argument("--per-address", type=int, default=50)
    parser.add_argument("--duration", type=float, default=12.0)
    parser.add_argument("--retry-s", type=float, default=1.0)
    options = parser.parse_args()
    if not options.host.startswith("127."):
        sys.exit("loopback only")
    # The server's latency is what is measured: these clients yield the CPU to it.
    os.nice(10)
    print(json.dumps(uvloop.run(_run(options))), flush=True)


if __name__ == "__main__":
    main()
