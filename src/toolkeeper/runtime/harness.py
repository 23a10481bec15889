"""`Harness`: owns catalog, policy, approvals, secrets, ledger, artifacts and executors, and
runs the ten-stage pipeline. This file holds the *order* of the stages (`_run` and
`_execute`); each stage is one function in stages.py. Every entry point — `invoke`,
`resume`, the vendor adapters, the gateway, Code Mode's inner calls — comes through `_run`
or, after an approval, `_execute`: there is one road to execution.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import toolkeeper.runtime.stages as stages
from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.contract.functions import contract_of
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ApprovalError, RegistryError, ToolkeeperError
from toolkeeper.executors import Executor
from toolkeeper.executors.inprocess import FunctionExecutor
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    Ledger,
    RecordState,
)
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine, PolicyEngine
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.assess import Verdict
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import (
    EffectState,
    ErrorCategory,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.runtime.grants import Grant, GrantAuthority
from toolkeeper.runtime.invocation import (
    InvocationRequest,
    Principal,
    Proposal,
    arguments_digest,
    new_request_id,
)
from toolkeeper.runtime.recording import (
    OWNER,
    Recorder,
    Trail,
    base_record,
    envelope_for_record,
    execution_meta,
    provenance,
)
from toolkeeper.runtime.registry import Registry, ResourceVersionReader, ToolEntry, Verifier
from toolkeeper.runtime.views import ToolViews, View
from toolkeeper.secrets.providers import SecretBroker, default_broker


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Harness:
    """The governed tool layer. Build one per process; share it between tasks."""

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
    ) -> None:
        self.home = Path(home if home is not None else ".toolkeeper")
        self.ledger: Ledger = ledger or SQLiteLedger(self.home / "ledger.db")
        self.policy: PolicyEngine = policy or CedarPolicyEngine()
        self.secrets = secrets or default_broker()
        self.redactor = self.secrets.redactor
        self.artifacts = artifacts or ArtifactStore(self.home / "artifacts")
        self.grants = grants or GrantAuthority()
        self.registry = Registry()
        self.approvals = Approvals(self.ledger)
        self._recorder = Recorder(self.ledger, self.redactor, self.approvals)
        self._verifiers: dict[str, Verifier] = {}
        self.views = ToolViews(self.registry)
        """Per-principal views of the catalog, changed in place as tools change."""
        if recover:
            self.recover()

    def __repr__(self) -> str:
        return f"Harness(home={str(self.home)!r}, tools={len(self.registry)})"

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
        if isinstance(tool, ToolContract):
            contract = tool
            if executor is None:
                raise RegistryError(
                    f"{contract.ref}: a contract needs an executor; pass executor=<function "
                    "or Executor> to register()"
                )
        else:
            contract = contract_of(tool) if hasattr(tool, "__toolkeeper_contract__") else None
            contract = contract or ToolContract.from_function(tool)
            executor = executor or tool
        if not hasattr(executor, "execute"):
            executor = FunctionExecutor(executor)  # type: ignore[arg-type]
        if verifier is None and contract.verifier is not None:
            verifier = self._verifiers.get(contract.verifier)
            if verifier is None:
                raise RegistryError(
                    f"{contract.ref} names verifier {contract.verifier!r}, which is not "
                    "registered; pass verifier=... or call register_verifier() first"
                )
        entry = ToolEntry(contract, executor, verifier, resource_version)  # type: ignore[arg-type]
        self.registry.add(entry)
        self.views.added(entry)
        return contract

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
        trail = Trail(new_request_id())
        return await self._run(
            proposal, principal, session, parent_request_id, dict(environment or {}), trail
        )

    def invoke_sync(self, proposal: Proposal, **kwargs: Any) -> ResultEnvelope:
        """`invoke` for code without an event loop."""
        _refuse_inside_loop("invoke_sync", "await harness.invoke(...)")
        return asyncio.run(self.invoke(proposal, **kwargs))

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

    # -- the pipeline ------------------------------------------------------------------

    async def _run(
        self,
        proposal: Proposal,
        principal: Principal,
        session: str | None,
        parent: str | None,
        environment: dict[str, Any],
        trail: Trail,
    ) -> ResultEnvelope:
        started = time.perf_counter()
        base = base_record(proposal, principal, session, parent, trail.request_id)

        entry = stages.resolve(proposal, self._visible(principal, proposal.family))  # 1
        if isinstance(entry, stages.Stop):
            trail.add("resolve", "unknown_tool", name=proposal.tool)
            return self._recorder.finish(base, trail, entry, None, None, started)
        contract = entry.contract
        trail.add("resolve", "resolved", contract=contract.ref, digest=contract.digest())
        base = replace(base, contract_ref=contract.ref, implementation_digest=contract.digest())

        arguments = stages.validate(contract, proposal.arguments)  # 2
        if isinstance(arguments, stages.Stop):
            trail.add("validate", "invalid", errors=len(arguments.error.field_errors))
            return self._recorder.finish(base, trail, arguments, contract, None, started)
        trail.add("validate", "valid")

        request = stages.normalize(  # 3
            contract,
            arguments,
            proposal,
            request_id=trail.request_id,
            principal=principal,
            session=session,
            parent_request_id=parent,
        )
        if entry.resource_version is not None:
            versions = await self._read_versions(entry, request)
            request = replace(request, resource_versions=versions)
        trail.add("normalize", "normalized", arguments_digest=request.arguments_digest)
        base = replace(
            base,
            arguments=self.redactor.redact(arguments),
            arguments_digest=request.arguments_digest,
        )

        decision = stages.authorize(self.policy, contract, request, environment)  # 4
        trail.add("authorize", decision.decision.value, policies=list(decision.policy_ids))

        verdict = stages.approve(contract, request, decision, "none")  # 5
        if isinstance(verdict, stages.Stop):
            trail.add("approve", "rejected", category=verdict.error.category.value)
            return self._recorder.finish(base, trail, verdict, contract, request, started)
        if verdict is Verdict.REQUIRES_APPROVAL:
            return self._recorder.suspend(base, trail, contract, request, decision, started)
        trail.add("approve", "not_required")
        grant = self.grants.mint(request, conditions=[c.describe() for c in decision.conditions])
        return await self._execute(entry, request, grant, base, trail, started)

    async def _execute(
        self,
        entry: ToolEntry,
        request: InvocationRequest,
        grant: Grant | None,
        base: InvocationRecord,
        trail: Trail,
        started: float,
    ) -> ResultEnvelope:
        """Stages 6–10, shared by a fresh call and a resumed approval."""
        contract = entry.contract
        secrets = stages.bind_credentials(self.secrets, contract)  # 6
        if isinstance(secrets, stages.Stop):
            trail.add("bind_credentials", "missing")
            return self._recorder.finish(base, trail, secrets, contract, request, started)
        trail.add("bind_credentials", "bound", names=list(contract.credentials))

        refused = stages.check_grant(self.grants, grant, request)  # 7
        if refused is not None:
            trail.add("dispatch", "grant_refused", reason=refused.error.message)
            return self._recorder.finish(base, trail, refused, contract, request, started)
        if not contract.is_read_only:
            # A row holds the idempotency key only from its intent on: a pending or rejected
            # call must never occupy (or, in SQLite, REPLACE away) the key's holder.
            claimed = replace(base, idempotency_key=request.idempotency_key)
            intent = replace(claimed, state=RecordState.INTENT, owner=OWNER, updated_at=time.time())
            trail.add("dispatch", "intent", idempotency_key=request.idempotency_key)
            holder = self.ledger.record_intent(intent, trail.drain())
            if holder is not None:
                return self._recorder.replay(holder, base, trail, request, started)
            base = claimed
        context = ToolContext(
            request_id=request.request_id,
            call_id=request.call_id,
            contract_ref=contract.ref,
            principal=request.principal,
            session=request.session,
            parent_request_id=request.parent_request_id,
            idempotency_key=request.idempotency_key,
            secrets=secrets.values,
        )
        outcome, attempts = await self._dispatch(entry, request, context, base, trail)

        verified = None  # 8
        if outcome.kind == "returned" and entry.verifier is not None:
            verified = await self._verify(entry, request.arguments, context, trail)
        checked = stages.check(contract, request.call_id, outcome, verified)
        trail.add("check", checked.status.value, effect_state=checked.effect_state.value)

        summary, content, refs, error = stages.project(  # 9
            contract, checked, self.redactor, self.artifacts
        )
        trail.add("project", "projected", artifacts=len(refs))
        envelope = ResultEnvelope(
            status=checked.status,
            error=error,
            summary=summary,
            structured_content=content,
            artifact_refs=refs,
            provenance=provenance(contract, request, entry),
            execution_meta=execution_meta(base, request, attempts, started, checked.effect_state),
        )
        return self._recorder.record(base, trail, envelope, attempts)  # 10

    async def _dispatch(
        self,
        entry: ToolEntry,
        request: InvocationRequest,
        context: ToolContext,
        base: InvocationRecord,
        trail: Trail,
    ) -> tuple[stages.Outcome, int]:
        """Run the executor, retrying only what is safe to retry; every attempt recorded."""
        contract = entry.contract
        assert entry.executor is not None
        number = 0
        while True:
            number += 1
            try:
                outcome = await stages.attempt(
                    entry.executor, contract, request.arguments, replace(context, attempt=number)
                )
            except asyncio.CancelledError:
                self._recorder.cancelled(base, trail, contract, request, number)
                raise
            trail.add(
                "dispatch",
                f"attempt_{outcome.kind}",
                attempt=number,
                latency_ms=round(outcome.latency_ms, 3),
                error=outcome.error.category.value if outcome.error else None,
            )
            if not stages.may_retry(contract, outcome, number):
                return outcome, number
            await asyncio.sleep(contract.retry.delay(number))

    async def _verify(
        self, entry: ToolEntry, arguments: dict[str, Any], context: ToolContext, trail: Trail
    ) -> bool | None:
        try:
            verified = await _maybe_await(entry.verifier(arguments, context))  # type: ignore[misc]
        except Exception as exc:
            trail.add("check", "verifier_error", error=self.redactor.redact_text(repr(exc)))
            return None
        result = verified if verified in (True, False) else None
        trail.add("check", "read_back", verified=result)
        return result

    async def _read_versions(self, entry: ToolEntry, request: InvocationRequest) -> dict[str, str]:
        context = ToolContext(
            request_id=request.request_id,
            call_id=request.call_id,
            contract_ref=request.contract_ref,
            principal=request.principal,
            session=request.session,
        )
        versions = await _maybe_await(entry.resource_version(request.arguments, context))  # type: ignore[misc]
        return {str(k): str(v) for k, v in dict(versions or {}).items()}

    # -- approvals ---------------------------------------------------------------------

    async def resume(self, approval_id: str) -> ResultEnvelope:
        """Continue a call after its approval was decided, re-checking everything first:
        contract version and digest, argument digest, resource versions and policy. Any
        change gives `stale` or the new decision; never a silent run."""
        approval = self.approvals.get(approval_id)
        record = self.ledger.get(approval.request_id)
        if record is None:
            raise ApprovalError(f"approval {approval_id} has no invocation in this ledger")
        if approval.status is ApprovalStatus.PENDING:
            return ResultEnvelope.model_validate(record.envelope)
        if approval.status is ApprovalStatus.APPROVED:
            claimed = self.ledger.transition_approval(
                approval_id, expected=ApprovalStatus.APPROVED, new=ApprovalStatus.CONSUMED
            )
            if claimed is not None:
                return await self._resume_approved(approval, record)
            record = self.ledger.get(approval.request_id) or record
        if (
            record.state is RecordState.PENDING_APPROVAL
            and approval.status is ApprovalStatus.DENIED
        ):
            trail = Trail(record.request_id)
            trail.add("approve", "denied", by=approval.decided_by)
            stop = stages._reject(
                ErrorCategory.APPROVAL_DENIED,
                f"{approval.decided_by or 'an approver'} denied this call"
                + (f": {approval.decision_reason}" if approval.decision_reason else ""),
                "Do not retry; ask the user how to proceed.",
            )
            return self._recorder.finish(record, trail, stop, None, None, time.perf_counter())
        return ResultEnvelope.model_validate(record.envelope)

    async def _resume_approved(
        self, approval: ApprovalRecord, record: InvocationRecord
    ) -> ResultEnvelope:
        started = time.perf_counter()
        trail = Trail(record.request_id)
        trail.add("approve", "approved", by=approval.decided_by, approval_id=approval.approval_id)
        entry = self.registry.get(approval.contract_ref)
        principal = Principal(
            id=approval.principal["id"],
            tenant=approval.principal["tenant"],
            capabilities=frozenset(approval.principal["capabilities"]),
            kind=approval.principal.get("kind", "agent"),
        )
        stale = f"{approval.contract_ref} is no longer registered"
        request = None
        if entry is not None:
            request = stages.normalize(
                entry.contract,
                approval.arguments,
                Proposal(
                    approval.call_id, entry.contract.id, idempotency_key=approval.idempotency_key
                ),
                request_id=approval.request_id,
                principal=principal,
                session=approval.session,
                parent_request_id=approval.parent_request_id,
            )
            request = replace(request, approval_id=approval.approval_id)
            stale = await self._stale_reason(entry, approval, request)
        if stale is not None or entry is None or request is None:
            trail.add("approve", "stale", reason=stale)
            stop = stages._reject(
                ErrorCategory.STALE,
                f"the approved call is stale: {stale}",
                "Read the current state and propose the call again; it needs a new approval.",
            )
            return self._recorder.finish(record, trail, stop, None, request, started)
        contract = entry.contract
        decision = stages.authorize(self.policy, contract, request, {})
        trail.add("authorize", decision.decision.value, policies=list(decision.policy_ids))
        verdict = stages.approve(contract, request, decision, "approved")
        if isinstance(verdict, stages.Stop):
            trail.add("approve", "rejected_on_recheck")
            return self._recorder.finish(record, trail, verdict, contract, request, started)
        grant = self.grants.mint(
            request,
            approval_id=approval.approval_id,
            conditions=[c.describe() for c in decision.conditions],
        )
        base = replace(record, state=RecordState.RECEIVED)
        return await self._execute(entry, request, grant, base, trail, started)

    async def _stale_reason(
        self, entry: ToolEntry, approval: ApprovalRecord, request: InvocationRequest
    ) -> str | None:
        if entry.contract.digest() != approval.implementation_digest:
            return f"{approval.contract_ref} changed since it was approved"
        if arguments_digest(approval.arguments) != approval.arguments_digest:
            return "the stored arguments no longer match the approved digest"
        if entry.resource_version is not None:
            current = await self._read_versions(entry, request)
            if current != approval.resource_versions:
                return (
                    f"the target changed since approval (versions {approval.resource_versions}"
                    f" → {current})"
                )
        return None

    def recover(self) -> list[InvocationRecord]:
        """Turn calls left between intent and completion by a dead process into
        `effect_unknown` records: never lost, never silently retried."""
        return self._recorder.recover()

    async def reconcile(self) -> list[InvocationRecord]:
        """Read back every call whose effect is unknown and settle what the read-back can
        tell: succeeded (committed) or failed (not committed). The rest stay unknown."""
        settled = []
        for record in self.ledger.query(effect_state=EffectState.UNKNOWN.value, limit=100_000):
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
            verified = await self._verify(entry, record.arguments or {}, context, trail)
            if verified is None:
                self.ledger.append(trail.drain())
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
            self.ledger.complete(done, trail.drain())
            settled.append(done)
        return settled

    def reconcile_sync(self) -> list[InvocationRecord]:
        _refuse_inside_loop("reconcile_sync", "await harness.reconcile()")
        return asyncio.run(self.reconcile())

    def resume_sync(self, approval_id: str) -> ResultEnvelope:
        _refuse_inside_loop("resume_sync", "await harness.resume(...)")
        return asyncio.run(self.resume(approval_id))

    def flush(self) -> None:
        """Write deferred ledger records now (reads through `ledger` already do)."""
        self.ledger.flush()

    def close(self) -> None:
        self.ledger.close()


def _refuse_inside_loop(name: str, instead: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ToolkeeperError(f"{name}() cannot run inside an event loop; use {instead}")


__all__ = ["Harness"]
