"""The runner inside the CPython sandbox: it receives the program over a pipe, sets the rlimits,
gives the program one Python function per inner call, runs it and reports how it ended.

The host compiles this file once and sends the code object down the answer pipe to a
bootstrap run with ``python -I -S -c`` inside bubblewrap, where nothing of toolkeeper is
importable; so the runner uses the standard library only — and only its cheapest parts:
the ``json`` package imports ``re`` (10–30 ms here, half the tier's start budget), so frames
are encoded with the C accelerator ``_json`` directly; ``os`` (1–2 ms: it imports
``_collections_abc`` and ``posixpath``) gives way to the built-in ``posix`` it wraps; and
``asyncio`` is imported only by a program that awaits.

Frames in both directions are a 4-byte big-endian length and that many bytes of JSON text.
The runner writes requests on one inherited pipe and reads answers on another; the program's
stdout stays its own. The program can write to those pipes too — the host treats every frame
as untrusted and kills the program at the first one it does not expect.
"""

import _json
import _thread
import builtins
import posix
import sys

# Neither `typing` (~10 ms to import) nor `from __future__ import annotations` (~5 ms): the
# annotations are for the type checker, and at run time `Any` is a stand-in.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
else:
    Any = object

_CO_COROUTINE = 0x80
_PY_CF_ONLY_AST = 0x400
_PY_CF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
_RESULT_NAME = "__toolkeeper_result__"
_MAX_MESSAGE = 4096


class _DecodeContext:
    """The attributes `_json.make_scanner` reads, as `json.JSONDecoder` would set them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))


def _not_json(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


_scan = _json.make_scanner(_DecodeContext)  # type: ignore[arg-type]  # duck-typed context
_markers: dict[int, object] = {}
"""The encoder's cycle detection; cleared before each frame, since an encoding that failed
part-way (a set among the arguments) leaves its containers in it, alive."""
_encode = _json.make_encoder(
    _markers, _not_json, _json.encode_basestring_ascii, None, ":", ",", False, False, True
)


class _FrameTooLarge(ValueError):
    """A frame over the host's limit, refused before it is sent."""


class _Channel:
    """The two pipes to the host: requests out, answers in."""

    def __init__(self, out_fd: int, in_fd: int):
        self.out_fd = out_fd
        self.in_fd = in_fd
        self.buffer = b""
        self.lock = _thread.allocate_lock()
        self.next_id = 0
        self.max_frame = 1 << 20  # until the host's start frame names its limit
        self.futures: dict[int, Any] = {}
        self.reader_loop: Any = None

    def send(self, message: dict[str, Any]) -> None:
        _markers.clear()
        data = "".join(_encode(message, 0)).encode("ascii")
        if len(data) > self.max_frame:
            # The host would stop the program for such a frame; refusing it here lets the
            # program see why, and do with less.
            raise _FrameTooLarge(f"{len(data)} bytes as JSON, over the limit of {self.max_frame}")
        frame = memoryview(len(data).to_bytes(4, "big") + data)
        while frame:
            frame = frame[posix.write(self.out_fd, frame) :]

    def take_frame(self) -> dict[str, Any] | None:
        """A whole frame from the buffer, or None if one is not in yet."""
        if len(self.buffer) < 4:
            return None
        size = int.from_bytes(self.buffer[:4], "big")
        if len(self.buffer) < 4 + size:
            return None
        text = self.buffer[4 : 4 + size].decode("ascii")
        self.buffer = self.buffer[4 + size :]
        value: dict[str, Any] = _scan(text, 0)[0]
        return value

    def receive(self) -> dict[str, Any]:
        """The next frame, blocking."""
        while (frame := self.take_frame()) is None:
            chunk = posix.read(self.in_fd, 1 << 16)
            if not chunk:
                posix._exit(70)  # the host is gone: nothing left to report to
            self.buffer += chunk
        return frame

    def request(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        call_id = self.next_id
        try:
            self.send({"op": "call", "id": call_id, "name": name, "args": args, "kwargs": kwargs})
        except _FrameTooLarge as exc:
            raise ValueError(f"{name}() arguments are {exc}; send less per call") from None
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name}() takes JSON values only (str, int, float, bool, None, list, dict "
                f"with str keys): {exc}"
            ) from None
        self.next_id += 1
        return call_id

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with self.lock:
            if self.reader_loop is not None:
                # Back from an event loop (the program's own asyncio.run): read blocking again.
                posix.set_blocking(self.in_fd, True)
                self.reader_loop = None
            call_id = self.request(name, args, kwargs)
            answer = self.receive()
        return _unwrap(answer, call_id)

    async def acall(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        if self.reader_loop is not loop:
            posix.set_blocking(self.in_fd, False)
            loop.add_reader(self.in_fd, self._readable)
            self.reader_loop = loop
        call_id = self.request(name, args, kwargs)
        future = loop.create_future()
        self.futures[call_id] = future
        return _unwrap(await future, call_id)

    def _readable(self) -> None:
        try:
            chunk = posix.read(self.in_fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            posix._exit(70)
        self.buffer += chunk
        while (frame := self.take_frame()) is not None:
            future = self.futures.pop(frame["id"])
            if not future.done():
                future.set_result(frame)


_error_classes: dict[str, type[Exception]] = {}


def _error_class(name: str) -> type[Exception]:
    """One class per error name, so `except` clauses and `type(e).__name__` see the same name."""
    if name not in _error_classes:
        _error_classes[name] = type(name, (Exception,), {"details": None})
    return _error_classes[name]


def _unwrap(answer: dict[str, Any], call_id: int) -> Any:
    if "error" in answer:
        error = answer["error"]
        exc = _error_class(error["type"])(error["message"])
        exc.details = error.get("details")  # type: ignore[attr-defined]
        raise exc
    return answer["value"]


def _function(channel: _Channel, name: str) -> Any:
    def function(*args: Any, **kwargs: Any) -> Any:
        # Inside a running event loop (a program that awaits) a call is awaitable, so
        # `asyncio.gather` can put several in flight; anywhere else it returns the value.
        asyncio = sys.modules.get("asyncio")
        if asyncio is not None and asyncio.events._get_running_loop() is not None:
            return channel.acall(name, args, kwargs)
        return channel.call(name, args, kwargs)

    function.__name__ = function.__qualname__ = name
    return function


def _cpu_limit_reached(signum: int, frame: object) -> None:
    # Exit as the signal would have ended a process that is not its namespace's init.
    posix._exit(128 + signum)


def _set_limits(limits: dict[str, int]) -> None:
    import _signal  # type: ignore[import-not-found]  # `signal` would import `enum` too
    import resource

    # The runner is its pid namespace's init, which ignores a signal it has no handler for:
    # without this, SIGXCPU at the CPU limit would do nothing and only the hard limit's
    # SIGKILL, a second later, would end the program. (A program stuck inside one C call
    # runs on to that hard stop: the handler runs between bytecodes.)
    _signal.signal(_signal.SIGXCPU, _cpu_limit_reached)

    for name, value in limits.items():
        limit = getattr(resource, name)
        # Hard = soft, except CPU: the soft limit sends SIGXCPU, which the host reports by
        # name; the hard one (a second later) is SIGKILL if the program ignores SIGXCPU.
        hard = value + 1 if name == "RLIMIT_CPU" else value
        resource.setrlimit(limit, (value, hard))


def _compile(source: str) -> Any:
    """The program as a code object whose last expression statement is stored as the value."""
    import _ast

    tree = compile(source, "<program>", "exec", _PY_CF_ONLY_AST | _PY_CF_ALLOW_TOP_LEVEL_AWAIT)
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = tree.body[-1]
        target = _ast.Name(id=_RESULT_NAME, ctx=_ast.Store())
        tree.body[-1] = _ast.Assign(targets=[target], value=last.value, lineno=last.lineno)
        for node in (tree.body[-1], target):
            node.lineno, node.col_offset = last.lineno, last.col_offset
            node.end_lineno, node.end_col_offset = last.end_lineno, last.end_col_offset
    return compile(tree, "<program>", "exec", _PY_CF_ALLOW_TOP_LEVEL_AWAIT)


def _describe(exc: BaseException) -> dict[str, Any]:
    # A walk rather than the traceback module: after a runaway recursion the traceback has
    # millions of entries, and formatting them would outlast every limit.
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<program>":
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f" (line {line})" if line is not None else ""
    message = f"{exc}"[:_MAX_MESSAGE]
    return {"op": "raised", "type": type(exc).__name__, "message": message + where}


def main() -> None:
    channel = _Channel(int(sys.argv[1]), int(sys.argv[2]))
    channel.send({"op": "hello"})
    start = channel.receive()
    _set_limits(start["limits"])
    channel.max_frame = start["max_frame"]
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for name in start["functions"]:
        namespace[name] = _function(channel, name)
    try:
        code = _compile(start["code"])
        if code.co_flags & _CO_COROUTINE:
            import asyncio

            asyncio.run(eval(code, namespace))
        else:
            exec(code, namespace)
        report: dict[str, Any] = {"op": "result", "value": namespace.get(_RESULT_NAME)}
    except SystemExit as exc:
        report = {"op": "result", "value": None}
        if exc.code not in (None, 0):
            report = {"op": "raised", "type": "SystemExit", "message": f"exit code {exc.code}"}
    except BaseException as exc:  # the program's own failure, reported as its outcome
        report = _describe(exc)
    try:  # noqa: SIM105 (contextlib would cost the runner an import)
        sys.stdout.flush()
    except BaseException:  # the program closed or broke its stdout; its value still counts
        pass
    try:
        channel.send(report)
    except _FrameTooLarge as exc:
        message = f"the program's value is {exc}; return a summary, and print or drop the rest"
        channel.send({"op": "raised", "type": "ValueError", "message": message})
    except (TypeError, ValueError) as exc:
        channel.send(
            {"op": "raised", "type": "TypeError", "message": f"the program's value: {exc}"}
        )
    posix._exit(0)


if __name__ == "__main__":
    main()
