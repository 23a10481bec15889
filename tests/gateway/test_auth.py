"""Bearer tokens over HTTP: a missing or wrong token is a 401 with the spec's challenge, a
static token maps to its principal, and OAuth mode names its protected-resource metadata."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from gateway_support import ALICE, Gateway, http_client
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError

from toolkeeper.gateway.app import http_app
from toolkeeper.gateway.auth import PrincipalResolver, StaticTokenVerifier
from toolkeeper.gateway.config.settings import HttpConfig
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import Principal

pytestmark = pytest.mark.anyio

EDITOR = Principal("editor", tenant="press", capabilities=frozenset({"write", "read"}))
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_static_tokens_map_to_their_principal() -> None:
    verifier = StaticTokenVerifier({"editor-token": EDITOR})
    token = await verifier.verify_token("editor-token")
    assert token is not None
    assert (token.client_id, token.subject, token.scopes) == ("editor", "editor", ["read", "write"])
    assert await verifier.verify_token("editor-tokem") is None
    assert await verifier.verify_token("") is None
    assert "editor-token" not in repr(verifier)
    assert PrincipalResolver(known={"editor": EDITOR}).for_token(token) == EDITOR


def test_an_oauth_token_of_an_unknown_subject_acts_with_its_scopes() -> None:
    token = AccessToken(
        token="t", client_id="app", subject="u-17", scopes=["read"], claims={"tenant": "press"}
    )
    principal = PrincipalResolver(known={"editor": EDITOR}).for_token(token)
    assert principal == Principal("u-17", "press", frozenset({"read"}), kind="user")


def test_a_fixed_principal_answers_every_request() -> None:
    assert PrincipalResolver(fixed=EDITOR)(None) == EDITOR
    assert PrincipalResolver(known={"editor": EDITOR})(None) is None


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("token", [None, "wrong-token", ALICE[:-1]])
async def test_missing_or_wrong_token_is_401(
    http_gateway: Gateway, era: str, token: str | None
) -> None:
    headers = {**ACCEPT, "MCP-Protocol-Version": era}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient() as http:
        response = await http.post(http_gateway.url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert token is None or token not in response.text


async def test_the_sdk_client_cannot_connect_with_a_wrong_token(http_gateway: Gateway) -> None:
    with pytest.RaisesGroup(MCPError, flatten_subgroups=True):
        async with http_client(http_gateway.url, "wrong-token", "legacy"):
            pass


async def test_oauth_mode_points_clients_at_the_resource_metadata(tmp_path: Path) -> None:
    http = HttpConfig.model_validate(
        {
            "auth": "oauth",
            "oauth": {
                "issuer_url": "https://auth.example.com",
                "resource_url": "http://127.0.0.1:8765/mcp",
                "verifier": "unused:here",
                "required_scopes": ["read"],
            },
        }
    )
    harness = Harness(home=tmp_path)
    server = GatewayServer(harness, principal_of=PrincipalResolver())
    app = http_app(server, http, verifier=StaticTokenVerifier({"editor-token": EDITOR}))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        refused = await client.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        metadata = await client.get("/.well-known/oauth-protected-resource/mcp")
    harness.close()
    assert refused.status_code == 401
    assert (
        'resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"'
        in refused.headers["www-authenticate"]
    )
    assert metadata.status_code == 200
    assert metadata.json()["authorization_servers"] == ["https://auth.example.com/"]
    assert metadata.json()["scopes_supported"] == ["read"]
