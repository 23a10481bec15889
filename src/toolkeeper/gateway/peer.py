"""`ClientPeer`: the MCP client of one ``tools/call``, as the called tool may reach it.

What an upstream sends mid-call goes back on the request it belongs to: progress under the
client's own ``progressToken`` (nothing when it sent none), log messages on the call's
stream (on 2026-07-28 only at the level the request opted in to), and elicitation, sampling
and ``roots/list`` as requests related to the call — when the client declared the capability.
A 2025 session's client is sent them mid-call; a 2026-07-28 client has no channel for that,
so its calls run suspended between round trips instead (rounds.py). Policy and the ledger
see each request first (runtime/peer.py).
"""

from __future__ import annotations

import warnings
from typing import Any, cast

from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata

from toolkeeper.runtime.context import ClientRequest
from toolkeeper.runtime.peer import InputRefused

_CAPABILITY = {
    "elicit": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "sample": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "roots": types.ClientCapabilities(roots=types.RootsCapability()),
}
_NAMES = {"elicit": "elicitation", "sample": "sampling", "roots": "roots"}
_SEVERITY: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


def undeclared(ctx: ServerRequestContext[Any, Any], request: ClientRequest) -> str | None:
    """Why the client behind `ctx` may not be sent `request`: it did not declare the
    capability (per connection in 2025, per request in 2026-07-28); None when it did."""
    if not ctx.session.check_client_capability(_CAPABILITY[request]):
        return f"the calling client did not declare the {_NAMES[request]} capability"
    return None


def wire_request(request: ClientRequest, params: dict[str, Any]) -> types.ServerRequest:
    """`request` with `params` (wire JSON) as the SDK's typed request."""
    if request == "elicit":
        return types.ElicitRequest.model_validate(
            {"method": "elicitation/create", "params": params}, by_name=False
        )
    if request == "roots":
        return types.ListRootsRequest.model_validate(
            {"method": "roots/list", "params": params or None}, by_name=False
        )
    return types.CreateMessageRequest.model_validate(
        {"method": "sampling/createMessage", "params": params}, by_name=False
    )


_ANSWER: dict[ClientRequest, type[types.Result]] = {
    "elicit": types.ElicitResult,
    "roots": types.ListRootsResult,
    "sample": types.CreateMessageResult,
}


class LogLevels:
    """The least severe log level each 2025 session asked for with ``logging/setLevel``
    (deprecated in 2026-07-28, where each request opts in instead). A session that never
    asked hears every level, as the SDK's servers behave."""

    def __init__(self, *, limit: int) -> None:
        self._levels: dict[str, types.LoggingLevel] = {}
        self._limit = limit

    def set(self, session: str, level: types.LoggingLevel) -> None:
        self._levels.pop(session, None)
        self._levels[session] = level
        if len(self._levels) > self._limit:
            del self._levels[next(iter(self._levels))]

    def wants(self, session: str | None, level: str) -> bool:
        floor = self._levels.get(session) if session is not None else None
        if floor is None or level not in _SEVERITY:
            return True
        return _SEVERITY.index(level) >= _SEVERITY.index(floor)


class ClientPeer:
    """The client behind `ctx`, for the duration of its ``tools/call``; `session` keys its
    log level in `levels`."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], *, session: str | None, levels: LogLevels
    ) -> None:
        self._ctx = ctx
        self._session = session
        self._levels = levels

    def __repr__(self) -> str:
        return f"ClientPeer(request_id={self._ctx.request_id!r})"

    @property
    def ctx(self) -> ServerRequestContext[Any, Any]:
        return self._ctx

    def unable(self, request: ClientRequest) -> str | None:
        session, what = self._ctx.session, _NAMES[request]
        if (missing := undeclared(self._ctx, request)) is not None:
            return missing
        if not session.can_send_request:
            return (
                f"the calling client's connection has no channel for {what} requests "
                f"mid-call (protocol {session.protocol_version})"
            )
        return None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if not self._levels.wants(self._session, level):
            return
        with warnings.catch_warnings():
            # Deprecated in 2026-07-28, still the way a 2025 client hears a tool's logs.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self._ctx.session.send_log_message(
                cast(types.LoggingLevel, level),
                data,
                logger,
                related_request_id=self._ctx.request_id,
            )

    async def ask(self, request: ClientRequest, params: dict[str, Any]) -> dict[str, Any]:
        related = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        outgoing = wire_request(request, params)
        try:
            answer = await self._ctx.session.send_request(
                outgoing, _ANSWER[request], metadata=related
            )
        except Exception as exc:  # the client refused, or the channel broke
            raise InputRefused(
                f"the calling client answered the {_NAMES[request]} request with an error: {exc}",
                request=request,
            ) from exc
        return answer.model_dump(mode="json", by_alias=True, exclude_none=True)
