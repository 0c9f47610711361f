"""The ask pieces the HAMi vendors share: defaults, units, the int32 bound, selectors."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from vgpu_extender.domain import ContainerRequest, DeviceSelector, RequestError
from vgpu_extender.vendors import hami_ask
from vgpu_extender.vendors.hami_pod import ContainerSpec


def spec(limits: dict[str, Any], requests: dict[str, Any] | None = None) -> ContainerSpec:
    return ContainerSpec("main", limits, requests or {}, False, MappingProxyType({}))


def test_integer_reads_limits_before_requests_and_defaults_when_absent() -> None:
    assert hami_ask.integer(spec({"x": "3"}, {"x": "5"}), "x") == 3
    assert hami_ask.integer(spec({}, {"x": "5"}), "x") == 5
    assert hami_ask.integer(spec({}), "x") == 0
    assert hami_ask.integer(spec({}), "x", 100) == 100


def test_integer_names_the_container_and_resource_of_a_bad_quantity() -> None:
    with pytest.raises(RequestError) as caught:
        hami_ask.integer(spec({"x": "1.5"}), "x")
    assert (caught.value.container, caught.value.field) == ("main", "x")


def test_scaled_memory_multiplies_by_the_unit_and_bounds_it_by_int32() -> None:
    assert hami_ask.scaled_memory(spec({"m": "4"}), "m", 256) == 1024
    assert hami_ask.scaled_memory(spec({}), "m", 256) == 0
    with pytest.raises(RequestError) as caught:
        hami_ask.scaled_memory(spec({"m": "8388608"}), "m", 256)
    assert str(caught.value).startswith("quantity times 256 MiB must be at most 2147483647 MiB")
    assert (caught.value.field, caught.value.value) == ("m", "8388608")
    with pytest.raises(RequestError, match=r"^the factor"):
        hami_ask.scaled_memory(spec({"m": "8388608"}), "m", 256, "the factor")


def test_share_asks_the_whole_memory_only_when_none_is_given() -> None:
    assert hami_ask.share(spec({}), "V", 2, 0, 30) == ContainerRequest(
        name="main", count=2, memory_percent=100, cores=30, vendor="V"
    )
    assert hami_ask.share(spec({}), "V", 1, 512, 0).memory_percent == 0


def test_whole_devices_take_all_memory_and_cores_and_zero_is_none() -> None:
    assert hami_ask.whole_devices(spec({"n": "2"}), "n", "V") == ContainerRequest(
        name="main", count=2, memory_percent=100, cores=100, vendor="V"
    )
    assert hami_ask.whole_devices(spec({"n": "0"}), "n", "V") == hami_ask.none(spec({}), "V")
    assert hami_ask.whole_devices(spec({}), "n", "V").count == 0


def test_typed_selector_lowers_types_and_keeps_uuids() -> None:
    read = hami_ask.typed_selector("ut", "at", "uu", "au")
    selector = read({"ut": "K100, Z100", "at": "BW", "uu": "DCU-A,DCU-A", "au": "DCU-b"})
    assert selector == DeviceSelector(
        use_types=("k100", "z100"),
        avoid_types=("bw",),
        use_uuids=("DCU-A",),
        avoid_uuids=("DCU-b",),
    )
