"""`Harness`: owns catalog, policy, approvals, secrets, ledger, artifacts and executors, and
offers the entry points — `invoke`, `resume`, `run_tool_calls`, `reconcile` — each of which
builds a `Call` and hands it to `pipeline.run`, the one road to execution.

Constructing a harness does no I/O: the ledger and the policy are opened (and calls a dead
process left in flight are recovered) when the harness opens — explicitly with `open()`,
with `with`/`async with`, or at the first call.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ApprovalError, ToolkeeperError
from toolkeeper.executors import Executor
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    Ledger,
    RecordState,
)
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine, PolicyEngine
from toolkeeper.runtime import pipeline, stages
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.call import Call, Services, Trail
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import (
    EffectState,
    ErrorCategory,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.runtime.grants import GrantAuthority
from toolkeeper.runtime.invocation import Principal, Proposal, new_request_id
from toolkeeper.runtime.limits import DEFAULT_LIMITS, Limits
from toolkeeper.runtime.recording import base_record, envelope_for_record, recover
from toolkeeper.runtime.registry import (
    Registry,
    ResourceVersionReader,
    Verifier,
    compile_entry,
)
from toolkeeper.runtime.views import ToolViews, View, suggest
from toolkeeper.secrets.providers import SecretBroker, default_broker

HOOK_TIMEOUT = 30.0
"""Default seconds for a verifier, version reader or secret lookup of a contract without a
timeout of its own."""


class Harness:
    """The governed tool layer. Build one per process; share it between tasks.

    ``async with Harness(home=...) as harness:`` (or ``with``) opens the ledger and closes it
    after; without one, the first call opens it and `close()` closes it.
    """

    def __init__(
        self,
        *,
        home: str | Path | None = None,
        ledger: Ledger | None = None,
        policy: PolicyEngine | None = None,
        secrets: SecretBroker | None = None,
        artifacts: ArtifactStore | None = None,
        grants: GrantAuthority | None = None,
        recover: bool = True,
        hook_timeout: float = HOOK_TIMEOUT,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        """`limits` bounds every call's arguments and what its result carries inline
        (docs/limits.md); the defaults suit calls a model writes."""
        self.home = Path(home if home is not None else ".toolkeeper")
        self._given_ledger = ledger
        self._given_closed = False
        """Set when close() closed the given ledger: unlike its own, the harness cannot
        open a given one again."""
        self._policy = policy
        self.secrets = secrets or default_broker()
        self.redactor = self.secrets.redactor
        self.artifacts = artifacts or ArtifactStore(self.home / "artifacts")
        self.grants = grants or GrantAuthority()
        self.registry = Registry()
        self.hook_timeout = hook_timeout
        self.limits = limits
        self._recover = recover
        self._services: Services | None = None
        self._opening = threading.Lock()
        self._verifiers: dict[str, Verifier] = {}
        self.views = ToolViews(self.registry)
        """Per-principal views of the catalog, changed in place as tools change."""

    def __repr__(self) -> str:
        return f"Harness(home={str(self.home)!r}, tools={len(self.registry)})"

    # -- lifecycle ---------------------------------------------------------------------

    def open(self) -> Harness:
        """Open the ledger and policy and recover what a dead process left in flight.
        Idempotent; every entry point calls it, so calling it yourself is optional."""
        with self._opening:
            if self._services is None:
                if self._given_closed:
                    raise ToolkeeperError(
                        "this harness was closed, and with it the ledger it was given; it "
                        "cannot open again: build a new Harness with a new ledger"
                    )
                ledger = self._given_ledger or SQLiteLedger(self.home / "ledger.db")
                self._policy = self._policy or CedarPolicyEngine()
                self._services = Services(
                    registry=self.registry,
                    visible=self._visible,
                    suggest=suggest,
                    policy=self._policy,
                    approvals=Approvals(ledger),
                    secrets=self.secrets,
                    redactor=self.redactor,
                    ledger=ledger,
                    artifacts=self.artifacts,
                    grants=self.grants,
                    hook_timeout=self.hook_timeout,
                    limits=self.limits,
                )
                if self._recover:
                    recover(ledger)
        return self

    def _opened(self) -> Services:
        return self._services or self.open()._services  # type: ignore[return-value]

    async def _opened_async(self) -> Services:
        if self._services is not None:
            return self._services
        await anyio.to_thread.run_sync(self.open)
        assert self._services is not None
        return self._services

    @property
    def ledger(self) -> Ledger:
        return self._opened().ledger

    @property
    def policy(self) -> PolicyEngine:
        return self._opened().policy

    @policy.setter
    def policy(self, engine: PolicyEngine) -> None:
        """Swap the policy engine; calls from now on (resumes included) are judged by it."""
        with self._opening:
            self._policy = engine
            if self._services is not None:
                self._services = replace(self._services, policy=engine)

    @property
    def approvals(self) -> Approvals:
        return self._opened().approvals

    def __enter__(self) -> Harness:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Harness:
        await self._opened_async()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.close)

    def flush(self) -> None:
        """Write deferred ledger records now (reads through `ledger` already do)."""
        if self._services is not None:
            self._services.ledger.flush()

    def close(self) -> None:
        """Write what is deferred and close the ledger; the harness can be opened again."""
        with self._opening:
            services, self._services = self._services, None
            if services is not None:
                services.ledger.close()
                self._given_closed = self._given_ledger is not None

    # -- catalog -----------------------------------------------------------------------

    def register(
        self,
        tool: Callable[..., Any] | ToolContract,
        *,
        executor: Executor | Callable[..., Any] | None = None,
        verifier: Verifier | None = None,
        resource_version: ResourceVersionReader | None = None,
    ) -> ToolContract:
        """Add a tool: a function (decorated with `@tool` or not) or a contract plus its
        executor. Returns the registered contract."""
        entry = compile_entry(
            tool,
            executor=executor,
            verifier=verifier,
            resource_version=resource_version,
            verifiers=self._verifiers,
        )
        self.registry.add(entry)  # the views follow through the registry's listener
        return entry.contract

    def register_verifier(self, name: str, verifier: Verifier) -> None:
        """Make a read-back verifier available to contracts that name it."""
        self._verifiers[name] = verifier

    def visible_contracts(self, principal: Principal) -> list[ToolContract]:
        """The latest version of every tool whose required capabilities `principal` holds."""
        return list(self.views.view(principal).contracts())  # a copy: the view keeps its own

    def _visible(self, principal: Principal | None, family: str | None) -> View:
        """Name → entry for what `principal` may see: vendor names for `family`, plus ids
        and id@version refs (which pin a version)."""
        return self.views.view(principal, family)

    def lookup(self, proposal: Proposal, principal: Principal | None = None) -> ToolContract | None:
        """The contract a proposal's name resolves to (as the resolve stage would)."""
        entry = self._visible(principal, proposal.family).get(proposal.tool)
        return entry.contract if entry else None

    # -- entry points ------------------------------------------------------------------

    async def invoke(
        self,
        proposal: Proposal,
        *,
        principal: Principal,
        session: str | None = None,
        parent_request_id: str | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> ResultEnvelope:
        """Run one proposal through all ten stages and answer with an envelope."""
        services = await self._opened_async()
        request_id = new_request_id()
        call = Call(
            proposal=proposal,
            principal=principal,
            session=session,
            parent_request_id=parent_request_id,
            environment=dict(environment or {}),
            trail=Trail(request_id),
            record=base_record(proposal, principal, session, parent_request_id, request_id),
            started=time.perf_counter(),
        )
        return await pipeline.run(services, call)

    def invoke_sync(
        self,
        proposal: Proposal,
        *,
        principal: Principal,
        session: str | None = None,
        parent_request_id: str | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> ResultEnvelope:
        """`invoke` for code without an event loop."""
        _refuse_inside_loop("invoke_sync", "await harness.invoke(...)")
        return anyio.run(
            functools.partial(
                self.invoke,
                proposal,
                principal=principal,
                session=session,
                parent_request_id=parent_request_id,
                environment=environment,
            )
        )

    async def run_tool_calls(
        self,
        response: Any,
        *,
        vendor: str,
        principal: Principal,
        session: str | None = None,
    ) -> list[dict[str, Any]]:
        """Parse a vendor response, invoke every call, and return the messages to append."""
        from toolkeeper.adapters import run_tool_calls

        return await run_tool_calls(
            self, response, vendor=vendor, principal=principal, session=session
        )

    # -- approvals ---------------------------------------------------------------------

    async def resume(
        self, approval_id: str, *, principal: Principal | None = None
    ) -> ResultEnvelope:
        """Continue a call after its approval was decided. The call re-enters the pipeline
        at normalize, for `principal` as it is now (the proposer's stored identity when not
        given) and with the environment stored with the approval: contract digest, argument
        digest, resource versions, visibility and policy are all checked again, and any
        change gives `stale` or the new decision, never a silent run. Repeats answer with
        the call's outcome. `principal`, when given, must be the one that proposed the call.
        """
        services = await self._opened_async()
        approval = await stages.offload(services.approvals.get, approval_id)
        stored = approval.principal
        if principal is not None and (principal.id, principal.tenant) != (
            stored["id"],
            stored["tenant"],
        ):
            raise ApprovalError(
                f"approval {approval_id} belongs to another principal", approval_id=approval_id
            )
        record = await stages.offload(services.ledger.get, approval.request_id)
        if record is None:
            raise ApprovalError(
                f"approval {approval_id} has no invocation in this ledger", approval_id=approval_id
            )
        if approval.status is ApprovalStatus.APPROVED:
            claimed = await stages.offload(
                lambda: services.ledger.transition_approval(
                    approval_id, expected=ApprovalStatus.APPROVED, new=ApprovalStatus.CONSUMED
                )
            )
            if claimed is None:  # another resume got there first
                record = await stages.offload(services.ledger.get, approval.request_id) or record
                return _answer_of(record, replace(approval, status=ApprovalStatus.CONSUMED))
        elif not (
            approval.status is ApprovalStatus.DENIED
            and record.state is RecordState.PENDING_APPROVAL
        ):
            return _answer_of(record, approval)
        now = principal or Principal(
            id=stored["id"],
            tenant=stored["tenant"],
            capabilities=frozenset(stored["capabilities"]),
            kind=stored.get("kind", "agent"),
        )
        call = Call(
            proposal=Proposal(
                approval.call_id,
                approval.contract_ref,
                approval.arguments,
                idempotency_key=approval.idempotency_key,
            ),
            principal=now,
            session=approval.session,
            parent_request_id=approval.parent_request_id,
            environment=dict(approval.environment),
            trail=Trail(record.request_id),
            record=replace(record, state=RecordState.RECEIVED),
            started=time.perf_counter(),
            approval=approval,
            entry=self.registry.get(approval.contract_ref),
            arguments=dict(approval.arguments),
        )
        return await pipeline.run(services, call, start="normalize")

    def resume_sync(
        self, approval_id: str, *, principal: Principal | None = None
    ) -> ResultEnvelope:
        """`resume` for code without an event loop."""
        _refuse_inside_loop("resume_sync", "await harness.resume(...)")
        return anyio.run(functools.partial(self.resume, approval_id, principal=principal))

    # -- recovery ----------------------------------------------------------------------

    def recover(self) -> list[InvocationRecord]:
        """Turn calls left between intent and completion by a dead process into
        `effect_unknown` records: never lost, never silently retried."""
        return recover(self._opened().ledger)

    async def reconcile(self) -> list[InvocationRecord]:
        """Read back every call whose effect is unknown and settle what the read-back can
        tell: succeeded (committed) or failed (not committed). The rest stay unknown."""
        services = await self._opened_async()
        unknown = await stages.offload(
            lambda: services.ledger.query(effect_state=EffectState.UNKNOWN.value, limit=100_000)
        )
        settled = []
        for record in unknown:
            entry = self.registry.get(record.contract_ref or "")
            if entry is None or entry.verifier is None or record.state is RecordState.INTENT:
                continue
            context = ToolContext(
                request_id=record.request_id,
                call_id=record.call_id,
                contract_ref=entry.contract.ref,
                principal=Principal(record.principal_id, record.tenant),
                session=record.session,
                idempotency_key=record.idempotency_key,
            )
            trail = Trail(record.request_id)
            timeout = entry.contract.timeout or services.hook_timeout
            verified = await stages.read_back(
                services, entry, record.arguments or {}, context, timeout
            )
            trail.add("check", "read_back", verified=verified)
            if verified is None:
                await stages.offload(services.ledger.append, trail.drain())
                continue
            status = Status.SUCCEEDED if verified else Status.FAILED
            error = None
            if not verified:
                error = ToolError(
                    category=ErrorCategory.INTERNAL,
                    message="reconciliation: the read-back shows the effect did not happen",
                    suggested_fix="The call may be proposed again.",
                    effect_committed=False,
                )
            state = EffectState.COMMITTED if verified else EffectState.NOT_COMMITTED
            envelope = envelope_for_record(record, status, error, state)
            trail.add("reconcile", status.value, effect_state=state.value)
            done = replace(
                record,
                status=status.value,
                effect_state=state.value,
                envelope=envelope.model_dump(mode="json"),
                updated_at=time.time(),
            )
            await stages.offload(services.ledger.complete, done, trail.drain())
            settled.append(done)
        return settled

    def reconcile_sync(self) -> list[InvocationRecord]:
        _refuse_inside_loop("reconcile_sync", "await harness.reconcile()")
        return anyio.run(self.reconcile)


def _answer_of(record: InvocationRecord, approval: ApprovalRecord) -> ResultEnvelope:
    """What a resume that does not run the call answers: its recorded outcome, or the
    pending answer while the approval waits. A call another resume has taken up is no longer
    waiting, though its row still carries the pending answer until it completes."""
    if record.state is RecordState.COMPLETED or approval.status is ApprovalStatus.PENDING:
        return ResultEnvelope.model_validate(record.envelope)
    error = ToolError(
        category=ErrorCategory.EFFECT_UNKNOWN,
        message=f"approval {approval.approval_id} was already taken up; its call is still "
        f"running as {record.request_id}",
        suggested_fix="Wait and read its outcome; do not repeat the call.",
        retryable=True,
        effect_committed=None,
    )
    return ResultEnvelope(status=Status.EFFECT_UNKNOWN, error=error, summary=error.message)


def _refuse_inside_loop(name: str, instead: str) -> None:
    try:
        anyio.get_current_task()
    except RuntimeError:
        return
    raise ToolkeeperError(f"{name}() cannot run inside an event loop; use {instead}")


__all__ = ["Harness"]
