"""Hygon DCUs on a node: ``hami.io/node-dcu-register`` in HAMi's legacy text, as the
DCU plugin writes it (``DCU-<serial>,4,<MiB>,100,DCU-<model>,0,true,<index>,hami:``:
four vDCUs per card), and the handshake ``hami.io/node-handshake-dcu`` the plugin
answers with ``"Reported " + time.String()``."""

from __future__ import annotations

from collections.abc import Iterable

from vgpu_extender.domain import Device
from vgpu_extender.vendors import hami_node_csv
from vgpu_extender.vendors.hygon.config import WORD

REGISTER_ANNOTATION = "hami.io/node-dcu-register"
HANDSHAKE_ANNOTATION = "hami.io/node-handshake-dcu"


def decode_inventory(value: str) -> tuple[Device, ...]:
    return hami_node_csv.decode_devices(value, vendor=WORD)


def encode_inventory(devices: Iterable[Device]) -> str:
    return hami_node_csv.encode_devices(devices)
