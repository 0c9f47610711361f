"""Kubernetes resource quantities (``4k``, ``500m``, ``8Gi``, ``1e3``) as exact numbers.

kube-scheduler and the API server send quantities in canonical form, not as the numbers
written in the manifest: ``nvidia.com/gpumem: 4000`` arrives as ``"4k"``. A plain ``int()``
would reject it, so every resource value goes through here. Values are exact
``Fraction``s: a float would turn ``0.1`` into a number that is not a tenth.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vgpu_extender.domain.errors import RequestError

#: Suffix -> multiplier, as in k8s.io/apimachinery/pkg/api/resource (suffix.go).
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

# sign, number (``1``, ``1.5``, ``1.``, ``.5``), then a suffix or a decimal exponent.
# ``1E`` is exa and ``1E3`` an exponent: the regex tries the suffix first and backtracks.
_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)

#: Integer multipliers, for the exact fast path that skips Fraction (the common case).
_INT_SUFFIXES: dict[str, int] = {
    suffix: factor.numerator for suffix, factor in _SUFFIXES.items() if factor.denominator == 1
}
_WHOLE = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]|m?)")

#: Larger exponents are never meaningful for a resource and would make Fraction slow.
_MAX_EXPONENT = 64

#: Resource values are int32 in HAMi's annotations and device plugin; larger is garbage.
INT32_MAX = 2**31 - 1

_MIB = 2**20


def parse_quantity(value: str | int | float, *, field: str = "", container: str = "") -> Fraction:
    """The exact value of a Kubernetes quantity.

    Accepts what the API server accepts (and ints or finite floats, as test builders and
    traces carry them). Raises ``RequestError`` naming ``field``, ``container`` and the
    value for anything else.
    """
    if isinstance(value, bool):  # bool is an int subclass; True is no quantity
        raise RequestError("not a quantity", container=container, field=field, value=value)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RequestError(
                "not a finite quantity", container=container, field=field, value=value
            )
        return Fraction(value)
    if not isinstance(value, str):
        raise RequestError(
            f"quantity must be a string or a number, not {type(value).__name__}",
            container=container,
            field=field,
            value=value,
        )
    if value.isascii() and value.isdigit():  # the common case: "1", "50", "2048"
        return Fraction(int(value))
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise RequestError(
            "not a Kubernetes quantity", container=container, field=field, value=value
        )
    sign, number, suffix, exponent = match.groups()
    amount = Fraction(number)
    if exponent is not None:
        power = int(exponent)
        if abs(power) > _MAX_EXPONENT:
            raise RequestError(
                "quantity exponent out of range", container=container, field=field, value=value
            )
        amount *= Fraction(10) ** power
    else:
        amount *= _SUFFIXES[suffix or ""]
    return -amount if sign == "-" else amount


def _whole_units(value: object) -> tuple[int, bool] | None:
    """``(n, milli)`` when ``value`` is a plain integer string with an integer multiplier
    (``n``) or an ``m`` suffix (``n`` thousandths); None when Fraction is needed."""
    if type(value) is not str:
        return None
    match = _WHOLE.fullmatch(value)
    if match is None:
        return None
    number, suffix = match.groups()
    if suffix == "m":
        return int(number), True
    return int(number) * _INT_SUFFIXES[suffix], False


def quantity_to_int(
    value: str | int | float,
    *,
    field: str = "",
    container: str = "",
    maximum: int = INT32_MAX,
) -> int:
    """A quantity that must be a whole number in ``0..maximum`` (``"4k"`` -> 4000).

    Device counts, MiB, percentages and priorities are all of this kind: ``"1.5"``,
    ``"500m"`` and ``"-1"`` are errors, never rounded.
    """
    fast = _whole_units(value)
    if fast is not None and not fast[1]:
        whole = fast[0]
    else:
        amount = parse_quantity(value, field=field, container=container)
        if amount.denominator != 1:
            raise RequestError(
                "quantity must be a whole number", container=container, field=field, value=value
            )
        whole = amount.numerator
    if whole < 0:
        raise RequestError(
            "quantity must not be negative", container=container, field=field, value=value
        )
    if whole > maximum:
        raise RequestError(
            f"quantity must be at most {maximum}", container=container, field=field, value=value
        )
    return whole


def quantity_to_milli(value: str | int | float, *, field: str = "", container: str = "") -> int:
    """Thousandths, rounded up as Kubernetes' ``MilliValue`` does (CPU: ``"2"`` -> 2000)."""
    fast = _whole_units(value)
    if fast is not None:
        return fast[0] if fast[1] else fast[0] * 1000
    amount = parse_quantity(value, field=field, container=container)
    if amount < 0:
        raise RequestError(
            "quantity must not be negative", container=container, field=field, value=value
        )
    return math.ceil(amount * 1000)


def quantity_to_mib(value: str | int | float, *, field: str = "", container: str = "") -> int:
    """Bytes expressed in MiB, rounded up so a request is never under-counted
    (memory: ``"8Gi"`` -> 8192, ``"1"`` -> 1)."""
    fast = _whole_units(value)
    if fast is not None and not fast[1]:
        return -(-fast[0] // _MIB)
    amount = parse_quantity(value, field=field, container=container)
    if amount < 0:
        raise RequestError(
            "quantity must not be negative", container=container, field=field, value=value
        )
    return math.ceil(amount / _MIB)
