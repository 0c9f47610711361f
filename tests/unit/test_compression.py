"""gzip for large answers: when a client's Accept-Encoding allows it, and one stream."""

from __future__ import annotations

import gzip

import pytest

from vgpu_extender.api.compression import accepts_gzip, gzip_pieces


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),  # Prometheus sends "gzip"; browsers lists like this
        ("deflate, GZIP;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip;q=0.0, identity", False),
        ("gzip;q=high", False),  # a weight that is no number grants nothing
        ("deflate, br", False),
        ("identity", False),
        ("", False),
        (None, False),
        ("xgzip", False),
    ],
)
def test_gzip_only_where_the_header_allows_it(header: str | None, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


def test_the_pieces_make_one_gzip_stream_of_the_text() -> None:
    pieces = [b"# HELP a x\n", b"", b'a{node="n"} 1.0\n' * 5000, b"b 2.0\n"]

    compressed = gzip_pieces(pieces)

    assert all(compressed)  # nothing empty to send
    assert gzip.decompress(b"".join(compressed)) == b"".join(pieces)
    assert sum(map(len, compressed)) < len(b"".join(pieces)) // 20
    assert gzip.decompress(b"".join(gzip_pieces([]))) == b""
