"""The one place policies are registered: name -> factory, built from options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vgpu_extender.policies.base import Policy
from vgpu_extender.policies.label_priority import DEFAULT_LABEL, LabelPriority
from vgpu_extender.policies.typical_pods import TypicalPod
from vgpu_extender.policies.usage import DeviceWeights, UsagePolicy


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Settings the policy factories read."""

    priority_label: str = DEFAULT_LABEL
    device_weights: DeviceWeights = field(default_factory=DeviceWeights)
    #: Typical pods for ``fragmentation`` as (weight, shape) pairs; empty = learn online.
    typical_pods: tuple[tuple[float, TypicalPod], ...] = field(default_factory=tuple)


PolicyFactory = Callable[[PolicyOptions], Policy]


def _fragmentation(options: PolicyOptions) -> Policy:
    from vgpu_extender.policies.fragmentation import build_fragmentation

    policy: Policy = build_fragmentation(options)
    return policy


BUILTIN: Mapping[str, PolicyFactory] = {
    "binpack": lambda o: UsagePolicy("binpack", +1.0, o.device_weights),
    "spread": lambda o: UsagePolicy("spread", -1.0, o.device_weights),
    "label-priority": lambda o: LabelPriority(label=o.priority_label),
    "fragmentation": _fragmentation,
}


class UnknownPolicyError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class PolicyRegistry:
    """Policies by name, each built once from the options."""

    def __init__(
        self,
        options: PolicyOptions | None = None,
        factories: Mapping[str, PolicyFactory] = BUILTIN,
    ) -> None:
        self.options = options or PolicyOptions()
        self._factories = dict(factories)
        self._built: dict[str, Policy] = {}

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._factories)

    def get(self, name: str) -> Policy:
        policy = self._built.get(name)
        if policy is None:
            factory = self._factories.get(name)
            if factory is None:
                known = ", ".join(sorted(self._factories))
                raise UnknownPolicyError(f"unknown policy {name!r} (known: {known})")
            policy = self._built[name] = factory(self.options)
        return policy
