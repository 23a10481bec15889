"""The upstream log: a stdio upstream's stderr, scrubbed of every registered secret on its way
to ``<home>/upstreams/<server>.log``.

Handed a file, the SDK lets the child write its stderr to it directly, and a child given a
credential in its `env` may print it there (a debug line, a traceback quoting its config).
So the child writes into a pipe instead, and a thread copies what arrives to the log through
`Redactor.redact_bytes_prefix`, holding back only the tail a secret could still be
completing — until more arrives, the pipe has been quiet for `IDLE` seconds, or it closes.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import FileIO
from pathlib import Path
from typing import TextIO

import anyio
import anyio.to_thread

from toolkeeper.secrets.redaction import Redactor

logger = logging.getLogger(__name__)

IDLE = 0.2
"""Seconds of silence after which the held-back tail is written out (scrubbed as it is)."""
_DRAIN_TIMEOUT = 5.0
"""How long closing waits for the copy to write what the stopped child left in the pipe."""


@asynccontextmanager
async def upstream_log(path: Path, redactor: Redactor) -> AsyncIterator[TextIO]:
    """A file to give a child as its stderr; what it writes is appended, scrubbed, to `path`.

    On exit the gateway's end of the pipe is closed and the copy is given a moment to write
    what the (by then stopped) child left; a descendant still holding the pipe keeps the
    copy going, on its daemon thread, until it exits.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = FileIO(path, "a")  # unbuffered: a failed write leaves nothing to flush again
    read_end, write_end = os.pipe()
    copy = threading.Thread(
        target=_copy, args=(read_end, sink, redactor), name=f"upstream log {path}", daemon=True
    )
    copy.start()
    errlog = os.fdopen(write_end, "w", encoding="utf-8")
    try:
        yield errlog
    finally:
        errlog.close()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(copy.join, _DRAIN_TIMEOUT)


def _copy(read_end: int, sink: FileIO, redactor: Redactor) -> None:
    """Copy the pipe to `sink`, scrubbed, until every writer closed it. A failing write (a
    full disk) stops the logging, never the reading: a child blocked on a full pipe would
    hang."""
    held = b""
    broken = False

    def write(data: bytes) -> None:
        nonlocal broken
        if broken or not data:
            return
        try:
            sink.write(data)  # a regular file takes it whole, or raises (ENOSPC, EIO)
        except OSError as exc:
            broken = True
            logger.warning("cannot write the upstream log %s (%s); discarding it", sink.name, exc)

    with sink, FileIO(read_end, "r") as source:
        while True:
            if held and not select.select([source], [], [], IDLE)[0]:
                write(redactor.redact_bytes(held))
                held = b""
                continue
            chunk = source.read(65536)
            if not chunk:
                break
            scrubbed, held = redactor.redact_bytes_prefix(held + chunk)
            write(scrubbed)
        write(redactor.redact_bytes(held))
