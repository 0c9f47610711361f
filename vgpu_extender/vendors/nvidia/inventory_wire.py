"""The inventory annotation's JSON shape, decoded and type-checked in C by msgspec.

Apart from ``inventory_codec`` so that importing the codec (the node agent encodes
only) does not load msgspec.
"""

from __future__ import annotations

import msgspec

__all__ = ["WIRE_DEVICES", "WireDevice"]


class WireDevice(msgspec.Struct):
    """One device as the plugin writes it; the types checked while decoding (a bool is
    not an int, as in Go), the bounds and the id afterwards."""

    id: str
    index: int | None = None
    count: int | None = None
    devmem: int | None = None
    devcore: int | None = None
    type: str | None = None
    numa: int | None = None
    mode: str | None = None
    health: bool | None = None


#: The common case decoded and type-checked in C: thousands of Node objects can arrive
#: in one scheduling request (``nodeCacheCapable: false``).
WIRE_DEVICES = msgspec.json.Decoder(list[WireDevice] | None)
