"""`GatewayServer`: the harness served over MCP by the SDK's low-level `Server`.

The low-level server is used (not `MCPServer`) so the pipeline owns validation: the SDK never
checks arguments against ``inputSchema``, and an invalid argument comes back as a tool
execution error carrying our envelope. Every ``tools/call`` is one `Harness.invoke` (or, for
`RESUME_TOOL`, one `Harness.resume`), so the gateway adds no second road to execution.

Both protocol eras are served by the same handlers; the SDK routes each connection (stdio) or
request (HTTP) by the era the client opens with:

- 2025-11-25 and earlier: the ``initialize`` handshake and, over HTTP, ``Mcp-Session-Id``
  sessions. The catalog changing is announced with ``notifications/tools/list_changed`` on
  each connection's standalone channel (stdout, or the session's GET stream).
- 2026-07-28: no handshake, no session; every request carries its own envelope. Change
  notifications reach only clients that opened a ``subscriptions/listen`` stream.

Either way a client is told only when its own principal's listing changed: a change to tools
it cannot see says nothing to it (not even that they exist).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

import anyio
from mcp.server import CacheHint, NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    SetLevelRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkeeper.adapters.mcp import CALL_ID_META
from toolkeeper.artifacts.store import ArtifactError
from toolkeeper.codemode.program import RUN_CODE_ID
from toolkeeper.contract.model import ToolContract
from toolkeeper.discovery.progressive import LOAD_TOOLS, META_TOOLS, MetaTools
from toolkeeper.errors import ApprovalError, LedgerError
from toolkeeper.gateway import resources
from toolkeeper.gateway.peer import ClientPeer, LogLevels, undeclared
from toolkeeper.gateway.readonly import UpstreamReads, install_handlers
from toolkeeper.gateway.results import (
    RESUME_TOOL,
    advertised_output_schema,
    call_result,
    gateway_note,
    passed_through,
    refusal,
    tool_listing,
    withheld_result,
)
from toolkeeper.gateway.rounds import SuspendedCalls, UnknownRequestState
from toolkeeper.gateway.wire import sent_call
from toolkeeper.runtime import stages
from toolkeeper.runtime.context import ClientRequest
from toolkeeper.runtime.envelope import ErrorCategory, ResultEnvelope, Status, ToolError
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import Principal, Proposal
from toolkeeper.schema.document import utf8_text

if TYPE_CHECKING:
    from toolkeeper.gateway.upstreams.federation import Federation

logger = logging.getLogger(__name__)

PrincipalOf = Callable[[Any], Principal | None]
"""Maps the transport's request object (a Starlette request, or None on stdio) to a principal."""

CATALOG_POLL_SECONDS = 0.25
"""How often the catalog state is compared. The harness exposes a generation counter and the
federation its tools' statuses, not callbacks; comparing them costs next to nothing and
catches changes from every source (registrations, re-listed upstreams, re-approved pins)."""
LIST_PAGE_SIZE = 500
"""Tools per ``tools/list`` page; a client follows ``nextCursor`` for the rest, and each
request serializes one page, however large the catalog."""
MAX_CACHED_LISTINGS = 64
"""Serialized listings kept, one per principal view in use (least recently used out)."""
MAX_TRACKED_SESSIONS = 10_000
"""Handshake-era connections remembered for list-changed pushes (the SDK's session cap), and
principals whose listeners are tracked."""
MAX_SUSPENDED_CALLS = 256
"""Calls of 2026-07-28 clients held at once while their clients answer a tool's request."""
SUSPENDED_CALL_SECONDS = 600.0
"""How long such a call waits for its client to call again with the answer (rounds.py)."""
_CAPABILITY_ASKS: tuple[ClientRequest, ...] = get_args(ClientRequest)
IDEMPOTENCY_KEY_META = "toolkeeper.dev/idempotency_key"
"""The ``_meta`` key of ``tools/call`` under which a client names its idempotency key: a
retry that carries the same key (after a timeout, a lost connection, a gateway restart)
replays the first call's outcome instead of running again. Without it a keyed tool's key is
derived, and a 2025 client's derived key changes with its session."""
MAX_IDEMPOTENCY_KEY = 256
MAX_CALL_ID = 256
"""Characters of a client's ``_meta`` ``toolkeeper.dev/call_id`` (`CALL_ID_META`): a client
whose JSON-RPC ids repeat (one connection per call, as `toolkeeper call` makes) names each
call there, and the gateway uses it instead of the JSON-RPC id."""


class _Server(Server[dict[str, Any]]):
    """The SDK server, advertising ``tools.listChanged`` on the handshake era too: the SDK
    reads that flag from `NotificationOptions`, which its HTTP session manager never passes."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        every_change = NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True
        )
        return super().create_initialization_options(
            notification_options or every_change,
            experimental_capabilities,
            extensions,
        )


@dataclass(slots=True)
class _Listing:
    """One view's ``tools/list`` result: the tools it shows in order, cut into pages that are
    serialized when first asked for (a client that reads one page pays for one page).

    A cursor names the listing's stamp (a digest of the listed names and contracts, so
    replicas with the same catalog agree) and an offset. It only ever selects a page of the
    caller's own listing, so a cursor from another principal shows nothing outside the
    caller's view; a cursor from a listing that has since changed is refused, and the client
    lists again.
    """

    stamp: str
    tools: tuple[tuple[str, ToolContract], ...]
    """(name, contract) in listing order; `RESUME_TOOL` follows the last."""
    pages: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Pages in wire form, by index, as they are first served."""

    @classmethod
    def of(cls, tools: Sequence[tuple[str, ToolContract]]) -> _Listing:
        basis = "\n".join(f"{name} {c.ref} {c.digest()}" for name, c in tools)
        return cls(hashlib.sha256(basis.encode()).hexdigest()[:16], tuple(tools))

    @property
    def page_count(self) -> int:
        return -(-(len(self.tools) + 1) // LIST_PAGE_SIZE)  # + 1: RESUME_TOOL

    def page_of(self, cursor: str) -> int:
        """The page `cursor` points to; a protocol error when it is not one of ours."""
        try:
            stamp, offset = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
            page, misaligned = divmod(int(offset), LIST_PAGE_SIZE)
        except (ValueError, UnicodeError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"invalid cursor {cursor!r}") from exc
        if stamp != self.stamp:
            raise MCPError(
                code=INVALID_PARAMS,
                message="the tool list changed since this cursor was issued; list from the start",
            )
        if misaligned or not 0 < page < self.page_count:
            raise MCPError(code=INVALID_PARAMS, message=f"invalid cursor {cursor!r}")
        return page


_EMPTY_PAGE = ListToolsResult(tools=[]).model_dump(by_alias=True, mode="json", exclude_none=True)
"""A ``tools/list`` result's own fields in wire form, for pages assembled from cached tools."""


@dataclass(slots=True)
class _Audience:
    """Who listens for one principal's listing — its 2025 connections (`GatewayServer`'s
    sessions) and its 2026 ``subscriptions/listen`` streams (its own bus) — and the stamp of
    the listing they were last told about."""

    stamp: str
    offered: tuple[str, ...] = ()
    """The stamp of the prompts and resources it was last told about (`UpstreamReads`)."""
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)


def _wire(tool: Tool) -> dict[str, Any]:
    return tool.model_dump(by_alias=True, mode="json", exclude_none=True)


def _link(uri: str, size: int, description: str) -> dict[str, Any]:
    return {
        "type": "resource_link",
        "uri": uri,
        "name": uri.rsplit("/", 1)[-1],
        "description": description,
        "mimeType": "application/json",
        "size": size,
    }


def _cursor(stamp: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{stamp}:{offset}".encode()).decode()


class GatewayServer:
    """Serves one harness to MCP clients; `lowlevel` is the SDK server to run on a transport."""

    def __init__(
        self,
        harness: Harness,
        *,
        principal_of: PrincipalOf,
        name: str = "toolkeeper",
        version: str = "",
        instructions: str | None = None,
        stdio_session: bool = False,
        federation: Federation | None = None,
        local_ids: frozenset[str] = frozenset(),
        background: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
        discovery: MetaTools | None = None,
        always_loaded: frozenset[str] = frozenset(),
    ) -> None:
        """`federation` serves upstream tools; every registered id outside `local_ids` is one
        of its tools and is listed only while the federation serves it (the registry keeps
        what it once registered, so a withdrawn approval must be filtered here).
        `background` tasks (the ledger's reconciliation) run for as long as it serves.
        With `discovery` (its meta-tools registered on `harness`), a session lists only
        `always_loaded`, the meta-tools and what it loaded (docs/discovery.md)."""
        self.harness = harness
        self._discovery = discovery
        self._always_loaded = always_loaded | META_TOOLS
        self._background = tuple(background)
        self._principal_of = principal_of
        self._federation = federation
        self._local_ids = local_ids
        # stdio serves exactly one connection per process, so one id names its session.
        self._stdio_session = f"stdio-{uuid.uuid4().hex[:12]}" if stdio_session else None
        self._listings: OrderedDict[tuple[int, Hashable], _Listing] = OrderedDict()
        self._wire_tools: dict[str, dict[str, Any] | None] = {}
        """Each listed ref's entry in wire form: a ref's content never changes (the registry
        refuses a second definition), so one serialization serves every listing after."""
        self._resume_tool = _wire(tool_listing([])[-1])
        self._output_schemas: dict[str, bool] = {}
        self._sessions: dict[str, tuple[Principal, ServerSession]] = {}
        self._audiences: OrderedDict[Principal, _Audience] = OrderedDict()
        self._log_levels = LogLevels(limit=MAX_TRACKED_SESSIONS)
        self.suspended = SuspendedCalls(limit=MAX_SUSPENDED_CALLS, lifetime=SUSPENDED_CALL_SECONDS)
        self.lowlevel = _Server(
            name,
            version=version,
            instructions=instructions,
            lifespan=self._lifespan,
            # None skips the SDK's Mcp-Param header check, which would otherwise list tools on
            # every 2026 call; its lookup is not scoped to the caller, so answering it would
            # also tell a caller which hidden tools exist.
            get_tool_input_schema=lambda _name: None,
            cache_hints={"tools/list": CacheHint(ttl_ms=0, scope="private")},
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=self._listen,
        )
        # Added by method rather than as `on_list_tools`, whose slot wants a model: a cached
        # page is already in its wire form.
        self.lowlevel.add_request_handler("tools/list", PaginatedRequestParams, self._list_tools)
        # A 2025 client sets the level of the upstream log messages it hears.
        self.lowlevel.add_request_handler(
            "logging/setLevel", SetLevelRequestParams, self._set_level
        )
        self.lowlevel.middleware.append(self._remember_session)
        self._reads: UpstreamReads | None = None
        if federation is not None:
            self._serve_upstream_reads(federation)

    def __repr__(self) -> str:
        return f"GatewayServer({self.harness!r}, sessions={len(self._sessions)})"

    # -- handlers ------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> dict[str, Any]:
        listing = self._listing(self._principal(ctx), self._session_of(ctx))
        index = 0 if params.cursor is None else listing.page_of(params.cursor)
        page = listing.pages.get(index)
        if page is None:
            page = listing.pages[index] = self._page(listing, index)
        return dict(page)

    def _listing(self, principal: Principal, session: str | None = None) -> _Listing:
        """The principal's listing, made once per change of its view (or, with a federation,
        of the upstream tools it serves; with discovery, of what `session` loaded)."""
        view = self.harness.views.view(principal, "mcp")
        served = self._served()
        shown = None
        if self._discovery is not None:
            shown = self._always_loaded.union(self._discovery.loaded(principal, session))
        key = (view.version, (served, shown))
        listing = self._listings.get(key)
        if listing is not None:
            self._listings.move_to_end(key)
            return listing
        tools = []
        for contract in view.contracts():
            name = view.vendor_name(contract.ref)
            wanted = shown is None or contract.id in shown
            if name is not None and wanted and self._serves(contract, served):
                if contract.id == RUN_CODE_ID:
                    # Its description carries this principal's SDK, as a vendor view's does.
                    contract = self.harness.code_mode().view_contract(principal)
                tools.append((name, contract))
        listing = self._listings[key] = _Listing.of(tools)
        if len(self._listings) > MAX_CACHED_LISTINGS:
            self._listings.popitem(last=False)
        return listing

    def _page(self, listing: _Listing, index: int) -> dict[str, Any]:
        """Page `index` of `listing` in wire form; a tool the adapter leaves out leaves its
        page one shorter."""
        start, end = index * LIST_PAGE_SIZE, (index + 1) * LIST_PAGE_SIZE
        tools = []
        for name, contract in listing.tools[start:end]:
            tool = self._wire_tool(contract)
            if tool is not None:
                tools.append(tool if tool["name"] == name else {**tool, "name": name})
        if start <= len(listing.tools) < end:
            tools.append(self._resume_tool)
        page = {**_EMPTY_PAGE, "tools": tools}
        if index + 1 < listing.page_count:
            page["nextCursor"] = _cursor(listing.stamp, end)
        return page

    def _wire_tool(self, contract: ToolContract) -> dict[str, Any] | None:
        """`contract`'s ``tools/list`` entry in wire form, its name as the contract alone
        would have it (the view's name replaces it); None when the adapter leaves it out.
        An upstream tool's presentation is the one listed when its definition was first
        served (the ref names the definition; icons are not pinned)."""
        if contract.id == RUN_CODE_ID:  # one per principal (its SDK): the page keeps it
            rendered = tool_listing([contract])[:-1]
            return _wire(rendered[0]) if rendered else None
        if contract.ref not in self._wire_tools:
            rendered = tool_listing([contract])[:-1]  # without the trailing RESUME_TOOL
            tool = _wire(rendered[0]) if rendered else None
            if tool is not None and self._federation is not None:
                # An upstream tool's icons and task support, as listed (`assessment`).
                tool |= self._federation.presentation(contract.id)
            self._wire_tools[contract.ref] = tool
        return self._wire_tools[contract.ref]

    def _served(self) -> frozenset[str] | None:
        """The upstream tool ids the federation serves now; None without a federation. (One
        pass over its tools: asking `is_served` per registered tool costs tools × tools.)"""
        federation = self._federation
        if federation is None:
            return None
        return frozenset(
            tool.contract_id
            for key, tool in federation.tools.items()
            if key not in federation.withheld
        )

    def _serves(self, contract: ToolContract, served: frozenset[str] | None) -> bool:
        return served is None or contract.id in self._local_ids or contract.id in served

    def _catalog_state(self) -> Hashable:
        """Changes whenever what any principal may list changes."""
        offered = None
        if self._federation is not None:
            offered = frozenset((o.kind, o.served_as, o.server) for o in self._federation.routes)
        return self.harness.registry.generation, self._served(), offered

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        principal = self._principal(ctx)
        name, arguments, request_id = params.name, params.arguments, ctx.request_id
        sent = sent_call(ctx.request)
        if sent is not None:  # the SDK handled a copy it could parse; run what was sent
            name, arguments, request_id = sent.name, sent.arguments, sent.request_id
        session = self._session_of(ctx)
        peer = ClientPeer(ctx, session=session, levels=self._log_levels)
        try:
            if params.request_state is not None:
                # A 2026-07-28 client answering the input its suspended call asked for.
                try:
                    outcome = await self.suspended.resume(
                        principal, name, params.request_state, params.input_responses, peer
                    )
                except UnknownRequestState:
                    outcome = refusal(
                        ErrorCategory.INVALID_ARGUMENT,
                        "the requestState names no call waiting on this client: it expired, "
                        "was already answered, or was never issued to this principal",
                        "Call the tool again without requestState.",
                    )
                if isinstance(outcome, InputRequiredResult):
                    return outcome
                envelope = outcome
            elif name == RESUME_TOOL:
                envelope = await self._resume(arguments, principal)
            else:
                meta = params.meta or {}
                key, sent_id = meta.get(IDEMPOTENCY_KEY_META), meta.get(CALL_ID_META)
                if key is not None and not (
                    isinstance(key, str) and 0 < len(key) <= MAX_IDEMPOTENCY_KEY
                ):
                    envelope = refusal(
                        ErrorCategory.INVALID_ARGUMENT,
                        f"_meta {IDEMPOTENCY_KEY_META!r} must be a string of 1 to "
                        f"{MAX_IDEMPOTENCY_KEY} characters",
                        "Send one key per logical call, the same on every retry of it.",
                    )
                    return call_result(envelope)
                if sent_id is not None and not (
                    isinstance(sent_id, str) and 0 < len(sent_id) <= MAX_CALL_ID
                ):
                    envelope = refusal(
                        ErrorCategory.INVALID_ARGUMENT,
                        f"_meta {CALL_ID_META!r} must be a string of 1 to {MAX_CALL_ID} characters",
                        "Send one id per call, or none to use the JSON-RPC request id.",
                    )
                    return call_result(envelope)
                if sent_id is None and request_id is not None:
                    sent_id = str(request_id)
                # The call id travels on in the result and the ledger, both UTF-8: a lone
                # surrogate in it is kept as its escape.
                call_id = utf8_text(sent_id) if sent_id is not None else uuid.uuid4().hex
                proposal = Proposal(
                    call_id,
                    name,
                    arguments if arguments is not None else {},
                    family="mcp",
                    idempotency_key=key,
                )
                if self._asks_in_rounds(ctx):
                    outcome = await self.suspended.start(
                        principal,
                        name,
                        peer,
                        lambda peer: self.harness.invoke(
                            proposal, principal=principal, session=session, peer=peer
                        ),
                    )
                    if isinstance(outcome, InputRequiredResult):
                        return outcome
                    envelope = outcome
                else:
                    envelope = await self.harness.invoke(
                        proposal, principal=principal, session=session, peer=peer
                    )
                if self._discovery is not None and name == LOAD_TOOLS and envelope.ok:
                    await self._loaded_tools_changed(ctx)
        except LedgerError as exc:
            # The pipeline answers every ledger fault it meets from the intent on; one that
            # escapes it came earlier (opening the ledger, reading an approval): nothing ran.
            logger.warning("tools/call %r answered unavailable: %s", name, exc)
            error = ToolError(
                category=ErrorCategory.UNAVAILABLE,
                retryable=exc.transient,
                message="the gateway's ledger is unavailable, so nothing ran",
                suggested_fix="Try again later; nothing was changed.",
                effect_committed=False,
            )
            envelope = ResultEnvelope(status=Status.FAILED, error=error, summary=error.message)
        if envelope.content is not None:
            return await self._passed_through(envelope)
        if envelope.ok and envelope.artifact_refs and self._advertises(envelope):
            # The projection stored the result aside, and the preview would not match the
            # advertised output schema: the client needs the whole stored result.
            ref, limit = envelope.artifact_refs[0], self.harness.limits.result_bytes
            if ref.size > limit:
                return withheld_result(envelope, limit)
            full = await stages.offload(self.harness.artifacts.get_json, ref)
            return call_result(envelope, structured_content=full)
        result = call_result(envelope)
        if envelope.ok and result.structured_content is None and self._advertises(envelope):
            # A success without output — a call settled by reconciliation: its effect confirmed
            # by read-back, its output lost with the process that ran it — cannot meet the
            # advertised output schema, and a client rejects such a result outright. Answer
            # it as an error result carrying the envelope, whose status says succeeded.
            whole = envelope.model_dump(mode="json", exclude_none=True)
            result = result.model_copy(update={"is_error": True, "structured_content": whole})
        return result

    def _asks_in_rounds(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether a call of `ctx`'s client runs suspendable (rounds.py): its era has no
        channel for requests mid-call, and it declared one it could be asked."""
        if ctx.session.can_send_request or not self.suspended.available:
            return False
        return any(undeclared(ctx, request) is None for request in _CAPABILITY_ASKS)

    async def _passed_through(self, envelope: ResultEnvelope) -> CallToolResult:
        """The answer of a tool that sent content blocks: its blocks and structured content
        as it sent them (redacted), read back from the artifact store when the projection
        stored them aside, and linked (`resources.readable_uri`) when they are over the
        inline limit (``result_bytes``)."""
        content, meta = envelope.content, envelope.execution_meta
        assert content is not None
        limit = self.harness.limits.result_bytes
        request_id = meta.request_id if meta is not None else ""
        stored = None
        blocks: list[dict[str, Any]] = list(content.blocks or ())
        if content.stored is not None:
            ref = content.stored
            uri = resources.readable_uri(ref, request_id)
            if ref.size <= limit:
                try:
                    blocks = await stages.offload(self.harness.artifacts.get_json, ref)
                except ArtifactError as exc:
                    stored = f"toolkeeper: the tool's content could not be read back: {exc}"
            if stored is None and not blocks:
                blocks = [_link(uri, ref.size, "the tool's content blocks")]
                stored = (
                    f"toolkeeper: the tool's content ({ref.size} bytes) is over the gateway's "
                    f"inline limit of {limit} bytes (result_bytes); read it with "
                    f"resources/read {uri}"
                )
        structured = envelope.structured_content if content.structured else None
        if content.structured and envelope.artifact_refs:
            # The projection stored the structured content aside (the preview would not
            # match an output schema): send the whole, or say where it is.
            ref = envelope.artifact_refs[0]
            if ref.size > limit and self._advertises(envelope):
                return withheld_result(envelope, limit)
            if ref.size <= limit:
                structured = await stages.offload(self.harness.artifacts.get_json, ref)
        return passed_through(
            envelope,
            blocks,
            structured_content=structured,
            note=gateway_note(envelope, stored=stored),
        )

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        """The upstreams' resources the caller may read (stored results are read by the URI
        their call answered with, never listed)."""
        principal = self._principal(ctx)
        listed = self._reads.resources(principal) if self._reads is not None else []
        return ListResourcesResult.model_validate({"resources": listed})

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        principal = self._principal(ctx)
        if resources.serves(params.uri):
            return await resources.read_artifact(self.harness, principal, params.uri)
        if self._reads is not None:
            return await self._reads.read(principal, params.uri)
        raise MCPError(
            code=resources.RESOURCE_NOT_FOUND, message=f"resource not found: {params.uri}"
        )

    # -- upstream prompts and resources (readonly.py) ------------------------------------------

    def _serve_upstream_reads(self, federation: Federation) -> None:
        """Serve the prompts, resources, completions and resource subscriptions of the
        federation's upstreams (the prompts and completions capabilities come with them)."""
        reads = self._reads = UpstreamReads(
            federation, policy=lambda: self.harness.policy, publish=self._publish_updated
        )
        federation.on_resource_updated = reads.updated
        install_handlers(
            self.lowlevel, reads, principal=self._principal, session=self._connection_key
        )

    def _connection_key(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The session a subscription belongs to (HTTP ``Mcp-Session-Id``, or stdio's one
        connection); a connection without one has no channel to hear updates on."""
        key = self._session_of(ctx)
        if key is None:
            raise MCPError(
                code=INVALID_REQUEST,
                message="resource subscriptions need a session (Mcp-Session-Id) to deliver "
                "updates on; use a stateful connection",
            )
        return key

    async def _publish_updated(self, uri: str, allowed: Callable[[Principal], bool]) -> None:
        """Tell the 2026 listen streams of the principals `allowed` admits that `uri`
        changed (each stream's filter keeps it to those that named `uri`)."""
        for principal, audience in list(self._audiences.items()):
            if allowed(principal):
                await audience.bus.publish(ResourceUpdated(uri))

    async def _notify_offerings_changed(self) -> None:
        """Like `notify_tools_changed`, for the prompts and resources each principal may
        list: 2025 sessions hear both list_changed notifications, 2026 listeners the events."""
        reads = self._reads
        if reads is None:
            return
        changed = set()
        for principal, audience in list(self._audiences.items()):
            stamp = reads.stamp(principal)
            if stamp != audience.offered:
                audience.offered = stamp
                changed.add(principal)
                await audience.bus.publish(PromptsListChanged())
                await audience.bus.publish(ResourcesListChanged())
        for key, (principal, session) in list(self._sessions.items()):
            if principal not in changed:
                continue
            try:
                with anyio.fail_after(1):
                    await session.send_prompt_list_changed()
                    await session.send_resource_list_changed()
            except Exception:
                self._sessions.pop(key, None)

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> dict[str, Any]:
        session = self._session_of(ctx)
        if session is not None:
            self._log_levels.set(session, params.level)
        return {}

    async def _resume(
        self, arguments: Mapping[str, Any] | None, principal: Principal
    ) -> ResultEnvelope:
        """Continue an approved call, for the principal that proposed it and nobody else."""
        approval_id = (arguments or {}).get("approval_id")
        if not isinstance(approval_id, str):
            return refusal(
                ErrorCategory.INVALID_ARGUMENT,
                "approval_id is required and must be a string",
                'Pass the approval_id of the pending_approval answer: {"approval_id": "apr_..."}.',
            )
        unknown = refusal(
            ErrorCategory.NOT_FOUND,
            f"no approval {approval_id!r} for this caller",
            "Use the approval_id from a pending_approval answer to one of your own calls.",
        )
        try:
            # `resume` refuses an unknown approval and another principal's alike, reading
            # the ledger off the event loop.
            return await self.harness.resume(approval_id, principal=principal)
        except ApprovalError:
            return unknown

    def _advertises(self, envelope: ResultEnvelope) -> bool:
        """Whether the listing shows an output schema for the tool that answered."""
        provenance = envelope.provenance
        if provenance is None:
            return False
        ref = f"{provenance.tool_id}@{provenance.tool_version}"
        advertised = self._output_schemas.get(ref)
        if advertised is None:
            entry = self.harness.registry.get(ref)
            advertised = entry is not None and advertised_output_schema(entry.contract) is not None
            self._output_schemas[ref] = advertised
        return advertised

    # -- identity --------------------------------------------------------------------------

    def _principal(self, ctx: ServerRequestContext[Any, Any]) -> Principal:
        principal = self._principal_of(ctx.request)
        if principal is None:
            # The HTTP layer refuses unauthenticated requests before they get here; this is
            # the last line if a deployment wires the app without it.
            raise MCPError(code=INVALID_REQUEST, message="unauthenticated request")
        return principal

    def _session_of(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        headers = getattr(ctx.request, "headers", None)
        if headers is not None:
            return headers.get("mcp-session-id")
        return self._stdio_session

    # -- list-changed notifications ----------------------------------------------------------

    async def _remember_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Keep a handle on each handshake-era connection, to push list_changed to it later."""
        if ctx.request_id is not None and ctx.method != "initialize":
            key = self._session_of(ctx)
            principal = self._principal_of(ctx.request)
            legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            if key is not None and principal is not None and legacy:
                self._audience(principal)
                self._sessions.pop(key, None)
                self._sessions[key] = (principal, ctx.session)
                if len(self._sessions) > MAX_TRACKED_SESSIONS:
                    del self._sessions[next(iter(self._sessions))]
        return await call_next(ctx)

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """A 2026 ``subscriptions/listen`` stream, fed by its principal's own bus; the
        upstream resources it names are subscribed for as long as it is open."""
        principal = self._principal(ctx)
        uris = tuple(params.notifications.resource_subscriptions or ())
        if self._reads is None or not uris:
            return await self._audience(principal).listen(ctx, params)
        counted = await self._reads.listen(principal, uris)
        try:
            return await self._audience(principal).listen(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                await self._reads.unlisten(counted)

    def _audience(self, principal: Principal) -> _Audience:
        audience = self._audiences.get(principal)
        if audience is None:
            offered = self._reads.stamp(principal) if self._reads is not None else ()
            audience = _Audience(self._listing(principal).stamp, offered)
            self._audiences[principal] = audience
            if len(self._audiences) > MAX_TRACKED_SESSIONS:
                self._audiences.popitem(last=False)
        self._audiences.move_to_end(principal)
        return audience

    async def _loaded_tools_changed(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """A load changed one session's listing: tell that session (a handshake-era
        connection), or the principal's listeners (a 2026 client, whose loads are kept per
        principal, having no session)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or self._session_of(ctx) is None:
            await self.notify_tools_changed()
            return
        try:
            with anyio.fail_after(1):
                await ctx.session.send_tool_list_changed()
        except Exception:
            logger.debug("list_changed after load_tools not delivered", exc_info=True)

    async def notify_tools_changed(self) -> None:
        """Tell the clients whose principal's listing changed that it did (a level trigger:
        each lists again). A change to tools a principal cannot see is not announced to it."""
        changed = set()
        for principal, audience in list(self._audiences.items()):
            stamp = self._listing(principal).stamp
            if stamp != audience.stamp:
                audience.stamp = stamp
                changed.add(principal)
                await audience.bus.publish(ToolsListChanged())
        for key, (principal, session) in list(self._sessions.items()):
            if principal not in changed and principal in self._audiences:
                continue  # (an audience evicted over the cap cannot tell: notify)
            try:
                with anyio.fail_after(1):
                    await session.send_tool_list_changed()
            except Exception:
                # The connection is gone (closed, timed out); forget it.
                self._sessions.pop(key, None)

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with self.suspended.running(), anyio.create_task_group() as tasks:
            tasks.start_soon(self._watch_catalog)
            for task in self._background:
                tasks.start_soon(task)
            yield {}
            tasks.cancel_scope.cancel()

    async def _watch_catalog(self) -> None:
        seen, pins = self._catalog_state(), self._pins_stamp()
        while True:
            await anyio.sleep(CATALOG_POLL_SECONDS)
            if self._federation is not None and (stamp := self._pins_stamp()) != pins:
                # An operator approved (or revoked) an upstream pin from another process.
                pins = stamp
                self._federation.reassess()
            current = self._catalog_state()
            if current != seen:
                seen = current
                logger.info("the tool catalog changed; notifying clients")
                await self.notify_tools_changed()
                await self._notify_offerings_changed()

    def _pins_stamp(self) -> tuple[int, int] | None:
        if self._federation is None:
            return None
        try:
            stat = self._federation.pins.path.stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size
