"""JSON-RPC on the gateway's transports: every message read gets an answer, every answer is
written.

A line or body that is not a JSON-RPC message is answered as JSON-RPC 2.0 says — ``-32700``
(parse error, id null) when it is not JSON, ``-32600`` (invalid request, with its id when
one can be read) when it is JSON of the wrong shape — and the connection serves on. The SDK
gives no answer to such a stdio line, and over HTTP answers a wrong shape ``-32602`` without
the id; `stdio_streams` and `MessageCheck` close those gaps.

Text a client escapes as a lone surrogate (``"\\ud800"``: JSON text, not Unicode) is carried
through, never a reason to drop a message: the SDK's parser (jiter) refuses it and its
serializer fails on it. So stdio reads a line the SDK refuses with Python's parser, and
writes an answer that cannot be encoded as UTF-8 with the surrogate escaped. Over HTTP, a
2025-era request holding one reaches the SDK as a copy with each lone surrogate replaced
(U+FFFD) and a string id replaced by a placeholder; the answer gets the id back, escaped, and
the gateway reads a ``tools/call``'s name and arguments as the client sent them
(`sent_call`), so the pipeline answers it: ``unknown_tool``, ``invalid_argument``. (The
2026-07-28 path parses and writes with Python's ``json`` already.)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from io import TextIOWrapper
from typing import IO, Any, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate in decoded text: JSON decoding joins every valid pair into one character."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""How a surrogate reaches JSON text; a body without one cannot hold a lone surrogate."""
_SENT_CALL = "toolkeeper.sent_call"
"""The ASGI scope key under which `MessageCheck` keeps a ``tools/call`` as the client sent it."""


# -- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Text that holds no JSON-RPC message, and the error that answers it."""

    reply: JSONRPCError


def parse_message(text: str | bytes) -> JSONRPCMessage | Unreadable:
    """The JSON-RPC message `text` holds, or the error that answers it when it holds none."""
    try:
        return jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        pass  # not JSON, the wrong shape, or JSON jiter refuses (a lone surrogate)
    try:
        value = json.loads(text)
    except ValueError:
        return Unreadable(_error(None, PARSE_ERROR, "Parse error: the message is not JSON text"))
    except RecursionError:
        return Unreadable(_error(None, PARSE_ERROR, "Parse error: JSON nested too deeply to read"))
    try:
        return jsonrpc_message_adapter.validate_python(value, by_name=False)
    except (ValidationError, RecursionError):
        return Unreadable(
            _error(
                _request_id(value),
                INVALID_REQUEST,
                "Invalid Request: not a JSON-RPC 2.0 message (a request is an object with "
                '"jsonrpc": "2.0", a string or integer "id" and a string "method")',
            )
        )


def dump_message(message: JSONRPCMessage) -> str:
    """`message` as one line of JSON. Text UTF-8 cannot carry (a lone surrogate a client
    sent, echoed in an id or a message) is written escaped instead of failing the write."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        value = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return json.dumps(value, separators=(",", ":"))


def _error(request_id: Any, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _request_id(value: Any) -> str | int | None:
    """The id of what looks like a request (it names a method), when it is a valid id; an
    error answering anything else carries id null, as JSON-RPC asks."""
    if not isinstance(value, dict) or "method" not in value:
        return None
    request_id = value.get("id")
    if isinstance(request_id, str) or (type(request_id) is int):
        return request_id
    return None


def _holds_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _replace_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_lone_surrogates(item) for item in value]
    return value


# -- stdio -------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_streams(
    stdin: anyio.AsyncFile[str] | None = None, stdout: anyio.AsyncFile[str] | None = None
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The SDK server's read and write streams over this process's stdin and stdout (or the
    given streams), as the SDK's ``stdio_server`` makes them, except that a line that is not
    a JSON-RPC message is answered (`parse_message`) and every answer is written
    (`dump_message`).

    While it serves, fd 0 reads the null device and fd 1 writes to stderr, so a tool's stray
    ``print`` or a child reading stdin cannot corrupt the wire; both are restored on exit.
    """
    restore: list[Callable[[], object]] = []
    try:
        if stdin is None:
            wire_in = _claim(0, sys.stdin, "rb", lambda: os.open(os.devnull, os.O_RDONLY), restore)
            stdin = anyio.wrap_file(_Text(wire_in, encoding="utf-8", errors="replace"))
        if stdout is None:
            wire_out = _claim(1, sys.stdout, "wb", lambda: os.dup(2), restore)
            stdout = anyio.wrap_file(_Text(wire_out, encoding="utf-8"))
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception]()
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage]()
        replies = write_stream.clone()

        async def read_lines() -> None:
            assert stdin is not None
            async with read_writer, replies:
                async for line in stdin:
                    if not line.strip():
                        continue  # a blank line carries no message to answer
                    message = parse_message(line)
                    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        # Suppressed: the server stopped serving; nothing is left to answer.
                        if isinstance(message, Unreadable):
                            await replies.send(SessionMessage(message.reply))
                        else:
                            await read_writer.send(SessionMessage(message))

        async def write_lines() -> None:
            assert stdout is not None
            async with write_reader:
                async for session_message in write_reader:
                    await stdout.write(dump_message(session_message.message) + "\n")
                    await stdout.flush()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_lines)
            tasks.start_soon(write_lines)
            yield read_stream, write_stream
    finally:
        for undo in reversed(restore):
            undo()


class _Text(TextIOWrapper):
    """Text over a wire descriptor this transport does not own: closing it leaves the
    descriptor open (a worker thread may still be blocked reading it)."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


def _claim(
    fd: int,
    stream: TextIO,
    mode: str,
    diversion: Callable[[], int],
    restore: list[Callable[[], object]],
) -> IO[bytes]:
    """Serve the wire from a private duplicate of `fd`, pointing `fd` at `diversion()`; the
    way back is appended to `restore`. A stream not backed by `fd` (a test's capture) is
    served in place."""
    buffer: IO[bytes] = stream.buffer
    try:
        if buffer.fileno() != fd:
            return buffer
    except (AttributeError, OSError, ValueError):
        return buffer
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    elsewhere = diversion()
    os.dup2(elsewhere, fd)
    os.close(elsewhere)
    restore.append(lambda: os.dup2(wire, fd))
    # closefd=False: the descriptor outlives the transport, as a blocked reader may need it.
    return os.fdopen(wire, mode, closefd=False)


# -- Streamable HTTP ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SentCall:
    """A ``tools/call`` as the client sent it, lone surrogates and all."""

    request_id: str | int
    name: Any
    arguments: Any


def sent_call(request: Any) -> SentCall | None:
    """The ``tools/call`` the SDK handled as a cleaned copy (see `MessageCheck`), as the
    client sent it; None for every other request (and on stdio, which carries the original)."""
    scope = getattr(request, "scope", None)
    return scope.get(_SENT_CALL) if isinstance(scope, dict) else None


class MessageCheck:
    """ASGI middleware before the SDK's Streamable HTTP endpoint: a POST body that is not a
    JSON-RPC message is answered as JSON-RPC says (the SDK's own answer to a wrong shape,
    ``-32602`` with id null, is replaced: ``-32600`` with the id), and a 2025-era request
    holding a lone surrogate reaches the SDK as a copy it can parse (module docstring).

    The body is read whole, as the SDK reads it, and parsed again only when the SDK refused
    it or it may hold a surrogate escape: a well-formed request costs a byte scan.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, rest = await _read_body(receive)
        sent = body
        if _SURROGATE_ESCAPE.search(body) and _handshake_era(scope):
            cleaned = _cleaned(body)
            if cleaned is not None:
                body, restored, call = cleaned
                if call is not None:
                    scope = {**scope, _SENT_CALL: call}
                send = _rewriting(send, lambda _status, chunk: _restore(chunk, restored))
        await self.app(scope, _replay(body, rest, receive), _rewriting(send, _answer_for(sent)))


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole request body, and what `receive` gave after it (a disconnect)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message]
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), []


def _replay(body: bytes, rest: list[Message], receive: Receive) -> Receive:
    """`receive` for the app: the body read, whatever came after it, then the client again
    (the SDK watches for a disconnect while a call runs)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *rest]

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def _handshake_era(scope: Scope) -> bool:
    """Whether the SDK serves this request on its 2025 path (it routes by this header)."""
    for name, value in scope["headers"]:
        if name == b"mcp-protocol-version":
            return value.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
    return True


def _cleaned(body: bytes) -> tuple[bytes, dict[bytes, bytes], SentCall | None] | None:
    """A copy of the message in `body` the SDK can parse: lone surrogates replaced, a string
    id holding one replaced by a placeholder; with the placeholders' JSON → the id's JSON,
    and the ``tools/call`` as sent. None when `body` needs no cleaning or holds no message
    (the SDK refuses it, and `_answer_for` says why)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        if not _holds_lone_surrogate(value):
            return None
        jsonrpc_message_adapter.validate_python(value, by_name=False)
        cleaned = _replace_lone_surrogates(value)
    except (ValidationError, RecursionError):
        return None
    restored = {}
    request_id = value.get("id")
    if isinstance(request_id, str) and _holds_lone_surrogate(request_id):
        placeholder = f"toolkeeper-id-{uuid.uuid4().hex}"
        restored[json.dumps(placeholder).encode()] = json.dumps(request_id).encode()
        cleaned["id"] = placeholder
    call = None
    params = value.get("params")
    if value.get("method") == "tools/call" and isinstance(params, dict) and request_id is not None:
        call = SentCall(request_id, params.get("name"), params.get("arguments"))
    return json.dumps(cleaned).encode(), restored, call


def _restore(chunk: bytes, restored: dict[bytes, bytes]) -> bytes:
    for placeholder, original in restored.items():
        chunk = chunk.replace(placeholder, original)
    return chunk


def _answer_for(body: bytes) -> Callable[[int, bytes], bytes]:
    """Rewrites the SDK's refusal of `body` (HTTP 400, a JSON-RPC error with id null) into
    JSON-RPC's answer when `body` holds no message; any other response passes unchanged."""

    def answer(status: int, chunk: bytes) -> bytes:
        if status != 400 or b'"id":null' not in chunk.replace(b" ", b""):
            return chunk
        message = parse_message(body)
        if not isinstance(message, Unreadable):
            return chunk  # a message the SDK refused for another reason (a missing session)
        return dump_message(message.reply).encode()

    return answer


def _rewriting(send: Send, rewrite: Callable[[int, bytes], bytes]) -> Send:
    """`send` with each body chunk passed through ``rewrite(status, chunk)``; a response sent
    in one chunk gets its Content-Length fixed."""
    start: Message | None = None
    status = 200

    async def rewriting(message: Message) -> None:
        nonlocal start, status
        if message["type"] == "http.response.start":
            start, status = message, message["status"]
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        chunk = rewrite(status, message.get("body", b""))
        if start is not None:
            headers = [
                (k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"
            ]
            if not message.get("more_body", False):
                headers.append((b"content-length", str(len(chunk)).encode()))
            await send({**start, "headers": headers})
            start = None
        await send({**message, "body": chunk})

    return rewriting
