"""The AWS Neuron vendor's settings: HAMi's ``awsneuron:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

#: Each resource field and the HAMi key that renames it.
_NAMES = {"count_resource": "resourceCountName", "core_resource": "resourceCoreName"}
_KEYS = frozenset(_NAMES.values())
#: NeuronCores per device a core ask is read against (HAMi v2.10: 2, Inferentia2 and
#: Trainium; a core ask over it must be a multiple of it).
CORES_PER_DEVICE = 2


@dataclass(frozen=True, slots=True)
class NeuronConfig:
    count_resource: str = "aws.amazon.com/neuron"
    core_resource: str = "aws.amazon.com/neuroncore"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> NeuronConfig:
        section = hami_config.section(settings, "AWS Neuron", _KEYS)
        return hami_config.with_names(cls(), section, _NAMES)
