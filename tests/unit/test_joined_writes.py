"""JoinedWrites: a cycle's writes of one event-loop turn reach the connection together."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from vgpu_extender.serving.joined_writes import JoinedWrites
from vgpu_extender.serving.limits import connection_limits
from vgpu_extender.settings import Settings


class RecordingTransport(asyncio.Transport):
    """The connection's side of the seam: what reached it, call by call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[bytes]]] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.calls.append(("write", [bytes(data)]))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self.calls.append(("writelines", [bytes(d) for d in list_of_data]))

    def write_eof(self) -> None:
        self.calls.append(("write_eof", []))

    def close(self) -> None:
        self.calls.append(("close", []))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", []))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 5555)}.get(name, default)


async def _next_turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_a_head_and_its_body_leave_in_one_call() -> None:
    asyncio.run(_a_head_and_its_body_leave_in_one_call())


async def _a_head_and_its_body_leave_in_one_call() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.calls == []  # held for the body
    writes.write(b"{}")
    assert transport.calls == [
        ("writelines", [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", b"{}"])
    ]
    await _next_turn()
    assert len(transport.calls) == 1  # nothing left over for the turn's end


def test_a_lone_write_leaves_when_the_turn_ends() -> None:
    asyncio.run(_a_lone_write_leaves_when_the_turn_ends())


async def _a_lone_write_leaves_when_the_turn_ends() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert transport.calls == []
    await _next_turn()
    assert transport.calls == [("write", [b"HTTP/1.1 100 Continue\r\n\r\n"])]


def test_writes_keep_their_order_across_turns() -> None:
    asyncio.run(_writes_keep_their_order_across_turns())


async def _writes_keep_their_order_across_turns() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    for part in (b"a", b"b", b"c"):
        writes.write(part)
    await _next_turn()
    writes.write(b"d")
    writes.writelines([b"e", b"f"])
    writes.writelines([b"g"])
    await _next_turn()
    sent = b"".join(b"".join(parts) for _, parts in transport.calls)
    assert sent == b"abcdefg"
    assert transport.calls[:2] == [("writelines", [b"a", b"b"]), ("write", [b"c"])]


def test_a_buffer_the_caller_reuses_is_held_as_it_was() -> None:
    asyncio.run(_a_buffer_the_caller_reuses_is_held_as_it_was())


async def _a_buffer_the_caller_reuses_is_held_as_it_was() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    buffer = bytearray(b"head")
    writes.write(buffer)
    buffer[:] = b"XXXX"
    writes.write(b"body")
    assert transport.calls == [("writelines", [b"head", b"body"])]


def test_closing_sends_what_is_held_first() -> None:
    asyncio.run(_closing_sends_what_is_held_first())


async def _closing_sends_what_is_held_first() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"head")
    writes.close()
    assert transport.calls == [("write", [b"head"]), ("close", [])]
    assert writes.is_closing()
    await _next_turn()
    assert len(transport.calls) == 2  # not sent twice


def test_write_eof_sends_what_is_held_first() -> None:
    asyncio.run(_write_eof_sends_what_is_held_first())


async def _write_eof_sends_what_is_held_first() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"head")
    writes.write_eof()
    assert transport.calls == [("write", [b"head"]), ("write_eof", [])]


def test_nothing_is_written_to_a_connection_already_closing() -> None:
    asyncio.run(_nothing_is_written_to_a_connection_already_closing())


async def _nothing_is_written_to_a_connection_already_closing() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"head")
    transport.closing = True  # the client went away meanwhile
    await _next_turn()
    assert transport.calls == []


def test_abort_drops_what_is_held() -> None:
    asyncio.run(_abort_drops_what_is_held())


async def _abort_drops_what_is_held() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    writes.write(b"head")
    writes.abort()
    await _next_turn()
    assert transport.calls == [("abort", [])]


def test_the_connection_answers_for_itself() -> None:
    asyncio.run(_the_connection_answers_for_itself())


async def _the_connection_answers_for_itself() -> None:
    transport = RecordingTransport()
    writes = JoinedWrites(transport, asyncio.get_running_loop())
    assert writes.get_extra_info("peername") == ("127.0.0.1", 5555)
    assert writes.get_extra_info("socket", "none") == "none"
    writes.write(b"12345")
    assert writes.get_write_buffer_size() == 7 + 5  # what the connection holds and this


class Connection(RecordingTransport):
    """What uvicorn's protocol also asks of a connection (flow control, addresses)."""

    def get_extra_info(self, name: str, default: object = None) -> object:
        known = {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 80)}
        return known.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def test_serve_s_protocol_sends_an_answer_in_one_call() -> None:
    asyncio.run(_serve_s_protocol_sends_an_answer_in_one_call())


async def _serve_s_protocol_sends_an_answer_in_one_call() -> None:
    options = connection_limits(Settings(kube_mode="off")).uvicorn_options()
    config = uvicorn.Config(_answer, lifespan="off", log_level="warning", **options)
    config.load()
    protocol = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}
    )
    connection = Connection()
    protocol.connection_made(connection)
    request = b"POST /filter HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"
    for _ in range(2):  # two requests, one after the other, on one connection
        connection.calls.clear()
        protocol.data_received(request)
        for _ in range(5):
            await asyncio.sleep(0)
        [(call, parts)] = connection.calls
        assert call == "writelines"
        assert parts[0].startswith(b"HTTP/1.1 200 OK\r\n")
        assert parts[0].endswith(b"\r\n\r\n")
        assert parts[1:] == [b"{}"]
    protocol.connection_lost(None)
