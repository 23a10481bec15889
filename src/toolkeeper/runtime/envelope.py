"""What comes back from a tool call: the `ResultEnvelope` and its parts.

An envelope is an *outcome*, never an exception: a denial, a pending approval or an invalid
argument is answered with an envelope the model can act on (seed 000 §3–4, seed 001's four
artifacts). Every envelope carries enough to correlate it with exactly one call id and one
request id, and to say whether the world changed (`effect_committed`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    """The seven outcomes of a call. Only `succeeded` means the effect is confirmed."""

    SUCCEEDED = "succeeded"
    REJECTED = "rejected"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    EFFECT_UNKNOWN = "effect_unknown"
    PENDING_APPROVAL = "pending_approval"


class ErrorCategory(StrEnum):
    """Why a call did not succeed; the model's next move depends on telling these apart."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    POLICY_DENIED = "policy_denied"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_DENIED = "approval_denied"
    STALE = "stale"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INTERNAL = "internal"
    EFFECT_UNKNOWN = "effect_unknown"


class EffectState(StrEnum):
    """Whether the call changed the world, as far as toolkeeper can prove."""

    NONE = "none"
    """Read-only, or never dispatched: nothing could have changed."""
    NOT_COMMITTED = "not_committed"
    COMMITTED = "committed"
    UNKNOWN = "unknown"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldError(_Model):
    """One violation in the arguments, addressed by a JSON pointer into the instance."""

    path: str = Field(description="JSON pointer (RFC 6901) to the offending value; '' is the root.")
    code: str = Field(description="Machine code: type, required, enum, minimum, maximum, ...")
    message: str
    expected: Any = Field(default=None, description="The expected value, bound or shape.")


class ToolError(_Model):
    """The structured error of seed 000 §3: what went wrong and what to do next."""

    category: ErrorCategory
    retryable: bool = False
    message: str
    field_errors: tuple[FieldError, ...] = ()
    suggested_fix: str | None = None
    effect_committed: bool | None = Field(
        default=False, description="true, false, or null when the effect is unknown."
    )


class Provenance(_Model):
    """Where a result came from: the exact contract and implementation that produced it."""

    tool_id: str
    tool_version: str
    implementation_digest: str | None = None
    target: str | None = None
    source: str | None = None
    time: datetime = Field(default_factory=lambda: datetime.now(UTC))


class ExecutionMeta(_Model):
    """Correlation and execution facts: request id, call id, attempts, latency, effect state."""

    request_id: str
    call_id: str
    attempt: int = 0
    latency_ms: float = 0.0
    effect_state: EffectState = EffectState.NONE
    approval_id: str | None = None
    idempotency_key: str | None = None
    replay_of: str | None = Field(
        default=None,
        description="Request id whose recorded outcome this answer repeats (same idempotency key).",
    )
    record_pending: bool = Field(
        default=False,
        description="The ledger refuses writes now: this call's record is queued and is "
        "written once it takes them again.",
    )


class ArtifactRef(_Model):
    """A large result stored aside (content-addressed), referenced instead of inlined."""

    uri: str
    digest: str
    media_type: str = "application/json"
    size: int
    description: str | None = None


class ToolContent(_Model):
    """A tool's answer as content blocks — an MCP tool's ``content`` (text, image, audio,
    resource_link, embedded resource) in the order it sent them, redacted. A gateway hands
    them to its client as they came; the envelope around them is toolkeeper's account."""

    blocks: tuple[dict[str, Any], ...] | None = Field(
        default=None, description="The blocks in MCP wire form; null when stored aside."
    )
    stored: ArtifactRef | None = Field(
        default=None, description="Where the blocks are, when they were too large to inline."
    )
    structured: bool = Field(
        default=False,
        description="The tool sent structured content too: the envelope's structured_content "
        "is it. Otherwise structured_content is toolkeeper's rendering of the text blocks.",
    )
    is_error: bool = Field(default=False, description="The tool flagged its answer an error.")


class ResultEnvelope(_Model):
    """The answer to one proposal. Render it for a model with `to_model_text()`."""

    status: Status
    error: ToolError | None = None
    summary: str = ""
    structured_content: dict[str, Any] | None = None
    artifact_refs: tuple[ArtifactRef, ...] = ()
    content: ToolContent | None = None
    provenance: Provenance | None = None
    execution_meta: ExecutionMeta | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.SUCCEEDED

    def to_model_text(self, max_chars: int | None = 2000) -> str:
        """A compact observation for the model: status, summary, the error and its fix.

        The text never exceeds `max_chars`; the structured content is included only while it
        fits, because the model's context is the scarcest resource the envelope touches.
        None shows everything: the structured content is already the contract's projection
        (bounded by its ``artifact_threshold``), which is what the gateway shows.
        """
        lines = [f"status: {self.status.value}"]
        meta = self.execution_meta
        if meta is not None and meta.replay_of:
            lines.append(
                f"replay: the recorded outcome of an earlier call with the same idempotency "
                f"key ({meta.replay_of}); nothing ran again"
            )
        if self.summary:
            lines.append(f"summary: {self.summary}")
        if self.error is not None:
            err = self.error
            lines.append(f"error: {err.category.value}: {err.message}")
            lines.extend(
                f"  - {fe.path or '/'}: {fe.code}: {fe.message}" for fe in err.field_errors[:20]
            )
            if len(err.field_errors) > 20:
                lines.append(f"  - ... {len(err.field_errors) - 20} more")
            if err.suggested_fix:
                lines.append(f"fix: {err.suggested_fix}")
            lines.append(f"retryable: {str(err.retryable).lower()}")
            committed = "unknown" if err.effect_committed is None else str(err.effect_committed)
            lines.append(f"effect_committed: {committed.lower()}")
        if meta is not None and meta.approval_id:
            lines.append(f"approval_id: {meta.approval_id}")
        if meta is not None and meta.record_pending:
            lines.append("record: pending (the audit ledger is unavailable; queued for retry)")
        for ref in self.artifact_refs[:5]:
            lines.append(f"artifact: {ref.uri} ({ref.size} bytes)")
        if self.content is not None and self.content.stored is not None:
            stored = self.content.stored
            lines.append(f"content: stored as {stored.uri} ({stored.size} bytes)")
        head = "\n".join(lines)
        if max_chars is None:
            if self.structured_content is not None:
                data = json.dumps(self.structured_content, ensure_ascii=False, default=str)
                head += f"\ndata: {data}"
            return head
        if self.structured_content is not None:
            data = json.dumps(self.structured_content, ensure_ascii=False, default=str)
            room = max_chars - len(head) - len("\ndata: ")
            if len(data) <= room:
                head += f"\ndata: {data}"
            elif room > 40:
                head += f"\ndata: {data[: room - 15]}…[truncated]"
        if len(head) > max_chars:
            head = head[: max_chars - 12] + "…[truncated]"
        return head


def envelope_json_schema() -> dict[str, Any]:
    """The published JSON Schema of `ResultEnvelope` (`toolkeeper schema envelope`)."""
    schema = ResultEnvelope.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://toolkeeper.dev/schemas/result-envelope.json"
    return schema
