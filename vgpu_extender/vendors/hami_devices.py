"""HAMi's pod device encoding, shared by its vendors (``EncodePodSingleDevice`` and
``DecodePodDevices``), and Go's JSON string spelling.

Per container (init containers first) each device is ``uuid,type,usedmem,usedcores:``
and the container ends with ``;``; a container without devices keeps its empty segment,
so positions line up with the pod's containers. ``type`` is the vendor's word (NVIDIA,
an Ascend chip's CommonWord), kept in each grant's ``vendor``.

HAMi's decoder reads a bad number as 0 and skips short entries, which would turn a
corrupt annotation into a wrong usage count; here it raises ``AnnotationError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from vgpu_extender.domain import AnnotationError, DeviceGrant
from vgpu_extender.vendors import gostrconv

_SEPARATORS = frozenset(",:;")
INT32_MAX = 2**31 - 1
#: Go's encoding/json escapes these even inside strings, for safe embedding in HTML.
_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def encode_containers(containers: Iterable[Sequence[DeviceGrant]], *, vendor: str) -> str:
    """Grants per container as HAMi writes them; a grant with an empty ``vendor`` is
    written with ``vendor``."""
    parts: list[str] = []
    for position, grants in enumerate(containers):
        for grant in grants:
            word = grant.vendor or vendor
            _check_grant(position, grant, word)
            parts.append(f"{grant.uuid},{word},{grant.memory_mib},{grant.cores}:")
        parts.append(";")
    return "".join(parts)


def decode_containers(
    value: str, *, init: tuple[bool, ...] = ()
) -> tuple[tuple[DeviceGrant, ...], ...]:
    """Grants per container. With ``init`` (one flag per container of the pod) the value
    must have exactly that many container segments."""
    if not isinstance(value, str):
        raise AnnotationError("device annotation must be a string", value=value)
    text = value.strip()
    segments = text.split(";") if text else []
    if segments and segments[-1] == "":
        segments.pop()  # the ';' that closes the last container
    if init and len(segments) != len(init):
        raise AnnotationError(
            f"device annotation has {len(segments)} container segment(s) "
            f"but the pod has {len(init)} container(s)",
            value=value,
        )
    return tuple(_decode_segment(position, segment) for position, segment in enumerate(segments))


def go_json_string(text: str) -> str:
    """A JSON string as Go's encoding/json writes it (UTF-8 kept, HTML characters escaped)."""
    encoded = json.dumps(text, ensure_ascii=False)
    if any(char in encoded for char in _GO_ESCAPES):
        encoded = "".join(_GO_ESCAPES.get(char, char) for char in encoded)
    return encoded


def _decode_segment(position: int, segment: str) -> tuple[DeviceGrant, ...]:
    grants: list[DeviceGrant] = []
    seen: set[str] = set()
    for entry in segment.split(":"):
        if not entry:
            continue  # the ':' that closes the last device
        fields = entry.split(",")
        if len(fields) < 4:
            raise AnnotationError(
                f"container #{position}: device entry needs uuid,type,usedmem,usedcores "
                f"(at least 4 comma-separated fields), got {len(fields)}",
                value=entry,
            )
        uuid, word = fields[0], fields[1]
        if not uuid or uuid != uuid.strip():
            raise AnnotationError(
                f"container #{position}: device uuid is empty or padded", value=entry
            )
        if not word:
            raise AnnotationError(f"container #{position}: device type is empty", value=entry)
        if uuid in seen:
            raise AnnotationError(
                f"container #{position}: device {uuid!r} is listed twice", value=segment
            )
        seen.add(uuid)
        grants.append(
            DeviceGrant(
                uuid=uuid,
                memory_mib=_number(position, entry, fields[2], "memory"),
                cores=_number(position, entry, fields[3], "cores"),
                vendor=word,
            )
        )
    return tuple(grants)


def _number(position: int, entry: str, text: str, name: str) -> int:
    try:
        number = gostrconv.parse_int(text, bits=32)
    except ValueError:
        raise AnnotationError(
            f"container #{position}: device {name} must be an integer, got {text!r}", value=entry
        ) from None
    if number < 0:
        raise AnnotationError(
            f"container #{position}: device {name} must not be negative, got {number}", value=entry
        )
    return number


def _check_grant(position: int, grant: DeviceGrant, vendor: str) -> None:
    where = f"container #{position}"
    for name, text in (("uuid", grant.uuid), ("vendor", vendor)):
        if not isinstance(text, str) or not text or _SEPARATORS.intersection(text):
            raise AnnotationError(
                f"{where}: grant {name} must be non-empty and free of ',', ':' and ';'", value=text
            )
    for name, number in (("memory_mib", grant.memory_mib), ("cores", grant.cores)):
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= INT32_MAX:
            raise AnnotationError(
                f"{where}: grant {name} of {grant.uuid!r} must be an integer in 0..{INT32_MAX}",
                value=number,
            )
