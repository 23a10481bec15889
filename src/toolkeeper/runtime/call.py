"""The values the pipeline passes from stage to stage: `Services` (what the harness lends every
stage), `Call` (one call in flight, filled in as it goes) and `Stop` (the call ends here).

A stage is ``async def stage(services, call) -> Call | Stop``: it reads what earlier stages
put on the `Call`, sets the fields it owns (marked below with the stage's name; no stage
writes another's), and appends its ledger events to the call's `Trail`. The ledger row is
built from the call whenever it is written (`stages.row`), so whatever stage ends the call,
the row holds everything found up to that point.

`Call` is deliberately a mutable record rather than a chain of frozen copies: copying a
twenty-field dataclass at every stage cost about a sixth of a governed read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.executors import ToolAnswer
from toolkeeper.ledger import ApprovalRecord, InvocationRecord, Ledger, LedgerEvent
from toolkeeper.policy import PolicyDecision, PolicyEngine
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.context import Peer
from toolkeeper.runtime.envelope import EffectState, ResultEnvelope, Status, ToolError
from toolkeeper.runtime.grants import Grant, GrantAuthority
from toolkeeper.runtime.invocation import InvocationRequest, Principal, Proposal
from toolkeeper.runtime.limits import Limits
from toolkeeper.runtime.registry import CallFacts, Registry, ToolEntry
from toolkeeper.runtime.views import View
from toolkeeper.secrets.providers import ResolvedSecrets, SecretBroker
from toolkeeper.secrets.redaction import Redactor


@dataclass(frozen=True, slots=True)
class Services:
    """The parts of a harness the stages use. Built once when the harness opens."""

    registry: Registry
    visible: Callable[[Principal, str | None], View]
    """Name → entry for what a principal may see in a model family's view."""
    suggest: Callable[[str, View], list[str]]
    """Close names for an unknown one, drawn only from the view it is given."""
    policy: PolicyEngine
    approvals: Approvals
    secrets: SecretBroker
    redactor: Redactor
    ledger: Ledger
    artifacts: ArtifactStore
    grants: GrantAuthority
    hook_timeout: float
    """Seconds a verifier, resource-version reader or secret lookup may take at most when
    its contract sets no timeout of its own."""
    derived_key_ttl: float | None
    """Seconds a derived idempotency key keeps a settled outcome; None: for good."""
    resume_wait: float
    """Seconds a resume waits for the outcome of a call another resume took up."""
    argument_threshold: int
    """Canonical-JSON bytes of recorded arguments above which the ledger row holds a
    reference to an artifact instead."""
    call_timeout: float
    """Seconds one executor attempt may take at most when its contract sets no timeout."""
    limits: Limits
    """How large arguments may be, and results inline; what is large enough to work on off
    the event loop."""


@dataclass(slots=True)
class Trail:
    """Ledger events of one request, buffered so a read-only call costs one transaction."""

    request_id: str
    events: list[LedgerEvent] = field(default_factory=list)

    def add(self, stage: str, kind: str, **data: Any) -> None:
        self.events.append(LedgerEvent(self.request_id, stage, kind, data))

    def drain(self) -> list[LedgerEvent]:
        events, self.events = self.events, []
        return events


@dataclass(frozen=True, slots=True)
class Stop:
    """The call ends here with this status and error; the stages after it do not run, and
    the record stage writes the outcome."""

    status: Status
    error: ToolError
    effect_state: EffectState = EffectState.NONE
    envelope: ResultEnvelope | None = None
    """A finished answer to give instead of building one (an idempotent replay, a pending
    approval)."""
    settled: bool = False
    """The ledger already holds the call's outcome (another resume of the same approval
    took it up): the record stage writes nothing."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt of the executor produced."""

    kind: str
    """returned, error, timed_out, cancelled or suspended (waits on an approval)."""
    output: Any = None
    error: ToolError | None = None
    effect_committed: bool | None = None
    latency_ms: float = 0.0
    answer: ToolAnswer | None = None
    """The content blocks the executor answered with besides `output`, if any."""
    approval_id: str | None = None
    """The approval a suspended executor waits on."""


@dataclass(frozen=True, slots=True)
class Checked:
    """The check stage's verdict on an outcome."""

    status: Status
    effect_state: EffectState
    output: dict[str, Any] | None = None
    error: ToolError | None = None
    answer: ToolAnswer | None = None


@dataclass(slots=True)
class Call:
    """One call in flight. Each stage fills the fields it is responsible for."""

    proposal: Proposal
    principal: Principal
    session: str | None
    parent_request_id: str | None
    environment: Mapping[str, Any]
    trail: Trail
    record: InvocationRecord
    """The row the call started as (for a resumed call, its pending row)."""
    started: float
    approval: ApprovalRecord | None = None
    """Set when the call resumes after a human decision (it then enters at normalize)."""
    peer: Peer | None = None
    """The client that made the call, governed, for the tool to reach mid-call."""
    entry: ToolEntry | None = None  # resolve
    arguments: dict[str, Any] | None = None  # validate
    argument_bytes: int = 0  # validate: their size as JSON, measured against the limits
    request: InvocationRequest | None = None  # normalize (approve adds the grant id)
    recorded_arguments: Any = None  # normalize: redacted, classified fields masked
    row_arguments: Any = None  # normalize: recorded_arguments, or their artifact reference
    facts: CallFacts | None = None  # normalize: the entry's analyzer's judgement, if any
    decision: PolicyDecision | None = None  # authorize
    grant: Grant | None = None  # approve
    secrets: ResolvedSecrets | None = None  # bind_credentials
    outcome: Outcome | None = None  # dispatch
    attempts: int = 0  # dispatch
    holds_key: bool = False  # dispatch: the intent is written (claiming any key)
    checked: Checked | None = None  # check
    envelope: ResultEnvelope | None = None  # project
    recorded: bool = False  # record: the final row is written

    @property
    def request_id(self) -> str:
        return self.trail.request_id
