"""HAMi's admission rewrite for Ascend: template rounding (910A and 310P examples),
hami-core memory as given, HAMi's rejection texts, and 910C's pairs."""

from __future__ import annotations

import dataclasses

import pytest

from vgpu_extender.domain import RequestError
from vgpu_extender.vendors.ascend import DEFAULT_CHIPS, AscendChipVendor, ChipConfig
from vgpu_extender.vendors.ascend.admission import admit_container
from vgpu_extender.vendors.base import ContainerAdmission

CHIPS = {chip.common_word: chip for chip in DEFAULT_CHIPS}
A910 = CHIPS["Ascend910A"]
P310 = CHIPS["Ascend310P"]
C910 = CHIPS["Ascend910C"]
HAMI_CORE = {"huawei.com/vnpu-mode": "hami-core"}


@pytest.mark.parametrize(
    ("chip", "asked", "written"),
    [
        (A910, "2000", "2184"),
        (A910, "20000", "32768"),
        (P310, "3500", "6144"),
        (P310, "20000", "21527"),
        (A910, "2k", "2184"),
    ],
    ids=["910A-2000", "910A-20000", "310P-3500", "310P-20000", "quantity-suffix"],
)
def test_hard_split_rounds_to_a_template_or_the_whole_card(
    chip: ChipConfig, asked: str, written: str
) -> None:
    memory = chip.resource_memory_name
    result = admit_container({chip.resource_name: "1", memory: asked}, {}, {}, chip)
    assert result.uses
    assert result.limits[memory] == written
    assert result.requests[memory] == written  # requests created when absent


def test_910a_40000_is_rejected_with_hamis_words() -> None:
    limits = {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "40000"}
    with pytest.raises(RequestError) as caught:
        admit_container(limits, {}, {}, A910)
    assert str(caught.value) == "huawei.com/Ascend910A-memory 40000 is invalid"
    assert caught.value.field == "huawei.com/Ascend910A-memory"


def test_no_memory_asks_for_the_whole_card() -> None:
    result = admit_container({"huawei.com/Ascend310P": "2"}, {"cpu": "1"}, {}, P310)
    assert result.limits == {"huawei.com/Ascend310P": "2", "huawei.com/Ascend310P-memory": "21527"}
    assert result.requests == {"cpu": "1", "huawei.com/Ascend310P-memory": "21527"}


def test_the_inputs_are_not_changed() -> None:
    limits = {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "2000"}
    requests: dict[str, str] = {}
    admit_container(limits, requests, {}, A910)
    assert limits == {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "2000"}
    assert requests == {}


def test_core_only_in_hami_core_mode() -> None:
    limits = {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-core": "10"}
    with pytest.raises(RequestError) as caught:
        admit_container(limits, {}, {}, A910)
    assert str(caught.value) == (
        "huawei.com/Ascend910A-core is only supported in hami-core (soft split) mode"
    )
    zero = {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-core": "0"}
    assert admit_container(zero, {}, {}, A910).uses
    assert admit_container(limits, {}, HAMI_CORE, A910).limits["huawei.com/Ascend910A-core"] == "10"


def test_hami_core_keeps_memory_as_given_and_allows_partial_multi_npu() -> None:
    limits = {"huawei.com/Ascend910A": "2", "huawei.com/Ascend910A-memory": "2000"}
    result = admit_container(limits, {}, HAMI_CORE, A910)
    assert result.limits["huawei.com/Ascend910A-memory"] == "2000"


def test_partial_memory_on_several_npus_is_rejected_in_hard_split() -> None:
    limits = {"huawei.com/Ascend910A": "2", "huawei.com/Ascend910A-memory": "2000"}
    with pytest.raises(RequestError) as caught:
        admit_container(limits, {}, {}, A910)
    assert str(caught.value) == "vNPU not supported for multiple devices"
    whole = {"huawei.com/Ascend910A": "2", "huawei.com/Ascend910A-memory": "30000"}
    assert admit_container(whole, {}, {}, A910).limits["huawei.com/Ascend910A-memory"] == "32768"


def test_910c_super_pod_rounds_one_to_two_and_rejects_odd_counts() -> None:
    result = admit_container(
        {"huawei.com/Ascend910C": "1"}, {"huawei.com/Ascend910C": "1"}, {}, C910
    )
    assert result.limits["huawei.com/Ascend910C"] == "2"
    assert result.requests["huawei.com/Ascend910C"] == "2"
    assert (
        admit_container({"huawei.com/Ascend910C": "4"}, {}, {}, C910).limits[
            "huawei.com/Ascend910C"
        ]
        == "4"
    )
    only_limits = admit_container({"huawei.com/Ascend910C": "1"}, {}, {}, C910)
    assert "huawei.com/Ascend910C" not in only_limits.requests
    with pytest.raises(RequestError) as caught:
        admit_container({"huawei.com/Ascend910C": "3"}, {}, {}, C910)
    assert str(caught.value) == "Ascend910C device request must be 1 or 2*n, got 3"
    plain = dataclasses.replace(C910, super_pod=False)
    assert (
        admit_container({"huawei.com/Ascend910C": "1"}, {}, {}, plain).limits[
            "huawei.com/Ascend910C"
        ]
        == "1"
    )


def test_the_count_is_read_from_limits_only() -> None:
    result = admit_container({}, {"huawei.com/Ascend910A": "1"}, {}, A910)
    assert not result.uses
    assert result.requests == {"huawei.com/Ascend910A": "1"}


def test_overwrite_env_hides_npus_from_containers_that_ask_for_none() -> None:
    chip = dataclasses.replace(A910, overwrite_env=True, runtime_class_name="ascend")
    assert admit_container({"cpu": "1"}, {}, {}, chip).env == (("ASCEND_VISIBLE_DEVICES", ""),)
    assert admit_container({"cpu": "1"}, {}, {}, A910).env == ()
    used = admit_container({"huawei.com/Ascend910A": "1"}, {}, {}, chip)
    assert (used.env, used.runtime_class_name) == ((), "ascend")


@pytest.mark.parametrize(
    "limits",
    [
        {"huawei.com/Ascend910A": "-1"},
        {"huawei.com/Ascend910A": "one"},
        {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "-2000"},
        {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "16Gi"},
        {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "lots"},
        {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-core": "-3"},
    ],
)
def test_hostile_values_are_request_errors(limits: dict[str, str]) -> None:
    with pytest.raises(RequestError):
        admit_container(limits, {}, {}, A910)


def test_the_vendor_admits_a_container_as_what_changes() -> None:
    vendor = AscendChipVendor(A910)
    container = {
        "name": "main",
        "resources": {
            "limits": {"huawei.com/Ascend910A": "1", "huawei.com/Ascend910A-memory": "2000"}
        },
    }
    admitted = vendor.admit(container, {"metadata": {}})
    assert admitted == ContainerAdmission(
        limits={"huawei.com/Ascend910A-memory": "2184"},
        requests={"huawei.com/Ascend910A-memory": "2184"},
        uses=True,
    )
    # A container that asks for another chip, or none, changes nothing (no overwriteEnv).
    assert vendor.admit({"name": "x", "resources": {"limits": {"cpu": "1"}}}, {}) is None
    assert vendor.admit({"name": "x"}, {}) is None


def test_the_vendor_reads_the_mode_from_the_pod() -> None:
    vendor = AscendChipVendor(CHIPS["Ascend910B3"])
    limits = {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-core": "5"}
    container = {"name": "main", "resources": {"limits": limits}}
    with pytest.raises(RequestError):
        vendor.admit(container, {"metadata": {"annotations": {}}})
    admitted = vendor.admit(container, {"metadata": {"annotations": HAMI_CORE}})
    assert admitted is not None and admitted.uses
    assert admitted.limits == {"huawei.com/Ascend910B3-memory": "65536"}
