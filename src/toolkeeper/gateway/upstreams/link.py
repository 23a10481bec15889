"""One upstream connection and the executor that calls through it.

`UpstreamLink` is owned by a supervisor task: it connects with the official SDK client (stdio
or Streamable HTTP), lists the tools, re-lists on ``notifications/tools/list_changed`` (or a
2026-07-28 ``subscriptions/listen`` event) and on reconnect, and reconnects when a call finds
the connection gone. A call to a tool whose definition moved since it was served is refused
(``stale``). Every way a call can fail is translated here into a `ToolFailure` the harness can
act on: unreachable, stale, rejected, timed out, connection lost, or the tool's own error.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskStatus
from mcp import Client, ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolkeeper import __version__
from toolkeeper.executors import ToolFailure
from toolkeeper.gateway.upstreams.assessment import UpstreamTool
from toolkeeper.gateway.upstreams.config import UpstreamConfig
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import ErrorCategory

_MAX_PAGES = 100
_CALL_TIMEOUT = 86_400.0
"""The harness owns call timeouts (per contract); the session's own only guards against a
call outliving every contract."""


class UpstreamLink:
    """One upstream connection, owned by its supervisor task: connects, lists, watches for
    list changes, and reconnects when a call finds the connection gone."""

    def __init__(
        self,
        name: str,
        config: UpstreamConfig,
        *,
        home: Path,
        on_listing: Callable[[UpstreamLink], None],
    ) -> None:
        self.name = name
        self.config = config
        self.listing: dict[str, dict[str, Any]] | None = None
        """Tool name → definition, as last listed (None before the first listing)."""
        self.error: str | None = None
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
            await self._session()
            self._fire_changed()
            if self._closing:
                return
            await self._wake.wait()
            self._wake = anyio.Event()

    async def _session(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client(stack))
                async with anyio.create_task_group() as watchers:
                    # Subscribe before the first listing, or a change in between is lost.
                    await watchers.start(self._listen, client)
                    watchers.start_soon(self._relist_on_request, client)
                    await self._list_and_report(client)
                    self.client, self.error = client, None
                    self._fire_changed()
                    await self._lost.wait()
                    watchers.cancel_scope.cancel()
        except Exception as exc:  # a dead upstream is reported, never fatal to the gateway
            log = f"; the server's stderr is in {self._log}" if self._log.exists() else ""
            self.error = _describe(exc) + log
        finally:
            self.client = None

    def _client(self, stack: AsyncExitStack) -> Client:
        if self.config.transport == "stdio":
            self._log.parent.mkdir(parents=True, exist_ok=True)
            errlog = stack.enter_context(self._log.open("a", encoding="utf-8"))
            transport: Any = stdio_client(self.config.stdio_parameters(self.name), errlog=errlog)
        else:
            http = httpx2.AsyncClient(
                headers=self.config.resolved_headers(self.name),
                timeout=httpx2.Timeout(self.config.timeout, read=300.0),
            )
            transport = streamable_http_client(str(self.config.url), http_client=http)
            stack.push_async_callback(http.aclose)
        return Client(
            transport,
            cache=None,  # a cached listing would hide a rug pull
            message_handler=self._on_message,
            read_timeout_seconds=self.config.timeout,
            client_info=types.Implementation(name="toolkeeper-gateway", version=__version__),
        )

    async def _list_and_report(self, client: Client) -> None:
        tools: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools[tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.listing = tools
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
                self.error = _describe(exc)

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
            self.error = _describe(exc)
        if not subscribed:
            task_status.started()

    # -- calls -------------------------------------------------------------------------------

    async def call(self, tool: UpstreamTool, arguments: dict[str, Any]) -> Any:
        """``tools/call`` on the upstream, with every outcome the harness must tell apart
        mapped to a `ToolFailure` (see `_protocol_failure`)."""
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
        if self._served.get(tool.name) != tool.hash:
            raise ToolFailure(
                f"{tool.contract_id} changed on upstream {self.name!r} since it was approved; "
                "it is withheld until an operator approves the new definition",
                category=ErrorCategory.STALE,
                effect_committed=False,
                suggested_fix="Do not retry; an operator must review and approve the change.",
            )
        try:
            # The session, not Client.call_tool: the latter re-lists and resends on a schema
            # mismatch, which would run a definition nobody approved.
            result = await session.call_tool(
                tool.name, arguments, read_timeout_seconds=_CALL_TIMEOUT
            )
        except MCPError as exc:
            raise self._protocol_failure(exc) from exc
        except (RuntimeError, ValidationError) as exc:
            raise ToolFailure(
                f"upstream {self.name!r} answered {tool.name} with an invalid result: {exc}",
                effect_committed=None,
            ) from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._drop()
            raise ToolFailure(
                f"the connection to upstream {self.name!r} failed: {exc}",
                category=ErrorCategory.UNAVAILABLE,
                retryable=True,
                effect_committed=None,
            ) from exc
        if result.is_error:
            raise _tool_error(self.name, tool.name, result)
        return _output(result)

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

    def _drop(self) -> None:
        """The session is dead: stop handing it out and let the supervisor end it."""
        self.client = None
        self._lost.set()

    def _protocol_failure(self, exc: MCPError) -> ToolFailure:
        """A JSON-RPC error is not the tool's answer: the call may never have run (a rejected
        request) or its effect is unknown (the connection died while it ran)."""
        where = f"upstream {self.name!r}: {exc.error.message}"
        if exc.error.code == types.CONNECTION_CLOSED:
            self._drop()
            return ToolFailure(
                f"lost the connection to {where}",
                category=ErrorCategory.UNAVAILABLE,
                retryable=True,
                effect_committed=None,
            )
        if exc.error.code == types.REQUEST_TIMEOUT:
            return ToolFailure(
                where, category=ErrorCategory.TIMEOUT, retryable=True, effect_committed=None
            )
        if exc.error.code in (types.INVALID_PARAMS, types.METHOD_NOT_FOUND):
            return ToolFailure(f"rejected by {where}", category=ErrorCategory.INVALID_ARGUMENT)
        if exc.error.code == types.HEADER_MISMATCH:
            self._relist.set()
            return ToolFailure(
                f"the tool's definition changed on {where}", category=ErrorCategory.STALE
            )
        return ToolFailure(
            f"protocol error from {where}",
            category=ErrorCategory.UNAVAILABLE,
            retryable=True,
            effect_committed=None,
        )


class UpstreamExecutor:
    """Runs one approved upstream tool: the harness's executor for ``mcp:<server>`` tools."""

    def __init__(self, link: UpstreamLink, tool: UpstreamTool) -> None:
        self.source = f"mcp:{link.name}"
        self._link = link
        self._tool = tool

    def __repr__(self) -> str:
        return f"UpstreamExecutor({self._link.name!r}, {self._tool.name!r})"

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self._link.call(self._tool, arguments)


def _session_of(client: Client | None) -> ClientSession | None:
    try:
        return client.session if client is not None else None
    except RuntimeError:  # the client closed between our check and the call: nothing sent
        return None


def _output(result: types.CallToolResult) -> dict[str, Any]:
    if isinstance(result.structured_content, dict):
        return result.structured_content
    output: dict[str, Any] = {"text": _text(result)}
    other = [b.model_dump(mode="json", by_alias=True) for b in result.content if b.type != "text"]
    if other:
        output["content"] = other
    return output


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _tool_error(server: str, tool: str, result: types.CallToolResult) -> ToolFailure:
    """An ``isError`` result: the tool ran and failed. When the upstream is itself a
    toolkeeper gateway its envelope says what kind of failure; otherwise nobody can say
    whether a side effect happened before the failure."""
    text = _text(result)[:2000] or f"{tool} on upstream {server!r} failed without a message"
    content = result.structured_content if isinstance(result.structured_content, dict) else {}
    error = content.get("error") if isinstance(content.get("error"), dict) else None
    if error and error.get("category") in ErrorCategory.__members__.values():
        committed = error.get("effect_committed")
        return ToolFailure(
            str(error.get("message") or text),
            category=error["category"],
            retryable=bool(error.get("retryable", False)),
            effect_committed=committed if isinstance(committed, bool) else None,
            suggested_fix=error.get("suggested_fix"),
        )
    return ToolFailure(text, effect_committed=None)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (MCP error {exc.error.code})"
    return f"{type(exc).__name__}: {exc}"
