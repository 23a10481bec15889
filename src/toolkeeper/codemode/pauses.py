"""A program paused at an inner call that waits on a human: what is kept with the approval.

The sandbox state (a Monty snapshot dump, a few KB) plus what the host knew of the run —
printed output so far, the inner calls made, the sequence counter and the id prefix — is
stored in the approval's ``snapshot`` column, in the ledger, so any process sharing the
ledger can continue the program. Continuing *takes* it (compare-and-clear in the ledger):
a program continues at most once, so no inner call after the pause can run twice.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

FORMAT = 1
"""The bundle's format version; a bundle of another version is refused, not misread."""
QUEUED = b"queued-behind:"
"""The prefix of the note stored with an approval its program does not wait on yet (it paused
on several calls at once and continues at another's approval first); that approval follows."""


@dataclass
class InnerCall:
    """One call the program made, as run_code reports it."""

    sequence: int
    function: str
    tool: str
    request_id: str | None
    status: str
    effect_state: str
    approval_id: str | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        data = {
            "seq": self.sequence,
            "function": self.function,
            "tool": self.tool,
            "request_id": self.request_id,
            "status": self.status,
            "effect_state": self.effect_state,
        }
        if self.approval_id:
            data["approval_id"] = self.approval_id
        if self.error:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class PausedProgram:
    """Everything a fresh process needs to continue a paused program."""

    state: bytes
    """The sandbox's dump, suspended at the waiting call."""
    stdout: str
    calls: list[dict[str, Any]]
    """The inner calls made so far; the last is the one waiting."""
    sequence: int
    call_prefix: str
    request_id: str
    """The run_code request that paused."""
    waiting: int
    """The sequence number of the inner call the program waits on."""
    batch: dict[str, Any] | None = None
    """The awaited batch it paused in (`monty.Batch.as_json`), if it paused in one."""
    tier: str = "monty"
    """Which tier `state` belongs to: a Monty dump, or the CPython tier's replay record."""

    def encode(self) -> bytes:
        body = {
            "format": FORMAT,
            "state": base64.b64encode(self.state).decode(),
            "stdout": self.stdout,
            "calls": self.calls,
            "sequence": self.sequence,
            "call_prefix": self.call_prefix,
            "request_id": self.request_id,
            "waiting": self.waiting,
            "batch": self.batch,
            "tier": self.tier,
        }
        return json.dumps(body, ensure_ascii=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> PausedProgram:
        body = json.loads(data)
        if body.get("format") != FORMAT:
            raise ValueError(f"paused program of format {body.get('format')!r}; expected {FORMAT}")
        return cls(
            state=base64.b64decode(body["state"]),
            stdout=body["stdout"],
            calls=body["calls"],
            sequence=body["sequence"],
            call_prefix=body["call_prefix"],
            request_id=body["request_id"],
            waiting=body["waiting"],
            batch=body["batch"],
            tier=body["tier"],
        )


def inner_call(data: dict[str, Any]) -> InnerCall:
    return InnerCall(
        sequence=data["seq"],
        function=data["function"],
        tool=data["tool"],
        request_id=data.get("request_id"),
        status=data["status"],
        effect_state=data["effect_state"],
        approval_id=data.get("approval_id"),
        error=data.get("error"),
    )


ACCOUNT_CALLS = 10
"""Earlier calls an approver reads in full; the rest are counted."""


def account(call_account: str, calls: list[InnerCall], waiting: InnerCall) -> str:
    """What the approver reads: the waiting call's own account, then what the program did
    before it (every write and failure named, reads counted)."""
    earlier = [call for call in calls if call is not waiting]
    lines = [
        f"Code Mode program, call #{waiting.sequence}: {call_account}",
        f"Before it the program made {len(earlier)} call(s).",
    ]
    notable = [c for c in earlier if c.effect_state != "none" or c.status != "succeeded"]
    for call in notable[:ACCOUNT_CALLS]:
        lines.append(f"  #{call.sequence} {call.tool}: {call.status}, effect {call.effect_state}")
    if len(notable) > ACCOUNT_CALLS:
        lines.append(f"  … and {len(notable) - ACCOUNT_CALLS} more writes or failures")
    reads = len(earlier) - len(notable)
    if reads:
        lines.append(f"  {reads} read-only call(s) succeeded")
    return "\n".join(lines)


__all__ = ["InnerCall", "PausedProgram", "account", "inner_call"]
