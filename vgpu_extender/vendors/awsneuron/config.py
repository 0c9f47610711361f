"""The AWS Neuron vendor's settings: HAMi's ``awsneuron:`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.vendors import hami_config

_KEYS = frozenset({"resourceCountName", "resourceCoreName"})
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
        d = cls()
        return cls(
            count_resource=hami_config.name(section, "resourceCountName", d.count_resource),
            core_resource=hami_config.name(section, "resourceCoreName", d.core_resource),
        )
