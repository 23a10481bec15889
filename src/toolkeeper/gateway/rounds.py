"""Input asked of a 2026-07-28 client: the call waits in the gateway between round trips.

A 2026-07-28 client has no channel for a request mid-call; instead the server's
``tools/call`` answers ``input_required`` with the requests (elicitation, sampling,
``roots/list``) and an opaque ``requestState``, and the client calls again with its
responses and that state (the SDK's ``Client`` does so on its own). An upstream tool,
though, asks mid-call and waits for the answer. `SuspendedCalls` joins the two: such a call
runs in the gateway's own task group, and when its tool asks, the request goes out as the
``input_required`` answer while the call stays suspended, keyed by an unguessable state
bound to the calling principal, used once, and bounded in number (``limit``) and in how
long it waits for the client (``lifetime``). Policy and the ledger still see each request
first: `RoundTripPeer` sits under the call's `GovernedPeer` like any client.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import anyio
import anyio.abc
from mcp import types

from toolkeeper.gateway.peer import ClientPeer, undeclared, wire_request
from toolkeeper.gateway.results import refusal
from toolkeeper.runtime.context import ClientRequest
from toolkeeper.runtime.envelope import ErrorCategory, ResultEnvelope
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.peer import InputRefused

_WHAT = {"elicit": "elicitation", "sample": "sampling", "roots": "roots"}


class UnknownRequestState(Exception):
    """A ``requestState`` the gateway holds no call for — never issued, already used,
    expired, or issued to another principal (which is not told apart, so a guess learns
    nothing)."""


@dataclass(eq=False)
class _Ask:
    request: ClientRequest
    params: dict[str, Any]
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | None = None
    refused: str | None = None


@dataclass(eq=False)
class _Call:
    principal: Principal
    tool: str
    peer: ClientPeer | None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    changed: anyio.Event = field(default_factory=anyio.Event)
    fresh: list[_Ask] = field(default_factory=list)
    outstanding: dict[str, _Ask] = field(default_factory=dict)
    envelope: ResultEnvelope | None = None
    error: Exception | None = None
    finished: bool = False
    state: str | None = None


class RoundTripPeer:
    """The 2026-07-28 client of one call across its round trips: notifications go on the
    request open now (none between rounds), requests wait for the next ``input_required``."""

    def __init__(self, calls: SuspendedCalls, call: _Call) -> None:
        self._calls = calls
        self._call = call

    def __repr__(self) -> str:
        return f"RoundTripPeer(state={self._call.state!r})"

    def unable(self, request: ClientRequest) -> str | None:
        peer = self._call.peer
        return undeclared(peer.ctx, request) if peer is not None else None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._call.peer is not None:
            await self._call.peer.progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if self._call.peer is not None:
            await self._call.peer.log(level, data, logger)

    async def ask(self, request: ClientRequest, params: dict[str, Any]) -> dict[str, Any]:
        ask = _Ask(request, params)
        self._call.fresh.append(ask)
        self._call.changed.set()
        with anyio.move_on_after(self._calls.lifetime):
            await ask.answered.wait()
        if not ask.answered.is_set():
            self._calls.forget(self._call)
            raise InputRefused(
                f"the calling client did not answer the {_WHAT[request]} request within "
                f"{self._calls.lifetime:g} s; its request state expired",
                request=request,
            )
        if ask.refused is not None:
            raise InputRefused(ask.refused, request=request)
        assert ask.answer is not None
        return ask.answer


Invoke = Callable[[RoundTripPeer], Awaitable[ResultEnvelope]]


class SuspendedCalls:
    """The calls of 2026-07-28 clients that wait on their client's input; at most `limit`
    at once, each waiting at most `lifetime` seconds for the client to call again."""

    def __init__(self, *, limit: int, lifetime: float) -> None:
        self.limit = limit
        self.lifetime = lifetime
        self._waiting: dict[str, _Call] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._keys = count(1)

    @property
    def available(self) -> bool:
        """Whether calls can be suspended: only while `running`."""
        return self._tasks is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Calls may be suspended within this block; those still waiting end with it."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                self._waiting.clear()
                tasks.cancel_scope.cancel()

    async def start(
        self, principal: Principal, tool: str, peer: ClientPeer | None, invoke: Invoke
    ) -> ResultEnvelope | types.InputRequiredResult:
        """Run `invoke`, `principal`'s call of `tool`; its envelope, or the input its tool
        asks first. `peer` carries the call's notifications during this request (None: it
        hears none)."""
        assert self._tasks is not None, "start() outside running()"
        call = _Call(principal, tool, peer)
        self._tasks.start_soon(self._run, call, invoke)
        return await self._next(call)

    async def resume(
        self,
        principal: Principal,
        tool: str,
        state: str,
        responses: dict[str, Any] | None,
        peer: ClientPeer | None,
    ) -> ResultEnvelope | types.InputRequiredResult:
        """Hand the client's `responses` to the call `state` names and go on with it; raises
        `UnknownRequestState` unless `principal` holds that state for a call of `tool` (the
        client sends the original request again)."""
        call = self._waiting.get(state)
        if call is None or call.principal != principal or call.tool != tool:
            raise UnknownRequestState(state)
        del self._waiting[state]  # each state is good for one round trip
        call.state, call.peer = None, peer
        for key, answer in (responses or {}).items():
            ask = call.outstanding.pop(key, None)
            if ask is not None:
                ask.answer = _wire(answer)
                ask.answered.set()
        # A request the client left unanswered is asked again in the next round.
        call.fresh[:0] = call.outstanding.values()
        call.outstanding.clear()
        return await self._next(call)

    def forget(self, call: _Call) -> None:
        if call.state is not None:
            self._waiting.pop(call.state, None)
            call.state = None

    async def _run(self, call: _Call, invoke: Invoke) -> None:
        with call.scope:
            try:
                call.envelope = await invoke(RoundTripPeer(self, call))
            except Exception as exc:  # raised again in the request that waits on the call
                call.error = exc
            finally:
                call.finished = True
                call.changed.set()
                self.forget(call)

    async def _next(self, call: _Call) -> ResultEnvelope | types.InputRequiredResult:
        """Wait on `call` until it ends or asks; suspend it in the second case."""
        try:
            while True:
                while not call.finished and not call.fresh:
                    call.changed = anyio.Event()
                    await call.changed.wait()
                if call.finished:
                    call.peer = None
                    if call.error is not None:
                        raise call.error
                    if call.envelope is None:  # cancelled: the gateway is stopping
                        return refusal(
                            ErrorCategory.CANCELLED,
                            "the call was cancelled while it waited on its client",
                            "Call the tool again.",
                        )
                    return call.envelope
                if len(self._waiting) < self.limit:
                    break
                for ask in call.fresh:
                    ask.refused = (
                        f"the gateway already holds {self.limit} calls waiting on their "
                        f"clients' input; the {_WHAT[ask.request]} request was not sent"
                    )
                    ask.answered.set()
                call.fresh.clear()
        except BaseException:
            # The client gave up on this round (cancelled it, disconnected): so does the call.
            call.scope.cancel()
            raise
        requests: dict[str, Any] = {}
        for ask in call.fresh:
            key = f"{ask.request}-{next(self._keys)}"
            call.outstanding[key] = ask
            requests[key] = wire_request(ask.request, ask.params)
        call.fresh.clear()
        call.state, call.peer = secrets.token_urlsafe(32), None
        self._waiting[call.state] = call
        return types.InputRequiredResult(input_requests=requests, request_state=call.state)


def _wire(answer: Any) -> dict[str, Any]:
    if isinstance(answer, dict):
        return answer
    dumped: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
