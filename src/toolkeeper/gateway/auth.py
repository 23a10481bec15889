"""Who a gateway request acts as: bearer tokens over HTTP, the configured principal on stdio.

Over HTTP the gateway is an OAuth 2.1 resource server in the SDK's terms: a `TokenVerifier`
turns a bearer token into an `AccessToken`, the SDK's middleware answers a missing or unknown
token with 401 and a ``WWW-Authenticate: Bearer`` challenge (naming the protected-resource
metadata when an authorization server is configured), and `PrincipalResolver` maps the token
to a `Principal`. The embedded default is `StaticTokenVerifier`; OAuth deployments plug in a
verifier for their authorization server (JWT, introspection) through the same seam.

Tokens are never logged, printed or kept in a repr. Each refused request is logged once, at
WARNING, with its reason, client address, method and path (`LoggedRefusals`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkeeper.runtime.invocation import Principal

logger = logging.getLogger(__name__)


class StaticTokenVerifier:
    """A `TokenVerifier` over tokens fixed in the configuration, one per principal.

    Every configured token is compared, in constant time over sha256 digests, so neither the
    answer time nor an early exit tells a caller how close a guess was or which token matched.
    """

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        self._tokens = [(_digest(token), principal) for token, principal in tokens.items()]

    def __repr__(self) -> str:
        return f"StaticTokenVerifier(<{len(self._tokens)} tokens hidden>)"

    async def verify_token(self, token: str) -> AccessToken | None:
        presented = _digest(token)
        matched: Principal | None = None
        for secret, principal in self._tokens:
            if hmac.compare_digest(presented, secret):
                matched = principal
        if matched is None:
            return None
        return AccessToken(
            token=token,
            client_id=matched.id,
            subject=matched.id,
            scopes=sorted(matched.capabilities),
            claims={"tenant": matched.tenant},
        )


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True)
class PrincipalResolver:
    """Maps the transport's request to the principal it acts as, or None (refuse it).

    `fixed` answers every request (stdio, or HTTP without authentication); otherwise the
    request's authenticated token decides: a token whose subject (or client id) names a
    configured principal acts as that principal, and any other token an authorization server
    issued acts as itself, with its scopes as capabilities and its ``tenant`` claim as tenant.
    """

    fixed: Principal | None = None
    known: Mapping[str, Principal] = field(default_factory=dict)

    def __call__(self, request: Any) -> Principal | None:
        if self.fixed is not None:
            return self.fixed
        scope = getattr(request, "scope", None)
        user = scope.get("user") if isinstance(scope, Mapping) else None
        if not isinstance(user, AuthenticatedUser):
            return None
        return self.for_token(user.access_token)

    def for_token(self, token: AccessToken) -> Principal:
        for name in (token.subject, token.client_id):
            if name is not None and name in self.known:
                return self.known[name]
        tenant = (token.claims or {}).get("tenant", "default")
        return Principal(
            id=token.subject or token.client_id,
            tenant=str(tenant),
            capabilities=frozenset(token.scopes),
            kind="user",
        )


def require_bearer(
    app: ASGIApp,
    verifier: TokenVerifier,
    *,
    resource_url: AnyHttpUrl | None = None,
    required_scopes: list[str] | None = None,
    check_audience: bool = False,
) -> tuple[ASGIApp, list[Middleware]]:
    """Wrap the MCP endpoint so only requests with a token `verifier` accepts reach it.

    Returns the endpoint and the app-level middleware that authenticates every request. With
    `resource_url` (OAuth mode) the 401 challenge names the RFC 9728 metadata document, which
    the caller must serve (`mcp.server.auth.routes.create_protected_resource_routes`), and
    `check_audience` refuses a token whose ``AccessToken.resource`` is not `resource_url`
    (the spec's audience binding: a token issued for another service is not ours to honour).
    """
    metadata_url = build_resource_metadata_url(resource_url) if resource_url else None
    endpoint = LoggedRefusals(RequireAuthMiddleware(app, required_scopes or [], metadata_url))
    audience = resource_url if check_audience else None
    backend = BearerAuthBackend(verifier, resource_server_url=audience)
    middleware = [
        Middleware(AuthenticationMiddleware, backend=backend),
        Middleware(AuthContextMiddleware),
    ]
    return endpoint, middleware


class LoggedRefusals:
    """ASGI middleware logging each request the bearer layer refuses: a 401 or 403 whose
    ``WWW-Authenticate: Bearer`` challenge marks it as an authentication answer (a 403 of the
    transport's DNS-rebinding check is not one). The line says why (no bearer token, a token
    not accepted, a missing scope), from where and for what; never the token."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (401, 403):
                headers = dict(message.get("headers") or ())
                if headers.get(b"www-authenticate", b"").startswith(b"Bearer "):
                    _log_refusal(scope, message["status"])
            await send(message)

        await self.app(scope, receive, watched)


def _log_refusal(scope: Scope, status: int) -> None:
    if status == 403:
        reason = "the token lacks a required scope"
    elif any(name == b"authorization" for name, _ in scope.get("headers") or ()):
        reason = "the bearer token was not accepted"
    else:
        reason = "no bearer token"
    client = scope.get("client")
    logger.warning(
        "refused %s %s from %s: %d, %s",
        scope.get("method", "?"),
        scope.get("path", "?"),
        client[0] if client else "an unknown address",
        status,
        reason,
    )
