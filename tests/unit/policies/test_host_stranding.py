"""Host CPU stranding: the device capacity a node's free host CPU can no longer feed, at
the typical pods' CPU per milli of device share, and the points a placement is charged
for it, by hand.

Devices have 1000 MiB and 100 cores, so a device's free capacity in milli is its free
cores x 10.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.builders import make_index, make_node, make_request
from vgpu_extender.domain import ContainerRequest
from vgpu_extender.engine import ClusterIndex
from vgpu_extender.engine.framework import ArgumentError
from vgpu_extender.policies.fragment_math import CompiledShapes, Devices
from vgpu_extender.policies.fragmentation import (
    Fragmentation,
    FragmentationArgs,
    build_fragmentation,
)
from vgpu_extender.policies.host_stranding import (
    cpu_per_milli,
    one_device_points,
    stranded,
)
from vgpu_extender.policies.ss_lookahead import SsLookaheadArgs, build_ss_lookahead
from vgpu_extender.policies.typical_pods import TypicalPod, WeightedShape
from vgpu_extender.sim.replay import SIM_POLICIES


def shape(cpu: int, milli: int, count: int = 1) -> TypicalPod:
    return TypicalPod.from_milli(cpu_milli=cpu, gpu_milli=milli, count=count)


def two_nodes(cpu0: int | None, cpu1: int | None) -> ClusterIndex:
    """``n0`` and ``n1``: two free devices each, host CPU as given (None: untracked)."""
    return make_index(
        make_node("n0", 2, mem=1000, cores=100, cpu_milli=cpu0),
        make_node("n1", 2, mem=1000, cores=100, cpu_milli=cpu1),
    )


#: k = 4000 / 500 = 8 milli of host CPU per milli of device share.
HALVES: list[WeightedShape] = [(1.0, shape(4000, 500))]
#: A share of half a device, with 9 vCPU.
HALF_9_CPU = make_request(1, pct=50, cores=50, cpu_milli=9000)


def test_k_weights_the_typical_device_pods() -> None:
    # (0.5 x 4000 + 0.25 x 12000) / (0.5 x 500 + 0.25 x 1000) = 5000 / 500 = 10; the
    # host-only shape asks for no share and drops out.
    shapes = [(0.5, shape(4000, 500)), (0.25, shape(12000, 1000)), (0.25, shape(32000, 0))]
    assert cpu_per_milli(CompiledShapes.of(shapes)) == pytest.approx(10.0)
    # Two whole devices for 16 vCPU: 16000 / 2000.
    assert cpu_per_milli(CompiledShapes.of([(1.0, shape(16000, 1000, count=2))])) == 8.0
    # A share named in MiB only depends on the device: unknown, so no k at all.
    mib_only = TypicalPod(cpu_milli=1000, count=1, memory_mib=4096)
    assert cpu_per_milli(CompiledShapes.of([(1.0, mib_only)])) == 0.0
    assert cpu_per_milli(CompiledShapes.of([])) == 0.0


def test_stranded_is_what_the_cpu_cannot_feed() -> None:
    # 5 free GPUs and 24.484 vCPU at k = 10.9: 24484 / 10.9 = 2246.24 milli fed, 2753.76
    # not; 1 free GPU and 64 vCPU: all of it fed.
    got = stranded(np.array([5000, 1000]), np.array([24484, 64000]), 10.9)
    assert got.tolist() == pytest.approx([2753.76, 0.0], abs=0.01)


def test_the_charge_by_hand() -> None:
    # k = 8. n0 (16 vCPU): S = max(0, 2000 - 16000 / 8) = 0 before; after a 500 share
    # with 9 vCPU, max(0, 1500 - 7000 / 8) = 625: round(625 / 40) = 16 points, on either
    # device. n1 (40 vCPU): 1500 - 31000 / 8 < 0, nothing stranded, no charge.
    index = two_nodes(16_000, 40_000)
    d = Devices.of_rows(index, index.rows_of(["n0", "n1"]))
    container = HALF_9_CPU.containers[0]
    # (Columns past a node's devices are empty slots of the index: never charged.)
    points = one_device_points(d, container, 9000, 8.0, 1.0)
    assert points[:, :2].tolist() == [[-16, -16], [0, 0]] and not points[:, 2:].any()
    # Twice the weight: round(2 x 625 / 40) = round(31.25).
    assert one_device_points(d, container, 9000, 8.0, 2.0)[:, :2].tolist() == [[-31, -31], [0, 0]]
    # No k (no typical share known) or no weight: no charge.
    assert not one_device_points(d, container, 9000, 0.0, 1.0).any()
    assert not one_device_points(d, container, 9000, 8.0, 0.0).any()


def test_no_charge_where_the_share_does_not_fit_or_cpu_is_untracked() -> None:
    index = two_nodes(16_000, None)
    d = Devices.of_rows(index, index.rows_of(["n0", "n1"]))
    too_big = ContainerRequest("c", 1, 2000, 0, 0)  # more memory than a device has
    assert not one_device_points(d, too_big, 9000, 8.0, 1.0).any()
    points = one_device_points(d, HALF_9_CPU.containers[0], 9000, 8.0, 1.0)
    assert points[0, :2].tolist() == [-16, -16] and not points[1].any()


def test_fgd_ties_that_the_charge_breaks() -> None:
    # FGD: a 500 share leaves 500 free on the device, which the typical 500 still fits,
    # and both nodes keep CPU for it (7 and 31 vCPU): delta 0, score 50 on both; the
    # paper's ranks would take n0. Charged, n0 loses 16 points (above).
    index = two_nodes(16_000, 40_000)
    rows = index.rows_of(["n0", "n1"])
    plain = build_fragmentation(FragmentationArgs(typical_pods=tuple(HALVES)))
    assert plain.score_nodes(index, HALF_9_CPU, rows).tolist() == [50, 50]
    charged = build_fragmentation(FragmentationArgs(typical_pods=tuple(HALVES), host_strand=1.0))
    assert charged.score_nodes(index, HALF_9_CPU, rows).tolist() == [34, 50]
    # Untracked CPU (the extender's case): the charge changes nothing.
    untracked = two_nodes(None, None)
    got = charged.score_nodes(untracked, HALF_9_CPU, untracked.rows_of(["n0", "n1"]))
    assert got.tolist() == [50, 50]


def test_ss_lookahead_charges_by_default_and_fgd_paper_never() -> None:
    assert SsLookaheadArgs().host_strand == 1.0
    assert FragmentationArgs().host_strand == 0.0
    index = two_nodes(16_000, 40_000)
    rows = index.rows_of(["n0", "n1"])
    on = build_ss_lookahead(SsLookaheadArgs(typical_pods=tuple(HALVES)))
    off = build_ss_lookahead(SsLookaheadArgs(typical_pods=tuple(HALVES), host_strand=0.0))
    gained = off.score_nodes(index, HALF_9_CPU, rows) - on.score_nodes(index, HALF_9_CPU, rows)
    assert gained.tolist() == [16, 0]
    paper = SIM_POLICIES["fgd-paper"].build(
        FragmentationArgs(typical_pods=tuple(HALVES), host_strand=1.0)
    )
    assert isinstance(paper, Fragmentation)
    assert paper.score_nodes(index, HALF_9_CPU, rows).tolist() == [50, 50]


@pytest.mark.parametrize("value", [-1.0, True, "1", float("nan"), float("inf")])
def test_a_bad_weight_names_the_field(value: object) -> None:
    with pytest.raises(ArgumentError, match="host_strand"):
        FragmentationArgs(host_strand=value)  # type: ignore[arg-type]
