"""AWS Neuron asks, as HAMi's ``GenerateResourceRequests`` reads them (limits, else
requests).

- ``aws.amazon.com/neuron: n`` asks for ``n`` whole devices (``cores == 0``, HAMi's
  "whole device" core request);
- else ``aws.amazon.com/neuroncore: c``: up to a device's cores (2), one device with
  ``c`` cores; more, a multiple of 2, as ``c / 2`` devices of 2 cores each; any other
  count is refused with HAMi's ``must be 1 or a multiple of 2`` text.

``cores > 0`` marks an ask by cores: its ``AWS_NEURON_IDS`` name cores, not devices.
UUIDs ``aws.amazon.com/use-neuron-uuid`` / ``nouse-neuron-uuid`` restrict the devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import ContainerRequest, PodRequest, RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors import hami_pod
from vgpu_extender.vendors.awsneuron.config import CORES_PER_DEVICE, NeuronConfig

WORD = "AWSNeuron"
USE_UUID = "aws.amazon.com/use-neuron-uuid"
AVOID_UUID = "aws.amazon.com/nouse-neuron-uuid"


def read_ask(spec: hami_pod.ContainerSpec, config: NeuronConfig) -> ContainerRequest:
    none = ContainerRequest(name=spec.name, init=spec.init, vendor=WORD)
    raw = spec.value(config.count_resource)
    if raw is not None:
        count = quantity_to_int(raw, field=config.count_resource, container=spec.name)
        if count == 0:
            return none
        return ContainerRequest(name=spec.name, count=count, init=spec.init, vendor=WORD)
    raw = spec.value(config.core_resource)
    if raw is None:
        return none
    cores = quantity_to_int(raw, field=config.core_resource, container=spec.name)
    if cores == 0:
        return none
    if cores <= CORES_PER_DEVICE:
        return ContainerRequest(name=spec.name, count=1, cores=cores, init=spec.init, vendor=WORD)
    if cores % CORES_PER_DEVICE:
        error = RequestError(
            f"{config.core_resource} must be 1 or a multiple of {CORES_PER_DEVICE}, got {cores}"
        )
        error.container, error.field, error.value = spec.name, config.core_resource, raw
        raise error
    return ContainerRequest(
        name=spec.name,
        count=cores // CORES_PER_DEVICE,
        cores=CORES_PER_DEVICE,
        init=spec.init,
        vendor=WORD,
    )


def parse_pod(pod: Mapping[str, Any], config: NeuronConfig) -> PodRequest:
    return hami_pod.parse_pod(
        pod, lambda spec: read_ask(spec, config), hami_pod.uuid_selector(USE_UUID, AVOID_UUID)
    )
