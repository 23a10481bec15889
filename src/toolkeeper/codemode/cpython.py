"""The CPython tier of Code Mode: a program in a fresh CPython under bubblewrap, its inner calls
crossing to the host over a pipe.

The sandbox (see docs/code-mode-cpython.md): no network, no host file but the interpreter's
installation and ``/usr`` (read-only), a private size-bounded ``/tmp``, an empty environment,
its own user, mount, pid (the interpreter its init), network, IPC, UTS and cgroup namespaces
with every capability dropped, a seccomp filter that refuses new processes and ptrace, and
rlimits for CPU, memory, file size, open files and processes. The whole sandbox is killed on
timeout, cancellation or abort. Without bubblewrap nothing runs: `SandboxUnavailable`. A
`Sandbox` can be started ahead of its program, which takes bubblewrap's and the interpreter's
start off the program's time.

The program's value is that of its last statement when that is an expression (as in Monty
and a notebook cell), else None. It must be a JSON value. Each name in ``functions`` is a
Python function in the program's globals; calling it sends a request frame to the host,
which awaits ``call(HostCall(...))`` and answers. The host trusts no frame: it accepts only
well-formed requests, for the names offered, with sequential ids, within `MAX_FRAME_BYTES`,
and kills the program at the first other frame.

Exceptions:

    ToolkeeperError
    ├── executors.sandbox.SandboxUnavailable
    │   └── SandboxUnavailable   bubblewrap is missing or cannot create the sandbox here
    └── Divergence               a replayed program made another call than the one recorded,
                                 or ended before it
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import keyword
import marshal
import os
import platform
import shutil
import signal
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from toolkeeper.codemode.program import CodeLimits, HostCall, InnerCallError, ProgramOutcome
from toolkeeper.errors import ToolkeeperError
from toolkeeper.executors.sandbox import (
    BwrapSpec,
    Mount,
    ResourceLimits,
    kill_process_tree,
    minimal_root,
)
from toolkeeper.executors.sandbox import (
    SandboxUnavailable as _BwrapUnavailable,
)

MAX_FRAME_BYTES: Final = 4 * 1024 * 1024
"""The largest frame the host reads from a program: one inner call's arguments or the
program's value, as JSON. A larger one ends the program as a protocol violation."""
TMP_BYTES: Final = 64 * 1024 * 1024
"""Size of the program's private writable ``/tmp`` (RAM-backed, so bounded)."""
FILE_BYTES: Final = 64 * 1024 * 1024
"""The largest file the program may write (RLIMIT_FSIZE)."""
OPEN_FILES: Final = 256
"""Descriptors the program may hold open (RLIMIT_NOFILE)."""
MAX_ERROR_OUTPUT: Final = 64 * 1024
"""What a sandbox keeps of its output before a program sets `CodeLimits.output_bytes`:
bubblewrap's own error, if it fails to start."""
PROCESSES: Final = 64
"""RLIMIT_NPROC. The kernel exempts a host running as root, so the seccomp filter, which
refuses every new process, is what stops a fork bomb; the rlimit is a second wall elsewhere."""

_BOOTSTRAP: Final = """import marshal, posix, sys
fd, size, code = int(sys.argv[2]), int(sys.argv[3]), b""
while len(code) < size:
    chunk = posix.read(fd, size - len(code))
    code += chunk if chunk else posix._exit(70)
exec(marshal.loads(code))
"""
"""What the sandboxed interpreter runs first: it reads the runner, compiled by the host, from
the answer pipe. Compiling the runner's source in every sandbox would cost several ms of
the start budget; the host compiles it once, for the same interpreter. It and the runner use
the built-in ``posix`` module, not ``os``, whose import costs 1–2 ms of that budget."""
_SANDBOX_UID: Final = 65534
_ENV: Final = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
"""The program's whole environment: bwrap is started with it and passes it on; nothing of the
host's environment is inherited."""
_GRACE_SECONDS: Final = 5.0
_HELLO: Final = b'{"op":"hello"}'

CallHost = Callable[[HostCall], Awaitable[Any]]
"""The host callback: answers one inner call, or raises `InnerCallError` or `Abort`."""


class SandboxUnavailable(_BwrapUnavailable):
    """Raised when bubblewrap is missing or cannot create the sandbox; nothing ran. The same
    failure as a shell command's (`toolkeeper.executors.sandbox.SandboxUnavailable`, whose
    handlers catch it too); `detail` is bubblewrap's own message, if it printed one."""

    def __init__(self, message: str, *, detail: str = ""):
        super().__init__(message, reason=detail or message)
        self.detail = detail


class Divergence(ToolkeeperError):
    """Raised during a replay when the program's call at `position` differs from the one
    recorded there (`made` is None when the program ended before making it): the program is
    not the one that was paused, so no recorded result may answer it."""

    def __init__(self, position: int, recorded: HostCall, made: HostCall | None):
        now = f"now {_show(made)}" if made is not None else "now the program ended before it"
        super().__init__(
            f"the program diverged from its recorded run at inner call {position}: recorded "
            f"{_show(recorded)}, {now}; run it afresh instead of resuming"
        )
        self.position = position
        self.recorded = recorded
        self.made = made


def _show(call: HostCall) -> str:
    arguments = [json.dumps(a, default=repr)[:80] for a in call.args]
    arguments += [f"{k}={json.dumps(v, default=repr)[:80]}" for k, v in call.kwargs.items()]
    return f"{call.name}({', '.join(arguments)})"


@dataclass(frozen=True)
class Replay:
    """Answers a resumed program's first inner calls from the record of its earlier run.

    `recorded` holds, in call order, each call and what it returned — or the `InnerCallError`
    it raised. ``Replay(recorded).wrap(live)`` is a callback for `run_cpython`: call ``i`` is
    answered from ``recorded[i]`` if it is the same call (else `Divergence`), and calls past
    the record go to ``live``. No recorded call reaches ``live`` again, so none is re-run.
    """

    recorded: Sequence[tuple[HostCall, Any]]

    def wrap(self, live: CallHost) -> Replaying:
        """A fresh callback for one run of the program."""
        return Replaying(self.recorded, live)


class Replaying:
    """The callback `Replay.wrap` returns, for one run; `position` counts the calls made."""

    def __init__(self, recorded: Sequence[tuple[HostCall, Any]], live: CallHost):
        self.recorded = recorded
        self.live = live
        self.position = 0

    async def __call__(self, made: HostCall) -> Any:
        position = self.position
        self.position += 1
        if position >= len(self.recorded):
            return await self.live(made)
        recorded, outcome = self.recorded[position]
        if _normal(recorded) != _normal(made):
            raise Divergence(position, recorded, made)
        if isinstance(outcome, InnerCallError):
            raise InnerCallError(outcome.type_name, outcome.message, outcome.details)
        return outcome

    def finish(self) -> None:
        """Raise `Divergence` if the program ended before making every recorded call; call
        it once `run_cpython` returns."""
        if self.position < len(self.recorded):
            raise Divergence(self.position, self.recorded[self.position][0], None)


def _normal(call: HostCall) -> str:
    """A call as the program would send it, so a recorded tuple equals a replayed list."""
    return json.dumps([call.name, list(call.args), call.kwargs], sort_keys=True, default=repr)


async def run_cpython(
    code: str,
    *,
    functions: Sequence[str],
    call: CallHost,
    limits: CodeLimits,
    sandbox: Sandbox | None = None,
) -> ProgramOutcome:
    """Run `code` in a fresh sandboxed CPython; each name in `functions` calls `call`.

    `sandbox` is one started ahead with `Sandbox.start` (it takes the sandbox's start off the
    program's time); without it, or if it has died, a new one starts here.

    Returns the program's outcome — its own exception or an exceeded limit is an outcome
    with `error_type` set. Raises `SandboxUnavailable` if the sandbox cannot start, `Abort`
    if the callback aborted (the sandbox is killed first), and whatever else the callback
    raised, likewise.
    """
    names = [_function_name(name) for name in functions]
    run = _Run(code=code, functions=frozenset(names), call=call, limits=limits)
    return await run.execute(names, sandbox)


def _function_name(name: str) -> str:
    # Dunder names would replace the program's own globals (`__builtins__`, `__name__`).
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
        raise ValueError(f"inner function name {name!r} is not a plain Python identifier")
    return name


class Sandbox:
    """A started CPython sandbox, its runner waiting for a program.

    ``await Sandbox.start()`` ahead of time, then hand it to one `run_cpython`, which closes
    it; a sandbox never used is closed with `close`. Starting one is most of the tier's start
    time (bubblewrap, namespaces, the interpreter), so a caller that keeps one spare runs
    each program without waiting for it. Nothing of a program is in it before it is used.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        frames: asyncio.StreamReader,
        frames_transport: asyncio.ReadTransport,
        answers: asyncio.StreamWriter,
        output_limit: int = MAX_ERROR_OUTPUT,
    ):
        self.process = process
        self.frames = frames
        self.frames_transport = frames_transport
        self.answers = answers
        self.output = bytearray()
        self.output_limit = output_limit
        self.truncated = False
        self.used = False
        assert process.stdout is not None
        self.pump = asyncio.create_task(self._pump(process.stdout))

    @classmethod
    async def start(cls, *, first: bytes = b"", output_limit: int = MAX_ERROR_OUTPUT) -> Sandbox:
        """Start a sandbox and wait until its runner is up; `SandboxUnavailable` if it cannot.

        `first`: frames to queue behind the runner before it has started. A cold run passes
        its program's start frame here, so the runner goes on to the program without waiting
        for the host to answer its hello (a round trip through both schedulers); its output
        may then come before `start` returns, so `output_limit` bounds what is kept of it
        from the first byte."""
        starting = asyncio.create_task(cls._start(first, output_limit))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Killed mid-setup, bubblewrap can orphan its child in the new namespaces: the
            # child sets its parent-death signal only after the clone. So a cancelled start
            # finishes first (bounded), and then the sandbox is killed whole.
            with contextlib.suppress(BaseException):
                sandbox = await asyncio.wait_for(starting, _GRACE_SECONDS)
                await sandbox.close()
            raise

    @classmethod
    async def _start(cls, first: bytes, output_limit: int) -> Sandbox:
        loop = asyncio.get_running_loop()
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        filter_read, filter_write = os.pipe()
        child_fds = (request_write, answer_read, filter_read)
        # The runner (and `first`) go into the pipe before bubblewrap starts, as far as the
        # pipe holds them: the interpreter finds them there, however late this process is
        # scheduled again after the spawn. The rest, if any, follows through the writer.
        head = _runner() + first
        try:
            with open(filter_write, "wb", closefd=True) as filter_file:
                filter_file.write(_seccomp_filter())
            os.set_blocking(answer_write, False)
            try:
                sent = os.write(answer_write, head)
            except BlockingIOError:
                sent = 0
            argv = _bwrap_argv(
                filter_fd=filter_read, request_fd=request_write, answer_fd=answer_read
            )
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                pass_fds=child_fds,
                env=dict(_ENV),
                start_new_session=True,
            )
        except BaseException:
            os.close(request_read)
            os.close(answer_write)
            raise
        finally:
            for fd in child_fds:
                os.close(fd)
        requests, answers = os.fdopen(request_read, "rb", 0), os.fdopen(answer_write, "wb", 0)
        try:
            frames = asyncio.StreamReader(limit=MAX_FRAME_BYTES + 4, loop=loop)
            frames_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(frames), requests
            )
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop), answers
            )
        except BaseException:
            # Cancelled (or failed) between the spawn and the pipes: nothing may outlive it.
            kill_process_tree(process.pid)
            _close_transport(process)
            requests.close()
            answers.close()
            raise
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        sandbox = cls(process, frames, frames_transport, writer, output_limit)
        try:
            if sent < len(head):
                sandbox.answers.write(head[sent:])
            await sandbox._hello()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    async def _hello(self) -> None:
        """Wait for the runner's hello: proof the sandbox started."""
        try:
            header = await self.frames.readexactly(4)
            hello = await self.frames.readexactly(int.from_bytes(header, "big"))
        except asyncio.IncompleteReadError:
            hello = b""
        if hello == _HELLO:
            return
        self.kill()
        await self.process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.pump), _GRACE_SECONDS)
        detail = bytes(self.output).decode("utf-8", "replace").strip()
        raise SandboxUnavailable(
            "the CPython sandbox could not start (bubblewrap exited with "
            f"{self.process.returncode}): {detail or 'no output'}; Code Mode's CPython "
            "tier needs bubblewrap with user namespaces — use the Monty tier instead",
            detail=detail,
        )

    @property
    def alive(self) -> bool:
        """Whether the sandbox still waits for a program."""
        return not self.used and self.process.returncode is None

    def kill(self) -> None:
        """SIGKILL bubblewrap's process group; the pid namespace takes everything in it
        (`kill_process_tree`, the one kill every sandbox uses)."""
        if self.process.returncode is None:
            kill_process_tree(self.process.pid)

    async def close(self) -> None:
        """Kill the sandbox and release its pipes, keeping what it printed."""
        self.used = True
        self.kill()
        self.answers.close()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.process.wait(), _GRACE_SECONDS)
        # The sandbox is dead, so its output ends: keep what is left in the pipe.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.pump, _GRACE_SECONDS)
        self.pump.cancel()
        self.frames_transport.close()
        _close_transport(self.process)

    async def _pump(self, stdout: asyncio.StreamReader) -> None:
        """Keep the first `output_limit` bytes of the output and drain the rest."""
        while chunk := await stdout.read(1 << 16):
            room = self.output_limit - len(self.output)
            if len(chunk) > room:
                self.truncated = True
            self.output += chunk[: max(room, 0)]


class Spares:
    """One spare `Sandbox` per event loop, so a program starts in one already up.

    `take` hands out the loop's spare (waiting for it if it is still starting, which is
    still sooner than a cold start) or None when there is none; `refill` starts the next one
    in the background. Code Mode calls it as soon as a program has taken the spare (the
    replacement's start then overlaps that program, so a program sent right after finds more
    of it done, at the price of sharing the CPU with it) and, after a cold program, once that
    program has ended (two starts at once would each take longer). A spare found dead
    (killed from outside, out of memory) is closed and not handed out. A sandbox is bound to
    the loop that started it (its pipes and its child watcher are), hence one per loop. Each
    spare waits in a task of its loop: when the loop ends (``asyncio.run`` cancels its
    tasks) or `close` is called, from any thread, the task closes its sandbox.
    """

    def __init__(self) -> None:
        self._slots: dict[asyncio.AbstractEventLoop, _Slot] = {}
        self._lock = threading.Lock()

    async def take(self) -> Sandbox | None:
        """The running loop's spare, alive and unused, or None (start one cold)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_closed_loops()
            slot = self._slots.pop(loop, None)
        if slot is None or slot.keeper.cancelled():
            return None
        if not slot.wanted.done():
            slot.wanted.set_result(None)
        try:
            sandbox = await asyncio.shield(slot.keeper)
        except asyncio.CancelledError:
            if slot.keeper.cancelled():  # closed meanwhile, not this caller cancelled
                return None
            slot.keeper.add_done_callback(_close_kept)
            raise
        except Exception:  # a cold start reports the same failure, in its own words
            return None
        if not sandbox.alive:
            await sandbox.close()
            return None
        return sandbox

    def refill(self) -> None:
        """Start the running loop's next spare, unless it has one ready or starting."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_closed_loops()
            if loop not in self._slots:
                slot = _Slot(loop.create_future())
                slot.keeper = loop.create_task(slot.keep())
                # A failed start is tried again at the next program, which reports it then.
                slot.keeper.add_done_callback(_exception_seen)
                self._slots[loop] = slot

    def ready(self) -> bool:
        """Whether the running loop's spare has started (for benchmarks and tests)."""
        slot = self._slots.get(asyncio.get_running_loop())
        return slot is not None and slot.sandbox is not None

    def close(self) -> None:
        """Close every spare; callable from any thread. Each keeper task, cancelled, kills
        its sandbox and releases its pipes on its own loop (a start still under way finishes
        first, and is then killed whole: see `Sandbox.start`); a spare whose loop is not
        running is killed here."""
        with self._lock:
            slots, self._slots = self._slots, {}
        for loop, slot in slots.items():
            if not loop.is_running() and slot.sandbox is not None:
                slot.sandbox.kill()  # no loop to close it now; the keeper would not run
            if not loop.is_closed():
                # A running loop's keeper closes its sandbox (a kill from here first would
                # look like a death while idle, and be replaced).
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(slot.keeper.cancel)

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._slots if loop.is_closed()]:
            del self._slots[loop]


class _Slot:
    """One loop's spare: the task that starts and keeps it until `wanted` is set."""

    keeper: asyncio.Task[Sandbox]

    def __init__(self, wanted: asyncio.Future[None]):
        self.wanted = wanted
        self.sandbox: Sandbox | None = None

    async def keep(self) -> Sandbox:
        """Start a sandbox and keep it until it is wanted; one that dies meanwhile (killed
        from outside, out of memory) is replaced once — a second death is left for `take`
        to find, so a sandbox that cannot stay up does not restart in a loop."""
        sandbox = self.sandbox = await Sandbox.start()
        if not await self._wanted_alive(sandbox):
            self.sandbox = None
            await sandbox.close()
            sandbox = self.sandbox = await Sandbox.start()
            await self._wanted_alive(sandbox)
        return sandbox

    async def _wanted_alive(self, sandbox: Sandbox) -> bool:
        """Wait until the spare is wanted (True) or its sandbox dies (False)."""
        died = asyncio.ensure_future(sandbox.process.wait())
        either: set[asyncio.Future[Any]] = {self.wanted, died}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled: the loop ends or the spares close
            # Dropped here, while the loop runs: its transports must not outlive it.
            self.sandbox = None
            await sandbox.close()
            raise
        finally:
            died.cancel()
        return self.wanted.done()


def _exception_seen(keeper: asyncio.Task[Sandbox]) -> None:
    if not keeper.cancelled():
        keeper.exception()


def _close_kept(keeper: asyncio.Task[Sandbox]) -> None:
    """Close the sandbox a keeper handed to a taker that was cancelled meanwhile."""
    if not keeper.cancelled() and keeper.exception() is None:
        sandbox = keeper.result()
        sandbox.kill()
        closing = keeper.get_loop().create_task(sandbox.close())
        _closing.add(closing)
        closing.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[None]] = set()
"""Closes under way, held so the loop does not drop them half done."""


def _close_transport(process: asyncio.subprocess.Process) -> None:
    """Close the process's own transport now, on its loop: a spare's sandbox can outlive its
    loop (in a cancelled task's traceback), and a transport closed by the collector after
    the loop would call the closed loop. asyncio's Process exposes no public close."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()


class _ProgramEnded(Exception):
    """Internal: the program must stop now with this outcome error."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class _Run:
    """One program in its sandbox, and the inner calls in flight."""

    def __init__(self, *, code: str, functions: frozenset[str], call: CallHost, limits: CodeLimits):
        self.code = code
        self.functions = functions
        self.call = call
        self.limits = limits
        self.sandbox: Sandbox | None = None
        self.next_id = 0
        self.in_flight: set[asyncio.Task[None]] = set()
        self.host_failure: BaseException | None = None

    async def execute(self, names: list[str], spare: Sandbox | None) -> ProgramOutcome:
        try:
            value, error_type, error = await self._drive(names, spare)
        finally:
            await self._close()
        assert self.sandbox is not None
        limit, output = self.limits.output_bytes, self.sandbox.output
        truncated = self.sandbox.truncated or len(output) > limit
        stdout = bytes(output[:limit]).decode("utf-8", "replace")
        return ProgramOutcome(value, stdout, truncated, error, error_type)

    async def _drive(
        self, names: list[str], spare: Sandbox | None
    ) -> tuple[Any, str | None, str | None]:
        """The program's value, or the type and message of the error that ended it."""
        if spare is not None and spare.used:
            raise ValueError("this Sandbox already ran a program; start a new one")
        try:
            async with asyncio.timeout(self.limits.wall_seconds):
                if spare is not None and spare.alive:
                    self.sandbox = spare
                    self._send(self._start_frame(names))
                else:
                    if spare is not None:
                        await spare.close()
                    # Cold: the program goes down the pipe behind the runner, not after
                    # its hello. Its output is kept up to its own limit (cut to it at the
                    # end), or enough for bubblewrap's error should the sandbox not start.
                    kept = max(self.limits.output_bytes, MAX_ERROR_OUTPUT)
                    self.sandbox = await Sandbox.start(
                        first=_frame(self._start_frame(names)), output_limit=kept
                    )
                self.sandbox.used = True
                self.sandbox.output_limit = self.limits.output_bytes
                report = await self._serve()
                await asyncio.gather(*self.in_flight)
                if self.host_failure is not None:
                    raise self.host_failure
                await self.sandbox.process.wait()
        except TimeoutError:
            if self.sandbox is None:
                raise SandboxUnavailable(
                    f"the sandbox did not start within the wall-time limit "
                    f"({self.limits.wall_seconds} s)"
                ) from None
            seconds = self.limits.wall_seconds
            message = (
                f"the program ran longer than its wall-time limit of {seconds} s; raise "
                "CodeLimits.wall_seconds to give it longer"
            )
            return None, "WallTimeLimitExceeded", message
        except _ProgramEnded as ended:
            return None, ended.error_type, ended.message
        return self._reported(report)

    async def _close(self) -> None:
        """Kill the sandbox, stop the calls in flight, and release every pipe."""
        if self.sandbox is not None:
            self.sandbox.kill()
        for task in self.in_flight:
            task.cancel()
        if self.in_flight:
            await asyncio.wait(self.in_flight, timeout=_GRACE_SECONDS)
        if self.sandbox is not None:
            await self.sandbox.close()

    def _start_frame(self, names: list[str]) -> dict[str, Any]:
        """The program, its functions and its rlimits: the runner's first frame."""
        return {
            "op": "start",
            "code": self.code,
            "functions": names,
            "max_frame": MAX_FRAME_BYTES,
            "limits": ResourceLimits(
                cpu_seconds=max(1, self.limits.cpu_seconds),
                memory_bytes=self.limits.memory_bytes,
                file_bytes=FILE_BYTES,
                open_files=OPEN_FILES,
                processes=PROCESSES,
            ).rlimits(),
        }

    async def _serve(self) -> dict[str, Any]:
        """Answer inner calls until the program reports how it ended."""
        while True:
            frame = await self._frame()
            if frame.get("op") == "call":
                self._accept(frame)
                continue
            if frame.get("op") in ("result", "raised"):
                return self._final(frame)
            self._violation(f"a frame with unknown op {str(frame.get('op'))[:40]!r}")

    async def _frame(self) -> dict[str, Any]:
        assert self.sandbox is not None
        if self.host_failure is not None:
            raise self.host_failure
        try:
            header = await self.sandbox.frames.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self._violation("a truncated frame header")
            raise await self._exited() from None
        size = int.from_bytes(header, "big")
        if size > MAX_FRAME_BYTES:
            self._violation(
                f"a frame of {size} bytes (the limit is {MAX_FRAME_BYTES}: one inner call's "
                "arguments or the program's value, as JSON)"
            )
        try:
            body = await self.sandbox.frames.readexactly(size)
        except asyncio.IncompleteReadError:
            self._violation("a truncated frame")
        try:
            frame = json.loads(body)
        except (ValueError, RecursionError):
            self._violation("a frame that is not JSON")
        if not isinstance(frame, dict):
            self._violation("a frame that is not a JSON object")
        return frame

    def _accept(self, frame: dict[str, Any]) -> None:
        name, args, kwargs = frame.get("name"), frame.get("args"), frame.get("kwargs")
        if set(frame) != {"op", "id", "name", "args", "kwargs"}:
            self._violation("a call frame with missing or extra fields")
        if type(frame["id"]) is not int or frame["id"] != self.next_id:
            self._violation(f"a call with id {frame['id']!r} where {self.next_id} was next")
        if not isinstance(name, str) or name not in self.functions:
            self._violation(f"a call to {str(name)[:80]!r}, which is not an offered function")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            self._violation("a call whose args are not a list or kwargs not an object")
        self.next_id += 1
        if self.next_id > self.limits.max_inner_calls:
            raise _ProgramEnded(
                "InnerCallLimitExceeded",
                f"the program made more than {self.limits.max_inner_calls} inner calls; raise "
                "CodeLimits.max_inner_calls to allow more",
            )
        task = asyncio.create_task(self._answer(frame["id"], HostCall(name, tuple(args), kwargs)))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def _answer(self, call_id: int, host_call: HostCall) -> None:
        try:
            try:
                answer: dict[str, Any] = {"id": call_id, "value": await self.call(host_call)}
            except InnerCallError as exc:
                type_name = exc.type_name if exc.type_name.isidentifier() else "InnerCallError"
                error = {"type": type_name, "message": exc.message, "details": exc.details}
                answer = {"id": call_id, "error": error}
            self._send(answer)
        except BaseException as exc:
            # Abort, a Divergence or a bug in the host: the program stops here, and the
            # caller of run_cpython receives the exception once the sandbox is dead.
            if self.host_failure is None:
                self.host_failure = exc
            assert self.sandbox is not None
            self.sandbox.kill()
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _send(self, message: dict[str, Any]) -> None:
        assert self.sandbox is not None
        if not self.sandbox.answers.is_closing():
            self.sandbox.answers.write(_frame(message))

    def _final(self, frame: dict[str, Any]) -> dict[str, Any]:
        if frame["op"] == "result" and set(frame) == {"op", "value"}:
            return frame
        if (
            frame["op"] == "raised"
            and set(frame) == {"op", "type", "message"}
            and isinstance(frame["type"], str)
            and isinstance(frame["message"], str)
        ):
            return frame
        self._violation("a malformed final report")

    async def _exited(self) -> BaseException:
        """Why the program's pipe closed before it reported: the exception to raise."""
        assert self.sandbox is not None
        await self.sandbox.process.wait()
        if self.host_failure is not None:
            return self.host_failure
        status = self.sandbox.process.returncode
        # bwrap exits with 128 + the signal that ended the program, as a shell does.
        if status == 128 + signal.SIGXCPU:
            return _ProgramEnded(
                "CpuTimeLimitExceeded",
                f"the program used more than its CPU-time limit of {self.limits.cpu_seconds} s; "
                "raise CodeLimits.cpu_seconds to give it longer",
            )
        if status == 128 + signal.SIGKILL:
            return _ProgramEnded(
                "ProgramKilled",
                "the program was killed: it passed the hard stop of its CPU-time limit "
                f"({self.limits.cpu_seconds} s, CodeLimits.cpu_seconds) or exhausted memory "
                f"({self.limits.memory_bytes} bytes, CodeLimits.memory_bytes)",
            )
        if status is not None and 128 < status < 128 + signal.NSIG:
            cause = f"signal {signal.strsignal(status - 128)}"
        else:
            cause = f"exit status {status}"
        return _ProgramEnded(
            "ProgramCrashed", f"the program exited without reporting how it ended ({cause})"
        )

    def _violation(self, what: str) -> NoReturn:
        raise _ProgramEnded(
            "SandboxProtocolError",
            f"the program sent {what} on the host channel; it was stopped",
        )

    def _reported(self, report: dict[str, Any]) -> tuple[Any, str | None, str | None]:
        if report["op"] == "result":
            return report["value"], None, None
        error_type, message = report["type"], report["message"]
        if error_type == "MemoryError":
            error_type = "MemoryLimitExceeded"
            message = (
                f"the program ran out of memory under its limit of {self.limits.memory_bytes} "
                f"bytes ({message}); raise CodeLimits.memory_bytes to give it more"
            )
        return None, error_type, message


def _frame(message: dict[str, Any]) -> bytes:
    """`message` as the runner reads it: 4-byte big-endian length, then JSON (ASCII)."""
    data = json.dumps(message, ensure_ascii=True).encode("ascii")
    return len(data).to_bytes(4, "big") + data


def _bwrap_argv(*, filter_fd: int, request_fd: int, answer_fd: int) -> list[str]:
    """The sandbox's bwrap command line, from the one builder (`BwrapSpec`): the host's
    programs and libraries and the interpreter's installation read-only, nothing else of
    the host, uid 65534, the seccomp filter at `filter_fd`."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "Code Mode's CPython tier needs bubblewrap, and no bwrap executable is on PATH; "
            "install it (apt-get install bubblewrap) or use the Monty tier"
        )
    python = os.path.realpath(sys.executable)
    # The interpreter's installation, read-only at its own path (after /tmp, so even an
    # installation under /tmp shows through the private one).
    bound: list[str] = []
    for root in sorted({os.path.realpath(sys.base_prefix), os.path.dirname(python)}):
        inside = [r for r in ["/usr", *bound] if root == r or root.startswith(r + "/")]
        if not inside:
            bound.append(root)
    spec = BwrapSpec(
        base=minimal_root(),
        mounts=tuple(Mount("ro-bind", root) for root in bound),
        uid=_SANDBOX_UID,
        tmp_bytes=TMP_BYTES,
        remount_root_read_only=True,
        chdir="/tmp",
        seccomp_fd=filter_fd,
        # The interpreter starts no process (the seccomp filter refuses them), so it is the
        # namespace's init itself: one fork and one wait for a CPU fewer on every start.
        command_is_init=True,
        bwrap=bwrap,
    )
    command = [python, "-I", "-S", "-X", "utf8", "-c", _BOOTSTRAP]
    return spec.argv([*command, str(request_fd), str(answer_fd), str(len(_runner()))])


@functools.cache
def _runner() -> bytes:
    """The runner (cpython_child.py) as a marshalled code object for this interpreter."""
    path = Path(__file__).parent / "cpython_child.py"
    return marshal.dumps(compile(path.read_text(encoding="utf-8"), str(path), "exec"))


# seccomp: the classic-BPF program bwrap installs before it runs the interpreter.
_LD_W_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000


@dataclass(frozen=True)
class _Arch:
    audit: int
    refused: tuple[int, ...]
    """Syscalls answered EPERM: new processes by fork/vfork, ptrace and reading or writing
    another process's memory or descriptors."""
    clone: int
    clone3: int
    x32: bool


_ARCHES: Final = {
    "x86_64": _Arch(0xC000003E, (57, 58, 101, 310, 311, 438), 56, 435, True),
    "aarch64": _Arch(0xC00000B7, (117, 270, 271, 438), 220, 435, False),
}


def _seccomp_filter() -> bytes:
    """Refuse new processes (threads stay allowed: a clone with CLONE_THREAD), ptrace and
    cross-process memory access; clone3 answers ENOSYS so libc falls back to clone, whose
    flags the filter can read. Any other architecture's syscalls kill the process."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise SandboxUnavailable(
            f"Code Mode's CPython tier has no seccomp filter for {platform.machine()}; "
            "use the Monty tier"
        )
    program: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4)]
    program.append((_JEQ, 1, 0, arch.audit))
    program.append((_RET, 0, 0, _KILL))
    program.append((_LD_W_ABS, 0, 0, 0))
    if arch.x32:
        program.append((_JGE, 0, 1, 0x40000000))
        program.append((_RET, 0, 0, _KILL))
    for number in arch.refused:
        program.append((_JEQ, 0, 1, number))
        program.append((_RET, 0, 0, _ERRNO | _EPERM))
    program.append((_JEQ, 0, 1, arch.clone3))
    program.append((_RET, 0, 0, _ERRNO | _ENOSYS))
    program.append((_JEQ, 0, 4, arch.clone))  # any other syscall: to the last instruction
    program.append((_LD_W_ABS, 0, 0, 16))  # the low half of clone's flags argument
    program.append((_JSET, 0, 1, _CLONE_THREAD))
    program.append((_RET, 0, 0, _ALLOW))
    program.append((_RET, 0, 0, _ERRNO | _EPERM))
    program.append((_RET, 0, 0, _ALLOW))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
