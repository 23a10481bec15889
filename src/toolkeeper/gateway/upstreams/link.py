"""One upstream connection, kept alive for the executors that call through it.

`UpstreamLink` is owned by a supervisor task: it connects with the official SDK client (stdio
or Streamable HTTP), lists the tools, re-lists on ``notifications/tools/list_changed`` (or a
2026-07-28 ``subscriptions/listen`` event) and on reconnect, and reconnects when a call finds
the connection gone. It is the `McpUpstream` of the gateway's `McpExecutor`s (executors/mcp.py,
which checks grants and maps every outcome): it hands out its session only for tools served
under an approved pin, and a call to a tool withheld since it was served is refused
(``stale``) or, when the upstream cannot be reached, ``unavailable`` — before anything is sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
from anyio.abc import TaskStatus
from mcp import Client, ClientSession, types
from mcp.client.subscriptions import ListenNotSupportedError

from toolkeeper.executors import ToolFailure
from toolkeeper.executors.mcp import describe, list_tools, mcp_client
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.gateway.upstreams.stderr import upstream_log
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.secrets.redaction import Redactor

logger = logging.getLogger(__name__)


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
    ) -> None:
        self.name = name
        self.config = config
        self.listing: dict[str, dict[str, Any]] | None = None
        """Tool name → definition, as last listed (None before the first listing)."""
        self.error: str | None = None
        """Why the last connection failed, scrubbed: calls and the operator's log quote it."""
        self.redactor = redactor
        """Where the credentials this upstream is given are registered, before it starts."""
        self.client: Client | None = None
        self._log = Path(home) / "upstreams" / f"{name}.log"
        self._on_listing = on_listing
        self._served: dict[str, str] = {}  # tool name → pin hash it is served under
        self._lost = anyio.Event()  # set: end the current session
        self._wake = anyio.Event()  # set: start a new session (or stop, when closing)
        self._changed = anyio.Event()  # fired whenever a session starts or ends
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
        self._wake.set()

    async def refresh(self) -> None:
        if self.client is not None:
            await self._list_and_report(self.client)

    # -- the supervisor --------------------------------------------------------------------

    async def attempted(self) -> None:
        """Wait until the first connection attempt succeeded or failed."""
        await self._first_attempt.wait()

    async def supervise(self) -> None:
        """Keep a session until closed: connect, serve until the connection is lost, then
        wait for the next call to ask for a reconnect."""
        while not self._closing:
            self._lost = anyio.Event()
            await self._run_session()
            self._fire_changed()
            if self._closing:
                return
            await self._wake.wait()
            self._wake = anyio.Event()

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
                    self.client, self.error = client, None
                    logger.info(
                        "upstream %s: connected in %.0f ms, %d tool(s) listed",
                        self.name,
                        (time.perf_counter() - started) * 1000,
                        len(self.listing or ()),
                    )
                    self._fire_changed()
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
        finally:
            self.client = None

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

    async def _client(self, stack: AsyncExitStack) -> Client:
        for credential in self.config.credentials(self.name):
            self.redactor.add(credential)
        options: dict[str, Any] = {
            "timeout": self.config.timeout,
            "message_handler": self._on_message,
            "client_name": "toolkeeper-gateway",
        }
        if self.config.transport != "stdio":
            url, headers = str(self.config.url), self.config.resolved_headers(self.name)
            return mcp_client(stack, url=url, headers=headers, **options)
        errlog = await stack.enter_async_context(upstream_log(self._log, self.redactor))
        stdio = self.config.stdio_parameters(self.name)
        return mcp_client(stack, stdio=stdio, errlog=errlog, **options)

    async def _list_and_report(self, client: Client) -> None:
        self.listing = await list_tools(client)
        self._on_listing(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()  # listing here would block the session's receive loop

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
        2025 one, as notifications through `_on_message`. Started once subscribed."""
        tools = client.server_capabilities.tools
        subscribed = False
        try:
            if tools and tools.list_changed:
                async with client.listen(tools_list_changed=True) as subscription:
                    subscribed = True
                    task_status.started()
                    async for _event in subscription:
                        self._relist.set()
        except ListenNotSupportedError:
            pass
        except Exception as exc:  # the stream is a convenience; calls still find a dead link
            self._failed(exc)
        if not subscribed:
            task_status.started()

    # -- what an McpExecutor calls through ----------------------------------------------

    async def session(self, tool: str) -> ClientSession:
        """The live session for a served `tool`, reconnecting first when the last call found
        the connection gone; nothing is sent when this raises."""
        client = self.client or await self._reconnect()
        session = _session_of(client)
        if session is None:
            raise ToolFailure(
                f"upstream {self.name!r} is unreachable: {self.error}",
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

    def lost(self) -> None:
        """The session is dead: stop handing it out and let the supervisor end it."""
        self.client = None
        self._lost.set()

    def changed(self) -> None:
        self._relist.set()

    async def _reconnect(self) -> Client | None:
        async with self._reconnecting:
            with anyio.move_on_after(self.config.timeout):
                while self.client is None and not self._closing:
                    changed = self._changed
                    self._wake.set()
                    await changed.wait()
        return self.client

    def _fire_changed(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        self._first_attempt.set()


def _session_of(client: Client | None) -> ClientSession | None:
    try:
        return client.session if client is not None else None
    except RuntimeError:  # the client closed between our check and the call: nothing sent
        return None
