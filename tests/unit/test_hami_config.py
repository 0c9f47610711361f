"""A HAMi config section read into a vendor's resource names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vgpu_extender.vendors import hami_config

NAMES = {"count": "resourceCountName", "memory": "resourceMemoryName"}


@dataclass(frozen=True, slots=True)
class Names:
    count: str = "x.com/gpu"
    memory: str = "x.com/gpumem"
    other: int = 7


def test_with_names_renames_the_keys_given_and_keeps_the_defaults_of_the_rest() -> None:
    assert hami_config.with_names(Names(), {"resourceMemoryName": " y.com/mem "}, NAMES) == Names(
        memory="y.com/mem"
    )
    assert hami_config.with_names(Names(other=3), {}, NAMES) == Names(other=3)


def test_with_names_reports_the_first_bad_key_in_the_order_given() -> None:
    settings = {"resourceCountName": "a b", "resourceMemoryName": ""}
    with pytest.raises(ValueError, match=r"^resourceCountName must be a resource name"):
        hami_config.with_names(Names(), settings, NAMES)


def test_section_refuses_unknown_keys_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown X setting\(s\) bogus; known: a, b"):
        hami_config.section({"bogus": 1, "a": "x"}, "X", frozenset({"b", "a"}))
