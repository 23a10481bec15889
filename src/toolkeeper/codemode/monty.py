"""The Monty tier: a program runs in a pydantic-monty worker — no imports beyond Monty's small
standard library, no files, no network, no environment — and every call to a name the program
did not define suspends it at a snapshot that the host answers.

The driver drives the sandbox synchronously (pydantic-monty's async driver costs about four
times as much per call) from a stepper thread per running program (`_Stepper`): each blocking
step — starting, resuming or loading a program, which lasts as long as the program computes
before its next call, up to `CodeLimits.cpu_seconds` — runs there, and the event loop waits
for it in place at most `STEP_WAIT_SECONDS` before it awaits it from a worker thread instead;
each inner call is awaited on the loop through the pipeline. A host answer may instead pause
the program (`Pause`): the snapshot then dumps to a few KB that `MontyTier.resume` continues
in any process, exactly at that call.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

try:
    import pydantic_monty as pm
except ModuleNotFoundError as exc:  # named, so the CLI can say which extra to install
    raise ModuleNotFoundError(
        "Code Mode's sandbox needs pydantic-monty: pip install 'toolkeeper[codemode]'",
        name=exc.name,
    ) from exc

from toolkeeper.codemode.program import CodeLimits, HostCall, InnerCallError, ProgramOutcome

RECURSION_DEPTH = 200
"""Python frames a program may nest; deeper raises RecursionError in the program."""
STORED_OUTPUT_BYTES = 8 * 1024 * 1024
"""Printed output kept at most (inline and as an artifact together); the rest is dropped."""

STEP_WAIT_SECONDS = 0.001
"""How long the event loop waits in place for a sandbox step before it awaits the step from
a worker thread instead (`_Stepper`): the most a program holds the loop at a time."""

IDLE_STEPPERS = 8
"""Stepper threads kept, process-wide, for the next programs once theirs end; programs running
at once beyond that each get their own, which ends with the program."""

_LIMIT_HINT = "raise it with Harness(code_limits=CodeLimits({field}=...))"


class Pause(Exception):
    """Raised by the host callback: stop the program at this call, keeping its state."""

    def __init__(self, reason: str, *, key: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key = key
        """What the pause waits on (an approval id)."""


class Halt(Exception):
    """Raised by the host callback: end the program now with this error (a limit reached),
    which the program cannot catch."""

    def __init__(self, message: str, *, type_name: str = "RuntimeError") -> None:
        super().__init__(message)
        self.message = message
        self.type_name = type_name


@dataclass
class Paused:
    """A program stopped at a call by `Pause`: `state` continues it (`MontyTier.resume`)."""

    state: bytes
    call: HostCall
    key: str
    """What it waits on (`Pause.key`)."""
    stdout: str
    batch: Batch | None = None
    """The awaited batch it paused in, with what of it is already answered."""


@dataclass
class _Output:
    """Printed output, kept up to `STORED_OUTPUT_BYTES`."""

    parts: list[str] = field(default_factory=list)
    size: int = 0
    dropped: bool = False

    def write(self, stream: str, text: str) -> None:
        if self.size >= STORED_OUTPUT_BYTES:
            self.dropped = True
            return
        chunk = text.encode("utf-8", "surrogatepass")[: STORED_OUTPUT_BYTES - self.size]
        self.dropped = self.dropped or len(chunk) < len(text.encode("utf-8", "surrogatepass"))
        self.size += len(chunk)
        self.parts.append(chunk.decode("utf-8", "ignore"))

    def text(self) -> str:
        return "".join(self.parts)


class MontyTier:
    """A pool of Monty workers, started at the first program and closed with the harness."""

    def __init__(self) -> None:
        self._pool: pm.Monty | None = None
        self._lock = threading.Lock()

    def _workers(self) -> pm.Monty:
        with self._lock:
            if self._pool is None:
                pool = pm.Monty(min_processes=1)
                pool.__enter__()
                self._pool = pool
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.__exit__(None, None, None)

    @contextlib.asynccontextmanager
    async def _session(self, **options: Any) -> AsyncIterator[tuple[Any, _Stepper]]:
        """A worker checked out of the pool, with the stepper that drives it; starting the
        pool and waiting for a free worker block, so both go through the stepper."""

        def start() -> tuple[Any, Any]:  # one step, not one per call
            checkout = self._workers().checkout(script_name="program.py", **options)
            return checkout, checkout.__enter__()

        stepper = _Stepper.take()
        try:
            with anyio.CancelScope(shield=True):  # a worker checked out is always returned
                checkout, session = await stepper.step(start)
            try:
                yield session, stepper
            finally:
                with anyio.CancelScope(shield=True):  # a cancelled run still returns it
                    await stepper.step(checkout.__exit__, None, None, None)
        finally:
            stepper.put_back()

    async def run(self, code: str, *, call: Host, limits: CodeLimits) -> ProgramOutcome | Paused:
        """Run `code`, answering each call to an undefined function with `call`."""
        output = _Output()
        async with self._session(limits=_limits(limits)) as (session, stepper):
            try:
                snapshot = await stepper.step(session.feed_start, code, print_callback=output.write)
            except pm.MontyError as exc:
                return _failed(exc, output, limits)
            return await _drive(stepper, snapshot, call, limits, output)

    async def resume(
        self,
        state: bytes,
        answer: Callable[[], Awaitable[Any]],
        *,
        call: Host,
        limits: CodeLimits,
        stdout: str,
        batch: Batch | None = None,
    ) -> ProgramOutcome | Paused:
        """Continue a paused program: `answer` gives (or raises, as `InnerCallError`) the
        result of the call it paused at; later calls go to `call` as before."""
        output = _Output()
        output.write("stdout", stdout)
        async with self._session() as (session, stepper):
            snapshot = await stepper.step(session.load_snapshot, state, print_callback=output.write)
            return await _drive(stepper, snapshot, call, limits, output, first=answer, batch=batch)


class Host(Protocol):
    """What the driver asks of the host: answer a call, and say how calls may overlap."""

    async def __call__(self, call: HostCall) -> Any: ...

    def awaitable(self, name: str) -> str | None:
        """The function `name` awaits when it is an awaitable twin (``f_async``), else None."""
        ...

    def concurrent(self, call: HostCall) -> bool:
        """Whether `call` may run alongside others of its batch (a read-only call)."""
        ...


@dataclass
class Batch:
    """Calls the program awaits together (``asyncio.gather``), answered at once: read-only
    ones concurrently, the others one at a time in the order the program made them."""

    calls: dict[int, HostCall]
    settled: dict[int, Any] = field(default_factory=dict)
    """Sandbox call id → its answer (a return value or an exception), once known."""
    waiting: int | None = None
    """The call the batch paused at."""
    approvals: dict[int, str] = field(default_factory=dict)
    """Concurrent calls that paused too, each on its own approval (sandbox call id → approval
    id): the batch pauses on them in turn, so no approval is left without its program."""

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": {str(k): list(v) for k, v in self.calls.items()},
            "settled": {str(k): v for k, v in self.settled.items()},
            "waiting": self.waiting,
            "approvals": {str(k): v for k, v in self.approvals.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Batch:
        return cls(
            calls={int(k): HostCall(v[0], tuple(v[1]), v[2]) for k, v in data["calls"].items()},
            settled={int(k): v for k, v in data["settled"].items()},
            waiting=data["waiting"],
            approvals={int(k): v for k, v in data.get("approvals", {}).items()},
        )

    def pause_on_next_approval(self) -> None:
        """Pause at the first call still waiting on an approval it already has, if any: the
        approval is stored with the program then, not created again."""
        if self.approvals:
            self.waiting = min(self.approvals)
            key = self.approvals.pop(self.waiting)
            raise Pause(f"waiting for approval {key}", key=key)


async def _drive(
    stepper: _Stepper,
    snapshot: Any,
    host: Host,
    limits: CodeLimits,
    output: _Output,
    first: Callable[[], Awaitable[Any]] | None = None,
    batch: Batch | None = None,
) -> ProgramOutcome | Paused:
    deadline = time.monotonic() + limits.wall_seconds
    pending: dict[int, HostCall] = {}
    try:
        with anyio.fail_after(limits.wall_seconds):
            while not isinstance(snapshot, pm.MontyComplete):
                if time.monotonic() > deadline:
                    break
                if type(snapshot) is pm.FunctionSnapshot and not snapshot.is_os_function:
                    # The common case first: a call to an SDK function.
                    name = str(snapshot.function_name)
                    call = HostCall(
                        name, _plain_args(snapshot.args), _plain_kwargs(snapshot.kwargs)
                    )
                    awaited = host.awaitable(name)
                    if awaited is not None:
                        pending[snapshot.call_id] = call._replace(name=awaited)
                        snapshot = await stepper.step(snapshot.resume, _FUTURE)
                        continue
                    try:
                        answer = await (first() if first is not None else host(call))
                        first = None
                    except Pause as pause:
                        state = await stepper.step(snapshot.dump)
                        return Paused(state, call, pause.key, output.text())
                    except InnerCallError as exc:
                        first = None
                        snapshot = await stepper.step(snapshot.resume, _raised(exc))
                        continue
                    snapshot = await stepper.step(snapshot.resume, {"return_value": answer})
                    continue
                if isinstance(snapshot, pm.NameLookupSnapshot):
                    snapshot = await stepper.step(snapshot.resume)  # an undefined name: NameError
                    continue
                if isinstance(snapshot, pm.FutureSnapshot):
                    if batch is None:
                        batch = Batch({i: pending.pop(i) for i in snapshot.pending_call_ids})
                    try:
                        await _settle(batch, host, first)
                    except Pause as pause:
                        assert batch.waiting is not None
                        waiting = batch.calls[batch.waiting]
                        state = await stepper.step(snapshot.dump)
                        return Paused(state, waiting, pause.key, output.text(), batch)
                    first = None
                    snapshot = await stepper.step(snapshot.resume, batch.settled)
                    batch = None
                    continue
                # An OS call (files, environment, imports...) or a snapshot of another kind.
                snapshot = await stepper.step(_refuse_os, snapshot)
            else:
                return ProgramOutcome(
                    value=_plain(snapshot.output),
                    stdout=output.text(),
                    truncated=output.dropped,
                )
    except Halt as halt:
        return ProgramOutcome(
            value=None,
            stdout=output.text(),
            truncated=output.dropped,
            error=halt.message,
            error_type=halt.type_name,
        )
    except pm.MontyError as exc:
        return _failed(exc, output, limits)
    except TimeoutError:
        pass
    return ProgramOutcome(
        value=None,
        stdout=output.text(),
        truncated=output.dropped,
        error=(
            f"the program ran past its wall-time limit (CodeLimits.wall_seconds = "
            f"{limits.wall_seconds:g}); " + _LIMIT_HINT.format(field="wall_seconds")
        ),
        error_type="TimeoutError",
    )


async def _settle(batch: Batch, host: Host, first: Callable[[], Awaitable[Any]] | None) -> None:
    """Answer every call of `batch`: the one it paused at from `first`, then read-only calls
    concurrently, then the rest in program order. A `Pause` leaves `batch.waiting` set and
    what is settled kept, so a continued program answers each call once. Reads that pause
    together are resolved in turn — each continuation pauses on the next one's approval —
    and a write is not proposed before the reads ahead of it are answered."""

    async def one(call_id: int, answer: Callable[[], Awaitable[Any]]) -> None:
        try:
            batch.settled[call_id] = {"return_value": await answer()}
        except InnerCallError as exc:
            batch.settled[call_id] = _raised(exc)
        except Pause:
            batch.waiting = call_id
            raise

    if first is not None and batch.waiting is not None:
        await one(batch.waiting, first)
    batch.waiting = None
    batch.pause_on_next_approval()
    order = [i for i in sorted(batch.calls) if i not in batch.settled]
    reads = [i for i in order if host.concurrent(batch.calls[i])]

    async def read(call_id: int) -> None:
        try:
            await one(call_id, functools.partial(host, batch.calls[call_id]))
        except Pause as pause:  # a read that needs approval waits like a write
            batch.approvals[call_id] = pause.key

    async with anyio.create_task_group() as group:
        for call_id in reads:
            group.start_soon(read, call_id)
    batch.pause_on_next_approval()
    for call_id in order:
        if call_id not in batch.settled:
            await one(call_id, functools.partial(host, batch.calls[call_id]))


class _Stepper:
    """A thread that runs one program's blocking sandbox steps — starting, resuming, loading,
    dumping — one at a time, so the session is never touched by two threads.

    A step lasts as long as the program computes before its next call (up to
    `CodeLimits.cpu_seconds`), which the host cannot know in advance. The event loop waits
    for it in place up to `STEP_WAIT_SECONDS` — most steps take tens of microseconds, less
    than a round trip through the loop costs — and past that awaits it from a worker thread,
    serving other calls meanwhile: a program never holds the loop longer than that at a time.
    A step is not abandoned on cancellation: the worker's own CPU limit ends it.

    The step goes over and back through a connected pair of sockets rather than locks:
    sending lets go of the GIL before it wakes the other thread, which can then run at once;
    releasing a lock wakes it while the GIL is still held, and under load the switch back and
    forth for the GIL costs more than the step (about twice the context switches per step).
    The loop's end has a kernel receive timeout of `STEP_WAIT_SECONDS` (``SO_RCVTIMEO``), so
    waiting in place for the answer and taking it is one system call that lets go of the GIL
    once — waiting with ``poll`` and then reading a pipe took two, and the thread that just
    answered contended for the GIL at each (about a fifth of a step's cost, measured alone)."""

    def __init__(self) -> None:
        self._loop_end, self._thread_end = socket.socketpair()
        for end in (self._loop_end, self._thread_end):
            end.settimeout(None)  # blocking, whatever socket.setdefaulttimeout says
        self._loop_end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _STEP_WAIT)
        self._job: Callable[[], Any] | None = None
        self._result: tuple[bool, Any] = (True, None)
        threading.Thread(target=self._serve, name="toolkeeper-monty", daemon=True).start()

    def _serve(self) -> None:
        try:
            while self._thread_end.recv(1) == _STEP:
                job, self._job = self._job, None
                assert job is not None
                try:
                    self._result = (True, job())
                except BaseException as exc:  # handed to the task awaiting the step
                    self._result = (False, exc)
                self._thread_end.send(_STEP)
        finally:
            self._loop_end.close()
            self._thread_end.close()

    async def step(self, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._job = functools.partial(step, *args, **kwargs)
        self._loop_end.send(_STEP)
        try:
            self._loop_end.recv(1)  # returns within STEP_WAIT_SECONDS, answered or not
        except BlockingIOError:  # the step runs on: wait for it off the loop
            await anyio.to_thread.run_sync(_answered, self._loop_end)
        (ok, value), self._result = self._result, (True, None)
        if not ok:
            raise value
        return value

    @classmethod
    def take(cls) -> _Stepper:
        """An idle stepper, or a new one."""
        with _IDLE_LOCK:
            return _IDLE.pop() if _IDLE else cls()

    def put_back(self) -> None:
        """Keep it for the next program, or end its thread when enough are idle."""
        with _IDLE_LOCK:
            if len(_IDLE) < IDLE_STEPPERS:
                _IDLE.append(self)
                return
        self._loop_end.send(_STOP)


def _answered(end: socket.socket) -> None:
    """Block until the stepper answers on `end` (whose own receive timeout is short)."""
    readable = select.poll()
    readable.register(end, select.POLLIN)
    readable.poll()
    end.recv(1)


_STEP, _STOP = b"s", b"q"
_STEP_WAIT = struct.pack("ll", 0, int(STEP_WAIT_SECONDS * 1_000_000))
"""`STEP_WAIT_SECONDS` as the ``struct timeval`` that ``SO_RCVTIMEO`` takes (Linux, macOS)."""
_IDLE: list[_Stepper] = []
_IDLE_LOCK = threading.Lock()


def _raised(exc: InnerCallError) -> Any:
    return {"exc_type": _exc_type(exc.type_name), "message": exc.message}


def _refuse_os(snapshot: Any) -> Any:
    """Files, environment, sleeping, imports beyond Monty's own modules: no OS call is ever
    served, and Monty's own refusal answers it (PermissionError for a path,
    ModuleNotFoundError for an import, RuntimeError for the rest)."""
    if isinstance(snapshot, pm.FunctionSnapshot):
        return snapshot.resume_not_handled()
    if isinstance(snapshot, pm.FutureSnapshot):
        return snapshot.resume(
            {
                call_id: {"exc_type": "RuntimeError", "message": "no pending call"}
                for call_id in snapshot.pending_call_ids
            }
        )
    return snapshot.resume()


_EXC_TYPES = frozenset(
    {
        "ValueError",
        "TypeError",
        "PermissionError",
        "LookupError",
        "KeyError",
        "TimeoutError",
        "NameError",
        "RuntimeError",
        "MemoryError",
    }
)


def _exc_type(name: str) -> Any:
    # Monty raises builtin exception types only; anything else is a RuntimeError.
    return name if name in _EXC_TYPES else "RuntimeError"


def _failed(exc: pm.MontyError, output: _Output, limits: CodeLimits) -> ProgramOutcome:
    """A program that raised, with the limit it hit named when it hit one."""
    if isinstance(exc, pm.MontyCrashedError) and exc.timed_out:
        # The pool's watchdog: the program computed past its CPU limit without yielding.
        kind = "TimeoutError"
        message = (
            f"the program computed past its CPU limit (CodeLimits.cpu_seconds = "
            f"{limits.cpu_seconds}); " + _LIMIT_HINT.format(field="cpu_seconds")
        )
    elif isinstance(exc, pm.MontyCrashedError):
        kind, message = "RuntimeError", f"the sandbox worker stopped: {exc}"
    elif isinstance(exc, pm.MontySyntaxError):
        kind, message = "SyntaxError", exc.display("msg")
    else:
        inner = exc.exception()
        kind = type(inner).__name__
        message = exc.display("msg") if isinstance(exc, pm.MontyRuntimeError) else str(exc)
        message = _explained(kind, message, limits)
    return ProgramOutcome(
        value=None, stdout=output.text(), truncated=output.dropped, error=message, error_type=kind
    )


def _explained(kind: str, message: str, limits: CodeLimits) -> str:
    if kind == "MemoryError":
        return (
            f"{message} — the program went over its memory limit (CodeLimits.memory_bytes = "
            f"{limits.memory_bytes}); " + _LIMIT_HINT.format(field="memory_bytes")
        )
    if kind == "TimeoutError" and "time limit" in message.lower():
        return (
            f"{message} — the program computed past its CPU limit (CodeLimits.cpu_seconds = "
            f"{limits.cpu_seconds}); " + _LIMIT_HINT.format(field="cpu_seconds")
        )
    if kind == "RecursionError":
        return f"{message} — programs may nest at most {RECURSION_DEPTH} calls"
    return message


def _limits(limits: CodeLimits) -> pm.ResourceLimits:
    return {
        "max_feed_duration_secs": float(limits.cpu_seconds),
        "max_memory": limits.memory_bytes,
        "max_recursion_depth": RECURSION_DEPTH,
        # The host counts inner calls itself (with a clear error); this only backstops it.
        "max_suspensions": limits.max_inner_calls + 1_000,
    }


def _plain(value: Any) -> Any:
    """Sandbox values as JSON-shaped ones: tuples become lists, other keys strings."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _INT_BITS:
        # Python refuses to print an int this long (and no JSON reader takes it): it crosses
        # as a description, which no integer field accepts.
        return f"<int of {value.bit_length()} bits>"
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def _plain_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A call's positional arguments as `_plain` makes them, without copying the common
    case: strings, floats, booleans, None and ints short enough to print, which it keeps."""
    for value in args:
        kind = type(value)
        if kind is str or kind is float or kind is bool or value is None:
            continue
        if kind is int and value.bit_length() <= _INT_BITS:
            continue
        return tuple(_plain(args))
    return tuple(args)


def _plain_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return _plain(kwargs) if kwargs else {}


_INT_BITS = 4000 * 3
"""Bits of the largest int a value may carry out of the sandbox as a number (about 3,600
decimal digits, below Python's 4,300-digit conversion limit)."""
_FUTURE = {"future": ...}
"""The answer to a call the program will await: Monty hands it a future."""


__all__ = ["Batch", "Halt", "Host", "MontyTier", "Pause", "Paused"]
