"""Go's ``strconv`` parsing rules, which HAMi's annotations are written and read with.

Python's ``int()`` accepts spaces and underscores and ``bool("false")`` is True, so
reading HAMi's values with them would accept what HAMi rejects, or the reverse.
"""

from __future__ import annotations

import re

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``: exactly the twelve spellings Go accepts, else ValueError."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r} (expected one of true/false, 1/0, t/f)")


def parse_int(text: str, *, bits: int = 32) -> int:
    """``strconv.ParseInt(text, 10, bits)``: optional sign and ASCII digits, in range."""
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"not a decimal integer: {text!r}")
    value = int(text)
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise ValueError(f"integer out of the int{bits} range: {text!r}")
    return value
