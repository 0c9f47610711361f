"""gzip for large answers, when the client asks for it (Prometheus does).

A scrape at 10,000 nodes is over 100 MB of text that compresses about twentyfold.
zlib lets go of the interpreter while it compresses, so this costs the verbs nothing
but a core's time in the thread that answers.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

#: zlib's fastest level: the text is repetitive enough that higher levels gain little.
LEVEL = 1
#: zlib's window bits for a gzip header and trailer.
_GZIP = 16 + zlib.MAX_WBITS


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header lets the answer be gzip (not ``q=0``)."""
    for item in (accept_encoding or "").split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().lower()
        if quality.startswith("q="):
            try:
                if float(quality[2:]) <= 0.0:
                    continue
            except ValueError:
                continue  # a malformed weight grants nothing
        return True
    return False


def gzip_pieces(pieces: Iterable[bytes]) -> list[bytes]:
    """One gzip stream of ``pieces`` in order, as compressed pieces (empty ones dropped)."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, _GZIP)
    compressed = [compressor.compress(piece) for piece in pieces]
    compressed.append(compressor.flush())
    return [piece for piece in compressed if piece]
