"""The CPython tier's pause: abort, then replay from the recorded inner calls.

A CPython process cannot be snapshotted the way Monty's heap can, so a program that reaches
an inner call needing approval is killed (the callback's `Pause` propagates out of
`run_cpython`, which kills the sandbox first) and what it received so far is kept: every inner
call it made, in order, with its answer. Continuing runs the program again from the start;
the tier's `Replay` answers those calls from the record — no tool runs for them — and the
next call, which must be the one it paused at, gets the approved call's outcome; from there
it runs live. A program that asks anything else on the way (it read a clock, or a random
number) has diverged, and stops before any call of its own runs.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolkeeper.codemode.monty import Halt, Host, Pause, Paused
from toolkeeper.codemode.program import CodeLimits, HostCall, InnerCallError, ProgramOutcome

Answer = Callable[[], Awaitable[Any]]


@dataclass
class Record:
    """A paused CPython program: its code, the calls it made with their answers, and the
    call it waits on."""

    code: str
    calls: list[tuple[HostCall, Any]]
    """Each call and its return value, or the `InnerCallError` it raised."""
    waiting: HostCall

    def encode(self) -> bytes:
        calls = []
        for call, outcome in self.calls:
            entry: dict[str, Any] = {"call": list(call)}
            if isinstance(outcome, InnerCallError):
                entry["error"] = [outcome.type_name, outcome.message, outcome.details]
            else:
                entry["value"] = outcome
            calls.append(entry)
        body = {"code": self.code, "calls": calls, "waiting": list(self.waiting)}
        return json.dumps(body, default=repr).encode()

    @classmethod
    def decode(cls, data: bytes) -> Record:
        body = json.loads(data)
        calls: list[tuple[HostCall, Any]] = []
        for entry in body["calls"]:
            call = _call(entry["call"])
            error = entry.get("error")
            calls.append((call, InnerCallError(*error) if error else entry.get("value")))
        return cls(body["code"], calls, _call(body["waiting"]))


def _call(data: list[Any]) -> HostCall:
    return HostCall(data[0], tuple(data[1]), data[2])


def _same(a: HostCall, b: HostCall) -> bool:
    def normal(call: HostCall) -> str:
        return json.dumps([call.name, list(call.args), call.kwargs], sort_keys=True, default=repr)

    return normal(a) == normal(b)


async def run(
    code: str,
    *,
    host: Host,
    functions: list[str],
    limits: CodeLimits,
    record: Record | None = None,
    first: Answer | None = None,
) -> ProgramOutcome | Paused:
    """Run `code` in the CPython tier; with `record`, replay its calls, then answer the call
    it paused at from `first`."""
    # The tier's own module (bubblewrap, the child protocol, `Replay`), loaded when used.
    cpython = importlib.import_module("toolkeeper.codemode.cpython")
    calls = list(record.calls) if record else []
    waiting: list[HostCall] = []

    async def live(call: HostCall) -> Any:
        nonlocal first
        answer: Answer = lambda: host(call)  # noqa: E731 - the default source of an answer
        if first is not None:
            assert record is not None
            if not _same(call, record.waiting):
                raise Halt(
                    f"the program diverged from its recorded run at inner call "
                    f"{len(calls) + 1}: it paused at {record.waiting.name}, now it asks "
                    f"{call.name} with other arguments; nothing after that point ran"
                )
            answer, first = first, None
        try:
            value = await answer()
        except InnerCallError as exc:
            calls.append((call, exc))
            raise
        except Pause:
            waiting.append(call)
            raise
        calls.append((call, value))
        return value

    replaying = cpython.Replay(list(calls)).wrap(live)
    try:
        outcome: ProgramOutcome = await cpython.run_cpython(
            code, functions=functions, call=replaying, limits=limits
        )
        replaying.finish()
        return outcome
    except Pause as pause:
        return Paused(Record(code, calls, waiting[-1]).encode(), waiting[-1], pause.key, "")
    except (Halt, cpython.Divergence) as stop:
        message = stop.message if isinstance(stop, Halt) else str(stop)
        return ProgramOutcome(
            value=None, stdout="", truncated=False, error=message, error_type="RuntimeError"
        )


__all__ = ["Record", "run"]
