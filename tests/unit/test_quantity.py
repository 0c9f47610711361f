"""Kubernetes quantities: the canonical strings kube-scheduler sends, and garbage."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import (
    INT32_MAX,
    parse_quantity,
    quantity_to_int,
    quantity_to_mib,
    quantity_to_milli,
)

VALID = [
    ("0", Fraction(0)),
    ("1", Fraction(1)),
    ("2048", Fraction(2048)),
    ("4k", Fraction(4000)),
    ("10k", Fraction(10000)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("1Ki", Fraction(1024)),
    ("512Mi", Fraction(512 * 2**20)),
    ("8Gi", Fraction(8 * 2**30)),
    ("1Ti", Fraction(2**40)),
    ("1Pi", Fraction(2**50)),
    ("1Ei", Fraction(2**60)),
    ("500m", Fraction(1, 2)),
    ("100u", Fraction(1, 10**4)),
    ("5n", Fraction(5, 10**9)),
    ("1.5", Fraction(3, 2)),
    ("0.1", Fraction(1, 10)),
    (".5", Fraction(1, 2)),
    ("1.", Fraction(1)),
    ("1.5Gi", Fraction(3 * 2**29)),
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("2.5e-1", Fraction(1, 4)),
    ("1e+2", Fraction(100)),
    ("+7", Fraction(7)),
    ("-1", Fraction(-1)),
    ("-500m", Fraction(-1, 2)),
    (3, Fraction(3)),
    (0.25, Fraction(1, 4)),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[repr(v[0]) for v in VALID])
def test_parse_quantity_reads_kubernetes_syntax(
    text: str | int | float, expected: Fraction
) -> None:
    assert parse_quantity(text) == expected


INVALID = [
    "",
    " ",
    "abc",
    "k",
    "1.2.3",
    "1KB",
    "1ki",
    "1 k",
    "1e",
    "e3",
    "--1",
    "1e1.5",
    "1e999",
    "0x10",
    "1_000",
    "\u0661",  # an Arabic-Indic digit: str.isdigit() says yes, Kubernetes says no
    True,
    None,
    [1],
    float("nan"),
    float("inf"),
]


@pytest.mark.parametrize("value", INVALID, ids=[repr(v) for v in INVALID])
def test_parse_quantity_rejects_garbage_naming_field_and_value(value: object) -> None:
    with pytest.raises(RequestError) as caught:
        parse_quantity(value, field="nvidia.com/gpumem", container="main")  # type: ignore[arg-type]
    assert caught.value.field == "nvidia.com/gpumem"
    assert caught.value.container == "main"
    assert caught.value.value is value
    assert "nvidia.com/gpumem" in str(caught.value)
    assert "main" in str(caught.value)


TO_INT = [
    ("1", 1),
    ("4k", 4000),
    ("8k", 8000),
    ("5500", 5500),
    ("1e3", 1000),
    ("1Ki", 1024),
    ("2000m", 2),
    (7, 7),
    (3.0, 3),
    ("0", 0),
    (str(INT32_MAX), INT32_MAX),
]


@pytest.mark.parametrize(("text", "expected"), TO_INT, ids=[repr(v[0]) for v in TO_INT])
def test_quantity_to_int_gives_whole_numbers(text: str | int | float, expected: int) -> None:
    assert quantity_to_int(text, field="f") == expected


TO_INT_ERRORS = [
    ("1.5", {}, "whole number"),
    ("500m", {}, "whole number"),
    ("-1", {}, "negative"),
    (-3, {}, "negative"),
    (str(INT32_MAX + 1), {}, "at most"),
    ("101", {"maximum": 100}, "at most 100"),
    ("junk", {}, "not a Kubernetes quantity"),
]


@pytest.mark.parametrize(
    ("text", "kwargs", "message"), TO_INT_ERRORS, ids=[repr(v[0]) for v in TO_INT_ERRORS]
)
def test_quantity_to_int_rejects_what_is_no_count(
    text: str | int, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(RequestError, match=message) as caught:
        quantity_to_int(text, field="nvidia.com/gpucores", container="c1", **kwargs)
    assert caught.value.field == "nvidia.com/gpucores"
    assert caught.value.container == "c1"
    assert caught.value.value == text


MILLI = [("500m", 500), ("2", 2000), ("0.1", 100), ("1u", 1), ("250m", 250), (4, 4000)]


@pytest.mark.parametrize(("text", "expected"), MILLI, ids=[repr(v[0]) for v in MILLI])
def test_quantity_to_milli_rounds_up_like_kubernetes(text: str | int, expected: int) -> None:
    assert quantity_to_milli(text) == expected


MIB = [("8Gi", 8192), ("512Mi", 512), ("1", 1), ("1G", 954), ("0", 0), ("1Mi", 1)]


@pytest.mark.parametrize(("text", "expected"), MIB, ids=[repr(v[0]) for v in MIB])
def test_quantity_to_mib_rounds_up(text: str, expected: int) -> None:
    assert quantity_to_mib(text) == expected


@pytest.mark.parametrize("convert", [quantity_to_milli, quantity_to_mib], ids=["milli", "mib"])
def test_host_quantities_reject_negative(convert: object) -> None:
    with pytest.raises(RequestError, match="negative"):
        convert("-1", field="cpu")  # type: ignore[operator]


@given(st.integers(min_value=0, max_value=INT32_MAX))
def test_plain_and_canonical_forms_agree(number: int) -> None:
    assert quantity_to_int(str(number)) == number
    if number % 1000 == 0 and number:
        assert quantity_to_int(f"{number // 1000}k") == number
    assert parse_quantity(f"{number}m") == Fraction(number, 1000)
