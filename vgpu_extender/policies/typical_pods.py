"""The workload the ``fragmentation`` policy plans for: typical pod shapes and their weights.

FGD (Weng et al., ATC'23) measures how much free GPU capacity the *typical* pods of the
workload could not use. A shape is what a pod asks for (host CPU, device count, and
per device memory and cores, plus the device types it accepts); the distribution keeps the
most frequent shapes until they cover 95 % of the pods, and renormalises their weights
(spec: fgd.md §5). The shapes come from configuration (a list of weighted shapes), from a
trace, or are learned online from the requests the policy observes, starting from a prior
so that a fresh extender is not blind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu_extender.domain import ContainerRequest, PodRequest

#: Fraction of the pods the kept shapes must cover (the paper's 95 % rule).
DEFAULT_COVERAGE = 0.95


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One pod shape. ``count == 0`` is a pod without devices (host CPU only).

    ``memory_mib``/``memory_percent`` and ``cores`` are per device, as in
    ``ContainerRequest``; ``types`` are lower-case device type substrings the shape
    accepts (empty: any type), as in ``DeviceSelector.use_types``.
    """

    cpu_milli: int = 0
    count: int = 0
    memory_mib: int = 0
    memory_percent: int = 0
    cores: int = 0
    types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("cpu_milli", "count", "memory_mib", "memory_percent", "cores"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"typical pod field {name!r} must be an integer >= 0: {value!r}")
        if self.memory_percent > 100 or self.cores > 100:
            raise ValueError(
                f"typical pod memory_percent and cores are percentages (0..100): "
                f"{self.memory_percent!r}, {self.cores!r}"
            )

    @classmethod
    def from_milli(
        cls, *, cpu_milli: int, gpu_milli: int, count: int, types: Sequence[str] = ()
    ) -> TypicalPod:
        """A shape in the trace's units: ``gpu_milli`` thousandths of each of ``count``
        devices, taken as that share of the device's cores and memory."""
        if count <= 0 or gpu_milli <= 0:
            return cls(cpu_milli=cpu_milli)
        percent = min(gpu_milli, 1000) // 10
        return cls(
            cpu_milli=cpu_milli,
            count=count,
            memory_percent=percent,
            cores=percent,
            types=tuple(t.lower() for t in types),
        )

    @classmethod
    def of_request(cls, request: PodRequest) -> TypicalPod:
        """The shape of a pod: its host CPU and its largest device container."""
        devices = request.device_containers
        if not devices:
            return cls(cpu_milli=request.cpu_milli)
        main = max(devices, key=lambda c: (c.count, c.cores, c.memory_percent, c.memory_mib))
        return cls(
            cpu_milli=request.cpu_milli,
            count=main.count,
            memory_mib=main.memory_mib,
            memory_percent=main.memory_percent,
            cores=main.cores,
            types=tuple(sorted(request.selector.use_types)),
        )

    @property
    def wants_devices(self) -> bool:
        return self.count > 0

    @property
    def gpu_milli(self) -> int:
        """Per device share in thousandths, as far as it is known without the device."""
        if not self.wants_devices:
            return 0
        return max(self.cores, self.memory_percent) * 10

    def container(self) -> ContainerRequest:
        """The shape as one container's request (what the device fit test reads)."""
        return ContainerRequest(
            name="typical",
            count=self.count,
            memory_mib=self.memory_mib,
            memory_percent=self.memory_percent,
            cores=self.cores,
        )

    def sort_key(self) -> tuple[int, int, int, str]:
        """Larger shapes sort higher (the artifact's order among equally frequent shapes)."""
        return (self.cpu_milli, self.gpu_milli, self.count, "|".join(self.types))


WeightedShape = tuple[float, TypicalPod]


def top_shapes(
    counts: Mapping[TypicalPod, float], coverage: float = DEFAULT_COVERAGE
) -> tuple[WeightedShape, ...]:
    """The most frequent shapes until they cover ``coverage`` of the total, renormalised.

    Shapes are taken by count, descending; among equal counts the larger shape first.
    """
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1]: {coverage!r}")
    positive = [(w, s) for s, w in counts.items() if w > 0]
    total = sum(w for w, _ in positive)
    if total <= 0:
        return ()
    ordered = sorted(positive, key=lambda ws: (ws[0], ws[1].sort_key()), reverse=True)
    kept: list[WeightedShape] = []
    covered = 0.0
    for weight, shape in ordered:
        if covered >= coverage * total:
            break
        kept.append((weight, shape))
        covered += weight
    return tuple((w / covered, s) for w, s in kept)


def shapes_from_json(data: object) -> tuple[WeightedShape, ...]:
    """Weighted shapes from decoded JSON: a list of objects with ``weight`` and either the
    device fields (``count``, ``memory_mib``, ``memory_percent``, ``cores``) or the
    trace's ``gpu_milli``; ``cpu_milli`` and ``types`` are optional. Weights are
    renormalised to sum to 1. Raises ``ValueError`` naming the entry and field."""
    if not isinstance(data, list) or not data:
        raise ValueError(f"typical pods must be a non-empty JSON list, not {data!r:.80}")
    shapes: list[WeightedShape] = []
    for position, item in enumerate(data):
        where = f"typical pods[{position}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where} must be an object: {item!r:.80}")
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
            raise ValueError(f"{where}.weight must be a number > 0: {weight!r}")
        fields = {k: v for k, v in item.items() if k != "weight"}
        types = fields.pop("types", ())
        if isinstance(types, str) or not isinstance(types, list | tuple):
            raise ValueError(f"{where}.types must be a list of type names: {types!r}")
        try:
            if "gpu_milli" in fields:
                shape = TypicalPod.from_milli(
                    cpu_milli=int(fields.pop("cpu_milli", 0)),
                    gpu_milli=int(fields.pop("gpu_milli")),
                    count=int(fields.pop("count", 1)),
                    types=[str(t) for t in types],
                )
                if fields:
                    raise ValueError(f"unknown field(s) {sorted(fields)}")
            else:
                shape = TypicalPod(**fields, types=tuple(str(t).lower() for t in types))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        shapes.append((float(weight), shape))
    total = sum(w for w, _ in shapes)
    return tuple((w / total, s) for w, s in shapes)


#: What a fresh extender assumes before it has seen pods: whole devices, halves and
#: quarters, equally likely. Learned shapes outweigh it after a few dozen pods.
DEFAULT_PRIOR: tuple[WeightedShape, ...] = (
    (1 / 3, TypicalPod(count=1, memory_percent=100, cores=100)),
    (1 / 3, TypicalPod(count=1, memory_percent=50, cores=50)),
    (1 / 3, TypicalPod(count=1, memory_percent=25, cores=25)),
)


class ShapeCounter:
    """Shape frequencies learned online, on top of a prior worth ``prior_pods`` pods.

    Memory stays bounded: past ``max_shapes`` distinct shapes the rarest learned one is
    forgotten. ``version`` changes whenever the distribution may have changed, so users
    can cache what they derive from it.
    """

    def __init__(
        self,
        prior: Sequence[WeightedShape] = DEFAULT_PRIOR,
        *,
        prior_pods: float = 10.0,
        coverage: float = DEFAULT_COVERAGE,
        max_shapes: int = 1024,
    ) -> None:
        if prior_pods < 0 or max_shapes < 1:
            raise ValueError(f"prior_pods >= 0 and max_shapes >= 1: {prior_pods!r}, {max_shapes!r}")
        self._prior = {s: w * prior_pods for w, s in prior}
        self._counts: dict[TypicalPod, float] = {}
        self._coverage = coverage
        self._max_shapes = max_shapes
        self._version = 0
        self._cached: tuple[int, tuple[WeightedShape, ...]] = (-1, ())

    @property
    def version(self) -> int:
        return self._version

    def add(self, shape: TypicalPod) -> None:
        self._counts[shape] = self._counts.get(shape, 0.0) + 1.0
        if len(self._counts) > self._max_shapes:
            rarest = min(self._counts, key=lambda s: (self._counts[s], s.sort_key()))
            del self._counts[rarest]
        self._version += 1

    def distribution(self) -> tuple[WeightedShape, ...]:
        if self._cached[0] != self._version:
            merged = dict(self._prior)
            for shape, count in self._counts.items():
                merged[shape] = merged.get(shape, 0.0) + count
            self._cached = (self._version, top_shapes(merged, self._coverage))
        return self._cached[1]
