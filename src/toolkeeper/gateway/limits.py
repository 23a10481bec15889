"""The largest JSON-RPC message the gateway reads, enforced before the SDK parses it: an HTTP
request body (`MessageLimit`, ASGI) and a stdio line (`bounded_stdin`).

Parsing is where an oversized message costs the most, on the event loop every principal
shares, so the size is checked on the bytes. A refusal is a protocol error the client can
read — JSON-RPC ``-32600`` naming the limit (with HTTP 413) — never the SDK's bare 413, which
its client reports as an opaque ``-32603``. Set ``[limits] message_bytes`` above
``argument_bytes``: a call a little over the argument limit then still parses and is answered
with a tool error naming that limit, with its ledger row (docs/limits.md).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Final, cast

from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    INVALID_REQUEST,
    PROTOCOL_VERSION_META_KEY,
    RequestParams,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkeeper.runtime.limits import MIB

logger = logging.getLogger(__name__)

DEFAULT_MESSAGE_BYTES: Final = 2 * MIB
"""Twice the default argument limit: room for the envelope and for JSON escapes (a client
that writes CJK text as ``\\u`` escapes doubles it). Half the SDK's own 4 MiB, because the SDK
parses every body it accepts on the event loop, in time linear in its size (0.1–0.6 s for
1.8 MB of small keys on a shared 2-core machine), and that stall is what other principals
wait for (benchmarks/oversize_p99.py)."""


def _too_large(size: int | None, limit: int) -> str:
    found = f"{size} bytes" if size is not None else "larger"
    return (
        f"the message is {found}, over the gateway's limit of {limit} bytes (message_bytes); "
        "send smaller arguments, or ask the operator to raise [limits] message_bytes"
    )


class MessageLimit:
    """ASGI middleware: a request body over `max_bytes` is answered with HTTP 413 and a
    JSON-RPC error before anything parses it. A declared Content-Length is checked first;
    otherwise the body is read up to the limit and handed on whole."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send, int(value))
                return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send, None)
                return
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, send: Send, size: int | None) -> None:
        logger.warning("refused an HTTP request body: %s", _too_large(size, self.max_bytes))
        error = {"code": INVALID_REQUEST, "message": _too_large(size, self.max_bytes)}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    async def replayed() -> Message:
        return messages.pop(0) if messages else await receive()

    return replayed


# -- stdio ------------------------------------------------------------------------------

OVERSIZED_METHOD: Final = "toolkeeper/oversized"
"""The request an oversized stdio line is replaced by, so that the server answers its id
with an error naming the limit (the line itself is never parsed)."""

_REQUEST_ID = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,20}|"(?:[^"\\]|\\.){0,256}")'
    rb'\s*,\s*"method"'
)
"""A request's id where clients write it, before its method (``{"jsonrpc":"2.0","id":7,
"method":...``): read from the start of an oversized line, which is never parsed whole."""
_PROTOCOL_VERSION = re.compile(
    rb'"' + re.escape(PROTOCOL_VERSION_META_KEY.encode()) + rb'"\s*:\s*"([0-9A-Za-z.-]{1,32})"'
)
"""The protocol version a 2026-07-28 request carries in ``_meta``, read from the start or the
end of the line (clients write ``_meta`` first or last): without it the SDK would refuse the
replacement request for its missing envelope instead of for its size."""
_HEAD: Final = 2048
_CHUNK: Final = 64 * 1024


class OversizedParams(RequestParams):
    """What the replaced line was: its size (at least) and the limit."""

    size: int
    limit: int


async def _refuse_oversized(_ctx: ServerRequestContext[Any, Any], params: OversizedParams) -> Any:
    raise MCPError(code=INVALID_REQUEST, message=_too_large(params.size, params.limit))


def refuse_oversized(server: Server[Any]) -> None:
    """Let `server` answer the requests `BoundedLines` puts in place of oversized lines."""
    server.add_request_handler(OVERSIZED_METHOD, OversizedParams, _refuse_oversized)


class BoundedLines(io.TextIOBase):
    """The lines of a binary stream as text, none longer than `max_bytes`: a longer line is
    skipped in chunks (never held whole) and replaced by an `OVERSIZED_METHOD` request with
    the same id, or dropped with a warning when no id can be read from its start (a
    notification, a response, or a client that writes the id late)."""

    def __init__(self, stream: IO[bytes], max_bytes: int) -> None:
        super().__init__()
        self._stream = stream
        self._max = max_bytes

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]  # as typeshed
        """The next line within the bound (`size` is ignored: the bound is `max_bytes`)."""
        while True:
            line = self._stream.readline(self._max + 1)
            if len(line) <= self._max or line.endswith(b"\n"):
                return line.decode("utf-8", "replace")  # as the SDK decodes stdin
            head, tail, seen = line[:_HEAD], line[-_HEAD:], len(line)
            while line and not line.endswith(b"\n"):
                line = self._stream.readline(_CHUNK)
                seen += len(line)
                tail = (tail + line)[-_HEAD:]
            logger.warning("skipped a stdio line: %s", _too_large(seen, self._max))
            request = _REQUEST_ID.match(head)
            if request is not None:
                params: dict[str, Any] = {"size": seen, "limit": self._max}
                version = _PROTOCOL_VERSION.search(head) or _PROTOCOL_VERSION.search(tail)
                if version is not None:  # a 2026 request is refused without its envelope
                    params["_meta"] = {
                        PROTOCOL_VERSION_META_KEY: version.group(1).decode(),
                        CLIENT_CAPABILITIES_META_KEY: {},
                    }
                return (
                    f'{{"jsonrpc":"2.0","id":{request.group(1).decode("utf-8", "replace")},'
                    f'"method":"{OVERSIZED_METHOD}","params":{json.dumps(params)}}}\n'
                )


@contextmanager
def bounded_stdin(max_bytes: int) -> Iterator[IO[str]]:
    """This process's stdin as `BoundedLines` for the SDK's `stdio_server(stdin=...)`.

    The SDK points fd 0 at the null device while it serves stdin itself, so that tools and
    their children cannot read the client's messages; given a stream, it leaves fd 0 alone,
    so this does the same: the wire moves to a private descriptor and fd 0 reads EOF until
    the transport is done.
    """
    try:
        wire = os.dup(0)
    except OSError:  # no descriptor 0 to divert (as the SDK, serve what sys.stdin holds)
        yield cast(IO[str], BoundedLines(sys.stdin.buffer, max_bytes))
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # closefd=False: a worker thread may still block reading it after the transport exits.
    stream = os.fdopen(wire, "rb", buffering=_CHUNK, closefd=False)
    try:
        yield cast(IO[str], BoundedLines(stream, max_bytes))
    finally:
        os.dup2(wire, 0)
