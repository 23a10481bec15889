"""The MCP gateway: serves governed tools to any MCP client and federates upstream MCP servers
behind pins, scans and policy.

    config = load_config("gateway.toml")
    async with open_gateway(config, transport="http") as server:
        await serve_http(server, config, on_ready=print)

`toolkeeper serve CONFIG [--http HOST:PORT]` does exactly this (README "## Gateway").
Needs the `gateway` extra (the MCP SDK and its server stack): pip install 'toolkeeper[gateway]'.
"""

try:
    import mcp  # noqa: F401
    import uvicorn  # noqa: F401
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        f"toolkeeper.gateway needs {exc.name!r}, which toolkeeper's core install leaves out: "
        "pip install 'toolkeeper[gateway]'",
        name=exc.name,
    ) from exc

from toolkeeper.gateway.app import http_app, open_gateway, serve_http, serve_stdio
from toolkeeper.gateway.auth import PrincipalResolver, StaticTokenVerifier
from toolkeeper.gateway.config.settings import GatewayConfig, HttpConfig, OAuthConfig, load_config
from toolkeeper.gateway.loader import build_harness
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.federation import Federation, connect_upstreams

__all__ = [
    "RESUME_TOOL",
    "Federation",
    "GatewayConfig",
    "GatewayServer",
    "HttpConfig",
    "OAuthConfig",
    "PrincipalResolver",
    "StaticTokenVerifier",
    "UpstreamConfig",
    "build_harness",
    "connect_upstreams",
    "http_app",
    "load_config",
    "open_gateway",
    "serve_http",
    "serve_stdio",
]
