"""Running a gateway: open it from a configuration, then serve it over stdio or HTTP.

`open_gateway` owns everything with a lifetime (the harness and its ledger, the upstream
connections) and yields the `GatewayServer`; `serve_stdio` and `serve_http` put that server
on a transport. Over HTTP the SDK's session manager serves both protocol eras on one endpoint
(``MCP-Protocol-Version: 2026-07-28`` requests take its stateless path), behind bearer
authentication and, on a loopback host, DNS-rebinding protection.
"""

from __future__ import annotations

import functools
import importlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from toolkeeper import __version__
from toolkeeper.discovery.progressive import MetaTools
from toolkeeper.errors import ConfigError
from toolkeeper.gateway.auth import PrincipalResolver, StaticTokenVerifier, require_bearer
from toolkeeper.gateway.config.settings import (
    GatewayConfig,
    HttpConfig,
    LedgerConfig,
    OAuthConfig,
    is_loopback,
)
from toolkeeper.gateway.limits import (
    DEFAULT_MESSAGE_BYTES,
    MessageLimit,
    bounded_stdin,
    refuse_oversized,
)
from toolkeeper.gateway.loader import build_harness, check_reserved_names
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.gateway.upstreams.federation import connect_upstreams
from toolkeeper.gateway.wire import MessageCheck, stdio_streams
from toolkeeper.ledger.retention import apply_policy
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.reconciliation import Reconciliation
from toolkeeper.secrets.redaction import redacting_log_records

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]

_INSTRUCTIONS = (
    "Every call is governed: it is validated, authorized, possibly held for a human approval, "
    "and recorded. A result that did not succeed says why and what to do next; a call held "
    "for approval is continued with toolkeeper.resume once a human has decided."
)


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig, *, transport: Transport
) -> AsyncIterator[GatewayServer]:
    """The gateway `config` describes, ready to serve on `transport`; closed on exit (in the
    task that opened it, which the upstream connections require). While it is open, every
    log record of the process is scrubbed of the secrets its redactor holds."""
    principal_of = _principals(config, transport)
    harness = build_harness(config, recover=False)
    discovery = MetaTools(harness) if config.discovery == "search" else None
    local_ids = frozenset(contract.id for contract in harness.registry.latest_contracts())
    try:
        async with AsyncExitStack() as stack:
            stack.enter_context(redacting_log_records(harness.redactor))
            federation = None
            if config.upstreams:
                # Not waited for: a slow upstream's tools join when it connects.
                federation = await connect_upstreams(
                    config.upstreams, harness, home=config.home, wait=False
                )
                stack.push_async_callback(federation.aclose)
            check_reserved_names(harness)
            # Before serving: a client retrying after a crash then finds its call settled.
            await maintain_ledger(harness, config.ledger)
            background = []
            if config.ledger.reconcile_interval > 0:
                background.append(functools.partial(_maintain_every, harness, config.ledger))
            yield GatewayServer(
                harness,
                principal_of=principal_of,
                name=config.name,
                version=__version__,
                instructions=_INSTRUCTIONS,
                stdio_session=transport == "stdio",
                federation=federation,
                local_ids=local_ids,
                background=background,
                discovery=discovery,
                always_loaded=frozenset(config.always_loaded),
            )
    finally:
        harness.close()


async def maintain_ledger(harness: Harness, settings: LedgerConfig) -> None:
    """One reconciliation pass, then the retention policy if one is set, each reported in
    the log. A pass that fails (the database is away) is logged and left to the next: it
    must never stop the gateway."""
    try:
        report = await harness.reconcile()
    except Exception as exc:
        logger.error("ledger reconciliation failed; the next pass retries: %s", exc)
    else:
        _report_reconciliation(report)
    policy = settings.retention.policy()
    if policy.bounded:
        try:
            pruned = await anyio.to_thread.run_sync(apply_policy, harness.ledger, policy)
        except Exception as exc:
            logger.error("ledger retention failed; the next pass retries: %s", exc)
        else:
            if pruned.pruned:
                logger.warning(
                    "ledger retention pruned %d settled invocation(s) (%s)", pruned.pruned, policy
                )


async def _maintain_every(harness: Harness, settings: LedgerConfig) -> None:
    while True:
        await anyio.sleep(settings.reconcile_interval)
        await maintain_ledger(harness, settings)


_LOGGED_UNSETTLED = 20
"""Calls still unknown that one pass names in the log; the rest are counted."""


def _report_reconciliation(report: Reconciliation) -> None:
    """Counts at WARNING when a pass found anything (an operator wants to know a crash left
    work), at INFO otherwise; the first calls left unknown by id and reason."""
    counts = report.counts()
    level = logging.WARNING if any(counts[k] for k in counts if k != "running") else logging.INFO
    logger.log(level, "ledger reconciliation: %s", report.summary())
    for left in report.unsettled[:_LOGGED_UNSETTLED]:
        logger.warning("effect still unknown: %s (%s): %a", left.request_id, left.tool, left.reason)


def _principals(config: GatewayConfig, transport: Transport) -> PrincipalResolver:
    if transport == "stdio":
        if config.stdio_principal is None:
            raise ConfigError(
                "stdio_principal is not set; name the principal a stdio client acts as "
                '(stdio_principal = "<id>"), or serve over HTTP with --http',
                key="stdio_principal",
            )
        return PrincipalResolver(fixed=config.principal(config.stdio_principal))
    if config.http.auth == "none":
        assert config.http.principal is not None  # checked when the config loaded
        return PrincipalResolver(fixed=config.principal(config.http.principal))
    return PrincipalResolver(known={name: config.principal(name) for name in config.principals})


async def serve_stdio(
    server: GatewayServer, *, max_message_bytes: int = DEFAULT_MESSAGE_BYTES
) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects; a line
    over `max_message_bytes` is refused unread, and one that is no JSON-RPC message is
    answered with a JSON-RPC error (gateway/wire.py)."""
    refuse_oversized(server.lowlevel)
    with bounded_stdin(max_message_bytes) as stdin:
        async with stdio_streams(stdin=anyio.wrap_file(stdin)) as (read_stream, write_stream):
            await server.lowlevel.run(
                read_stream, write_stream, server.lowlevel.create_initialization_options()
            )


async def serve_http(
    server: GatewayServer,
    config: GatewayConfig,
    *,
    host: str | None = None,
    port: int | None = None,
    on_ready: Callable[[str], None] = lambda url: None,
) -> None:
    """Serve over Streamable HTTP until interrupted or cancelled; `on_ready(url)` runs once
    it accepts connections (port 0 picks a free port, and the URL names the real one).

    Cancelling the caller's scope shuts the server down gracefully, as a signal does.
    """
    port = config.http.port if port is None else port
    http = config.http.model_copy(update={"host": host or config.http.host, "port": port})
    listener = _listen(http.host, http.port)
    url_host = f"[{http.host}]" if ":" in http.host else http.host
    url = f"http://{url_host}:{listener.getsockname()[1]}{http.path}"
    app = http_app(
        server,
        http,
        verifier=_verifier(config, http),
        on_ready=lambda: on_ready(url),
        max_message_bytes=config.limits.message_bytes,
    )
    uvicorn_config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2
    )
    web = uvicorn.Server(uvicorn_config)
    async with anyio.create_task_group() as tasks:

        async def run() -> None:
            # Shielded: cancelling uvicorn mid-loop skips its shutdown; it must exit itself.
            with anyio.CancelScope(shield=True):
                await web.serve(sockets=[listener])
            tasks.cancel_scope.cancel()

        tasks.start_soon(run)
        try:
            await anyio.sleep_forever()
        finally:
            web.should_exit = True


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say
    # so, and with Nagle on every response waits ~40 ms for the client's delayed ACK.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host.strip("[]"), port))
    except OSError as exc:
        listener.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another port with "
            "--http HOST:PORT (port 0 picks a free one)",
            key="http.port",
            value=port,
        ) from None
    listener.listen(128)
    return listener


def _verifier(config: GatewayConfig, http: HttpConfig) -> TokenVerifier | None:
    if http.auth == "none":
        return None
    if http.oauth is not None:
        return _load_verifier(http.oauth)
    tokens = config.tokens()
    if not tokens:
        raise ConfigError(
            "http.auth is 'token' but no principal has a token; add token_env (or token) to "
            "a principal, or serve over stdio",
            key="http.auth",
            value=http.auth,
        )
    return StaticTokenVerifier(tokens)


def _load_verifier(oauth: OAuthConfig) -> TokenVerifier:
    module_name, _, attribute = oauth.verifier.partition(":")
    try:
        verifier: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            verifier = getattr(verifier, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"http.oauth.verifier = {oauth.verifier!r} cannot be loaded ({exc}); name a "
            "TokenVerifier instance as package.module:attribute",
            key="http.oauth.verifier",
            value=oauth.verifier,
        ) from exc
    if not callable(getattr(verifier, "verify_token", None)):
        raise ConfigError(
            f"http.oauth.verifier = {oauth.verifier!r} has no verify_token(token) method; "
            "name an object implementing mcp.server.auth.provider.TokenVerifier",
            key="http.oauth.verifier",
            value=oauth.verifier,
        )
    return verifier


def http_app(
    server: GatewayServer,
    http: HttpConfig,
    *,
    verifier: TokenVerifier | None,
    on_ready: Callable[[], None] = lambda: None,
    max_message_bytes: int = DEFAULT_MESSAGE_BYTES,
) -> Starlette:
    """The ASGI app: the MCP endpoint at `http.path`, authenticated by `verifier` (None: open);
    a request body over `max_message_bytes` is refused before it is parsed."""
    security = None
    if is_loopback(http.host):
        loopback = ("127.0.0.1", "localhost", "[::1]")
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{name}:*" for name in loopback],
            allowed_origins=[f"http://{name}:*" for name in loopback],
        )
    manager = StreamableHTTPSessionManager(
        app=server.lowlevel,
        json_response=http.json_response,
        stateless=http.stateless,
        security_settings=security,
        max_request_body_size=max_message_bytes,
    )
    endpoint: ASGIApp = MessageLimit(
        MessageCheck(StreamableHTTPASGIApp(manager)), max_message_bytes
    )
    middleware: list[Middleware] = []
    extra_routes: list[BaseRoute] = []
    if verifier is not None:
        oauth = http.oauth
        endpoint, middleware = require_bearer(
            endpoint,
            verifier,
            resource_url=oauth.resource_url if oauth else None,
            required_scopes=oauth.required_scopes if oauth else None,
            check_audience=oauth.check_audience if oauth else False,
        )
        if oauth is not None:
            extra_routes.extend(
                create_protected_resource_routes(
                    resource_url=oauth.resource_url,
                    authorization_servers=[oauth.issuer_url],
                    scopes_supported=oauth.required_scopes or None,
                )
            )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            on_ready()
            yield

    routes: list[BaseRoute] = [Route(http.path, endpoint=endpoint), *extra_routes]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
