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


def test_common_word_is_a_key_safe_name() -> None:
    assert hami_config.common_word("chips[0]", {"commonWord": "Ascend910B3"}) == "Ascend910B3"
    for bad in ("a,b", "-x", "", None, 3):
        with pytest.raises(ValueError, match=r"^chips\[0\]\.commonWord must be a name"):
            hami_config.common_word("chips[0]", {"commonWord": bad})


def test_go_bool_reads_yaml_and_go_booleans_naming_the_key_of_a_bad_one() -> None:
    assert hami_config.go_bool("k", True) is True
    assert hami_config.go_bool("k", " F ") is False
    assert hami_config.go_bool("k", "1") is True
    with pytest.raises(ValueError, match=r"^k must be true or false: 'yes'$"):
        hami_config.go_bool("k", "yes")
    assert hami_config.flag({}, "k", True) is True
