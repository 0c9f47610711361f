"""Start-up failures as one line each: the setting, the value, what to do.

A bad setting, an unreadable inventory file or a database that cannot be reached is
the operator's to fix, not a bug: a traceback of 60 lines buries the one fact that
matters. :class:`StartupError` carries that fact; :func:`describe` turns the known
failure classes into them, and :meth:`StartupError.line` renders one, named by its
environment variable and its flag, with every password hidden. The CLI prints the
lines and exits with status 2 (the traceback too at ``--log-level debug``).

Kept light (the standard library and ``redaction``): the CLI imports it before it
knows whether it will start anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vgpu_extender.redaction import HIDDEN, hide_passwords

if TYPE_CHECKING:
    from pydantic import ValidationError

ENV_PREFIX = "VGPU_"
#: Settings whose value is never shown.
SECRET_FIELDS = frozenset({"admin_token"})
#: Advice when nothing more specific is known.
GENERIC_ADVICE = "fix the value, or unset it to get the default"
DEBUG_HINT = "run with --log-level debug for the traceback"


def env_var(name: str) -> str:
    """The environment variable of the setting ``name``."""
    return ENV_PREFIX + name.upper()


@dataclass(frozen=True)
class StartupError(Exception):
    """Why the extender cannot start, for the operator to fix.

    ``fields``: the settings concerned (none when the failure names none);
    ``value``: what was given, shown redacted (``None``: not shown).
    """

    problem: str
    advice: str = GENERIC_ADVICE
    fields: tuple[str, ...] = ()
    value: object | None = None
    #: Flags per setting of the command that failed, for the line (``--port``).
    flags: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return self.line()

    def with_flags(self, flags: Mapping[str, str]) -> StartupError:
        return StartupError(self.problem, self.advice, self.fields, self.value, flags)

    def line(self) -> str:
        """``error: VGPU_PORT (--port): <problem> (got 'x'); <advice>``, one line."""
        parts = ["error: "]
        if self.fields:
            parts.append(", ".join(self._label(name) for name in self.fields) + ": ")
        parts.append(self.problem.rstrip(". "))
        if self.value is not None:
            shown = HIDDEN if any(f in SECRET_FIELDS for f in self.fields) else _short(self.value)
            parts.append(f" (got {shown})")
        if self.advice:
            parts.append(f"; {self.advice}")
        # One line whatever the messages held (a YAML error spans several).
        return " ".join(hide_passwords("".join(parts)).split())

    def _label(self, name: str) -> str:
        flag = self.flags.get(name)
        return f"{env_var(name)} ({flag})" if flag else env_var(name)


def _short(value: object, limit: int = 200) -> str:
    # Passwords hidden before the cut: a cut inside a URL's credentials would leave
    # nothing for the redaction to recognise, and part of the password would show.
    if isinstance(value, (int, float, bool)):
        return repr(value)
    text = repr(hide_passwords(str(value)))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------ settings errors
#: pydantic's error types and what to do about each.
_ADVICE_BY_TYPE = {
    "int_parsing": "give a whole number",
    "int_from_float": "give a whole number",
    "float_parsing": "give a number",
    "bool_parsing": "give true or false",
    "json_invalid": "give valid JSON",
    "literal_error": "give one of the values listed",
    "enum": "give one of the values listed",
}


def from_validation(exc: ValidationError, known: Sequence[str]) -> list[StartupError]:
    """One error per failing setting of a pydantic ``ValidationError``; a check across
    settings (``loc`` empty) names the settings its message mentions (``known``)."""
    errors = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        advice = _ADVICE_BY_TYPE.get(str(err.get("type", "")), GENERIC_ADVICE)
        if loc:
            name = str(loc[0])
            value = err.get("input")
            shown = value if isinstance(value, (str, int, float, bool)) else None
            if message.startswith("no such file"):
                advice = "give the path of an existing file"
            errors.append(StartupError(message, advice, (name,), shown))
        else:
            mentioned = tuple(n for n in known if re.search(rf"\b{re.escape(n)}\b", message))
            errors.append(StartupError(message, "change one of them", mentioned))
    return errors


_SOURCE_FIELD = re.compile(r'error parsing value for field "(?P<field>[^"]+)"')


def from_settings_error(exc: Exception) -> StartupError:
    """pydantic-settings' ``SettingsError``: a complex setting (``vendor_options``)
    whose environment value is not JSON."""
    match = _SOURCE_FIELD.search(str(exc))
    name = match.group("field") if match else ""
    cause = exc.__cause__
    problem = f"not valid JSON ({cause})" if isinstance(cause, json.JSONDecodeError) else str(exc)
    return StartupError(
        problem,
        'give a JSON object, e.g. {"count_resource": "example.com/gpu"}',
        (name,) if name else (),
    )


# ------------------------------------------------------------------ runtime errors
def describe(exc: BaseException, settings: Any = None) -> StartupError:
    """The start-up error ``exc`` stands for: what the store, the inventory file, the
    vendor or the cluster config raised, named by the setting behind it; anything else
    by its type and first line, pointing to the traceback."""
    if isinstance(exc, StartupError):
        return exc
    # Imported here: only a failed start pays for them.
    from vgpu_extender.domain.errors import InventoryError
    from vgpu_extender.store.errors import StoreError, StoreInputError, StoreUnavailable

    url = getattr(settings, "database_url", None)
    if isinstance(exc, InventoryError):
        return StartupError(
            str(exc),
            "fix the file, or point the setting at another",
            ("inventory_file",),
        )
    if isinstance(exc, StoreInputError):
        return StartupError(exc.message, "fix the database URL", ("database_url",))
    text = _first_line(exc)
    if isinstance(exc, StoreError):
        text = exc.message.splitlines()[0] if exc.message.strip() else text
    if isinstance(exc, StoreError) and _read_only(exc):
        return StartupError(
            f"the database cannot be written: {text}",
            "make the SQLite file and its directory writable by this process, "
            "or point the setting at a writable path",
            ("database_url",),
            url,
        )
    if isinstance(exc, StoreUnavailable):
        return StartupError(
            f"the database cannot be reached: {text}",
            "start the database or fix the URL (host, port, credentials)",
            ("database_url",),
            url,
        )
    if isinstance(exc, StoreError):
        return StartupError(
            f"the database refused to start the extender: {text}",
            f"check the database and its URL; {DEBUG_HINT}",
            ("database_url",),
            url,
        )
    module = type(exc).__module__
    # A kubeconfig that is not YAML fails in the YAML parser, before the client knows.
    yaml_kubeconfig = module.startswith("yaml") and getattr(settings, "kubeconfig", None)
    if module.startswith("kubernetes") or yaml_kubeconfig or "kubeconfig" in text.lower():
        return StartupError(
            f"cannot load the Kubernetes configuration: {text}",
            "fix the kubeconfig, or run standalone (VGPU_KUBE_MODE=off, --standalone)",
            ("kubeconfig",),
        )
    return StartupError(f"start-up failed: {type(exc).__name__}: {text}", DEBUG_HINT)


def vendor_error(exc: Exception) -> StartupError:
    """The vendor could not be built from ``vendor`` and its options."""
    return StartupError(
        _first_line(exc),
        "fix the vendor's name or its options (a JSON object of its settings)",
        ("vendor", "vendor_options"),
    )


def _read_only(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).lower()
        if "readonly database" in text or "read-only" in text or "unable to open database" in text:
            return True
        seen = seen.__cause__
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ------------------------------------------------------------------ misspelt variables
#: Other programs' variables under the same prefix: the node agent's (``VGPU_DP_``),
#: the test suite's and the benchmarks'.
OTHER_PREFIXES = ("VGPU_DP_", "VGPU_TEST_", "VGPU_BENCH_", "VGPU_SHARED_")


def unknown_variables(
    environ: Mapping[str, str], known: Sequence[str]
) -> list[tuple[str, str | None]]:
    """Each ``VGPU_*`` variable that names no setting in ``known``, with the closest
    setting's variable (None when none is close), sorted by name."""
    import difflib

    names = {env_var(name) for name in known}
    found = []
    for key in sorted(environ):
        upper = key.upper()
        if not upper.startswith(ENV_PREFIX) or upper in names:
            continue
        if upper.startswith(OTHER_PREFIXES):
            continue
        close = difflib.get_close_matches(upper, sorted(names), n=1, cutoff=0.6)
        found.append((key, close[0] if close else None))
    return found
