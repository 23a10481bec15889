"""What a command did, as the model and the ledger get it.

Two facts are kept apart (seed 000 §8): how the command *ended* (exit code, signal, timeout)
and what it *changed* (files created, modified and deleted under the writable roots). "Exited
1 after writing 3 files" is not "nothing happened". The sandbox makes the second fact
observable: a command can write nowhere but its roots, so comparing a listing of the roots
before and after is the whole effect on disk (network effects, where allowed, are not seen).

Output is redacted first (the harness's known secret values), then cut to a head and a tail
for the model; the whole redacted stream is stored as an artifact when it was cut.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.executors.sandbox import Completed
from toolkeeper.secrets.redaction import Redactor

HEAD_BYTES = 2048
TAIL_BYTES = 2048
SNAPSHOT_LIMIT = 100_000
"""Entries listed under the roots at most; past it the effect is reported incomplete."""
_LISTED = 20
"""Paths per change kind named in the output; the counts cover the rest."""

_Entry = tuple[int, int, int, int]  # mode, size, mtime_ns, inode


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every file, link and directory under some roots, with what shows a change."""

    entries: dict[str, _Entry]
    complete: bool

    @classmethod
    def of(
        cls, roots: Iterable[Path], skip: Iterable[Path] = (), limit: int = SNAPSHOT_LIMIT
    ) -> Snapshot:
        """List `roots`, leaving out the trees under `skip` (paths the command cannot see,
        such as the harness's own ledger, which changes while the command runs)."""
        entries: dict[str, _Entry] = {}
        pending = [str(root) for root in roots]
        skipped = {str(path) for path in skip}
        while pending:
            directory = pending.pop()
            if directory in skipped:
                continue
            try:
                with os.scandir(directory) as listing:
                    for item in listing:
                        if len(entries) >= limit:
                            return cls(entries, complete=False)
                        try:
                            info = item.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        entries[item.path] = (
                            info.st_mode,
                            info.st_size,
                            info.st_mtime_ns,
                            info.st_ino,
                        )
                        if stat.S_ISDIR(info.st_mode):
                            pending.append(item.path)
            except OSError:
                continue
        return cls(entries, complete=True)


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed under the writable roots between two snapshots. A directory counts
    when it appears or goes, not when its listing changes (that is its files' change)."""

    created: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]
    complete: bool
    """False when a snapshot hit its limit: more may have changed than is listed."""

    @classmethod
    def between(cls, before: Snapshot, after: Snapshot) -> Changes:
        old, new = before.entries, after.entries
        created = sorted(set(new) - set(old))
        deleted = sorted(set(old) - set(new))
        modified = sorted(
            path
            for path in set(old) & set(new)
            if old[path] != new[path] and not stat.S_ISDIR(new[path][0])
        )
        return cls(
            tuple(created), tuple(modified), tuple(deleted), before.complete and after.complete
        )

    @property
    def count(self) -> int:
        return len(self.created) + len(self.modified) + len(self.deleted)

    def describe(self) -> str:
        """E.g. ``wrote 3 files (2 created, 1 modified) and deleted 1``; ``changed no file``."""
        written = len(self.created) + len(self.modified)
        parts = []
        if written:
            kinds = [f"{len(self.created)} created"] if self.created else []
            kinds += [f"{len(self.modified)} modified"] if self.modified else []
            parts.append(f"wrote {_files(written)} ({', '.join(kinds)})")
        if self.deleted:
            parts.append(f"deleted {_files(len(self.deleted))}")
        text = " and ".join(parts) or "changed no file"
        return text if self.complete else text + " (at least; the roots hold too many files)"

    def as_json(self) -> dict[str, Any]:
        return {
            "created": list(self.created[:_LISTED]),
            "modified": list(self.modified[:_LISTED]),
            "deleted": list(self.deleted[:_LISTED]),
            "count": self.count,
            "complete": self.complete,
        }


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def ending(completed: Completed, timeout: float) -> str:
    """How the command ended, in words: ``exited 0``, ``was killed by signal 15``..."""
    if completed.timed_out:
        return f"was killed after its {timeout:g} s timeout"
    if completed.cancelled:
        return "was cancelled"
    if completed.signal is not None:
        return f"was killed by signal {completed.signal}"
    return f"exited {completed.exit_code}"


def account(completed: Completed, changes: Changes, timeout: float, *, network: bool) -> str:
    """The one line a model or a reviewer reads: the ending, then the effect."""
    text = f"{ending(completed, timeout)} after {_duration(completed.duration)}; it "
    text += changes.describe()
    if network:
        text += " (network effects, if any, are not observed)"
    if not completed.sandboxed:
        text += "; it ran WITHOUT the sandbox (the operator allowed the fallback)"
    return text


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def head_and_tail(data: bytes, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> str:
    """`data` as text, whole when short, else its first `head` and last `tail` bytes
    around a marker saying how much was left out (the cut never splits a character)."""
    if len(data) <= head + tail:
        return data.decode("utf-8", "replace")
    first = data[:head].decode("utf-8", "ignore")
    last = data[-tail:].decode("utf-8", "ignore")
    omitted = len(data) - head - tail
    return f"{first}\n[… {omitted} bytes omitted; the whole output is in the artifact …]\n{last}"


def stream(
    name: str,
    data: bytes,
    total: int,
    *,
    redactor: Redactor,
    artifacts: ArtifactStore,
    head: int = HEAD_BYTES,
    tail: int = TAIL_BYTES,
) -> dict[str, Any]:
    """One output stream for the model: redacted, head and tail, the whole as an artifact
    when it was cut, and how many bytes the command wrote (more than kept, past the
    sandbox's capture limit)."""
    clean = redactor.redact_bytes(data)
    out: dict[str, Any] = {name: head_and_tail(clean, head, tail), f"{name}_bytes": total}
    if len(clean) > head + tail or total > len(data):
        ref = artifacts.put(clean, media_type="text/plain", description=f"shell {name}")
        out[f"{name}_artifact"] = ref.uri
    return out


def shell_output(
    completed: Completed,
    changes: Changes,
    *,
    timeout: float,
    network: bool,
    redactor: Redactor,
    artifacts: ArtifactStore,
) -> dict[str, Any]:
    """The structured result of one command (the shell tool's output schema)."""
    output: dict[str, Any] = {
        "account": account(completed, changes, timeout, network=network),
        "exit_code": completed.exit_code,
        "signal": completed.signal,
        "timed_out": completed.timed_out,
        "duration_ms": round(completed.duration * 1000, 3),
        "sandboxed": completed.sandboxed,
        "changed": changes.as_json(),
    }
    for name, data, total in (
        ("stdout", completed.stdout, completed.stdout_bytes),
        ("stderr", completed.stderr, completed.stderr_bytes),
    ):
        output |= stream(name, data, total, redactor=redactor, artifacts=artifacts)
    return output


OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "account": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},
        "signal": {"type": ["integer", "null"]},
        "timed_out": {"type": "boolean"},
        "duration_ms": {"type": "number"},
        "sandboxed": {"type": "boolean"},
        "changed": {
            "type": "object",
            "properties": {
                "created": {"type": "array", "items": {"type": "string"}},
                "modified": {"type": "array", "items": {"type": "string"}},
                "deleted": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer"},
                "complete": {"type": "boolean"},
            },
        },
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "stdout_bytes": {"type": "integer"},
        "stderr_bytes": {"type": "integer"},
        "stdout_artifact": {"type": "string"},
        "stderr_artifact": {"type": "string"},
    },
    "required": ["account", "exit_code", "signal", "timed_out", "changed", "stdout", "stderr"],
}
"""The shell tool's (and every CLI tool's) output schema."""
