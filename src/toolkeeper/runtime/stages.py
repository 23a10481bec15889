"""The ten stages of the pipeline, one function each (DESIGN.md, "The pipeline").

Each stage is ``async def stage(services, call) -> Call | Stop``: it adds its result to the
`Call` and its events to the call's trail, or ends the call with a `Stop`. The order lives in
one place, `toolkeeper.runtime.pipeline`; stages never call each other, so no caller can
reorder or skip them. The seed-001 judgement `assess_invocation` is the rule table the
approve and check stages both consult: one judge.

User hooks (verifiers, resource-version readers, secret providers) and blocking ledger and
artifact writes run off the event loop through `call_hook` and `offload`, each bounded by a
timeout that covers the whole awaited call.

Ledger faults (a lost database, a full disk; docs/ledger-faults.md) end a call with an
answer, never an exception, and what is honest depends on whether an effect ran:

- Nothing runs without its durable intent (nor waits without its approval): if the ledger
  cannot write it, the call ends `unavailable` before the executor — retryable when the
  fault is transient — and its row is queued like any other.
- Once the effect ran, its outcome is a fact the ledger may not refuse: a completion that
  cannot be written stays queued in the ledger, retried until it lands, and the model gets
  the outcome all the same, flagged `record_pending`. Withholding it, or answering
  `unavailable`, would invite a repeat of an effect that happened. Until the row lands the
  intent stands for it: a crash leaves `effect_unknown`, never a lost call, and a repeat
  with the same idempotency key waits for the queued row or finds the intent; it never
  runs twice.
- A call that changed nothing has its row queued (flagged `record_pending` while the
  database refuses writes). Only when the queue is full too is its answer withheld
  (`unavailable`), and the log keeps the row's facts.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import string
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from pydantic import ValidationError

from toolkeeper.artifacts.store import aside_value, project_result
from toolkeeper.contract.model import Classification, Idempotency, SideEffect, ToolContract
from toolkeeper.errors import LedgerError
from toolkeeper.executors import ToolAnswer, ToolFailure, ToolSuspended
from toolkeeper.executors.inprocess import call_in_thread
from toolkeeper.ledger import ApprovalStatus, InvocationRecord, RecordState
from toolkeeper.policy import Decision, PolicyDecision, PolicyRequest, decide_safely
from toolkeeper.runtime.assess import AssessedRequest, Environment, ObservedResult, Verdict
from toolkeeper.runtime.assess import assess_invocation as assess
from toolkeeper.runtime.call import Call, Checked, Outcome, Services, Stop
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import (
    ArtifactRef,
    EffectState,
    ErrorCategory,
    ExecutionMeta,
    ResultEnvelope,
    Status,
    ToolContent,
    ToolError,
)
from toolkeeper.runtime.invocation import (
    InvocationRequest,
    Principal,
    arguments_digest,
    canonical_json,
)
from toolkeeper.runtime.limits import Breach, admit, bound_error, larger_than
from toolkeeper.runtime.output import described
from toolkeeper.runtime.recording import OWNER, execution_meta, provenance
from toolkeeper.runtime.registry import CallFacts, ToolEntry
from toolkeeper.schema.document import utf8_text
from toolkeeper.secrets.providers import ResolvedSecrets
from toolkeeper.validation.repairs import pointer_parts

T = TypeVar("T")

logger = logging.getLogger(__name__)

REDACTED = "[REDACTED]"


def reject(category: ErrorCategory, message: str, fix: str | None = None) -> Stop:
    """A Stop for a call refused before anything ran."""
    error = ToolError(category=category, message=message, suggested_fix=fix, retryable=False)
    return Stop(Status.REJECTED, error)


async def offload(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking work (a ledger transaction, an artifact write) on a worker thread."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))


async def call_hook(fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
    """Call a user hook, sync or async, off the event loop; `timeout` bounds the whole call,
    including an awaitable a sync hook returns. Raises TimeoutError when it runs out."""
    with anyio.fail_after(timeout):
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        ):
            result = await fn(*args)
        else:
            # abandon_on_cancel: a thread cannot be killed; a timed-out hook runs on alone.
            result = await anyio.to_thread.run_sync(
                functools.partial(call_in_thread, fn, {}, *args), abandon_on_cancel=True
            )
        while inspect.isawaitable(result):
            result = await result
    return result


def context_of(call: Call, attempt: int = 1) -> ToolContext:
    """What an executor or hook may know about the call: ids, principal, grant, secrets."""
    request = call.request
    assert request is not None
    return ToolContext(
        request_id=request.request_id,
        call_id=request.call_id,
        contract_ref=request.contract_ref,
        principal=request.principal,
        session=request.session,
        parent_request_id=request.parent_request_id,
        idempotency_key=request.idempotency_key,
        attempt=attempt,
        secrets=call.secrets.values if call.secrets is not None else {},
        grant=call.grant,
        peer=call.peer,
        environment=call.environment,
    )


def redact_classified(
    values: dict[str, Any], contract: ToolContract, whole: Classification
) -> dict[str, Any]:
    """`values` with every field the contract classifies `secret` replaced by a marker:
    all of them when `whole` (the inputs' or outputs' level) is secret."""
    if whole is Classification.SECRET:
        return {name: REDACTED for name in values}
    pointers = [
        pointer_parts(p)
        for p, level in contract.data_classification.fields.items()
        if level is Classification.SECRET
    ]
    if not pointers:
        return values
    return _redact_at(values, pointers)


def _redact_at(value: Any, pointers: list[list[str]]) -> Any:
    if any(not parts for parts in pointers):
        return REDACTED
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            below = [parts[1:] for parts in pointers if parts[0] == key]
            out[key] = _redact_at(item, below) if below else item
        return out
    if isinstance(value, list):
        out_list = []
        for index, item in enumerate(value):
            below = [parts[1:] for parts in pointers if parts[0] == str(index)]
            out_list.append(_redact_at(item, below) if below else item)
        return out_list
    return value


# -- 1. resolve ------------------------------------------------------------------------


async def resolve(services: Services, call: Call) -> Call | Stop:
    """Model-view name → entry, among what this principal may see: a suggestion for an
    unknown name can never leak a hidden tool. A call id or name that is not valid Unicode
    (a lone surrogate, which a JSON escape can carry) is an invalid argument: the answer
    could not be sent back under it."""
    for what, text in (("call id", call.proposal.call_id), ("tool name", call.proposal.tool)):
        if isinstance(text, str) and utf8_text(text) != text:
            call.trail.add("resolve", "invalid", reason=f"the {what} is not valid Unicode")
            return reject(
                ErrorCategory.INVALID_ARGUMENT,
                f"the {what} {text!r} holds text that is not valid Unicode (a lone surrogate)",
                f"Send the call again with a {what} of valid UTF-8 text.",
            )
    visible = services.visible(call.principal, call.proposal.family)
    entry = visible.get(call.proposal.tool)
    if entry is None:
        call.trail.add("resolve", "unknown_tool", name=call.proposal.tool)
        close = services.suggest(call.proposal.tool, visible)
        fix = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else None
        return reject(
            ErrorCategory.UNKNOWN_TOOL,
            f"unknown tool {call.proposal.tool!r}",
            fix or "Call one of the tools listed in your tool definitions.",
        )
    contract = entry.contract
    digest = entry.digest
    call.trail.add("resolve", "resolved", contract=contract.ref, digest=digest)
    call.entry = entry
    return call


# -- 2. validate -----------------------------------------------------------------------


async def validate(services: Services, call: Call) -> Call | Stop:
    """Measure the arguments against the limits, then parse and check them; every violation
    reported with a path and a fix. Arguments over a limit are refused before any heavy
    work, and large ones are validated off the event loop."""
    assert call.entry is not None
    limits, raw = services.limits, call.proposal.arguments
    text = raw if isinstance(raw, str | bytes | bytearray) else ""
    # Text is parsed to be measured; large text is parsed off the loop.
    if len(text) > limits.offload_bytes:
        admitted = await offload(admit, raw, limits)
    else:
        admitted = admit(raw, limits)
    if isinstance(admitted, Breach):
        call.trail.add(
            "validate",
            "over_limit",
            limit=admitted.limit,
            allowed=admitted.allowed,
            found=admitted.found,
        )
        return Stop(Status.REJECTED, admitted.error())
    arguments, call.argument_bytes = admitted
    if call.argument_bytes > limits.offload_bytes:
        result = await offload(call.entry.validator.validate, arguments)
    else:
        result = call.entry.validator.validate(arguments)
    if result.error is not None or result.arguments is None:
        error = result.error or ToolError(
            category=ErrorCategory.INVALID_ARGUMENT, message="arguments are invalid"
        )
        call.trail.add("validate", "invalid", errors=len(error.field_errors))
        return Stop(Status.REJECTED, error)
    call.trail.add("validate", "valid")
    call.arguments = result.arguments
    return call


# -- 3. normalize ----------------------------------------------------------------------


def _expand(templates: Sequence[str], arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """Fill `{field}` templates from the arguments; a missing field stays visible as-is."""
    out = []
    for template in templates:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
        values = {f: arguments.get(f, "{" + f + "}") for f in fields}
        out.append(template.format_map(values))
    return tuple(out)


def derive_idempotency_key(
    principal: Principal, contract_ref: str, args_digest: str, session: str | None
) -> str:
    """The key of a keyed call whose caller named none: the same tenant, principal, contract
    id@version, arguments and session. Never from the model's call id, which vendors
    regenerate when a turn is retried. It keeps a settled outcome for the harness's
    `derived_key_ttl` only: the same call a day later is a new call."""
    return _key_of("derived", principal, contract_ref, args_digest, session or "")


def scope_idempotency_key(principal: Principal, contract_id: str, key: str) -> str:
    """A caller's key as the ledger holds it: scoped to tenant, principal and tool, so the
    same key from another principal (or for another tool) is another key."""
    return _key_of("caller", principal, contract_id, key)


def _key_of(kind: str, principal: Principal, *parts: str) -> str:
    # A JSON array, not a separator: tenant and principal ids come from tokens, and a
    # separator inside one must not let two scopes spell the same basis.
    basis = json.dumps([kind, principal.tenant, principal.id, *parts])
    return "idem_" + hashlib.sha256(basis.encode()).hexdigest()[:32]


def _idempotency_key(
    services: Services, call: Call, contract: ToolContract, digest: str
) -> tuple[str | None, float | None]:
    """The key the ledger holds for the call, and for how long it keeps a settled outcome:
    a caller's key (scoped) for good, a derived key for `services.derived_key_ttl`. A
    resumed call keeps the key its approval bound."""
    if call.approval is not None:
        key = call.approval.idempotency_key
        if key is None:
            return None, None
    elif contract.effective_idempotency is not Idempotency.KEYED:
        return None, None
    elif call.proposal.idempotency_key:
        supplied = call.proposal.idempotency_key
        return scope_idempotency_key(call.principal, contract.id, supplied), None
    else:
        key = None
    derived = derive_idempotency_key(call.principal, contract.ref, digest, call.session)
    if key is None or key == derived:
        return derived, services.derived_key_ttl
    return key, None


_RISK = {"none": "low", "reversible": "medium", "committing": "high"}


async def normalize(services: Services, call: Call) -> Call | Stop:
    """The request every later stage acts on: digest, idempotency key, read and write sets,
    and the current versions of the resources it would change."""
    if call.entry is None:  # only a resumed call arrives here without resolving
        assert call.approval is not None
        ref = call.approval.contract_ref
        disabled = services.registry.disabled(ref)
        reason = f"disabled: {disabled}" if disabled else "no longer registered"
        call.trail.add("normalize", "stale", reason=reason)
        return reject(
            ErrorCategory.STALE,
            f"the approved call is stale: {ref} is {reason}",
            "Read the current state and propose the call again; it needs a new approval.",
        )
    contract = call.entry.contract
    arguments = call.arguments
    assert arguments is not None
    large = call.argument_bytes > services.limits.offload_bytes
    try:
        if large:
            digest = await offload(arguments_digest, arguments)
        else:
            digest = arguments_digest(arguments)
    except UnicodeEncodeError as exc:  # a lone surrogate, which JSON escapes can carry
        call.trail.add("normalize", "invalid", reason="not UTF-8 text")
        return reject(
            ErrorCategory.INVALID_ARGUMENT,
            f"the arguments hold text that is not valid Unicode: {exc.object[exc.start]!a}",
            "Send every string as valid UTF-8 text (no unpaired surrogate escapes).",
        )
    except RecursionError:  # validation tolerates a depth JSON encoding does not
        call.trail.add("normalize", "invalid", reason="nested too deeply")
        return reject(
            ErrorCategory.INVALID_ARGUMENT,
            "the arguments are nested too deeply to record",
            "Send flatter arguments (at most a few hundred levels of nesting).",
        )
    approval = call.approval
    key, ttl = _idempotency_key(services, call, contract, digest)
    request = InvocationRequest(
        request_id=call.request_id,
        call_id=call.proposal.call_id,
        contract_ref=contract.ref,
        implementation_digest=call.entry.digest,
        arguments=arguments,
        arguments_digest=digest,
        principal=call.principal,
        session=call.session,
        parent_request_id=call.parent_request_id,
        idempotency_key=key,
        idempotency_ttl=ttl,
        read_set=_expand(contract.concurrency.read_set, arguments),
        write_set=_expand(contract.concurrency.write_set, arguments),
        approval_id=approval.approval_id if approval is not None else None,
        risk=_RISK[contract.effective_side_effect.value],
    )
    call.request = request
    if large:
        call.recorded_arguments = await offload(recorded_arguments, services, contract, arguments)
    else:
        call.recorded_arguments = recorded_arguments(services, contract, arguments)
    call.row_arguments = await _row_arguments(services, call.recorded_arguments)
    if call.entry.analyzer is not None:
        facts = _analyzed(services, call)
        if isinstance(facts, Stop):
            return facts
        call.facts = facts
        request = call.request = replace(request, risk=_RISK[facts.side_effect.value])
    if call.entry.resource_version is not None:
        versions = await _read_versions(services, call)
        if isinstance(versions, Stop):
            return versions
        call.request = replace(request, resource_versions=versions)
    if call.facts is not None and call.facts.bound:
        # Bound like resource versions: a resume re-analyzes, and any difference is stale.
        bound = {**call.request.resource_versions, **call.facts.bound}
        call.request = replace(call.request, resource_versions=bound)
    call.trail.add("normalize", "normalized", arguments_digest=digest)
    return call


def _analyzed(services: Services, call: Call) -> CallFacts | Stop:
    """The entry's analyzer's facts about this call, recorded with its summary; a refusal
    or a failing analyzer ends the call before policy (nothing unjudged runs)."""
    entry, arguments = call.entry, call.arguments
    assert entry is not None and entry.analyzer is not None and arguments is not None
    try:
        facts = entry.analyzer(arguments, call.principal)
    except Exception as exc:  # analyzer code ends only the call, refused
        reason = services.redactor.redact_text(described(exc))
        call.trail.add("normalize", "unanalyzable", reason=reason)
        return reject(
            ErrorCategory.POLICY_DENIED,
            f"{entry.contract.id} cannot judge this call: its analyzer raised {reason}",
            "Rewrite the call in a plainer form, or ask the operator.",
        )
    summary = services.redactor.redact(dict(facts.summary))
    call.trail.add(
        "normalize",
        "analyzed",
        side_effect=facts.side_effect.value,
        open_world=facts.open_world,
        account=services.redactor.redact_text(facts.account),
        summary=summary,
    )
    if facts.refusal is not None:
        call.trail.add("normalize", "refused", reason=services.redactor.redact_text(facts.refusal))
        return reject(
            ErrorCategory.POLICY_DENIED,
            f"{entry.contract.id} refuses this call: {facts.refusal}",
            "Rewrite the call without the construct named, or ask the operator.",
        )
    return facts


async def _row_arguments(services: Services, recorded: Any) -> Any:
    """The arguments as the ledger row holds them: inline, or — over the threshold — stored
    as an artifact like a large result, the row keeping its reference and digest, so one
    large call never makes a multi-megabyte row (nor one in every export)."""
    text = canonical_json(recorded)
    # For ASCII text (nearly always) the length is the byte count; encode only otherwise.
    blob = None if text.isascii() else text.encode()
    if (len(text) if blob is None else len(blob)) <= services.argument_threshold:
        return recorded
    ref = await offload(
        functools.partial(
            services.artifacts.put, blob or text.encode(), description="recorded call arguments"
        )
    )
    return aside_value(ref)


def recorded_arguments(
    services: Services, contract: ToolContract, arguments: dict[str, Any]
) -> Any:
    """The arguments as the ledger row and an approval keep them: secret-classified fields
    masked, known secret values redacted."""
    inputs = contract.data_classification.inputs
    return services.redactor.redact(redact_classified(arguments, contract, inputs))


async def _read_versions(services: Services, call: Call) -> dict[str, str] | Stop:
    entry, request = call.entry, call.request
    assert entry is not None and entry.resource_version is not None and request is not None
    timeout = entry.contract.timeout or services.hook_timeout
    try:
        versions = await call_hook(
            entry.resource_version, request.arguments, context_of(call), timeout=timeout
        )
        return {str(k): str(v) for k, v in dict(versions or {}).items()}
    except TimeoutError:
        reason = f"the resource-version reader did not answer within {timeout} s"
    except (Exception, SystemExit, GeneratorExit) as exc:  # hook code ends only the call
        reason = f"the resource-version reader raised {described(exc)}"
    call.trail.add("normalize", "versions_unreadable", reason=services.redactor.redact_text(reason))
    error = ToolError(
        category=ErrorCategory.UNAVAILABLE,
        retryable=True,
        message=f"{entry.contract.id} cannot run: {reason}",
        suggested_fix="Try again later; nothing was changed.",
        effect_committed=False,
    )
    return Stop(Status.FAILED, error)


# -- 4. authorize ----------------------------------------------------------------------


async def authorize(services: Services, call: Call) -> Call | Stop:
    """Ask policy about this principal, action, resource and environment."""
    assert call.entry is not None and call.request is not None
    request, contract, facts = call.request, call.entry.contract, call.facts
    if facts is not None:
        # The call's own effect class, not the contract's worst case, is what policy judges.
        contract = contract.model_copy(
            update={"side_effect": facts.side_effect, "open_world": facts.open_world}
        )
    policy_request = PolicyRequest(
        principal=call.principal,
        contract=contract,
        arguments=request.arguments,
        environment=call.environment,
        resource=request.write_set[0] if request.write_set else None,
    )
    decision = decide_safely(services.policy, policy_request)
    if facts is not None and facts.decision is not None:
        decision = stricter(decision, decide_safely(_Answer(facts.decision), policy_request))
    call.trail.add("authorize", decision.decision.value, policies=list(decision.policy_ids))
    call.decision = decision
    return call


_STRICTNESS = (
    Decision.ALLOW,
    Decision.ALLOW_WITH_CONDITIONS,
    Decision.REQUIRE_APPROVAL,
    Decision.DENY,
)


def stricter(first: PolicyDecision, second: PolicyDecision) -> PolicyDecision:
    """The stricter of two decisions (deny, then approval, then conditions, then allow);
    two equally strict ones stand together, their policies, reasons and conditions
    merged."""
    rank = _STRICTNESS.index
    if rank(first.decision) != rank(second.decision):
        return max(first, second, key=lambda d: rank(d.decision))
    return PolicyDecision(
        first.decision,
        tuple(dict.fromkeys((*first.policy_ids, *second.policy_ids))),
        tuple(dict.fromkeys((*first.reasons, *second.reasons))),
        tuple(dict.fromkeys((*first.conditions, *second.conditions))),
    )


@dataclass(frozen=True, slots=True)
class _Answer:
    """A decision already made, as an engine: `decide_safely` checks it is well formed."""

    decision: PolicyDecision

    def decide(self, request: PolicyRequest) -> PolicyDecision:
        return self.decision


# -- 5. approve ------------------------------------------------------------------------


async def approve(services: Services, call: Call) -> Call | Stop:
    """Turn the decision and the approval state into a verdict and, when the call may run,
    a grant. `require_approval` persists a pending approval; a resumed call is first
    re-checked against everything its approval was bound to."""
    entry, request, decision = call.entry, call.request, call.decision
    assert entry is not None and request is not None and decision is not None
    contract = entry.contract
    approval = call.approval
    state = "none"
    if approval is not None:
        if approval.status is ApprovalStatus.DENIED:
            call.trail.add("approve", "denied", by=approval.decided_by)
            return reject(
                ErrorCategory.APPROVAL_DENIED,
                f"{approval.decided_by or 'an approver'} denied this call"
                + (f": {approval.decision_reason}" if approval.decision_reason else ""),
                "Do not retry; ask the user how to proceed.",
            )
        if services.visible(call.principal, None).get(contract.ref) is not entry:
            # Judged for the principal as it is now: a capability revoked since the proposal
            # ends the approval, whoever approved it.
            call.trail.add("approve", "not_visible", principal=call.principal.id)
            return reject(
                ErrorCategory.POLICY_DENIED,
                f"{contract.ref} is no longer available to {call.principal.id}: it was "
                "approved, but the principal no longer holds the capabilities it requires",
                "Do not retry; ask an administrator to restore the access, then propose the "
                "call again.",
            )
        stale = _stale_reason(services, call)
        if stale is not None:
            call.trail.add("approve", "stale", reason=stale)
            return reject(
                ErrorCategory.STALE,
                f"the approved call is stale: {stale}",
                "Read the current state and propose the call again; it needs a new approval.",
            )
        state = "approved"
    unmet = [c for c in decision.conditions if not c.holds(request.arguments)]
    environment = Environment(
        policy=decision.decision.value,
        conditions_met=not unmet,
        approval=state,  # type: ignore[arg-type]
    )
    verdict = assess(contract, AssessedRequest(request.call_id, contract.id), environment).verdict
    if verdict is Verdict.REQUIRES_APPROVAL:
        if request.idempotency_key is not None:
            # A call that would only replay an earlier outcome runs nothing: no human is
            # asked to approve it.
            try:
                holder = await offload(
                    functools.partial(
                        services.ledger.key_holder,
                        request.idempotency_key,
                        key_ttl=request.idempotency_ttl,
                    )
                )
            except LedgerError as exc:
                return _unrecorded(services, call, "approve", exc, "the key's holder")
            if holder is not None:
                return _replay(call, holder, "approve")
        return await _suspend(services, call)
    if verdict is not Verdict.ALLOWED:
        call.trail.add("approve", "rejected" if approval is None else "rejected_on_recheck")
        return _refusal(contract, decision, unmet)
    grant = services.grants.mint(
        request,
        approval_id=request.approval_id,
        conditions=[c.describe() for c in decision.conditions],
        valid_for=_retry_budget(contract, call_timeout(services, contract)),
    )
    if approval is None:
        call.trail.add("approve", "not_required", grant_id=grant.grant_id)
    else:
        call.trail.add(
            "approve",
            "approved",
            by=approval.decided_by,
            approval_id=approval.approval_id,
            grant_id=grant.grant_id,
        )
    call.grant = grant
    call.request = replace(request, grant_id=grant.grant_id)
    return call


def _retry_budget(contract: ToolContract, timeout: float) -> float:
    """Seconds every attempt (`timeout` each) and pause of the call may take: its grant must
    outlive them, since an out-of-process executor checks it again on each attempt."""
    attempts = contract.retry.max_attempts
    pauses = sum(contract.retry.delay(n) for n in range(1, attempts))
    return timeout * attempts + pauses


def call_timeout(services: Services, contract: ToolContract) -> float:
    """Seconds one attempt of `contract` may take: its own timeout, else the harness's
    default, so no executor call is ever unbounded."""
    return contract.timeout or services.call_timeout


def _stale_reason(services: Services, call: Call) -> str | None:
    entry, request, approval = call.entry, call.request, call.approval
    assert entry is not None and request is not None and approval is not None
    if entry.digest != approval.implementation_digest:
        return f"{approval.contract_ref} changed since it was approved"
    if request.arguments_digest != approval.arguments_digest:
        if services.redactor.placeholder in canonical_json(approval.arguments):
            # Approvals are stored redacted: a secret value in the arguments is gone.
            return (
                "its arguments held a secret value, which an approval never stores, so it "
                "cannot run from the approval; pass secrets as contract credentials, not "
                "arguments"
            )
        return "the stored arguments no longer match the approved digest"
    bound = entry.resource_version is not None or entry.analyzer is not None
    if bound and request.resource_versions != dict(approval.resource_versions):
        return (
            f"the target changed since approval (versions {approval.resource_versions}"
            f" → {request.resource_versions})"
        )
    return None


def _refusal(contract: ToolContract, decision: Any, unmet: list[Any]) -> Stop:
    policies = ", ".join(decision.policy_ids) or "default deny"
    if unmet and decision.decision is Decision.ALLOW_WITH_CONDITIONS:
        needed = "; ".join(c.describe() for c in unmet)
        return reject(
            ErrorCategory.POLICY_DENIED,
            f"the call is allowed only when {needed} (policy {policies})",
            f"Call again with arguments that satisfy: {needed}.",
        )
    reasons = "; ".join(decision.reasons)
    return reject(
        ErrorCategory.POLICY_DENIED,
        f"policy denied {contract.id} (policy {policies})" + (f": {reasons}" if reasons else ""),
        "Do not retry this call; ask the user for a permitted way to proceed.",
    )


def approval_account(call: Call) -> str:
    """What an approver reads: the exact action, its target and why approval is needed."""
    entry, request, decision = call.entry, call.request, call.decision
    assert entry is not None and request is not None and decision is not None
    contract = entry.contract
    if call.facts is not None:
        return (
            f"{request.principal.id} (tenant {request.principal.tenant}) asks to run "
            f"{contract.ref}: {call.facts.account} [{call.facts.side_effect.value}, open world: "
            f"{str(call.facts.open_world).lower()}]. Approval is required by "
            f"{', '.join(decision.policy_ids) or 'policy'}."
        )
    target = ", ".join(request.write_set) or "(no declared target)"
    effect = contract.effective_side_effect.value
    return (
        f"{request.principal.id} (tenant {request.principal.tenant}) asks to run "
        f"{contract.ref} [{effect}, idempotency {contract.effective_idempotency.value}, "
        f"open world: {str(contract.open_world).lower()}] on {target} with arguments "
        f"{call.recorded_arguments}. Approval is required by "
        f"{', '.join(decision.policy_ids) or 'policy'}."
    )


async def _suspend(services: Services, call: Call) -> Stop:
    """Persist a pending approval, bound to the request and its environment."""
    entry, request, decision = call.entry, call.request, call.decision
    assert entry is not None and request is not None and decision is not None
    try:
        approval = await offload(
            functools.partial(
                services.approvals.create,
                request=request,
                account=services.redactor.redact_text(approval_account(call)),
                policy_ids=decision.policy_ids,
                # As the ledger row holds them: secret-classified fields masked, known
                # secrets redacted. The approval lives in the ledger too.
                arguments=call.recorded_arguments,
                environment=dict(call.environment),
            )
        )
    except LedgerError as exc:
        return _unrecorded(services, call, "approve", exc, "the approval request")
    call.trail.add("approve", "pending", approval_id=approval.approval_id)
    error = ToolError(
        category=ErrorCategory.APPROVAL_REQUIRED,
        message=f"{entry.contract.id} needs a human approval before it runs",
        suggested_fix=(
            f"Wait for approval {approval.approval_id}; do not call the tool again meanwhile."
        ),
        effect_committed=False,
    )
    pending = replace(request, approval_id=approval.approval_id)
    envelope = ResultEnvelope(
        status=Status.PENDING_APPROVAL,
        error=error,
        summary=approval.account,
        provenance=provenance(entry.contract, pending, None),
        execution_meta=execution_meta(call.record, pending, 0, call.started, EffectState.NONE),
    )
    return Stop(Status.PENDING_APPROVAL, error, envelope=envelope)


# -- 6. bind credentials ---------------------------------------------------------------

_NO_SECRETS = ResolvedSecrets({}, ())


async def bind_credentials(services: Services, call: Call) -> Call | Stop:
    """Resolve the contract's credentials by reference into the executor's context only."""
    assert call.entry is not None
    contract = call.entry.contract
    if not contract.credentials:
        call.trail.add("bind_credentials", "bound", names=[])
        call.secrets = _NO_SECRETS
        return call
    try:
        resolved = await call_hook(
            services.secrets.resolve, contract.credentials, timeout=services.hook_timeout
        )
    except TimeoutError:
        names = ", ".join(contract.credentials)
        call.trail.add("bind_credentials", "timed_out", names=list(contract.credentials))
        error = ToolError(
            category=ErrorCategory.UNAVAILABLE,
            retryable=True,
            message=f"{contract.id} cannot run: looking up credential(s) {names} did not "
            f"finish within {services.hook_timeout} s",
            suggested_fix="Try again later; nothing was changed.",
            effect_committed=False,
        )
        return Stop(Status.FAILED, error)
    except (Exception, SystemExit) as exc:  # the broker keeps provider errors; not these
        reason = services.redactor.redact_text(described(exc))
        call.trail.add("bind_credentials", "failed", reason=reason)
        error = ToolError(
            category=ErrorCategory.UNAVAILABLE,
            message=f"{contract.id} cannot run: looking up its credentials raised {reason}",
            suggested_fix="Tell the operator; nothing was changed.",
            effect_committed=False,
        )
        return Stop(Status.FAILED, error)
    if resolved.missing:
        names = ", ".join(resolved.missing)
        call.trail.add("bind_credentials", "missing", names=list(resolved.missing))
        error = ToolError(
            category=ErrorCategory.UNAVAILABLE,
            message=f"{contract.id} cannot run: credential(s) {names} are not configured",
            suggested_fix="Tell the operator; retrying will not help until it is configured.",
        )
        return Stop(Status.FAILED, error)
    call.trail.add("bind_credentials", "bound", names=list(contract.credentials))
    call.secrets = resolved
    return call


# -- 7. dispatch -----------------------------------------------------------------------


async def dispatch(services: Services, call: Call) -> Call | Stop:
    """The executor's gate (no valid grant, no run), the intent written durably before any
    effect, then the executor under its timeout, retried only where that is safe."""
    entry, request = call.entry, call.request
    assert entry is not None and request is not None
    contract = entry.contract
    refusal = services.grants.check(call.grant, request)
    if refusal is not None:
        call.trail.add("dispatch", "grant_refused", reason=refusal)
        return reject(
            ErrorCategory.POLICY_DENIED,
            f"the executor refused to run: {refusal}",
            "Do not retry; this call is not authorized as proposed.",
        )
    if not contract.is_read_only:
        # A row holds the idempotency key only from its intent on: a pending or rejected
        # call must never occupy (or, in SQLite, REPLACE away) the key's holder.
        call.trail.add("dispatch", "intent", idempotency_key=request.idempotency_key)
        intent = row(call, RecordState.INTENT, idempotency_key=request.idempotency_key, owner=OWNER)
        # A resumed call takes its approval up in the intent's own transaction: a crash
        # cannot consume the approval and lose the call, and of concurrent resumes only one
        # writes the intent; the others answer with its outcome.
        events = call.trail.drain()
        try:
            holder = await offload(
                functools.partial(
                    services.ledger.record_intent,
                    intent,
                    events,
                    approval_id=request.approval_id,
                    key_ttl=request.idempotency_ttl,
                )
            )
        except LedgerError as exc:
            # No durable intent, no effect. The final row carries the trail instead.
            call.trail.events[:0] = events
            return _unrecorded(services, call, "dispatch", exc, "the call's intent")
        if holder is not None and holder.request_id == request.request_id:
            return _settled(await awaited_outcome(services, holder))
        if holder is not None:
            return _replay(call, holder, "dispatch")
        call.holds_key = True
    number = 0
    while True:
        number += 1
        call.attempts = number  # a cancellation from here on knows how far it got
        outcome = await attempt(
            entry,
            request.arguments,
            context_of(call, number),
            call_timeout(services, contract),
            writes=not reads_only(call),
        )
        call.trail.add(
            "dispatch",
            f"attempt_{outcome.kind}",
            attempt=number,
            latency_ms=round(outcome.latency_ms, 3),
            error=outcome.error.category.value if outcome.error else None,
        )
        if not may_retry(contract, outcome, number):
            call.outcome, call.attempts = outcome, number
            if outcome.approval_id is not None:
                call.request = replace(request, approval_id=outcome.approval_id)
            return call
        await anyio.sleep(contract.retry.delay(number))


def reads_only(call: Call) -> bool:
    """Whether this call changes nothing: its contract says so, or — for a tool whose effect
    depends on its arguments (the shell) — the analyzer judged this call read-only. The
    contract's worst case still decides durability (intents, keys); this decides the effect
    the call records."""
    assert call.entry is not None
    facts = call.facts
    read_only = facts is not None and facts.side_effect is SideEffect.NONE
    return call.entry.contract.is_read_only or read_only


async def attempt(
    entry: ToolEntry,
    arguments: dict[str, Any],
    context: ToolContext,
    timeout: float,
    *,
    writes: bool | None = None,
) -> Outcome:
    """One run of the executor; `timeout` covers the whole awaited call. `writes`: whether
    this call may change anything (default: the contract's word)."""
    contract = entry.contract
    assert entry.executor is not None
    if writes is None:
        writes = not contract.is_read_only
    unknown = None if writes else False
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    try:
        with anyio.fail_after(timeout):
            output = await entry.executor.execute(arguments, context)
            while inspect.isawaitable(output):  # an async __call__ run as a plain function
                output = await output
    except TimeoutError:
        error = ToolError(
            category=ErrorCategory.TIMEOUT,
            retryable=True,
            message=f"{contract.id} did not finish within {timeout:g} s",
            effect_committed=unknown,
        )
        return Outcome("timed_out", error=error, effect_committed=unknown, latency_ms=elapsed())
    except ToolSuspended as pause:
        # The executor's work waits on a human decision about a call it made; what it did
        # so far stands (its own inner calls are recorded), and the call ends pending.
        error = ToolError(
            category=ErrorCategory.APPROVAL_REQUIRED,
            message=pause.message,
            suggested_fix=f"Wait for approval {pause.approval_id}; do not call again meanwhile.",
            effect_committed=pause.effect_committed if writes else False,
        )
        return Outcome(
            "suspended",
            output=pause.answer.value,
            error=error,
            effect_committed=error.effect_committed,
            latency_ms=elapsed(),
            answer=pause.answer,
            approval_id=pause.approval_id,
        )
    except ToolFailure as failure:
        try:
            error = ToolError(
                category=failure.category,
                retryable=failure.retryable,
                message=failure.message,
                field_errors=failure.field_errors,
                suggested_fix=failure.suggested_fix,
                effect_committed=failure.effect_committed if writes else False,
            )
        except ValidationError:  # tool code filled its failure with values of other types
            error = ToolError(
                category=ErrorCategory.INTERNAL,
                message=f"{contract.id} raised a malformed ToolFailure: {described(failure)}",
                effect_committed=unknown,
            )
        committed = error.effect_committed
        answer = failure.answer
        return Outcome(
            "error",
            output=answer.value if answer is not None and answer.structured else None,
            error=error,
            effect_committed=committed,
            latency_ms=elapsed(),
            answer=answer,
        )
    except (Exception, SystemExit, GeneratorExit) as exc:
        # SystemExit and GeneratorExit raised by tool code end the tool, not the caller.
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message=f"{contract.id} raised {described(exc)}",
            effect_committed=unknown,
        )
        return Outcome("error", error=error, effect_committed=unknown, latency_ms=elapsed())
    if isinstance(output, ToolAnswer):
        return Outcome(
            "returned",
            output=output.value,
            effect_committed=output.effect_committed if writes else False,
            latency_ms=elapsed(),
            # An answer with neither blocks nor structured content is a plain value that
            # reports its effect (run_code): nothing of it passes through as content.
            answer=output if output.blocks or output.structured or output.is_error else None,
        )
    return Outcome("returned", output=output, effect_committed=writes, latency_ms=elapsed())


def may_retry(contract: ToolContract, outcome: Outcome, attempt_number: int) -> bool:
    """Retry only a retryable error, and only when no effect happened or a repeat is safe."""
    error = outcome.error
    if error is None or not error.retryable or attempt_number >= contract.retry.max_attempts:
        return False
    if error.category not in contract.retry.retryable_categories:
        return False
    return outcome.effect_committed is False or contract.is_idempotent


def _unrecorded(services: Services, call: Call, stage: str, exc: LedgerError, what: str) -> Stop:
    """The call ends unrun because the ledger could not durably record `what`. The model
    is told that, not the database's words (paths, hosts); the log and the row keep them."""
    reason = services.redactor.redact_text(str(exc))
    logger.warning(
        "%s did not run: the ledger could not record %s: %s", call.request_id, what, reason
    )
    call.trail.add(stage, "unrecorded", reason=reason)
    error = ToolError(
        category=ErrorCategory.UNAVAILABLE,
        retryable=exc.transient,
        message=f"the ledger could not record {what}, so nothing ran",
        suggested_fix="Try again later; nothing was changed."
        if exc.transient
        else "Tell the operator; nothing was changed.",
        effect_committed=False,
    )
    return Stop(Status.FAILED, error)


def _replay(call: Call, holder: InvocationRecord, stage: str) -> Stop:
    """Same idempotency key: answer with the holder's outcome and run nothing."""
    request = call.request
    assert request is not None
    call.trail.add(stage, "idempotent_replay", of=holder.request_id)
    if holder.envelope is not None and holder.state is RecordState.COMPLETED:
        original = ResultEnvelope.model_validate(holder.envelope)
    else:
        error = ToolError(
            category=ErrorCategory.EFFECT_UNKNOWN,
            message=f"the same call is still in progress as {holder.request_id}",
            suggested_fix="Wait and read its outcome; do not repeat the call.",
            retryable=True,
            effect_committed=None,
        )
        original = ResultEnvelope(status=Status.EFFECT_UNKNOWN, error=error)
    old = original.execution_meta
    meta = ExecutionMeta(
        request_id=request.request_id,
        call_id=request.call_id,
        attempt=0,
        latency_ms=(time.perf_counter() - call.started) * 1000,
        effect_state=old.effect_state if old else EffectState.UNKNOWN,
        idempotency_key=request.idempotency_key,
        replay_of=holder.request_id,
    )
    envelope = original.model_copy(update={"execution_meta": meta})
    error = envelope.error or ToolError(category=ErrorCategory.INTERNAL, message="replayed")
    return Stop(envelope.status, error, envelope=envelope)


RESUME_POLL_FIRST = 0.01
RESUME_POLL_MAX = 0.5
"""Seconds between reads of a call another resume runs: doubling from the first to the max."""


async def awaited_outcome(services: Services, taker: InvocationRecord) -> ResultEnvelope:
    """The outcome of a call another resume took up (`taker` is its row as last read),
    read from the ledger — so a resume in another replica finds it too — once it completes,
    within `services.resume_wait` seconds. A call still running then is answered as such:
    retryable, its effect unknown to this caller, never `pending_approval`."""
    deadline = anyio.current_time() + services.resume_wait
    pause = RESUME_POLL_FIRST
    current: InvocationRecord | None = taker
    while current is None or current.state is not RecordState.COMPLETED:
        left = deadline - anyio.current_time()
        if left <= 0:
            break
        await anyio.sleep(min(pause, left))
        pause = min(pause * 2, RESUME_POLL_MAX)
        current = await offload(services.ledger.get, taker.request_id)
    if current is not None and current.state is RecordState.COMPLETED and current.envelope:
        return ResultEnvelope.model_validate(current.envelope)
    error = ToolError(
        category=ErrorCategory.EFFECT_UNKNOWN,
        message=f"approval {taker.approval_id} was already taken up; its call is still "
        f"running as {taker.request_id}",
        suggested_fix="Resume again later to read its outcome; do not propose the call again.",
        retryable=True,
        effect_committed=None,
    )
    meta = ExecutionMeta(
        request_id=taker.request_id,
        call_id=taker.call_id,
        effect_state=EffectState.UNKNOWN,
        approval_id=taker.approval_id,
        idempotency_key=taker.idempotency_key,
    )
    return ResultEnvelope(
        status=Status.EFFECT_UNKNOWN, error=error, summary=error.message, execution_meta=meta
    )


def _settled(envelope: ResultEnvelope) -> Stop:
    """A Stop answering with an outcome the ledger already holds."""
    error = envelope.error or ToolError(category=ErrorCategory.INTERNAL, message="settled")
    return Stop(envelope.status, error, envelope=envelope, settled=True)


def fault(services: Services, call: Call, stage: str, exc: Exception) -> Stop:
    """The end of a call whose `stage` raised — a defect of toolkeeper's or of a hook it
    calls, never an answer a stage chose. The call still ends with a record and a
    categorized error: a write whose intent is written may have taken effect, so its effect
    is unknown (and reconciliation may settle it); anything earlier ran nothing."""
    if isinstance(exc, LedgerError):
        return _unrecorded(services, call, stage, exc, f"the {stage} stage's work")
    logger.error(
        "%s: the %s stage failed: %s",
        call.request_id,
        stage,
        services.redactor.redact_text(described(exc)),
        exc_info=exc,
    )
    call.trail.add(stage, "fault", error=type(exc).__name__)
    writes = call.entry is not None and not call.entry.contract.is_read_only
    if call.holds_key and writes:
        error = ToolError(
            category=ErrorCategory.EFFECT_UNKNOWN,
            retryable=False,
            message=f"toolkeeper failed in its {stage} stage after the call was dispatched; "
            "whether its effect happened is unknown",
            suggested_fix="Do not repeat the call: check its target, or ask an operator to "
            "reconcile it (toolkeeper ledger reconcile).",
            effect_committed=None,
        )
        return Stop(Status.EFFECT_UNKNOWN, error, EffectState.UNKNOWN)
    error = ToolError(
        category=ErrorCategory.INTERNAL,
        message=f"toolkeeper failed in its {stage} stage; nothing ran",
        suggested_fix="Tell the operator; the gateway's log has the details.",
        effect_committed=False,
    )
    return Stop(Status.FAILED, error)


def record_cancelled(services: Services, call: Call, stage: str) -> None:
    """Write the row of a call whose caller was cancelled in `stage`, at once
    (synchronously: the task is unwinding). Its effect is unknown once a write was
    dispatched, and none before; a call already recorded is left as written."""
    if call.recorded:
        return
    entry, request = call.entry, call.request
    name = entry.contract.id if entry is not None else call.proposal.tool
    dispatched = call.attempts > 0 and entry is not None and not entry.contract.is_read_only
    state = EffectState.UNKNOWN if dispatched else EffectState.NONE
    error = ToolError(
        category=ErrorCategory.CANCELLED,
        message=f"{name} was cancelled during {stage}",
        effect_committed=None if dispatched else False,
    )
    if entry is not None:
        error = unrepeatable(entry.contract, error)
    envelope = ResultEnvelope(
        status=Status.CANCELLED,
        error=error,
        summary=error.message,
        provenance=provenance(entry.contract, request, None) if entry and request else None,
        execution_meta=execution_meta(call.record, request, call.attempts, call.started, state),
    )
    call.trail.add(stage, "cancelled", attempt=call.attempts)
    if call.approval is not None and not call.holds_key:
        # A resumed call cancelled before its intent changed nothing: it stays waiting for a
        # resume, and its approval with it (or another resume holds it).
        events = call.trail.drain()
        if events:
            services.ledger.append(events)
        call.recorded = True
        return
    _write(services, call, envelope, call.attempts, defer=False)


# -- 8. check --------------------------------------------------------------------------


async def check(services: Services, call: Call) -> Call | Stop:
    """Output schema, then read-back. A contract with a verifier is never `succeeded`
    until the read-back confirms (seed 001: no completion before verification)."""
    entry, outcome = call.entry, call.outcome
    assert entry is not None and outcome is not None and call.request is not None
    verified = None
    if outcome.kind == "returned" and entry.verifier is not None:
        verified = await _verify(services, call)
    # Serializing and checking a large output is CPU work: off the loop.
    if larger_than(outcome.output, services.limits.offload_bytes):
        checked = await offload(
            functools.partial(judge, read_only=reads_only(call)),
            entry,
            call.request.call_id,
            outcome,
            verified,
        )
    else:
        checked = judge(entry, call.request.call_id, outcome, verified, read_only=reads_only(call))
    if outcome.answer is not None:
        # The blocks travel on whatever the verdict; a failure's structured content (a tool
        # error the tool described) is projected like a success's.
        output = checked.output
        if output is None and isinstance(outcome.output, dict):
            output = outcome.output
        checked = replace(checked, answer=outcome.answer, output=output)
    call.trail.add("check", checked.status.value, effect_state=checked.effect_state.value)
    call.checked = checked
    return call


async def _verify(services: Services, call: Call) -> bool | None:
    entry, request = call.entry, call.request
    assert entry is not None and entry.verifier is not None and request is not None
    timeout = entry.contract.timeout or services.hook_timeout
    verified = await read_back(services, entry, request.arguments, context_of(call), timeout)
    call.trail.add("check", "read_back", verified=verified)
    return verified


async def read_back(
    services: Services,
    entry: ToolEntry,
    arguments: dict[str, Any],
    context: ToolContext,
    timeout: float,
) -> bool | None:
    """The verifier's answer: True confirmed, False absent, None when it cannot tell
    (it raised, timed out or answered something else)."""
    assert entry.verifier is not None
    try:
        verified = await call_hook(entry.verifier, arguments, context, timeout=timeout)
        # Compared inside the guard: the answer is the hook's object, its __eq__ its code.
        return verified if verified in (True, False) else None
    except (Exception, SystemExit, GeneratorExit):  # hook code ends only the read-back
        return None


def _effect_state(read_only: bool, committed: bool | None) -> EffectState:
    if read_only:
        return EffectState.NONE
    return {
        True: EffectState.COMMITTED,
        False: EffectState.NOT_COMMITTED,
        None: EffectState.UNKNOWN,
    }[committed]


UNKNOWN_EFFECT_FIX = (
    "Do not repeat this call: it may already have taken effect, and it is not idempotent, so a "
    "repeat could apply it twice. First check the target's current state (or ask the operator "
    "to reconcile the call), then decide."
)


def unrepeatable(contract: ToolContract, error: ToolError) -> ToolError:
    """`error` as the model may act on it: a failure whose effect is unknown on a write a
    repeat could duplicate is never retryable (seed 000 §3), whatever the executor said —
    a timeout, a connection lost after sending, a cancellation mid-flight. An idempotent or
    keyed call keeps its flag: repeating it is safe."""
    if error.effect_committed is not None or contract.is_read_only or contract.is_idempotent:
        return error
    if not error.retryable and error.suggested_fix:
        return error  # already says not to repeat, in the executor's own words
    return error.model_copy(update={"retryable": False, "suggested_fix": UNKNOWN_EFFECT_FIX})


def judge(
    entry: ToolEntry,
    call_id: str,
    outcome: Outcome,
    verified: bool | None,
    *,
    read_only: bool | None = None,
) -> Checked:
    """The check stage's rules over an outcome and a read-back, without I/O. `read_only`:
    this call changes nothing (default: the contract's word; see `reads_only`)."""
    contract = entry.contract
    state = _effect_state(
        contract.is_read_only if read_only is None else read_only, outcome.effect_committed
    )
    if outcome.kind != "returned":
        assert outcome.error is not None
        status = {
            "timed_out": Status.TIMED_OUT,
            "cancelled": Status.CANCELLED,
            "suspended": Status.PENDING_APPROVAL,
        }.get(outcome.kind)
        if status is None:
            unknown = state is EffectState.UNKNOWN
            status = Status.EFFECT_UNKNOWN if unknown else Status.FAILED
        return Checked(status, state, error=unrepeatable(contract, outcome.error))
    output, problems = entry.check_output(outcome.output)
    if problems:
        # The executor returned, so a write's effect happened: the call settles as failed
        # with its effect recorded, and a keyed repeat replays this answer.
        committed = state is EffectState.COMMITTED
        what = (
            "a value with no JSON form"
            if output is None
            else "output that does not match its output schema"
        )
        effect = "; its effect did happen" if committed else ""
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message=f"{contract.id} returned {what}{effect}",
            field_errors=problems,
            suggested_fix=(
                "Do not repeat the call: its effect is in place; read the current state instead."
                if committed
                else "Tell the tool's maintainer; repeating the call will not help."
            ),
            effect_committed=None if state is EffectState.UNKNOWN else committed,
        )
        return Checked(Status.FAILED, state, output=output, error=error)
    observed = ObservedResult(call_id, "returned", outcome.effect_committed, verified)
    verdict = assess(contract, AssessedRequest(call_id, contract.id), Environment(result=observed))
    if verdict.may_complete:
        return Checked(Status.SUCCEEDED, state, output=output)
    if verified is False:
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message=f"{contract.id} returned, but the read-back shows the effect is not in place",
            effect_committed=False,
        )
        return Checked(Status.FAILED, EffectState.NOT_COMMITTED, output=output, error=error)
    error = ToolError(
        category=ErrorCategory.EFFECT_UNKNOWN,
        message=f"{contract.id} returned, but the read-back could not confirm the effect",
        suggested_fix="Do not repeat the call; the operator will reconcile it.",
        effect_committed=None,
    )
    return Checked(Status.EFFECT_UNKNOWN, EffectState.UNKNOWN, output=output, error=error)


# -- 9. project ------------------------------------------------------------------------


async def project(services: Services, call: Call) -> Call | Stop:
    """Redact, then cut the result to what the model should read: summary, structured
    content, artifact refs. Redaction runs first, so no secret reaches the artifact store."""
    entry, request, checked = call.entry, call.request, call.checked
    assert entry is not None and request is not None and checked is not None
    contract = entry.contract
    error = checked.error
    if error is not None:
        error = bound_error(error, services.redactor.redact)
    summary = error.message if error else ""
    content: dict[str, Any] | None = None
    refs: tuple[ArtifactRef, ...] = ()
    if checked.output is not None:
        projection = contract.result_projection
        limit = services.limits.result_bytes
        if projection.artifact_threshold > limit:  # the harness's bound holds for every tool
            projection = projection.model_copy(update={"artifact_threshold": limit})
        store = services.artifacts
        if larger_than(checked.output, services.limits.offload_bytes):  # CPU work: off the loop
            output = await offload(redacted_output, services, contract, checked.output)
        else:
            output = redacted_output(services, contract, checked.output)
        # Only a result large enough to be stored aside writes a file: off the loop.
        if larger_than(output, projection.artifact_threshold):
            projected = await offload(project_result, output, projection, store)
        else:
            projected = project_result(output, projection, store)
        content, refs = projected.structured_content, projected.artifact_refs
        if checked.status is Status.SUCCEEDED:
            summary = projected.summary
    blocks = None
    if checked.answer is not None:
        blocks = await _projected_blocks(services, contract, checked.answer)
    call.trail.add("project", "projected", artifacts=len(refs))
    envelope = ResultEnvelope(
        status=checked.status,
        error=error,
        summary=summary,
        structured_content=content,
        artifact_refs=refs,
        content=blocks,
        provenance=provenance(contract, request, entry),
        execution_meta=execution_meta(
            call.record, request, call.attempts, call.started, checked.effect_state
        ),
    )
    call.envelope = envelope
    return call


async def _projected_blocks(
    services: Services, contract: ToolContract, answer: ToolAnswer
) -> ToolContent:
    """The tool's content blocks as the envelope keeps them: redacted like the output (every
    string of every block — text, a resource's text, URIs, and base64 data as a string), all
    of them when the outputs are classified secret; stored aside over the contract's
    ``artifact_threshold``, so the ledger row stays small."""
    if contract.data_classification.outputs is Classification.SECRET:
        blocks: Any = [{"type": "text", "text": REDACTED}]
    elif larger_than(answer.blocks, services.limits.offload_bytes):
        blocks = await offload(services.redactor.redact, list(answer.blocks))
    else:
        blocks = services.redactor.redact(list(answer.blocks))
    content = ToolContent(
        blocks=tuple(blocks), structured=answer.structured, is_error=answer.is_error
    )
    threshold = min(contract.result_projection.artifact_threshold, services.limits.result_bytes)
    if larger_than(blocks, threshold):
        ref = await offload(
            functools.partial(services.artifacts.put, blocks, description=CONTENT_ARTIFACT)
        )
        content = content.model_copy(update={"blocks": None, "stored": ref})
    return content


CONTENT_ARTIFACT = "content blocks"
"""The description of an artifact that holds a tool's content blocks (a JSON list)."""


def redacted_output(services: Services, contract: ToolContract, output: dict[str, Any]) -> Any:
    """The output with secret values and secret-classified fields redacted: redaction runs
    before projection, so no secret reaches the artifact store."""
    outputs = contract.data_classification.outputs
    return services.redactor.redact(redact_classified(output, contract, outputs))


# -- 10. record ------------------------------------------------------------------------


async def record(services: Services, call: Call, stop: Stop | None) -> ResultEnvelope:
    """Write the call's outcome — a projected result, or the `Stop` that ended it — and
    answer with its envelope. A call that changed nothing may be written behind."""
    if stop is None:
        envelope = call.envelope
        assert envelope is not None
    elif stop.envelope is not None:
        envelope = stop.envelope
    else:
        error = bound_error(stop.error, services.redactor.redact)
        contract = call.entry.contract if call.entry is not None else None
        envelope = ResultEnvelope(
            status=stop.status,
            error=error,
            summary=error.message,
            provenance=provenance(contract, call.request, None) if contract else None,
            execution_meta=execution_meta(
                call.record, call.request, call.attempts, call.started, stop.effect_state
            ),
        )
    if stop is not None and stop.settled:
        return envelope
    if call.approval is not None and not call.holds_key:
        return await _settle(services, call, envelope)
    pending = envelope.status is Status.PENDING_APPROVAL
    meta = envelope.execution_meta
    unchanged = meta is None or meta.effect_state is EffectState.NONE
    if not pending:
        call.trail.add("record", envelope.status.value)
    # A call that changed nothing may be written behind: off the caller's path, and a crash
    # can cost at most its audit row, never an effect's. Anything else is durable now.
    if unchanged and not pending:
        try:
            written = _write(services, call, envelope, call.attempts, defer=True)
        except LedgerError as exc:
            return _withheld(services, call, envelope, exc)
    else:
        written = await offload(_write, services, call, envelope, call.attempts, False)
    meta = envelope.execution_meta
    if written or meta is None:
        return envelope
    # The ledger queued the row for retry (for a call that ran, the outcome stands: it
    # happened), and the answer says the record is not written yet.
    pending_meta = meta.model_copy(update={"record_pending": True})
    return envelope.model_copy(update={"execution_meta": pending_meta})


def _withheld(
    services: Services, call: Call, envelope: ResultEnvelope, exc: LedgerError
) -> ResultEnvelope:
    """The answer to a call that changed nothing when the ledger can neither write nor queue
    its row (the queue is full and the database refuses writes): fail closed — its result
    is withheld — and put the row's facts in the log, the one record left."""
    record = call.record
    logger.error(
        "unrecorded call (ledger unavailable, queue full): request %s, call %s, tool %r, "
        "principal %s/%s, status %s: %s",
        record.request_id,
        record.call_id,
        record.tool,
        record.tenant,
        record.principal_id,
        envelope.status.value,
        services.redactor.redact_text(str(exc)),
    )
    error = ToolError(
        category=ErrorCategory.UNAVAILABLE,
        retryable=True,
        message="the audit ledger is unavailable and its queue is full, so this call "
        "cannot be recorded and its answer is withheld",
        suggested_fix="Try again later; nothing was changed.",
        effect_committed=False,
    )
    return envelope.model_copy(
        update={
            "status": Status.FAILED,
            "error": error,
            "summary": error.message,
            "structured_content": None,
            "artifact_refs": (),
        }
    )


async def _settle(services: Services, call: Call, envelope: ResultEnvelope) -> ResultEnvelope:
    """The end of a resumed call that wrote no intent (refused on re-check, denied, a read,
    a replay). An end worth retrying (a credential lookup timed out, the key's holder still
    runs) leaves the call waiting for another resume, its approval untouched; any other end
    is written once, by whichever resume gets there first, and the rest answer with it."""
    approval = call.approval
    assert approval is not None
    call.trail.add("record", envelope.status.value)
    call.recorded = True
    error = envelope.error
    if error is not None and (error.retryable or error.category is ErrorCategory.UNAVAILABLE):
        # A ledger or backend fault is not the call's end: the approval stands for a later
        # resume, whatever the fault's own retryability.
        await offload(services.ledger.append, call.trail.drain())
        return envelope
    final = _final_row(call, envelope, call.attempts)
    events = call.trail.drain()
    try:
        taker = await offload(
            functools.partial(
                services.ledger.settle_pending, final, events, approval_id=approval.approval_id
            )
        )
    except LedgerError as exc:
        # Nothing was written: the approval stays as it was, for a later resume to settle.
        logger.warning(
            "resume of %s not settled: the ledger could not record it: %s",
            call.request_id,
            services.redactor.redact_text(str(exc)),
        )
        error = ToolError(
            category=ErrorCategory.UNAVAILABLE,
            retryable=True,
            message="the ledger could not record this resume's outcome; the approval stands",
            suggested_fix="Resume again later.",
            effect_committed=False,
        )
        return envelope.model_copy(
            update={"status": Status.FAILED, "error": error, "summary": error.message}
        )
    return envelope if taker is None else await awaited_outcome(services, taker)


def _final_row(call: Call, envelope: ResultEnvelope, attempts: int) -> InvocationRecord:
    meta = envelope.execution_meta
    pending = envelope.status is Status.PENDING_APPROVAL
    return row(
        call,
        RecordState.PENDING_APPROVAL if pending else RecordState.COMPLETED,
        status=envelope.status.value,
        effect_state=meta.effect_state.value if meta else EffectState.NONE.value,
        attempts=attempts,
        approval_id=meta.approval_id if meta and meta.approval_id else call.record.approval_id,
        envelope=envelope.model_dump(mode="json"),
    )


def _write(
    services: Services, call: Call, envelope: ResultEnvelope, attempts: int, defer: bool
) -> bool:
    """Write the call's final row; False when the ledger only queued it for retry."""
    final = _final_row(call, envelope, attempts)
    written = services.ledger.complete(final, call.trail.drain(), defer=defer)
    call.recorded = True
    return written


def row(call: Call, state: RecordState, **fields: Any) -> InvocationRecord:
    """The ledger row of the call as far as it got. Built here, once per write, from what
    the stages found; the row holds the idempotency key only from its intent on, so a
    pending or rejected call never occupies (or, in SQLite, REPLACEs away) the key's holder."""
    base = call.record
    entry, request = call.entry, call.request
    if entry is not None:
        fields.setdefault("contract_ref", entry.contract.ref)
        fields.setdefault("implementation_digest", entry.digest)
    if request is not None:
        fields.setdefault("arguments", call.row_arguments)
        fields.setdefault("arguments_digest", request.arguments_digest)
        if call.holds_key:
            fields.setdefault("idempotency_key", request.idempotency_key)
    return replace(base, state=state, updated_at=time.time(), **fields)
