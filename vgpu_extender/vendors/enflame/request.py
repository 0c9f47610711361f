"""Enflame asks, as HAMi's ``GenerateResourceRequests`` reads them (limits, else requests).

- ``GCU``: the count ``enflame.com/gcu`` asks for whole cards (all memory, 100 cores).
- ``Enflame`` (DRS): always one GCU, as a slice count ``enflame.com/drs-gcu`` (which
  must be a profile's size) or as ``enflame.com/gcu-memory`` (GB, or MiB when over
  twice the largest profile's GB) and ``enflame.com/gcu-core`` (percent). The ask is
  the profile it matches (``profiles``): the profile's memory in MiB and core percent.
  An ask no profile matches asks for the mode ``NO_PROFILE``, which no GCU is in:
  every node refuses it with ``ModeNotFit``, as HAMi's Fit does.

UUIDs ``enflame.com/use-gpuuuid`` / ``nouse-gpuuuid`` restrict the DRS GCUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.vendors import hami_ask, hami_pod
from vgpu_extender.vendors.enflame import profiles
from vgpu_extender.vendors.enflame.config import EnflameConfig

GCU_WORD = "GCU"
DRS_WORD = "Enflame"
USE_UUID = "enflame.com/use-gpuuuid"
AVOID_UUID = "enflame.com/nouse-gpuuuid"
NO_PROFILE = "no-drs-profile"


def read_gcu_ask(spec: hami_pod.ContainerSpec, config: EnflameConfig) -> ContainerRequest:
    return hami_ask.whole_devices(spec, config.gcu_resource, GCU_WORD)


def read_drs_ask(spec: hami_pod.ContainerSpec, config: EnflameConfig) -> ContainerRequest:
    profile: profiles.Profile | None
    slices = hami_ask.integer(spec, config.drs_resource)
    if slices > 0:
        profile = profiles.by_slices(config.profiles, slices)
    else:
        if spec.value(config.memory_resource) is None and spec.value(config.core_resource) is None:
            return hami_ask.none(spec, DRS_WORD)
        memory = hami_ask.integer(spec, config.memory_resource)
        cores = hami_ask.integer(spec, config.core_resource)
        profile = profiles.by_spec(config.profiles, memory, cores)
    if profile is None:
        return ContainerRequest(
            name=spec.name, count=1, init=spec.init, vendor=DRS_WORD, mode=NO_PROFILE
        )
    return ContainerRequest(
        name=spec.name,
        count=1,
        memory_mib=profile.memory_mib,
        cores=profile.core_percent,
        init=spec.init,
        vendor=DRS_WORD,
    )


def parse_gcu_pod(pod: Mapping[str, Any], config: EnflameConfig) -> PodRequest:
    return hami_pod.parse_pod(pod, lambda spec: read_gcu_ask(spec, config))


def parse_drs_pod(pod: Mapping[str, Any], config: EnflameConfig) -> PodRequest:
    return hami_pod.parse_pod(
        pod,
        lambda spec: read_drs_ask(spec, config),
        hami_pod.uuid_selector(USE_UUID, AVOID_UUID),
    )
