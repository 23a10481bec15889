"""The registry: contracts by id@version, each with its executor and read-back hooks.

Several versions of one tool live side by side, so a call approved against 1.0.0 can still be
checked against exactly that version after 2.0.0 is registered (seed 000 §11).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkeeper.contract.model import SEMVER, ToolContract
from toolkeeper.errors import RegistryError
from toolkeeper.executors import Executor

Verifier = Callable[..., Any]
"""`verifier(arguments, context) -> bool | None` (may be async): read back whether the
intended effect is in place. True confirmed, False absent, None cannot tell."""

ResourceVersionReader = Callable[..., Any]
"""`reader(arguments, context) -> dict[str, str]` (may be async): the current versions of
the resources a call would change, compared again before an approved call resumes."""


@dataclass(frozen=True, slots=True)
class ToolEntry:
    contract: ToolContract
    executor: Executor | None
    verifier: Verifier | None = None
    resource_version: ResourceVersionReader | None = None


def _semver_key(version: str | None) -> tuple[int, int, int, int, str]:
    match = SEMVER.match(version or "0.0.0")
    if match is None:
        return (0, 0, 0, 0, version or "")
    major, minor, patch = (int(g) for g in match.groups()[:3])
    release = 0 if "-" in (version or "") else 1
    return (major, minor, patch, release, version or "")


class Registry:
    """Contracts keyed by `id@version`; `latest(id)` picks the highest semver."""

    def __init__(self) -> None:
        self._entries: dict[str, ToolEntry] = {}
        self._latest: dict[str, str] = {}
        self.generation = 0
        """Bumped on every change, so caches of rendered views know when to rebuild."""

    def add(self, entry: ToolEntry) -> None:
        ref = entry.contract.ref
        existing = self._entries.get(ref)
        if existing is not None and existing.contract.digest() != entry.contract.digest():
            raise RegistryError(
                f"{ref} is already registered with different content "
                f"({existing.contract.digest()[:19]} vs {entry.contract.digest()[:19]}); "
                "a changed tool needs a new version"
            )
        self._entries[ref] = entry
        tool_id = entry.contract.id
        current = self._latest.get(tool_id)
        if current is None or _semver_key(entry.contract.version) >= _semver_key(
            self._entries[current].contract.version
        ):
            self._latest[tool_id] = ref
        self.generation += 1

    def get(self, ref: str) -> ToolEntry | None:
        return self._entries.get(ref)

    def latest(self, tool_id: str) -> ToolEntry | None:
        ref = self._latest.get(tool_id)
        return self._entries[ref] if ref else None

    def find(self, name: str) -> ToolEntry | None:
        """By `id@version`, else the latest version of `id`."""
        return self._entries.get(name) or self.latest(name)

    def latest_contracts(self) -> list[ToolContract]:
        return [self._entries[ref].contract for ref in sorted(self._latest.values())]

    def __len__(self) -> int:
        return len(self._entries)
