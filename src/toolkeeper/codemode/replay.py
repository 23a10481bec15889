"""The CPython tier's pause: abort, then replay from the recorded inner calls.

A CPython process cannot be snapshotted the way Monty's heap can, so a program that reaches
an inner call needing approval is killed (the callback's `Pause` propagates out of
`run_cpython`, which kills the sandbox first) and what it received so far is kept: every inner
call it made, by its position in the program's call order, with its answer. Continuing runs
the program again from the start; those calls are answered from the record — no tool runs for
them — and the call it paused at gets the approved call's outcome; from there it runs live.
A program that asks anything else on the way (it read a clock, or a random number) has
diverged, and stops before any call of its own runs.

Calls a program puts in flight together (``asyncio.gather``) follow the rule of the Monty
tier: read-only calls run concurrently, and a call that may write waits until every call
before it is answered, so writes run in program order. When one call pauses, no further call
starts; the reads already running finish, and every one of them that pauses too is kept in
the record with its own approval. The program then pauses on the first of them; continuing
it pauses on the next (on the approval that call already has, never a new one), so no
approval is left without its program.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from toolkeeper.codemode.monty import Halt, Host, Pause, Paused
from toolkeeper.codemode.program import CodeLimits, HostCall, InnerCallError, ProgramOutcome

Answer = Callable[[], Awaitable[Any]]


@dataclass
class Record:
    """A paused CPython program: its code, the calls it made (by position in its call order)
    with their answers, the call it waits on, and the others waiting on approvals."""

    code: str
    calls: dict[int, tuple[HostCall, Any]]
    """Each answered call and its return value, or the `InnerCallError` it raised."""
    waiting: int
    """The position of the call the program waits on (its approval holds the record)."""
    paused: dict[int, tuple[HostCall, str]] = field(default_factory=dict)
    """Every call waiting on an approval, `waiting` included, with that approval's id."""

    def encode(self) -> bytes:
        calls = []
        for position, (call, outcome) in sorted(self.calls.items()):
            entry: dict[str, Any] = {"at": position, "call": list(call)}
            if isinstance(outcome, InnerCallError):
                entry["error"] = [outcome.type_name, outcome.message, outcome.details]
            else:
                entry["value"] = outcome
            calls.append(entry)
        paused = [
            {"at": position, "call": list(call), "approval": key}
            for position, (call, key) in sorted(self.paused.items())
        ]
        body = {"code": self.code, "calls": calls, "waiting": self.waiting, "paused": paused}
        return json.dumps(body, default=repr).encode()

    @classmethod
    def decode(cls, data: bytes) -> Record:
        body = json.loads(data)
        calls: dict[int, tuple[HostCall, Any]] = {}
        for entry in body["calls"]:
            error = entry.get("error")
            outcome = InnerCallError(*error) if error else entry.get("value")
            calls[entry["at"]] = (_call(entry["call"]), outcome)
        paused = {e["at"]: (_call(e["call"]), e["approval"]) for e in body["paused"]}
        return cls(body["code"], calls, body["waiting"], paused)


def _call(data: list[Any]) -> HostCall:
    return HostCall(data[0], tuple(data[1]), data[2])


def _same(a: HostCall, b: HostCall) -> bool:
    def normal(call: HostCall) -> str:
        return json.dumps([call.name, list(call.args), call.kwargs], sort_keys=True, default=repr)

    return normal(a) == normal(b)


class _Calls:
    """The host side of one run: answers the record's calls from it, orders the live ones,
    and collects every pause before the program is stopped."""

    def __init__(self, host: Host, record: Record | None, first: Answer | None):
        self.host = host
        self.record = record
        self.first = first
        self.made = 0
        self.open: dict[int, asyncio.Event] = {}
        """The calls not answered yet, each with the event its answer sets."""
        self.open_writes: set[int] = set()
        self.calls: dict[int, tuple[HostCall, Any]] = {}
        """What this run answered, by position: the record of its pause, if it pauses."""
        self.paused: dict[int, tuple[HostCall, str]] = {}
        self.running = 0
        self.quiet = asyncio.Event()
        self.quiet.set()

    async def __call__(self, call: HostCall) -> Any:
        position = self.made
        self.made += 1
        self.open[position] = asyncio.Event()
        try:
            value = await self._answer(position, call)
        except InnerCallError as exc:
            self._answered(position, call, exc)
            raise
        self._answered(position, call, value)
        return value

    def _answered(self, position: int, call: HostCall, outcome: Any) -> None:
        self.calls[position] = (call, outcome)
        self.open.pop(position).set()
        self.open_writes.discard(position)

    async def _answer(self, position: int, call: HostCall) -> Any:
        record = self.record
        entry = None if record is None else record.calls.get(position, record.paused.get(position))
        if entry is not None:
            assert record is not None
            if not _same(call, entry[0]):
                raise Halt(
                    f"the program diverged from its recorded run at inner call {position + 1}: "
                    f"it made {entry[0].name} there, now it asks {call.name} with other "
                    "arguments; nothing after that point ran"
                )
            if position in record.calls:
                outcome = record.calls[position][1]
                if isinstance(outcome, InnerCallError):
                    raise InnerCallError(outcome.type_name, outcome.message, outcome.details)
                return outcome
            if position != record.waiting:
                # Paused alongside the one resumed: it waits on the approval it already has.
                await self._pause(position, call, record.paused[position][1])
            assert self.first is not None
            answer, self.first = self.first, None
            if not self.host.concurrent(call):
                self.open_writes.add(position)  # the approved write: later reads wait for it
        else:
            await self._turn(position, call)
            answer = functools.partial(self.host, call)
        self.running += 1
        self.quiet.clear()
        try:
            return await answer()
        except Pause as pause:
            self.running -= 1
            await self._pause(position, call, pause.key)
            raise
        finally:
            if position not in self.paused:
                self.running -= 1
            if not self.running:
                self.quiet.set()

    async def _turn(self, position: int, call: HostCall) -> None:
        """Wait for this live call's turn: a write waits for every call before it, a read
        for the writes before it; after a pause, no call starts."""
        if self.host.concurrent(call):
            ahead = [self.open[p] for p in self.open_writes if p < position]
        else:
            self.open_writes.add(position)
            ahead = [event for p, event in self.open.items() if p < position]
        for event in ahead:
            await event.wait()
        if self.paused:
            await asyncio.Event().wait()  # the program stops at the pause: nothing starts

    async def _pause(self, position: int, call: HostCall, key: str) -> NoReturn:
        """Keep the pause, let the calls running finish, then stop the program."""
        self.paused[position] = (call, key)
        if not self.running:
            self.quiet.set()
        await self.quiet.wait()
        raise Pause(f"waiting for approval {key}", key=key)

    def finish(self) -> None:
        """Raise `Halt` if the program ended before making every recorded call."""
        if self.record is not None:
            count = max([*self.record.calls, *self.record.paused]) + 1
            if self.made < count:
                raise Halt(
                    f"the program diverged from its recorded run: it ended after {self.made} "
                    f"inner calls where it had made {count}; nothing after that point ran"
                )

    def paused_record(self, code: str) -> Paused:
        """The record to continue from: what this run answered and where it paused, and —
        when it was stopped before making every call of the record it replayed — the rest of
        that record, so no answer and no waiting approval is dropped."""
        calls = dict(self.record.calls) if self.record else {}
        paused = dict(self.record.paused) if self.record else {}
        calls.update(self.calls)
        for position in self.calls:
            paused.pop(position, None)
        paused.update(self.paused)
        waiting = min(paused)
        call, key = paused[waiting]
        return Paused(Record(code, calls, waiting, paused).encode(), call, key, "")


async def run(
    code: str,
    *,
    host: Host,
    functions: list[str],
    limits: CodeLimits,
    record: Record | None = None,
    first: Answer | None = None,
    sandbox: Any = None,
) -> ProgramOutcome | Paused:
    """Run `code` in the CPython tier; with `record`, replay its calls, then answer the call
    it paused at from `first`. `sandbox`: a `cpython.Sandbox` started ahead, to run in."""
    # The tier's own module (bubblewrap, the child protocol), loaded when used.
    cpython = importlib.import_module("toolkeeper.codemode.cpython")
    calls = _Calls(host, record, first)
    try:
        outcome: ProgramOutcome = await cpython.run_cpython(
            code, functions=functions, call=calls, limits=limits, sandbox=sandbox
        )
        if not calls.paused:
            calls.finish()
    except Pause:
        return calls.paused_record(code)
    except Halt as stop:
        return ProgramOutcome(
            value=None, stdout="", truncated=False, error=stop.message, error_type="RuntimeError"
        )
    if calls.paused:
        # Stopped some other way (its wall time) while calls waited on approvals: they are
        # proposed, so the program waits on them rather than lose them.
        return calls.paused_record(code)
    return outcome


__all__ = ["Record", "run"]
