"""Kunlunxin asks, as HAMi's ``GenerateResourceRequests`` reads them (limits, else
requests).

- ``kunlun``: the count ``kunlunxin.com/xpu`` asks for whole XPUs (all memory, 100 cores).
- ``XPU``: the count ``kunlunxin.com/vxpu`` and ``kunlunxin.com/vxpu-memory`` (MiB),
  rounded up to a quarter, half or whole card (24576, 49152, 98304 MiB), with cores in
  proportion (25, 50, 100); no memory asks for the whole card. Over a card is a
  ``RequestError``.

UUIDs: ``hami.io/use-xpu-uuid`` / ``hami.io/no-use-xpu-uuid`` and
``baidu.com/use-gpuuuid`` / ``baidu.com/nouse-gpuuuid``, both pairs read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, DeviceSelector, PodRequest, RequestError
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.kunlun.config import KunlunConfig

WHOLE_WORD = "kunlun"
VXPU_WORD = "XPU"
CARD_MIB = 98304
TEMPLATES = (24576, 49152, 98304)
USE_UUIDS = ("hami.io/use-xpu-uuid", "baidu.com/use-gpuuuid")
AVOID_UUIDS = ("hami.io/no-use-xpu-uuid", "baidu.com/nouse-gpuuuid")


def round_memory(memory_mib: int) -> int | None:
    """The template a vXPU ask of ``memory_mib`` takes (0: the whole card); None when it
    is over a card."""
    if memory_mib <= 0:
        return CARD_MIB
    return next((t for t in TEMPLATES if memory_mib <= t), None)


def cores_of(memory_mib: int) -> int:
    return memory_mib * 100 // CARD_MIB


def read_whole_ask(spec: hami_pod.ContainerSpec, config: KunlunConfig) -> ContainerRequest:
    return hami_ask.whole_devices(spec, config.count_resource, WHOLE_WORD)


def read_vxpu_ask(spec: hami_pod.ContainerSpec, config: KunlunConfig) -> ContainerRequest:
    count = hami_ask.integer(spec, config.vcount_resource)
    if count == 0:
        return hami_ask.none(spec, VXPU_WORD)
    memory = round_memory(hami_ask.integer(spec, config.vmemory_resource))
    if memory is None:
        raise RequestError(
            f"vXPU memory must be at most a card's {CARD_MIB} MiB",
            container=spec.name,
            field=config.vmemory_resource,
            value=spec.value(config.vmemory_resource),
        )
    return ContainerRequest(
        name=spec.name,
        count=count,
        memory_mib=memory,
        cores=cores_of(memory),
        init=spec.init,
        vendor=VXPU_WORD,
    )


def read_selector(annotations: Mapping[str, Any]) -> DeviceSelector:
    def merged(keys: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(u for key in keys for u in hami_pod.listed(annotations, key)))

    return DeviceSelector(use_uuids=merged(USE_UUIDS), avoid_uuids=merged(AVOID_UUIDS))


def parse_whole_pod(pod: Mapping[str, Any], config: KunlunConfig) -> PodRequest:
    return hami_pod.parse_pod(pod, lambda spec: read_whole_ask(spec, config), read_selector)


def parse_vxpu_pod(pod: Mapping[str, Any], config: KunlunConfig) -> PodRequest:
    return hami_pod.parse_pod(pod, lambda spec: read_vxpu_ask(spec, config), read_selector)
