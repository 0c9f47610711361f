"""Building a settings object for a command line: environment first, flags on top.

Shared by the extender's and the node agent's CLIs, so both report a bad value the
same way: every failing field named, with the value given, and exit status 2. A
secret's value is never shown, nor a password inside a URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, get_args

import typer
from pydantic import SecretBytes, SecretStr, ValidationError
from pydantic_settings import BaseSettings

from vgpu_extender.redaction import HIDDEN, hide_passwords

S = TypeVar("S", bound=BaseSettings)


def settings_or_exit(cls: type[S], overrides: Mapping[str, Any]) -> S:
    """``cls`` from the environment with the flags that were given (not None) on top."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return cls(**given)
    except ValidationError as exc:
        typer.echo("invalid settings:\n" + describe_errors(exc, secret_fields(cls)), err=True)
        raise typer.Exit(2) from None


def describe_errors(exc: ValidationError, secrets: frozenset[str] = frozenset()) -> str:
    """One line per failing field: ``  field: message (got value)``; the value of a
    field in ``secrets`` shows as ``***``, and passwords in URLs are hidden."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        line = f"  {where or 'settings'}: {err['msg']}"
        if err.get("input") is not None and err["loc"]:
            shown = HIDDEN if str(err["loc"][0]) in secrets else repr(err["input"])
            line += f" (got {shown})"
        lines.append(hide_passwords(line))
    return "\n".join(lines)


def secret_fields(cls: type[BaseSettings]) -> frozenset[str]:
    """The fields typed as a pydantic secret (``SecretStr``, optional or not)."""

    def secret(annotation: object) -> bool:
        if annotation in (SecretStr, SecretBytes):
            return True
        return any(secret(arg) for arg in get_args(annotation))

    return frozenset(name for name, field in cls.model_fields.items() if secret(field.annotation))
