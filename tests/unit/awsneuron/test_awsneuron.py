"""AWS Neuron: the config section, asks by device count and by cores (HAMi's "must be
1 or a multiple of 2"), the capacity inventory, the share stages on devices and a grid,
contiguous placement (any run on inf*, aligned 1/4/8/16 elsewhere), HAMi's annotation
literal (``AWS_NEURON_IDS "0,1"`` and ``test1,AWSNeuron,0,3:;``), and hostile input."""

from __future__ import annotations

import pytest

from tests.support.hami_checks import (
    assert_words_distinct,
    container,
    grid_verdicts,
    pod,
    verdict,
)
from vgpu_extender.domain import (
    AnnotationError,
    ContainerRequest,
    Device,
    DeviceGrant,
    InventoryError,
    PodAssignment,
    PodRequest,
    Reason,
    RequestError,
)
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.awsneuron import NeuronConfig, awsneuron_vendors
from vgpu_extender.vendors.awsneuron.inventory_codec import devices_from_capacity
from vgpu_extender.vendors.awsneuron.share import NEURON_SHARE
from vgpu_extender.vendors.awsneuron.topology import pick_devices

VENDOR = awsneuron_vendors({})


def test_config() -> None:
    assert NeuronConfig.from_mapping({}) == NeuronConfig(
        "aws.amazon.com/neuron", "aws.amazon.com/neuroncore"
    )
    assert awsneuron_vendors({"resourceCoreName": "a/c"}).resource_names == {
        "aws.amazon.com/neuron",
        "a/c",
    }
    with pytest.raises(ValueError, match="resourceMemoryName"):
        NeuronConfig.from_mapping({"resourceMemoryName": "x"})


# -- requests ----------------------------------------------------------------------


REQUESTS = [
    ("devices", {"aws.amazon.com/neuron": "2"}, (2, 0)),
    ("one core", {"aws.amazon.com/neuroncore": "1"}, (1, 1)),
    ("two cores", {"aws.amazon.com/neuroncore": "2"}, (1, 2)),
    ("six cores", {"aws.amazon.com/neuroncore": "6"}, (3, 2)),
    ("count wins over cores", {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2}, (1, 0)),
    ("zero devices", {"aws.amazon.com/neuron": "0", "aws.amazon.com/neuroncore": 2}, (0, 0)),
]


@pytest.mark.parametrize(("case", "limits", "want"), REQUESTS, ids=[c[0] for c in REQUESTS])
def test_asks(case: str, limits: dict[str, object], want: tuple[int, int]) -> None:
    (ask,) = VENDOR.parse_pod(pod(container(limits=limits))).containers
    assert (ask.count, ask.cores) == want
    assert ask.vendor == "AWSNeuron"


def test_an_odd_core_count_over_a_device_is_refused_with_hamis_text() -> None:
    with pytest.raises(
        RequestError, match=r"^aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3$"
    ):
        VENDOR.parse_pod(pod(container(limits={"aws.amazon.com/neuroncore": "3"})))
    with pytest.raises(RequestError):
        VENDOR.parse_pod(pod(container(limits={"aws.amazon.com/neuron": "-1"})))


def test_uuid_selector() -> None:
    selector = VENDOR.parse_pod(
        pod(
            annotations={
                "aws.amazon.com/use-neuron-uuid": "a",
                "aws.amazon.com/nouse-neuron-uuid": "b",
            }
        )
    ).selector
    assert (selector.use_uuids, selector.avoid_uuids) == (("a",), ("b",))


# -- inventory ---------------------------------------------------------------------


def test_devices_from_capacity() -> None:
    devices = devices_from_capacity(
        "node-a",
        {"aws.amazon.com/neuron": "2", "aws.amazon.com/neuroncore": "4"},
        {"node.kubernetes.io/instance-type": "inf2.24xlarge"},
    )
    assert devices == tuple(
        Device(
            f"node-a-AWSNeuron-{i}",
            i,
            2,
            0,
            2,
            "AWSNeuron",
            vendor="AWSNeuron",
            custom_info=(("AWSNodeType", "inf2.24xlarge"),),
        )
        for i in range(2)
    )
    assert VENDOR.devices_from_capacity("n", {}, {}) == ()
    assert (
        VENDOR.decode_node(NodeFacts("node-a", annotations={"aws.amazon.com/neuron": "2"})) is None
    )
    with pytest.raises(InventoryError):
        devices_from_capacity(
            "n", {"aws.amazon.com/neuron": "2", "aws.amazon.com/neuroncore": "3"}, {}
        )
    with pytest.raises(InventoryError):
        devices_from_capacity("n", {"aws.amazon.com/neuron": "2"}, {})


# -- share and placement -----------------------------------------------------------


def _ask(count: int = 1, cores: int = 0) -> ContainerRequest:
    return ContainerRequest("c", count=count, cores=cores)


SHARES = [
    ("a core on an empty device", (2, 0, 2), (0, 0, 0), _ask(cores=1), None),
    ("a core beside a core", (2, 0, 2), (1, 0, 1), _ask(cores=1), None),
    ("two cores beside a core", (2, 0, 2), (1, 0, 1), _ask(cores=2), Reason.CORES),
    ("whole on a used device", (2, 0, 2), (1, 0, 1), _ask(), Reason.EXCLUSIVE),
    ("whole on an empty device", (2, 0, 2), (0, 0, 0), _ask(), None),
    ("every core taken", (2, 0, 2), (2, 0, 2), _ask(cores=1), Reason.SLOTS),
]


@pytest.mark.parametrize(
    ("case", "total", "used", "ask", "want"), SHARES, ids=[c[0] for c in SHARES]
)
def test_stages(
    case: str,
    total: tuple[int, int, int],
    used: tuple[int, int, int],
    ask: ContainerRequest,
    want: Reason | None,
) -> None:
    assert verdict(NEURON_SHARE, total, used, ask) == want


@pytest.mark.parametrize("ask", sorted({c[3] for c in SHARES}, key=repr))
def test_the_grid_gives_the_same_verdicts(ask: ContainerRequest) -> None:
    cells = [(c[1], c[2]) for c in SHARES]
    assert grid_verdicts(NEURON_SHARE, cells, ask) == [
        verdict(NEURON_SHARE, t, u, ask) for t, u in cells
    ]


def _node(kind: str, *indexes: int) -> tuple[Device, ...]:
    return tuple(
        Device(f"n-AWSNeuron-{i}", i, vendor="AWSNeuron", custom_info=(("AWSNodeType", kind),))
        for i in indexes
    )


PICKS = [
    ("ring: any run", "inf2.48xlarge", (0, 2, 3, 4), 3, (2, 3, 4)),
    ("ring: no run", "inf2.48xlarge", (0, 2, 4), 2, None),
    ("aligned four", "trn1.32xlarge", (1, 2, 3, 4, 5, 6, 7), 4, (4, 5, 6, 7)),
    ("unaligned run refused", "trn1.32xlarge", (1, 2, 3, 4, 6), 4, None),
    ("three not allowed", "trn1.32xlarge", (0, 1, 2, 3), 3, None),
    ("one is the policy's first", "trn1.32xlarge", (5, 1), 1, (5,)),
    ("no type reads as aligned", "", (0, 1, 2, 3), 2, None),
]


@pytest.mark.parametrize(
    ("case", "kind", "indexes", "count", "want"), PICKS, ids=[p[0] for p in PICKS]
)
def test_contiguous_placement(
    case: str, kind: str, indexes: tuple[int, ...], count: int, want: tuple[int, ...] | None
) -> None:
    fitting = _node(kind, *indexes)
    chosen = pick_devices(fitting, count)
    assert (None if chosen is None else tuple(fitting[p].index for p in chosen)) == want
    assert NEURON_SHARE.pick_refuses


# -- pod annotations ---------------------------------------------------------------


def _request(*cores: int) -> PodRequest:
    return PodRequest(
        "u",
        containers=tuple(
            ContainerRequest(f"c{i}", 1, cores=c, vendor="AWSNeuron") for i, c in enumerate(cores)
        ),
    )


def test_hamis_literal_two_cores_on_device_0() -> None:
    assert (
        VENDOR.encode_assignment(PodAssignment("n", ((DeviceGrant("test1", 0, 2, "AWSNeuron"),),)))
        == "test1,AWSNeuron,0,3:;"
    )
    assignment = PodAssignment("node-a", ((DeviceGrant("node-a-AWSNeuron-0", 0, 2, "AWSNeuron"),),))
    assert VENDOR.bind_annotations(assignment, bind_time=1700000000, request=_request(2)) == {
        "hami.io/vgpu-node": "node-a",
        "hami.io/aws-neuron-devices-allocated": "node-a-AWSNeuron-0,AWSNeuron,0,3:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "AWS_NEURON_IDS": "0,1",
        "NEURON_ALLOC_TIME": "1700000000000000000",
        "NEURON_ALLOCATED": "false",
        "NEURON_RESOURCE_TYPE": "aws.amazon.com/neuroncore",
        "aws.amazon.com/predicate-node": "node-a",
    }


def test_two_containers_take_different_cores_and_device_asks_name_devices() -> None:
    def grant(i: int, cores: int) -> DeviceGrant:
        return DeviceGrant(f"n-AWSNeuron-{i}", 0, cores, "AWSNeuron")

    split = PodAssignment("n", ((grant(3, 1),), (grant(3, 1),)))
    annotations = VENDOR.bind_annotations(split, bind_time=1, request=_request(1, 1))
    assert annotations["hami.io/aws-neuron-devices-allocated"] == (
        "n-AWSNeuron-3,AWSNeuron,0,1:;n-AWSNeuron-3,AWSNeuron,0,2:;"
    )
    assert annotations["AWS_NEURON_IDS"] == "6,7"
    whole = PodAssignment("n", ((grant(2, 2), grant(3, 2)),))
    devices = VENDOR.bind_annotations(whole, bind_time=1, request=_request(0))
    assert devices["AWS_NEURON_IDS"] == "2,3"
    assert "NEURON_RESOURCE_TYPE" not in devices


def test_masks_read_back_as_core_counts() -> None:
    assert VENDOR.decode_assignment("n-AWSNeuron-0,AWSNeuron,0,3:;x,AWSNeuron,0,2:;") == (
        (DeviceGrant("n-AWSNeuron-0", 0, 2, "AWSNeuron"),),
        (DeviceGrant("x", 0, 1, "AWSNeuron"),),
    )
    with pytest.raises(AnnotationError):
        VENDOR.decode_assignment("x,AWSNeuron,0,y:;")
    with pytest.raises(AnnotationError):
        VENDOR.bind_annotations(
            PodAssignment("n", ((DeviceGrant("x", 0, 1, "AWSNeuron"),),)), bind_time=1
        )


def test_no_lock_no_handshake_and_words() -> None:
    assert VENDOR.names.node_lock is None and VENDOR.handshake is None
    assert VENDOR.wording.text(Reason.NO_DEVICES) == "no neuron devices"
    assert_words_distinct(VENDOR.wording)


def test_a_container_asking_two_vendors_is_read_by_its_neuron_ask() -> None:
    cores = ContainerRequest("c0", 1, cores=1, vendor="AWSNeuron")
    devices = ContainerRequest("c0", 1, cores=0, vendor="AWSNeuron")
    assignment = PodAssignment("n", ((DeviceGrant("n-AWSNeuron-1", 0, 1, "AWSNeuron"),),))
    by_cores = PodRequest(
        "u", containers=(ContainerRequest("c0", 1, cores=100, vendor="NVIDIA", also=(cores,)),)
    )
    by_devices = PodRequest(
        "u", containers=(ContainerRequest("c0", 1, cores=100, vendor="NVIDIA", also=(devices,)),)
    )
    assert (
        VENDOR.bind_annotations(assignment, bind_time=1, request=by_cores)["AWS_NEURON_IDS"] == "2"
    )
    assert (
        VENDOR.bind_annotations(assignment, bind_time=1, request=by_devices)["AWS_NEURON_IDS"]
        == "1"
    )


CAPACITY = {"aws.amazon.com/neuron": "4", "aws.amazon.com/neuroncore": "8"}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def test_devices_through_the_capacity_seam_carry_the_instance_type() -> None:
    assert VENDOR.capacity_keys == ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore")
    assert VENDOR.node_keys == ()
    node = NodeFacts("node-a", labels={INSTANCE_TYPE: "inf2.24xlarge"}, capacity=CAPACITY)
    devices = VENDOR.decode_capacity(node)
    assert devices is not None
    assert [(d.uuid, d.count, d.custom("AWSNodeType")) for d in devices] == [
        (f"node-a-AWSNeuron-{i}", 2, "inf2.24xlarge") for i in range(4)
    ]
    unlabelled = VENDOR.decode_capacity(NodeFacts("node-a", capacity=CAPACITY)) or ()
    assert {d.custom("AWSNodeType") for d in unlabelled} == {""}
    cores_only = {"aws.amazon.com/neuroncore": "4"}
    assert VENDOR.decode_capacity(NodeFacts("node-a", capacity=cores_only)) is None


RING_RULE = [
    ("inf: a run of three", "inf2.48xlarge", 3, (1, 2, 3)),
    ("inf: a run of two", "inf1.6xlarge", 2, (1, 2)),
    ("trn: three refused", "trn1.32xlarge", 3, None),
    ("trn: two refused", "trn1.32xlarge", 2, None),
    ("no label: two refused", "", 2, None),
]


@pytest.mark.parametrize(
    ("case", "kind", "count", "want"), RING_RULE, ids=[r[0] for r in RING_RULE]
)
def test_the_instance_type_label_decides_the_ring_rule(
    case: str, kind: str, count: int, want: tuple[int, ...] | None
) -> None:
    """Devices decoded from a node's capacity and labels, device 0 taken: only on an
    ``inf*`` instance may a container take a run that is not 1, 4, 8 or 16 aligned."""
    labels = {INSTANCE_TYPE: kind} if kind else {}
    devices = VENDOR.decode_capacity(NodeFacts("node-a", labels=labels, capacity=CAPACITY))
    assert devices is not None
    fitting = devices[1:]
    chosen = pick_devices(fitting, count)
    assert (None if chosen is None else tuple(fitting[p].index for p in chosen)) == want
