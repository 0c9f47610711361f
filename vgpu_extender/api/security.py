"""Who may change things: a bearer token from the settings, compared in constant time.

Reading is open (the admin API shows what the scheduler already knows). Every call
that changes state needs ``Authorization: Bearer <admin_token>``, and is refused
outright while no token is configured: a cluster without a token has no way to
change the inventory or cordon GPUs over HTTP, rather than an open one.
"""

# No ``from __future__ import annotations``: FastAPI reads these signatures at runtime.

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from vgpu_extender.settings import Settings

#: Documents the scheme in OpenAPI; the check below gives the errors their wording.
bearer = HTTPBearer(auto_error=False, description="The extender's admin_token (VGPU_ADMIN_TOKEN).")

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison, so the time taken says nothing about the token."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


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
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <admin_token>'",
            headers=_CHALLENGE,
        )
    if not token_matches(credentials.credentials, settings.admin_token.get_secret_value()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong bearer token", headers=_CHALLENGE)


AdminDep = Depends(require_admin)
