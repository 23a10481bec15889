"""Who asks for what: `Proposal`, `Principal` and the `InvocationRequest` a proposal becomes.

A `Proposal` is only a candidate: what a model emitted. It becomes an `InvocationRequest`
after resolution, validation and normalization, with every identifier the ledger needs to
correlate it (seed 001, the second artifact).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.schema.document import canonical_json


@dataclass(frozen=True, slots=True)
class Proposal:
    """A tool call as the model proposed it: a candidate, not a request."""

    call_id: str
    tool: str
    """The name as the model saw it (a model-view name, not necessarily the contract id)."""
    arguments: Any = None
    """The raw arguments: a JSON string, an object, or whatever the model produced."""
    family: str | None = None
    """The model family whose view the name comes from (openai, anthropic, gemini, mcp)."""
    idempotency_key: str | None = None
    """A caller-chosen key; when unset, keyed contracts derive one (never from call_id)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who acts: a user or agent within a tenant, holding capabilities."""

    id: str
    tenant: str = "default"
    capabilities: frozenset[str] = field(default_factory=frozenset)
    kind: str = "agent"

    def __post_init__(self) -> None:
        if not isinstance(self.capabilities, frozenset):
            object.__setattr__(self, "capabilities", frozenset(self.capabilities))


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    """A proposal that passed resolution and validation; what the later stages act on."""

    request_id: str
    call_id: str
    contract_ref: str
    implementation_digest: str
    arguments: dict[str, Any]
    arguments_digest: str
    principal: Principal
    session: str | None = None
    parent_request_id: str | None = None
    idempotency_key: str | None = None
    """The key the ledger holds: derived, or the caller's scoped to tenant, principal and tool."""
    idempotency_ttl: float | None = None
    """Seconds the key keeps a settled outcome (a derived key); None: for good."""
    resource_versions: dict[str, str] = field(default_factory=dict)
    read_set: tuple[str, ...] = ()
    write_set: tuple[str, ...] = ()
    approval_id: str | None = None
    grant_id: str | None = None
    risk: str = "low"


class _IdSource:
    """Unique, time-ordered ids without a system call per id.

    `os.urandom` costs hundreds of µs on some VMs, more than the rest of a read-only call,
    so ids come from a generator seeded once from it (and again in a forked child, which
    would otherwise repeat its parent's ids). Ids need to be unique, not secret: nothing
    is authorized by knowing one.
    """

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._rng = random.Random(os.urandom(32))

    def new(self, prefix: str) -> str:
        return f"{prefix}_{time.time_ns():016x}{self._rng.getrandbits(64):016x}"


_IDS = _IdSource()


def new_id(prefix: str) -> str:
    """`<prefix>_<time ns><64 random bits>` in hex: sortable by creation time."""
    return _IDS.new(prefix)


def new_request_id() -> str:
    return new_id("req")


def arguments_digest(arguments: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(arguments).encode()).hexdigest()
