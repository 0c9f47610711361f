"""AMD's node inventory: ``hami.io/node-amd-register``, HAMi's ``DeviceInfo`` JSON as
the amd-device-plugin writes it. HAMi has no handshake for AMD: a node's GPUs are
usable while its capacity ``amd.com/gpu`` is positive (``node_healthy``, for the seam
that reads capacity)."""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import quantity_to_int

REGISTER_ANNOTATION = "hami.io/node-amd-register"


def node_healthy(capacity: Mapping[str, str], resource: str) -> bool:
    """Whether the node's capacity of ``resource`` (``amd.com/gpu``) is positive; an
    absent or unreadable value is not."""
    raw = capacity.get(resource)
    if raw is None:
        return False
    try:
        return quantity_to_int(raw, field=resource) > 0
    except RequestError:
        return False
