"""One upstream connection, kept alive for the executors that call through it.

`UpstreamLink` is owned by a supervisor task: it connects with the official SDK client (stdio
or Streamable HTTP), lists the tools, re-lists on ``notifications/tools/list_changed`` (or a
2026-07-28 ``subscriptions/listen`` event) and on reconnect, and heals: a session that ends —
a stdio server that exited, an HTTP server that restarted and no longer knows the session, a
failed health check, a call that found the connection gone — is replaced by a new one (a
respawned process, a new ``initialize``), at once after a long-lived session and with
exponential backoff while the server keeps failing. Nobody waits for it: the gateway serves
at once, and the upstream's tools join when its first listing arrives.

It is the `McpUpstream` of the gateway's `McpExecutor`s (executors/mcp.py, which checks grants
and maps every outcome): it hands out its session only for tools served under an approved
pin, and a call to a tool withheld since it was served is refused (``stale``) or, when the
upstream cannot be reached, ``unavailable`` — before anything is sent.

A stdio server is started through `tether` on Linux, so it dies with the gateway even when
the gateway is killed outright.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
from anyio.abc import TaskStatus
from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkeeper.executors import ToolFailure
from toolkeeper.executors.mcp import CallsInFlight, describe, list_tools, mcp_client
from toolkeeper.gateway.upstreams import tether
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.offerings import list_offerings
from toolkeeper.gateway.upstreams.stderr import upstream_log
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.secrets.redaction import Redactor

logger = logging.getLogger(__name__)

HEALTH_CHECK_SECONDS = 5.0
"""How often an idle link pings its upstream: a stdio server that exited, or an HTTP server
that restarted (and answers 404 for the old session), is found and replaced before a call
has to find it."""
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
"""Seconds before reconnecting after a session that failed or lived less than `BACKOFF_MAX`
seconds: doubling from `BACKOFF_FIRST` while the upstream keeps failing, so a crash-looping
server is not respawned in a tight loop."""

_T = TypeVar("_T")
_RELISTED = (
    types.ToolListChangedNotification,
    types.PromptListChangedNotification,
    types.ResourceListChangedNotification,
)


class UpstreamLink:
    """One upstream connection, owned by its supervisor task: connects, lists, watches for
    list changes, and reconnects when a call finds the connection gone."""

    def __init__(
        self,
        name: str,
        config: UpstreamConfig,
        *,
        home: Path,
        redactor: Redactor,
        on_listing: Callable[[UpstreamLink], None],
        on_updated: Callable[[UpstreamLink, str], Awaitable[None]] | None = None,
    ) -> None:
        """`on_listing` hears each new listing; `on_updated` each resource the upstream
        says changed (``notifications/resources/updated``, or a 2026 listen event)."""
        self.name = name
        self.config = config
        self.listing: dict[str, dict[str, Any]] | None = None
        """Tool name → definition, as last listed (None before the first listing)."""
        self.offered: dict[str, dict[str, Any]] = {}
        """Its prompts, resources and templates by `pins.offering_key`, as last listed."""
        self.subscriptions: frozenset[str] = frozenset()
        """The URIs the gateway's clients subscribe to here; a 2026 listen stream is opened
        again whenever they change (its filter is fixed when it opens)."""
        self.error: str | None = None
        """Why the last connection failed, scrubbed: calls and the operator's log quote it."""
        self.redactor = redactor
        """Where the credentials this upstream is given are registered, before it starts."""
        self.client: Client | None = None
        self.calls: CallsInFlight | None = CallsInFlight()
        """The calls running through this link, whose clients the upstream may reach."""
        self._log = Path(home) / "upstreams" / f"{name}.log"
        self._on_listing = on_listing
        self._on_updated = on_updated
        self._relisten = anyio.Event()
        self._served: dict[str, str] = {}  # tool name → pin hash it is served under
        self._lost = anyio.Event()  # set: end the current session
        self._changed = anyio.Event()  # fired whenever a session starts or ends
        self._failures = 0  # sessions in a row that failed or ended young
        self._first_attempt = anyio.Event()
        self._relist = anyio.Event()
        self._reconnecting = anyio.Lock()
        self._closing = False

    def serve(self, tool: str, digest: str) -> None:
        self._served[tool] = digest

    def withhold(self, tool: str) -> None:
        self._served.pop(tool, None)

    def close(self) -> None:
        self._closing = True
        self._lost.set()

    async def refresh(self) -> None:
        if self.client is not None:
            await self._list_and_report(self.client)

    # -- the supervisor --------------------------------------------------------------------

    async def attempted(self) -> None:
        """Wait until the first connection attempt succeeded or failed."""
        await self._first_attempt.wait()

    async def supervise(self) -> None:
        """Keep a session until closed: connect, serve until the session ends, then connect
        again — at once after a session that lived long, else after a growing pause."""
        while not self._closing:
            self._lost = anyio.Event()
            started = anyio.current_time()
            await self._run_session()
            self._fire_changed()
            if self._closing:
                return
            young = anyio.current_time() - started < BACKOFF_MAX
            self._failures = self._failures + 1 if young else 0
            pause = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self._failures - 1))
            if self._failures:
                logger.warning(
                    "upstream %s: %s; connecting again in %.1f s", self.name, self.error, pause
                )
                await anyio.sleep(pause)

    async def _run_session(self) -> None:
        # Progress goes to the log as it happens: a slow upstream must not look like a hang.
        started = time.perf_counter()
        logger.info(
            "upstream %s: connecting to %s (timeout %g s)",
            self.name,
            self.target,
            self.config.timeout,
        )
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client(stack))
                async with anyio.create_task_group() as watchers:
                    # Subscribe before the first listing, or a change in between is lost.
                    await watchers.start(self._listen, client)
                    watchers.start_soon(self._relist_on_request, client)
                    await self._list_and_report(client)
                    await self._resubscribe(client)
                    self.client, self.error = client, None
                    logger.info(
                        "upstream %s: connected in %.0f ms, %d tool(s) listed",
                        self.name,
                        (time.perf_counter() - started) * 1000,
                        len(self.listing or ()),
                    )
                    self._fire_changed()
                    watchers.start_soon(self._check_health, client)
                    await self._lost.wait()
                    watchers.cancel_scope.cancel()
                    if not self._closing:
                        logger.info(
                            "upstream %s: connection lost; the next call reconnects", self.name
                        )
        except Exception as exc:  # a dead upstream is reported, never fatal to the gateway
            log = f"; the server's stderr is in {self._log}" if self._log.exists() else ""
            self._failed(exc, log)
            logger.info(
                "upstream %s: failed after %.0f ms: %s",
                self.name,
                (time.perf_counter() - started) * 1000,
                self.error,
            )
            if self.listing is None:
                self._on_listing(self)  # the federation names it unreachable
        finally:
            self.client = None

    async def _resubscribe(self, client: Client) -> None:
        """A new 2025 session knows none of the old one's resource subscriptions."""
        if not self.subscriptions or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for uri in sorted(self.subscriptions):
                await client.subscribe_resource(uri)

    def _failed(self, exc: BaseException, hint: str = "") -> None:
        # An upstream may quote its credentials in an error (a rejected token, a URL).
        self.error = self.redactor.redact_text(describe(exc) + hint)

    @property
    def target(self) -> str:
        """Where the upstream is, for the log: the URL without credentials or query, or the
        stdio command without its arguments (either may carry a token)."""
        if self.config.transport == "stdio":
            return f"{Path(self.config.command or '').name} (stdio)"
        url = urlsplit(str(self.config.url))
        host = url.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if url.port is not None:
            netloc += f":{url.port}"
        return urlunsplit((url.scheme, netloc, url.path, "", ""))

    async def _check_health(self, client: Client) -> None:
        while True:
            await anyio.sleep(HEALTH_CHECK_SECONDS)
            try:
                with anyio.fail_after(self.config.timeout):
                    await _probe(client)
            except Exception as exc:
                self._failed(exc, "")
                self.error = f"the health check failed: {self.error}"
                self.lost()
                return

    async def _client(self, stack: AsyncExitStack) -> Client:
        for credential in self.config.credentials(self.name):
            self.redactor.add(credential)
        options: dict[str, Any] = {
            "timeout": self.config.timeout,
            "message_handler": self._on_message,
            "client_name": "toolkeeper-gateway",
            "calls": self.calls,
            "mode": self.config.protocol,
        }
        if self.config.transport != "stdio":
            url, headers = str(self.config.url), self.config.resolved_headers(self.name)
            return mcp_client(stack, url=url, headers=headers, **options)
        errlog = await stack.enter_async_context(upstream_log(self._log, self.redactor))
        stdio = _tethered(self.config.stdio_parameters(self.name))
        return mcp_client(stack, stdio=stdio, errlog=errlog, **options)

    async def _list_and_report(self, client: Client) -> None:
        listing = await list_tools(client)
        try:
            self.offered = await list_offerings(client)
        except Exception as exc:  # the tools still serve; a broken listing offers nothing
            logger.warning(
                "upstream %s: its prompts and resources could not be listed: %s",
                self.name,
                self.redactor.redact_text(describe(exc)),
            )
            self.offered = {}
        self.listing = listing
        self._on_listing(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, _RELISTED):
            self._relist.set()  # listing here would block the session's receive loop
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self._updated(str(message.params.uri))

    async def _updated(self, uri: str) -> None:
        if self._on_updated is not None and uri in self.subscriptions:
            await self._on_updated(self, uri)

    async def _relist_on_request(self, client: Client) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                await self._list_and_report(client)
            except Exception as exc:
                self._failed(exc)

    async def _listen(
        self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """On a 2026-07-28 connection change events arrive on a subscription stream; on a
        2025 one, as notifications through `_on_message`. Started once subscribed; the
        stream is opened again when the subscribed resources change."""
        capabilities = client.server_capabilities
        tools, prompts, resources = (
            capabilities.tools,
            capabilities.prompts,
            capabilities.resources,
        )
        wanted = {
            "tools_list_changed": bool(tools and tools.list_changed),
            "prompts_list_changed": bool(prompts and prompts.list_changed),
            "resources_list_changed": bool(resources and resources.list_changed),
        }
        started = False
        try:
            while True:
                self._relisten = anyio.Event()
                if not (any(wanted.values()) or self.subscriptions):
                    if not started:
                        started = True
                        task_status.started()
                    await self._relisten.wait()  # a 2026 client subscribed to a resource
                    continue
                uris = sorted(self.subscriptions)
                async with client.listen(**wanted, resource_subscriptions=uris) as subscription:
                    if not started:
                        started = True
                        task_status.started()
                    async with anyio.create_task_group() as stream:
                        stream.start_soon(self._on_relisten, stream.cancel_scope)
                        async for event in subscription:
                            # The SDK also hands every event to `_on_message` as its
                            # notification, which routes resource updates (once).
                            if not isinstance(event, ResourceUpdated):
                                self._relist.set()
                        stream.cancel_scope.cancel()
                if not self._relisten.is_set():
                    break  # the upstream ended the stream
        except ListenNotSupportedError:
            pass
        except Exception as exc:  # the stream is a convenience; calls still find a dead link
            self._failed(exc)
        if not started:
            task_status.started()

    async def _on_relisten(self, scope: anyio.CancelScope) -> None:
        await self._relisten.wait()
        scope.cancel()

    # -- what an McpExecutor calls through ----------------------------------------------

    async def session(self, tool: str) -> ClientSession:
        """The live session for a served `tool`, reconnecting first when the last call found
        the connection gone; nothing is sent when this raises."""
        client = self.client or await self._reconnect()
        session = _session_of(client)
        if session is None:
            raise ToolFailure(
                f"upstream {self.name!r} is unreachable ({self._state()}): {self.error}",
                category=ErrorCategory.UNAVAILABLE,
                retryable=True,
                effect_committed=False,
                suggested_fix="Try again later; the call was not sent.",
            )
        # The federation serves a name only under the pin its executor was registered for,
        # so a tool missing here changed (or was withdrawn) since it was approved.
        if tool not in self._served:
            raise ToolFailure(
                f"{self.config.namespace}{tool} changed on upstream {self.name!r} since it was "
                "approved; it is withheld until an operator approves the new definition",
                category=ErrorCategory.STALE,
                effect_committed=False,
                suggested_fix="Do not retry; an operator must review and approve the change.",
            )
        return session

    async def forward(self, what: str, send: Callable[[Client], Awaitable[_T]]) -> _T:
        """`send` a read-only request (a prompt, a resource read, a completion) over the live
        session: the upstream's own protocol error passes on, redacted; an unreachable
        upstream is an internal error naming it, and a failed connection is replaced."""
        client = self.client or await self._reconnect()
        if client is None or _session_of(client) is None:
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"upstream {self.name!r} is unreachable ({self._state()}): {self.error}",
            )
        timeout = self.config.call_timeout or self.config.timeout
        try:
            with anyio.fail_after(timeout):
                return await send(client)
        except MCPError as exc:
            raise MCPError(
                code=exc.error.code, message=self.redactor.redact_text(exc.error.message)
            ) from None
        except TimeoutError:  # a slow answer; the session itself may be fine
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"upstream {self.name!r} did not answer {what} within {timeout:g} s",
            ) from None
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._failed(exc)
            self.lost()  # the connection is gone: the supervisor replaces it
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"upstream {self.name!r} failed to answer {what}: {self.error}",
            ) from None
        except Exception as exc:  # e.g. a result that is not what the method returns
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"upstream {self.name!r} answered {what} with an invalid result: "
                f"{self.redactor.redact_text(describe(exc))}",
            ) from None

    async def subscribe(self, uris: frozenset[str]) -> None:
        """Hear about changes to exactly `uris` from now on: ``resources/subscribe`` and
        ``unsubscribe`` on a 2025 session for the difference, a new listen stream on a
        2026 connection."""
        added, removed = uris - self.subscriptions, self.subscriptions - uris
        self.subscriptions = uris
        client = self.client
        if client is None or not (added or removed):
            return  # a new session subscribes to `subscriptions` as it starts
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self._relisten.set()
            return
        with warnings.catch_warnings():  # the 2025 way; 2026 took the other arm
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for uri in sorted(added):
                await self.forward("resources/subscribe", _subscribing(uri))
            for uri in sorted(removed):
                await self.forward("resources/unsubscribe", _unsubscribing(uri))

    def lost(self) -> None:
        """The session is dead: stop handing it out and let the supervisor replace it."""
        self.client = None
        self.error = self.error or "a call found the connection gone"
        self._lost.set()

    def changed(self) -> None:
        self._relist.set()

    async def _reconnect(self) -> Client | None:
        """The next session, waiting at most the connect timeout for the supervisor."""
        async with self._reconnecting:
            with anyio.move_on_after(self.config.timeout):
                while self.client is None and not self._closing:
                    await self._changed.wait()
        return self.client

    def _state(self) -> str:
        if self._failures:
            return f"{self._failures} failed attempt(s) in a row, reconnecting with backoff"
        return "reconnecting"

    def _fire_changed(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        self._first_attempt.set()


async def _probe(client: Client) -> None:
    """The cheapest request the connection's era has: ``ping`` on a 2025 session (removed in
    2026-07-28), a bare ``server/discover`` on a 2026 connection (no state is adopted)."""
    version = client.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS:
        await client.session.send_discover(version)
    else:
        with warnings.catch_warnings():  # deprecated for 2026-07-28, which takes the other arm
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_ping()


def _subscribing(uri: str) -> Callable[[Client], Awaitable[types.EmptyResult]]:
    async def send(client: Client) -> types.EmptyResult:
        return await client.subscribe_resource(uri)

    return send


def _unsubscribing(uri: str) -> Callable[[Client], Awaitable[types.EmptyResult]]:
    async def send(client: Client) -> types.EmptyResult:
        return await client.unsubscribe_resource(uri)

    return send


def _tethered(params: StdioServerParameters) -> StdioServerParameters:
    """`params` started through `tether` on Linux (elsewhere unchanged: the SDK's own process
    group still ends the server when the gateway closes the link)."""
    if not sys.platform.startswith("linux"):
        return params
    args = ["-I", str(Path(tether.__file__)), str(os.getpid()), params.command, *params.args]
    return params.model_copy(update={"command": sys.executable, "args": args})


def _session_of(client: Client | None) -> ClientSession | None:
    try:
        return client.session if client is not None else None
    except RuntimeError:  # the client closed between our check and the call: nothing sent
        return None
