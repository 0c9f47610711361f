"""Who may read and change things: a bearer token from the settings, compared in
constant time.

Every call that changes state needs ``Authorization: Bearer <admin_token>``, and is
refused outright while no token is configured: a cluster without a token has no way
to change the inventory or cordon GPUs over HTTP, rather than an open one.

Reads (the admin API, gpushare's inspect, ``/metrics``) show every tenant's pods,
namespaces and GPU UUIDs, so they are guarded too: with a token configured they need
it (unless ``open_reads``); with none, they answer loopback clients only (a laptop
demo, ``vgpu-extender inspect`` on the same host) and refuse others, saying how to
set a token. ``/healthz`` and ``/readyz`` stay open for the kubelet's probes.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

import hmac
import ipaddress
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from vgpu_extender.settings import Settings

#: Documents the scheme in OpenAPI; the check below gives the errors their wording.
bearer = HTTPBearer(auto_error=False, description="The extender's admin_token (VGPU_ADMIN_TOKEN).")

#: The token a read may carry instead: the API server's service proxy consumes the
#: ``Authorization`` header and passes other headers on (``kubectl vgpu`` sends it there).
#: Changes still need ``Authorization``.
PROXIED_TOKEN_HEADER = "X-Vgpu-Admin-Token"
proxied_token = APIKeyHeader(
    name=PROXIED_TOKEN_HEADER,
    auto_error=False,
    description="The admin_token, for reads through the API server's service proxy.",
)

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison, so the time taken says nothing about the token."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def is_loopback(host: str) -> bool:
    """Any loopback address: ``127.0.0.0/8``, ``::1``, ``::ffff:127.x.y.z``."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host == "localhost"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _check_token(credentials: HTTPAuthorizationCredentials | None, expected: str) -> None:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <admin_token>'",
            headers=_CHALLENGE,
        )
    if not token_matches(credentials.credentials, expected):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong bearer token", headers=_CHALLENGE)


async def require_reader(
    request: Request,
    settings: Annotated[Settings, Depends(get_settings)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    proxied: Annotated[str | None, Depends(proxied_token)],
) -> None:
    """Let a read through: with the token when one is configured (as a bearer token, or
    in ``X-Vgpu-Admin-Token`` when no ``Authorization`` came), from loopback when none
    is, from anyone with ``open_reads``."""
    if settings.open_reads:
        return
    if settings.admin_token is not None:
        expected = settings.admin_token.get_secret_value()
        if credentials is None and proxied is not None:
            if not token_matches(proxied, expected):
                raise HTTPException(
                    status.HTTP_401_UNAUTHORIZED,
                    f"wrong token in {PROXIED_TOKEN_HEADER}",
                    headers=_CHALLENGE,
                )
            return
        _check_token(credentials, expected)
        return
    host = request.client.host if request.client else ""
    if not is_loopback(host):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"reads are served to loopback clients only while no admin_token is configured "
            f"(client {host!r}): set VGPU_ADMIN_TOKEN and send 'Authorization: Bearer "
            "<admin_token>', or set VGPU_OPEN_READS=true to open them to everyone",
        )


async def require_admin(
    settings: Annotated[Settings, Depends(get_settings)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Let the call through only with the configured bearer token."""
    if settings.admin_token is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "changes over the admin API are disabled: no admin_token is configured "
            "(set VGPU_ADMIN_TOKEN)",
        )
    _check_token(credentials, settings.admin_token.get_secret_value())


AdminDep = Depends(require_admin)
ReaderDep = Depends(require_reader)
