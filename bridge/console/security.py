"""Who may see memory: bearer tokens on every ``/api/`` request, and headers that fence the page in.

The token travels only in the ``Authorization`` header. A query string ends up in access logs,
browser history and ``Referer`` headers, so a token there is ignored on purpose (the request gets
a 401 like one without a token). The page itself and its scripts hold no data and need no token.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from enum import Enum

from aiohttp import web
from aiohttp.typedefs import Middleware

from ..config import ConsoleSettings

API_PREFIX = "/api/"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: Only this origin's files may run, style, load or be fetched; nothing may frame the page.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleError(ValueError):
    """The console cannot start as configured; the message names the key to fix."""


class Role(Enum):
    READ = "read"
    ADMIN = "admin"


def check_settings(settings: ConsoleSettings) -> None:
    """Refuse a console nobody could sign in to (and that would otherwise be tempting to open up)."""
    if not settings.token and not settings.admin_token:
        raise ConsoleError(
            "the memory console needs a token: set console.token (read-only; $MEMBRIDGE_CONSOLE_TOKEN in the "
            "shipped config.yaml) and/or console.admin_token (read and revert; $MEMBRIDGE_CONSOLE_ADMIN_TOKEN)"
        )


def role_for(authorization: str | None, settings: ConsoleSettings) -> Role | None:
    """The role a ``Bearer`` header grants, or None; every comparison takes constant time."""
    scheme, _, presented = (authorization or "").partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        return None
    given = presented.encode("utf-8")
    is_admin = _matches(settings.admin_token, given)
    is_reader = _matches(settings.token, given)  # compared even after an admin match: timing tells nothing
    if is_admin:
        return Role.ADMIN
    return Role.READ if is_reader else None


def _matches(expected: str | None, given: bytes) -> bool:
    if not expected:  # an unset token matches nothing, not even an empty header
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given)


def json_error(status: int, message: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"error": message}), content_type="application/json",
                        headers=headers)


def auth_middleware(settings: ConsoleSettings) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX):
            return await handler(request)
        role = role_for(request.headers.get("Authorization"), settings)
        if role is None:
            return json_error(401, "a valid console token is required in the header 'Authorization: Bearer <token>'",
                              **{"WWW-Authenticate": 'Bearer realm="membridge console"'})
        if request.method not in SAFE_METHODS and role is not Role.ADMIN:
            return json_error(403, "this token is read-only; changing memory needs console.admin_token")
        return await handler(request)

    return authenticate


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response, errors and static files included (an ``on_response_prepare`` hook)."""
    response.headers.update(SECURITY_HEADERS)
    if request.path.startswith(API_PREFIX):
        response.headers["Cache-Control"] = "no-store"  # memory must not linger in caches
