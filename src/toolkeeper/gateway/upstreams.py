"""Upstream federation: the tools of other MCP servers, served through the harness only after
an operator approved exactly their definitions.

`connect_upstreams` connects to every configured upstream with the official SDK client (stdio
or Streamable HTTP), lists its tools and decides each one's fate (`ToolStatus`): disabled by
the config, invalid (cannot become a contract), a name collision, blocked by a scan finding,
new, changed since approval (a rug pull until an operator says otherwise), or approved. Only
approved tools are registered, as contracts with the importer's cautious defaults (committing,
open world, not idempotent) plus the operator's overrides; upstream annotations stay hints.

Each connection has a supervisor task (`UpstreamLink`) that re-lists on
``notifications/tools/list_changed`` (or a 2026-07-28 ``subscriptions/listen`` event) and on
reconnect, and every listing is assessed again: a served tool whose definition moved is
refused by its executor (``stale``) until re-approved. The harness registry cannot unregister,
so a gateway listing tools asks `Federation.is_served`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolkeeper import __version__
from toolkeeper.context import ToolContext
from toolkeeper.contract import ToolContract
from toolkeeper.envelope import ErrorCategory
from toolkeeper.errors import RegistryError, ToolkeeperError
from toolkeeper.executors import ToolFailure
from toolkeeper.gateway.pins import PinStore, pin_hash, pinned_definition
from toolkeeper.gateway.scanning import Finding, Severity, blocking, scan_tool
from toolkeeper.gateway.upstream_config import UpstreamConfig
from toolkeeper.importers import from_mcp_tool

if TYPE_CHECKING:
    from toolkeeper.harness import Harness

_MAX_PAGES = 100
_CALL_TIMEOUT = 86_400.0
"""The harness owns call timeouts (per contract); the session's own only guards against a
call outliving every contract."""

LOCAL = "(local tools)"
"""The `known_tools` key for tools registered with the harness outside the federation."""


class ToolStatus(StrEnum):
    """What the gateway made of one upstream tool; only `approved` is served."""

    APPROVED = "approved"
    NEW = "new"
    CHANGED = "changed"
    BLOCKED = "blocked"
    COLLISION = "collision"
    INVALID = "invalid"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """One tool an upstream offers, its pin hash, findings and status (with the reason when it
    is withheld)."""

    server: str
    name: str
    contract_id: str
    hash: str
    status: ToolStatus
    findings: tuple[Finding, ...] = ()
    reason: str = ""
    contract: ToolContract | None = field(default=None, repr=False)


def assess(
    listings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    configs: Mapping[str, UpstreamConfig],
    pins: PinStore,
    *,
    local_ids: Collection[str] = (),
) -> list[UpstreamTool]:
    """Decide every listed tool's status: ``listings`` maps server → tool name → definition.

    Collisions are judged across all listings at once: two upstreams offering one id both
    lose it until a namespace tells them apart.
    """
    known: dict[str, Collection[str]] = {server: set(tools) for server, tools in listings.items()}
    if local_ids:
        known[LOCAL] = set(local_ids)
    offered: dict[str, list[str]] = {}
    for server, tools in listings.items():
        for name in tools:
            offered.setdefault(configs[server].namespace + name, []).append(server)
    return [
        _assess_one(server, name, tool, configs[server], pins, known, offered, local_ids)
        for server, tools in listings.items()
        for name, tool in tools.items()
    ]


def _assess_one(
    server: str,
    name: str,
    tool: Mapping[str, Any],
    config: UpstreamConfig,
    pins: PinStore,
    known: Mapping[str, Collection[str]],
    offered: Mapping[str, list[str]],
    local_ids: Collection[str],
) -> UpstreamTool:
    contract_id, digest = config.namespace + name, pin_hash(tool)
    findings = tuple(scan_tool(server, tool, known_tools=known))

    def report(status: ToolStatus, reason: str = "", **extra: Any) -> UpstreamTool:
        return UpstreamTool(server, name, contract_id, digest, status, findings, reason, **extra)

    if not config.override(name).enabled:
        return report(ToolStatus.DISABLED, f"disabled in the config (tools.{name}.enabled)")
    rivals = [s for s in offered[contract_id] if s != server]
    if rivals or contract_id in local_ids:
        holders = ", ".join(repr(s) for s in rivals) or "a local tool"
        target = rivals[0] if rivals and config.namespace == f"{server}." else server
        reason = (
            f"id {contract_id!r} is also offered by {holders}; give each upstream its own "
            f"namespace, e.g. mcpServers.{target}.namespace = {target + '.'!r}"
        )
        findings += (Finding("name_collision", Severity.HIGH, "/name", reason, server, name),)
        return report(ToolStatus.COLLISION, reason)
    try:
        contract = _contract(tool, config, contract_id, digest)
    except ToolkeeperError as exc:
        return report(ToolStatus.INVALID, f"cannot become a contract: {exc}")
    pin = pins.approved(server, name)
    blockers = blocking(findings, config.scan)
    if blockers and not (pin and pin.hash == digest and pin.forced):
        codes = ", ".join(sorted({f.code for f in blockers}))
        return report(
            ToolStatus.BLOCKED,
            f"blocked by scan findings ({codes}); inspect with `toolkeeper upstreams list`",
        )
    if pin is None:
        return report(
            ToolStatus.NEW,
            f"new, not approved yet; review it, then `toolkeeper upstreams approve CONFIG "
            f"{server} {name}`",
        )
    if pin.hash != digest:
        return report(
            ToolStatus.CHANGED,
            f"changed since {pin.approved_by} approved it (a possible rug pull); review "
            f"`toolkeeper upstreams diff CONFIG {server} {name}`, then approve again",
        )
    return report(ToolStatus.APPROVED, contract=contract)


def _contract(
    tool: Mapping[str, Any], config: UpstreamConfig, contract_id: str, digest: str
) -> ToolContract:
    """The importer's cautious contract, with the operator's overrides on top; the pin hash
    is the implementation digest, so a ledger record names the exact definition it ran."""
    overrides = config.override(str(tool["name"])).contract_fields()
    return from_mcp_tool(
        pinned_definition(tool),
        **{"id": contract_id, "version": "0.0.0", "implementation_digest": digest, **overrides},
    )


class Federation:
    """Connected upstreams and what each offers; close it from the task that opened it."""

    def __init__(
        self,
        configs: Mapping[str, UpstreamConfig],
        harness: Harness | None,
        *,
        home: Path,
    ) -> None:
        self.pins = PinStore.in_home(home)
        self.tools: dict[tuple[str, str], UpstreamTool] = {}
        """Every listed tool by (server, name), as last assessed."""
        self.withheld: dict[tuple[str, str], str] = {}
        """Tools not served, with the reason."""
        self.errors: dict[str, str] = {}
        """Upstreams that could not be reached, with the error."""
        self._configs = dict(configs)
        self._harness = harness
        self._local_ids = {c.id for c in harness.registry.latest_contracts()} if harness else set()
        self._links = {
            name: UpstreamLink(name, config, home=home, on_listing=self._relisted)
            for name, config in configs.items()
        }
        self._registered: dict[str, str] = {}  # contract id → registered pin hash
        self._stack = AsyncExitStack()
        self._group: TaskGroup | None = None
        self._started = False

    def __repr__(self) -> str:
        served = sum(tool.status is ToolStatus.APPROVED for tool in self.tools.values())
        withheld = len(self.withheld)
        return f"Federation(upstreams={len(self._links)}, served={served}, withheld={withheld})"

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every listed tool, collisions included."""
        return [finding for tool in self.tools.values() for finding in tool.findings]

    def is_served(self, contract_id: str) -> bool:
        """Whether the tool with this id is approved as currently listed (a gateway filters its
        tool list with this, since the registry keeps what it once registered)."""
        return any(
            tool.contract_id == contract_id and key not in self.withheld
            for key, tool in self.tools.items()
        )

    async def start(self) -> None:
        group = await self._stack.enter_async_context(anyio.create_task_group())
        self._group = group
        for link in self._links.values():
            group.start_soon(link.supervise)
        for link in self._links.values():
            await link.attempted()
        self._started = True
        for link in self._links.values():
            self._record(link)
        self.reassess()

    async def refresh(self) -> None:
        """List every connected upstream again and re-pin (also done on list_changed)."""
        for link in self._links.values():
            await link.refresh()

    def reassess(self) -> None:
        """Judge the last listings against the pin store as it is now: call it after an
        operator approved (a signal handler, a timer); `refresh` also lists again."""
        listings = {
            name: link.listing for name, link in self._links.items() if link.listing is not None
        }
        for name, link in self._links.items():
            if link.error and not link.listing:
                self.errors[name] = link.error
            else:
                self.errors.pop(name, None)
        reports = assess(listings, self._configs, self.pins, local_ids=self._local_ids)
        self.tools = {(r.server, r.name): r for r in reports}
        self.withheld = {}
        for report in reports:
            link = self._links[report.server]
            if report.status is ToolStatus.APPROVED and self._register(report, link):
                link.serve(report.name, report.hash)
            else:
                link.withhold(report.name)
                self.withheld[(report.server, report.name)] = report.reason or (
                    "approved, but an earlier definition is registered in this process; "
                    "restart the gateway to serve the re-approved one"
                )

    async def aclose(self) -> None:
        for link in self._links.values():
            link.close()
        if self._group is not None:
            self._group.cancel_scope.cancel()  # a connect in progress need not finish first
        await self._stack.aclose()

    async def __aenter__(self) -> Federation:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _relisted(self, link: UpstreamLink) -> None:
        if self._started:  # the first listings are assessed together, for collisions
            self._record(link)
            self.reassess()

    def _record(self, link: UpstreamLink) -> None:
        if link.listing is not None:
            self.pins.record_seen(link.name, link.listing)

    def _register(self, report: UpstreamTool, link: UpstreamLink) -> bool:
        """Register an approved tool once per definition; False when the registry already
        holds another definition under the same id and version."""
        if self._harness is None or report.contract is None:
            return True  # a survey serves nothing
        if self._registered.get(report.contract_id) == report.hash:
            return True
        try:
            self._harness.register(report.contract, executor=UpstreamExecutor(link, report))
        except RegistryError:
            return False
        self._registered[report.contract_id] = report.hash
        return True


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


async def connect_upstreams(
    configs: Mapping[str, UpstreamConfig], harness: Harness, *, home: Path
) -> Federation:
    """Connect to `configs`, register their approved tools with `harness`, and return the
    `Federation` (an async context manager that disconnects; close it in this task).

    An upstream that cannot be reached is skipped and named in `Federation.errors`; the
    others are served.
    """
    federation = Federation(configs, harness, home=Path(home))
    await federation.start()
    return federation


async def survey_upstreams(
    configs: Mapping[str, UpstreamConfig], *, home: Path
) -> tuple[list[UpstreamTool], dict[str, str]]:
    """What every upstream offers and its status, without serving anything (the CLI's view):
    the tools, and the upstreams that could not be reached."""
    async with Federation(configs, None, home=Path(home)) as federation:
        await federation.start()
        return list(federation.tools.values()), dict(federation.errors)
