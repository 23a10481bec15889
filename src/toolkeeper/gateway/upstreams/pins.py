"""`PinStore`: which upstream tool definitions an operator approved, and what each upstream
says now.

An upstream tool is served only while its definition hashes to a pin an operator approved:
a new tool, or one whose name, description, schemas or annotations changed since approval (a
"rug pull"), is withheld until someone reads it — `diff` shows what changed — and approves
again. The store is one JSON file in the toolkeeper home (``upstream_pins.json``), small enough
to review and to keep in version control. Writers take an advisory lock and replace the file
atomically, so the gateway recording what it saw and an operator approving in another process
never lose each other's update.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from toolkeeper.errors import ConfigError, ToolkeeperError
from toolkeeper.schema.document import canonical_json

PIN_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""What a pin covers: everything about a tool that a model reads or policy authors consult.
`title` is included because the importer carries it into the contract's annotations."""

OFFERING_PIN_FIELDS = {
    "prompt": ("name", "title", "description", "arguments"),
    "resource": ("uri", "name", "title", "description", "mimeType", "annotations"),
    "template": ("uriTemplate", "name", "title", "description", "mimeType", "annotations"),
}
"""What a pin covers of an upstream's prompts, resources and resource templates, by kind:
what a model or a client's user reads, and what routes a read (a resource's ``size`` and
icons are left out: they change without changing what it is)."""

STORE_NAME = "upstream_pins.json"


def offering_key(kind: str, ident: str) -> str:
    """The store key of a prompt (by name), resource (URI) or template (URI template):
    ``<kind>:<ident>``, apart from tool names, which cannot hold a colon."""
    return f"{kind}:{ident}"


def pin_fields(key: str) -> tuple[str, ...]:
    """The fields a pin covers for the store key `key` (a tool name or an `offering_key`)."""
    kind, colon, _ = key.partition(":")
    return OFFERING_PIN_FIELDS.get(kind, PIN_FIELDS) if colon else PIN_FIELDS


def pinned_definition(
    tool: Mapping[str, Any], fields: tuple[str, ...] = PIN_FIELDS
) -> dict[str, Any]:
    """The part of an MCP definition a pin covers (absent fields stay absent)."""
    return {key: tool[key] for key in fields if tool.get(key) is not None}


def pin_hash(tool: Mapping[str, Any], fields: tuple[str, ...] = PIN_FIELDS) -> str:
    """``sha256:<hex>`` over the canonical JSON of the pinned definition."""
    # Non-ASCII is kept as is, so an invisible character changes the hash.
    digest = hashlib.sha256(canonical_json(pinned_definition(tool, fields)).encode()).hexdigest()
    return f"sha256:{digest}"


class PinStatus(StrEnum):
    """Where a listed tool stands against the operator's pins."""

    APPROVED = "approved"
    NEW = "new"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class ApprovedPin:
    """An operator's approval of one exact definition."""

    hash: str
    definition: dict[str, Any]
    approved_by: str
    approved_at: float
    reason: str | None = None
    forced: bool = False
    """Approved despite blocking scan findings (`reason` says why)."""


@dataclass(frozen=True, slots=True)
class SeenDefinition:
    """The latest definition an upstream offered for a tool, approved or not."""

    hash: str
    definition: dict[str, Any]
    first_seen: float
    last_seen: float


class PinError(ToolkeeperError):
    """Raised when an approval cannot be recorded: nothing seen, or the definition moved."""


class PinStore:
    """Approved pins and last-seen definitions, per upstream server and tool name."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._cache: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    @classmethod
    def in_home(cls, home: str | Path) -> PinStore:
        return cls(Path(home) / STORE_NAME)

    def __repr__(self) -> str:
        return f"PinStore({str(self.path)!r})"

    # -- reading ---------------------------------------------------------------------------

    def approved(self, server: str, tool: str) -> ApprovedPin | None:
        entry = self._read().get(server, {}).get(tool, {})
        return ApprovedPin(**entry["approved"]) if entry.get("approved") else None

    def seen(self, server: str, tool: str) -> SeenDefinition | None:
        entry = self._read().get(server, {}).get(tool, {})
        return SeenDefinition(**entry["seen"]) if entry.get("seen") else None

    def status(self, server: str, tool: str, current_hash: str) -> PinStatus:
        pin = self.approved(server, tool)
        if pin is None:
            return PinStatus.NEW
        return PinStatus.APPROVED if pin.hash == current_hash else PinStatus.CHANGED

    def tools(self, server: str) -> list[str]:
        return sorted(self._read().get(server, {}))

    def diff(self, server: str, tool: str) -> str:
        """A unified diff from the approved definition to the one seen last; empty when they
        are the same. A tool never approved diffs against nothing."""
        seen = self.seen(server, tool)
        if seen is None:
            raise PinError(
                f"no definition of {server}/{tool} has been seen; run `toolkeeper upstreams "
                "list CONFIG` first so the gateway reads what the upstream offers"
            )
        pin = self.approved(server, tool)
        before = _pretty(pin.definition).splitlines(keepends=True) if pin else []
        after = _pretty(seen.definition).splitlines(keepends=True)
        label = f"approved {pin.hash[:19]} by {pin.approved_by}" if pin else "(never approved)"
        return "".join(
            difflib.unified_diff(
                before, after, fromfile=f"{server}/{tool} {label}", tofile=f"{server}/{tool} now"
            )
        )

    # -- writing ---------------------------------------------------------------------------

    def record_seen(self, server: str, tools: Mapping[str, Mapping[str, Any]]) -> None:
        """Remember what `server` offers now (tool name or `offering_key` → definition), in
        one write."""
        now = time.time()
        with self._update() as data:
            entries = data.setdefault(server, {})
            for name, tool in tools.items():
                fields = pin_fields(name)
                definition, digest = pinned_definition(tool, fields), pin_hash(tool, fields)
                entry = entries.setdefault(name, {})
                old = entry.get("seen")
                first = old["first_seen"] if old and old["hash"] == digest else now
                entry["seen"] = asdict(SeenDefinition(digest, definition, first, now))

    def approve(
        self,
        server: str,
        tool: str,
        *,
        by: str,
        expected_hash: str | None = None,
        reason: str | None = None,
        forced: bool = False,
    ) -> ApprovedPin:
        """Approve the definition last seen for `tool`. With `expected_hash`, refuse when the
        upstream moved on since the operator looked (approval is of what was reviewed)."""
        if forced and not reason:
            raise ConfigError(
                "approving over blocking findings needs a reason; pass --reason", key="reason"
            )
        with self._update() as data:
            entry = data.get(server, {}).get(tool)
            if not entry or not entry.get("seen"):
                raise PinError(
                    f"no definition of {server}/{tool} has been seen, so there is nothing to "
                    "approve; check the server and tool names with `toolkeeper upstreams list`"
                )
            seen = SeenDefinition(**entry["seen"])
            if expected_hash is not None and seen.hash != expected_hash:
                raise PinError(
                    f"{server}/{tool} changed while it was being reviewed ({expected_hash[:19]} "
                    f"→ {seen.hash[:19]}); list it again and review the new definition"
                )
            pin = ApprovedPin(seen.hash, seen.definition, by, time.time(), reason, forced)
            entry["approved"] = asdict(pin)
        return pin

    # -- the file --------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        """The stored data, parsed again only when the file was replaced (every write makes a
        new file, so inode, size and mtime tell); readers must not mutate it."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._load())
        return self._cache[1]

    def _load(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the pin store {self.path}: {exc.strerror}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"the pin store {self.path} is not valid JSON ({exc}); restore it from version "
                "control or delete it to re-approve every upstream tool"
            ) from exc
        servers = data.get("servers") if isinstance(data, dict) else None
        return servers if isinstance(servers, dict) else {}

    @contextlib.contextmanager
    def _update(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under an exclusive lock; the new file replaces the old at once."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            yield data
            text = json.dumps({"version": 1, "servers": data}, indent=2, ensure_ascii=False)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise


def _pretty(definition: Mapping[str, Any]) -> str:
    # ensure_ascii: an invisible character shows up in the diff as an escape, not as nothing.
    return json.dumps(definition, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
