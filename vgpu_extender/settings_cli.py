"""Building a settings object for a command line: environment first, flags on top.

Shared by the extender's and the node agent's CLIs, so both report a bad value the
same way: every failing field named, with the value given, and exit status 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import typer
from pydantic import ValidationError
from pydantic_settings import BaseSettings

S = TypeVar("S", bound=BaseSettings)


def settings_or_exit(cls: type[S], overrides: Mapping[str, Any]) -> S:
    """``cls`` from the environment with the flags that were given (not None) on top."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return cls(**given)
    except ValidationError as exc:
        typer.echo("invalid settings:\n" + describe_errors(exc), err=True)
        raise typer.Exit(2) from None


def describe_errors(exc: ValidationError) -> str:
    """One line per failing field: ``  field: message (got value)``."""
    return "\n".join(
        f"  {'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
        + (f" (got {err['input']!r})" if err.get("input") is not None and err["loc"] else "")
        for err in exc.errors()
    )
