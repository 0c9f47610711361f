"""The vXPU node handshake (``hami.io/node-handshake-xpu``): HAMi's ``CheckHealth`` over
the vXPU registration and count resource."""

from __future__ import annotations

from vgpu_extender.vendors.hami_handshake import RegisterHandshake
from vgpu_extender.vendors.kunlun.inventory_codec import REGISTER_ANNOTATION

HANDSHAKE_ANNOTATION = "hami.io/node-handshake-xpu"


def vxpu_handshake(resource: str) -> RegisterHandshake:
    """The scheduler's side, as a ``NodeHandshake``; ``resource``: the vXPU count."""
    return RegisterHandshake(
        annotation=HANDSHAKE_ANNOTATION, resource=resource, register=REGISTER_ANNOTATION
    )
