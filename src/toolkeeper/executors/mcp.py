"""The MCP executor: runs a tool of another MCP server through the official SDK client.

`McpExecutor` checks the call's grant (`GrantAuthority.check_call`) before anything leaves the
process, sends ``tools/call`` and translates every outcome: the tool's answer becomes the
output, and every way a call can fail — unreachable, rejected, timed out, connection lost,
an invalid result, the tool's own error — becomes a `ToolFailure` the harness can act on.

It calls through an `McpUpstream`, which owns the connection. A library user fronts an MCP
server without the gateway::

    async with connect_mcp("files", command="mcp-server-files", args=["/srv"]) as files:
        await register_mcp(harness, files)

The gateway's `UpstreamLink` is an `McpUpstream` too, adding pins, approvals, scanning and
reconnects on top of this one executor.

Needs the MCP SDK: ``pip install 'toolkeeper[gateway]'``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

try:
    import anyio
    import httpx2
    from mcp import Client, ClientSession, StdioServerParameters, types
    from mcp.client.session import ClientRequestContext, MessageHandlerFnT
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError
except ImportError as exc:  # the SDK is the gateway extra's, not the core library's
    raise ImportError(
        "toolkeeper.executors.mcp needs the MCP SDK; install it with "
        "pip install 'toolkeeper[gateway]'"
    ) from exc

from toolkeeper import __version__
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ConfigError
from toolkeeper.executors import ToolAnswer, ToolFailure
from toolkeeper.importers.formats import from_mcp_tool
from toolkeeper.runtime.context import ClientRequest, Peer, ToolContext
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.runtime.grants import GrantAuthority
from toolkeeper.runtime.peer import InputRefused

if TYPE_CHECKING:
    from toolkeeper.runtime.harness import Harness

_MAX_PAGES = 100
_CALL_TIMEOUT = 86_400.0
"""The harness bounds every call (the contract's timeout, else its `call_timeout`); the
session's own read timeout must never be the one that fires first."""
_INPUT_REQUESTS = {
    "elicitation": ("elicitation/create", "Elicitation not supported"),
    "sampling": ("sampling/createMessage", "Sampling not supported"),
    "roots": ("roots/list", "List roots not supported"),
}
"""What an upstream may ask its client for mid-call, with the method it asks by and the
SDK's refusal text, which an upstream echoes when the refusal ends its tool."""
_MAX_INPUT_ROUNDS = 8
"""Rounds of ``input_required`` (2026-07-28) one call may go through before it is refused."""
_ASKED_BY: dict[str, ClientRequest] = {
    "elicitation/create": "elicit",
    "sampling/createMessage": "sample",
    "roots/list": "roots",
}
_ANSWER_TYPES: dict[ClientRequest, Any] = {
    "elicit": types.ElicitResult,
    "sample": types.CreateMessageResult,
    "roots": types.ListRootsResult,
}
_KIND: dict[ClientRequest, str] = {"elicit": "elicitation", "sample": "sampling", "roots": "roots"}
_SESSION_GONE = ("session not found", "session terminated", "no valid session")
"""How servers word their refusal of a session they no longer have: the SDK server's 404
body, the SDK client's stand-in for a bare 404, the TypeScript SDK's 400."""
_DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""What the MCP importer reads of a listed tool; the rest (``_meta``, ``icons``...) is not
the contract's."""


class McpUpstream(Protocol):
    """Where an `McpExecutor` gets the session it calls through, and whom it tells when the
    call found the connection dead or the tool's definition moved."""

    name: str
    """The server's name, for messages and provenance (``mcp:<name>``)."""
    calls: CallsInFlight | None
    """The calls running on the connection, when it passes the server's mid-call requests
    and log messages on to the clients that made them (None: it declares no such
    capability, and the server falls back or fails)."""

    async def session(self, tool: str) -> ClientSession:
        """The session to call `tool` through now; raises `ToolFailure` (nothing sent) when
        the call must not go out."""
        ...

    def lost(self) -> None:
        """A call found the connection dead: stop handing out this session."""
        ...

    def changed(self) -> None:
        """The server says a tool's definition changed under the caller: list again."""
        ...


class McpExecutor:
    """Runs one tool of an MCP server, and only under a grant `grants` vouches for.

    When the call finds the link dead — the server answered that it no longer knows the
    session (it restarted: HTTP 404 "Session not found"), or the connection closed — it tells
    the upstream, which replaces the session, and sends the call once more on the new one,
    but only when that is safe: the server refused the request unread, or the tool is
    `repeatable` (read-only or idempotent). A write whose request may have run is never sent
    twice; its answer says the effect is unknown."""

    def __init__(
        self,
        upstream: McpUpstream,
        tool: str,
        *,
        grants: GrantAuthority,
        repeatable: bool = False,
    ) -> None:
        self.source = f"mcp:{upstream.name}"
        self.tool = tool
        self._upstream = upstream
        self._grants = grants
        self._repeatable = repeatable

    def __repr__(self) -> str:
        return f"McpExecutor({self._upstream.name!r}, {self.tool!r})"

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        # The call leaves the process here: whoever reached this method without the grant
        # the pipeline minted for exactly this call must not reach the upstream either.
        refusal = self._grants.check_call(context, arguments)
        if refusal is not None:
            raise ToolFailure(
                f"refused to call {self.tool} on MCP server {self._upstream.name!r}: {refusal}",
                category=ErrorCategory.POLICY_DENIED,
                retryable=False,
                effect_committed=False,
                suggested_fix="Do not retry; this call is not authorized as proposed.",
            )
        session = await self._upstream.session(self.tool)
        try:
            return await self._call(session, arguments, context.peer)
        except _LinkLost as lost:
            if lost.effect_committed is not False and not self._repeatable:
                raise
            first = lost
        try:
            session = await self._upstream.session(self.tool)
        except ToolFailure as failure:
            raise ToolFailure(
                f"{first.message}; a new session could not be opened: {failure.message}",
                category=ErrorCategory.UNAVAILABLE,
                retryable=True,
                effect_committed=first.effect_committed,
            ) from failure
        return await self._call(session, arguments, context.peer)

    async def _call(
        self, session: ClientSession, arguments: dict[str, Any], peer: Peer | None
    ) -> Any:
        """One ``tools/call`` on `session`, every outcome translated; the server's progress,
        log messages and requests for input reach `peer`, the client that made the call."""
        calls = self._upstream.calls
        with calls.running(peer) if calls is not None else nullcontext():
            result = await self._send(session, arguments, peer)
        if result.is_error:
            raise _tool_error(self._upstream.name, self.tool, result)
        return _answer(result)

    async def _send(
        self, session: ClientSession, arguments: dict[str, Any], peer: Peer | None
    ) -> types.CallToolResult:
        progress = None
        if peer is not None:

            async def progress(value: float, total: float | None, message: str | None) -> None:
                await peer.progress(value, total, message)

        responses: types.InputResponses | None = None
        state: str | None = None
        for _ in range(_MAX_INPUT_ROUNDS):
            result = await self._send_once(session, arguments, progress, responses, state)
            if not isinstance(result, types.InputRequiredResult):
                return result
            # A 2026-07-28 server asks by answering input_required; the answers go back
            # with the same call, once the calling client gave them.
            responses, state = await self._answer(result, peer), result.request_state
        raise _input_refused(
            self._upstream.name,
            self.tool,
            [],
            f"it asked for input more than {_MAX_INPUT_ROUNDS} times",
            None,
        )

    async def _answer(
        self, asked: types.InputRequiredResult, peer: Peer | None
    ) -> types.InputResponses:
        answers: types.InputResponses = {}
        for key, request in (asked.input_requests or {}).items():
            kind = _ASKED_BY.get(request.method)
            if kind is None or peer is None:
                what = [k for k, (m, _) in _INPUT_REQUESTS.items() if m == request.method]
                said = "no client can be asked" if peer is None else "it is not passed on"
                raise _input_refused(self._upstream.name, self.tool, what, said, None)
            params = (
                request.params.model_dump(mode="json", by_alias=True, exclude_none=True)
                if request.params is not None
                else {}
            )
            try:
                answer = await peer.ask(kind, params)
            except InputRefused as refused:
                raise _input_refused(
                    self._upstream.name, self.tool, [_KIND[kind]], refused.message, None
                ) from refused
            answers[key] = _ANSWER_TYPES[kind].model_validate(answer, by_name=False)
        return answers

    async def _send_once(
        self,
        session: ClientSession,
        arguments: dict[str, Any],
        progress: Any,
        responses: types.InputResponses | None,
        state: str | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            # The session, not Client.call_tool: the latter re-lists and resends on a schema
            # mismatch, which would run a definition nobody approved.
            result = await session.call_tool(
                self.tool,
                arguments,
                read_timeout_seconds=_CALL_TIMEOUT,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            raise _protocol_failure(self._upstream, self.tool, exc) from exc
        except (RuntimeError, ValidationError) as exc:
            raise ToolFailure(
                f"MCP server {self._upstream.name!r} answered {self.tool} with an invalid "
                f"result: {exc}",
                effect_committed=None,
            ) from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._upstream.lost()
            raise _LinkLost(
                f"the connection to MCP server {self._upstream.name!r} failed: {exc}",
                effect_committed=None,
            ) from exc
        if not isinstance(result, types.CallToolResult | types.InputRequiredResult):
            raise ToolFailure(
                f"MCP server {self._upstream.name!r} answered {self.tool} with a result of "
                f"type {type(result).__name__}",
                effect_committed=None,
            )
        return result


class _LinkLost(ToolFailure):
    """The call found its session dead; `effect_committed` is False when the server refused
    the request unread (a session it no longer knows), None when it may have run."""

    def __init__(self, message: str, *, effect_committed: bool | None) -> None:
        super().__init__(
            message,
            category=ErrorCategory.UNAVAILABLE,
            retryable=True,
            effect_committed=effect_committed,
        )


class CallsInFlight:
    """The calls running on one connection, each with the client that made it, so what the
    server sends mid-call reaches that client.

    Progress is tied to its call on the wire (the progress token). A 2025 server's log
    messages and its requests for elicitation or sampling are not: they are the calling
    client's when exactly one call runs. With several, nobody can tell whose they are, so
    a request is refused (the server's tool fails or falls back) and a log message is kept
    from every client rather than shown to the wrong one.
    """

    def __init__(self) -> None:
        self._peers: dict[int, Peer | None] = {}

    @contextmanager
    def running(self, peer: Peer | None) -> Iterator[None]:
        token = object()
        self._peers[id(token)] = peer
        try:
            yield
        finally:
            del self._peers[id(token)]

    def callbacks(self) -> dict[str, Any]:
        """The SDK client's callbacks: declaring them declares the capabilities."""
        return {
            "elicitation_callback": self._elicit,
            "sampling_callback": self._sample,
            "list_roots_callback": self._roots,
            "logging_callback": self._log,
            "log_level": "debug",  # a 2026 server logs only when asked; the client filters
        }

    def _sole(self) -> tuple[Peer | None, str | None]:
        if len(self._peers) == 1:
            peer = next(iter(self._peers.values()))
            return peer, None if peer is not None else "no client can be asked for this call"
        if not self._peers:
            return None, "no call is running"
        return None, f"{len(self._peers)} calls are running, and it cannot tell which one asked"

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        peer, _ = self._sole()
        if peer is not None:
            await peer.log(params.level, params.data, params.logger)

    async def _elicit(
        self, _context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await self._ask("elicit", params)
        return answer if isinstance(answer, types.ErrorData) else types.ElicitResult(**answer)

    async def _sample(
        self, _context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        answer = await self._ask("sample", params)
        if isinstance(answer, types.ErrorData):
            return answer
        return types.CreateMessageResult.model_validate(answer, by_name=False)

    async def _roots(
        self, _context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        """The calling client's roots. Asked outside a call (a server asking once it is
        initialized), the gateway has no client to ask and answers an error, which servers
        treat as "no roots" and keep their configured directories."""
        answer = await self._ask("roots", None)
        if isinstance(answer, types.ErrorData):
            return answer
        return types.ListRootsResult.model_validate(answer, by_name=False)

    async def _ask(self, kind: ClientRequest, params: Any) -> dict[str, Any] | types.ErrorData:
        """The calling client's answer, or a refusal worded as the SDK words its own
        ("Elicitation not supported"), which the tool's failure then echoes."""
        peer, why = self._sole()
        refused = _INPUT_REQUESTS[_KIND[kind]][1]
        if peer is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{refused}: {why}")
        wire = (
            params.model_dump(mode="json", by_alias=True, exclude_none=True)
            if params is not None
            else {}
        )
        try:
            return await peer.ask(kind, wire)
        except InputRefused as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{refused}: {exc}")


class McpConnection:
    """A library's connection to one MCP server (see `connect_mcp`): no reconnects, no
    pins; once the connection is lost, calls fail as ``unavailable`` without being sent."""

    calls: CallsInFlight | None = None  # a library call has no client to ask mid-call

    def __init__(self, name: str, client: Client) -> None:
        self.name = name
        self.client = client
        self.error: str | None = None
        """Why calls are no longer sent, once the connection was lost or closed."""

    def __repr__(self) -> str:
        state = "open" if self.error is None else "closed"
        return f"McpConnection({self.name!r}, {state})"

    async def list_tools(self) -> dict[str, dict[str, Any]]:
        """Tool name → definition, as the server lists it now."""
        return await list_tools(self.client)

    async def session(self, tool: str) -> ClientSession:
        session = _session_of(self.client) if self.error is None else None
        if session is None:
            raise ToolFailure(
                f"MCP server {self.name!r} is not connected ({self.error or 'closed'}); "
                f"{tool} was not sent",
                category=ErrorCategory.UNAVAILABLE,
                retryable=False,
                effect_committed=False,
                suggested_fix="Connect again with connect_mcp() and register the tools anew.",
            )
        return session

    def lost(self) -> None:
        self.error = "the connection was lost"

    def changed(self) -> None:
        """Nothing to re-list: the harness serves the definitions registered from this
        connection, and the failing call already answered ``stale``."""


@asynccontextmanager
async def connect_mcp(
    name: str,
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    errlog: TextIO | None = None,
) -> AsyncIterator[McpConnection]:
    """Connect to an MCP server: a stdio ``command`` (with ``args``, ``cwd``, and ``env`` on
    top of the SDK's minimal environment — the caller's own is not inherited) or a Streamable
    HTTP ``url`` (with ``headers``). The server's stderr goes to ``errlog``.

    Close it in the task that opened it. An unreachable server raises `ConnectionError`.
    """
    if (command is None) == (url is None):
        raise ConfigError(
            f"connect_mcp({name!r}) needs exactly one of command=... (a stdio server) or "
            "url=... (a Streamable HTTP server)",
            key="command" if command is not None else "url",
            value=command or url,
        )
    stdio = None
    if command is not None:
        stdio = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
    elif env or cwd:
        raise ConfigError(
            f"connect_mcp({name!r}): env and cwd apply to a stdio command, not to a URL; pass "
            "values to an HTTP server in headers=...",
            key="env" if env else "cwd",
            value=env or cwd,
        )
    raised: list[BaseException] = []
    try:
        async with AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    mcp_client(
                        stack,
                        stdio=stdio,
                        url=url,
                        headers=headers,
                        timeout=timeout,
                        errlog=errlog or sys.stderr,
                    )
                )
            except Exception as exc:
                raise ConnectionError(
                    f"could not connect to MCP server {name!r}: {describe(exc)}"
                ) from exc
            connection = McpConnection(name, client)
            try:
                yield connection
            except BaseException as exc:
                raised.append(exc)
                raise
            finally:
                connection.error = "the connection was closed"
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap what the caller's block raised; give it back unwrapped,
        # so `except KeyError` around the block still works.
        if raised and _leaves(group) == raised:
            raise raised[0] from raised[0].__cause__
        raise


async def register_mcp(
    harness: Harness,
    upstream: McpConnection,
    *,
    namespace: str = "",
    tools: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ToolContract]:
    """Register `upstream`'s tools (all, or those named in `tools`) with `harness`, each run by
    an `McpExecutor` under the harness's grants. Returns the registered contracts.

    Every tool is imported with the importer's cautious defaults (committing, open world, not
    idempotent) — the server's annotations are hints, kept but never trusted — so the default
    policy holds each call for approval. ``overrides`` maps a tool name to contract fields
    you vouch for (``{"search": {"side_effect": "none"}}``). Ids are ``namespace + name``.
    """
    listing = await upstream.list_tools()
    wanted = list(listing) if tools is None else list(tools)
    missing = [name for name in wanted if name not in listing]
    if missing:
        raise ConfigError(
            f"MCP server {upstream.name!r} lists no tool named {', '.join(missing)}; it lists "
            f"{', '.join(sorted(listing)) or 'no tools'}",
            key="tools",
            value=missing,
        )
    fields = overrides or {}
    contracts = []
    for name in wanted:
        definition = {k: listing[name][k] for k in _DEFINITION_FIELDS if k in listing[name]}
        contract = from_mcp_tool(definition, **{"id": namespace + name, **fields.get(name, {})})
        executor = McpExecutor(upstream, name, grants=harness.grants)
        contracts.append(harness.register(contract, executor=executor))
    return contracts


def mcp_client(
    stack: AsyncExitStack,
    *,
    stdio: StdioServerParameters | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    errlog: TextIO = sys.stderr,
    message_handler: MessageHandlerFnT | None = None,
    client_name: str = "toolkeeper",
    calls: CallsInFlight | None = None,
    mode: str = "auto",
) -> Client:
    """An SDK `Client` (not yet entered) for a stdio server or a Streamable HTTP `url`; `stack`
    closes what the transport needs besides the client. With `calls`, it declares
    elicitation and sampling and passes them, and log messages, to the calling clients."""
    if stdio is not None:
        transport: Any = stdio_client(stdio, errlog=errlog)
    else:
        assert url is not None
        http = httpx2.AsyncClient(
            headers=dict(headers or {}), timeout=httpx2.Timeout(timeout, read=300.0)
        )
        stack.push_async_callback(http.aclose)
        transport = streamable_http_client(url, http_client=http)
    return Client(
        transport,
        cache=None,  # a cached listing would hide a rug pull
        message_handler=message_handler,
        read_timeout_seconds=timeout,
        client_info=types.Implementation(name=client_name, version=__version__),
        mode=mode,
        **(calls.callbacks() if calls is not None else {}),
    )


async def list_tools(client: Client) -> dict[str, dict[str, Any]]:
    """Tool name → definition (JSON, by alias), every page of ``tools/list``."""
    tools: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            tools[tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def describe(exc: BaseException) -> str:
    """One line for a failed connection, however deep the SDK nested the cause."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (MCP error {exc.error.code})"
    return f"{type(exc).__name__}: {exc}"


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    return [
        leaf
        for inner in group.exceptions
        for leaf in (_leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner])
    ]


def _session_of(client: Client | None) -> ClientSession | None:
    try:
        return client.session if client is not None else None
    except RuntimeError:  # the client closed between our check and the call: nothing sent
        return None


def _protocol_failure(upstream: McpUpstream, tool: str, exc: MCPError) -> ToolFailure:
    """A JSON-RPC error is not the tool's answer: the call may never have run (a rejected
    request) or its effect is unknown (the connection died while it ran)."""
    where = f"MCP server {upstream.name!r}: {exc.error.message}"
    if any(marker in exc.error.message.lower() for marker in _SESSION_GONE):
        # The spec's answer to a request on a session the server no longer has (HTTP 404
        # after a restart); the request was refused before it ran.
        upstream.lost()
        return _LinkLost(
            f"MCP server {upstream.name!r} no longer knows the gateway's session (it answered "
            f"{exc.error.message!r}: it restarted or expired the session)",
            effect_committed=False,
        )
    asked = _asked_for_input(exc)
    if asked is not None:
        kinds, before_running = asked
        said = f"it answered: {exc.error.message}"
        return _input_refused(upstream.name, tool, kinds, said, False if before_running else None)
    if exc.error.code == types.CONNECTION_CLOSED:
        upstream.lost()
        return _LinkLost(f"lost the connection to {where}", effect_committed=None)
    if exc.error.code == types.REQUEST_TIMEOUT:
        return ToolFailure(
            where, category=ErrorCategory.TIMEOUT, retryable=True, effect_committed=None
        )
    if exc.error.code in (types.INVALID_PARAMS, types.METHOD_NOT_FOUND):
        return ToolFailure(f"rejected by {where}", category=ErrorCategory.INVALID_ARGUMENT)
    if exc.error.code == types.HEADER_MISMATCH:
        upstream.changed()
        return ToolFailure(
            f"the tool's definition changed on {where}", category=ErrorCategory.STALE
        )
    return ToolFailure(
        f"protocol error from {where}",
        category=ErrorCategory.UNAVAILABLE,
        retryable=True,
        effect_committed=None,
    )


def _asked_for_input(exc: MCPError) -> tuple[list[str], bool] | None:
    """What client input a failed call asked for — elicitation, sampling, roots — and whether
    it was refused before the tool ran; None when the failure is about something else.

    The gateway declares none of these capabilities (it cannot pass them through to its own
    client yet), so an upstream that checks falls back on its own. One that needs them anyway
    fails in one of three ways: it answers -32021 (missing client capability, before running),
    or its tool ends with the refusal it received: the SDK client's "... not supported" answer
    to a 2025 request, or, on a 2026 connection, the SDK server's "cannot send
    'elicitation/create'" (that era has no channel for server-initiated requests).
    """
    error = exc.error
    if error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        required = error.data.get("requiredCapabilities") if isinstance(error.data, dict) else None
        names = [
            kind for kind in _INPUT_REQUESTS if isinstance(required, dict) and kind in required
        ]
        return names, True
    if error.code == types.INVALID_REQUEST:
        names = [
            kind
            for kind, markers in _INPUT_REQUESTS.items()
            if any(marker in error.message for marker in markers)
        ]
        if names:
            return names, False
    return None


def _input_refused(
    server: str, tool: str, kinds: Sequence[str], said: str, committed: bool | None
) -> ToolFailure:
    """An upstream needed input from the client that did not reach it (policy refused it,
    the client cannot answer it, or no client can be asked): not a transient fault, so not
    retryable."""
    what = " and ".join(kinds) or "input from the client"
    return ToolFailure(
        f"{tool} on MCP server {server!r} needs {what}, which was not passed to the calling "
        f"client ({said})",
        category=ErrorCategory.UNAVAILABLE,
        retryable=False,
        effect_committed=committed,
        suggested_fix=(
            f"Do not retry: this tool cannot complete without {what}. Use another tool, or ask "
            "the operator for one that does not need it."
        ),
    )


def _answer(result: types.CallToolResult) -> ToolAnswer:
    """The result as the tool sent it: its blocks in order, and its structured content as
    the value — or, without one, its text blocks joined under ``"text"``, the value a
    library's model view shows (non-text blocks are then only in the blocks)."""
    blocks = tuple(
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    )
    structured = isinstance(result.structured_content, dict)
    value = result.structured_content if structured else {"text": _text(result)}
    return ToolAnswer(value, blocks, structured=structured, is_error=bool(result.is_error))


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _tool_error(server: str, tool: str, result: types.CallToolResult) -> ToolFailure:
    """An ``isError`` result: the tool ran and failed. When the server is itself a toolkeeper
    gateway its envelope says what kind of failure; otherwise nobody can say whether a side
    effect happened before the failure. The result itself travels with the failure, so a
    gateway's client gets the tool's own blocks."""
    answer = _answer(result)
    text = _text(result) or f"{tool} on MCP server {server!r} failed without a message"
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
            answer=answer,
        )
    return ToolFailure(text, effect_committed=None, answer=answer)


__all__ = [
    "CallsInFlight",
    "McpConnection",
    "McpExecutor",
    "McpUpstream",
    "connect_mcp",
    "describe",
    "list_tools",
    "mcp_client",
    "register_mcp",
]
