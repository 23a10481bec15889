"""`Harness`: owns catalog, policy, approvals, secrets, ledger, artifacts and executors, and
offers the entry points — `invoke`, `resume`, `run_tool_calls`, `reconcile` — each of which
builds a `Call` and hands it to `pipeline.run`, the one road to execution.

Constructing a harness does no I/O: the ledger and the policy are opened (and calls a dead
process left in flight are recovered) when the harness opens — explicitly with `open()`,
with `with`/`async with`, or at the first call.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from toolkeeper.artifacts.store import ArtifactStore
from toolkeeper.codemode.program import DEFAULT_CODE_LIMITS, CodeLimits
from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ApprovalError, ConfigError, ToolkeeperError
from toolkeeper.executors import Executor
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    Ledger,
    RecordState,
)
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine, Decision, PolicyEngine, PolicyRequest
from toolkeeper.runtime import pipeline, reconciliation, stages
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.call import Call, Services, Trail
from toolkeeper.runtime.context import Peer
from toolkeeper.runtime.envelope import (
    ResultEnvelope,
)
from toolkeeper.runtime.grants import GrantAuthority
from toolkeeper.runtime.invocation import Principal, Proposal, new_id, new_request_id
from toolkeeper.runtime.limits import DEFAULT_LIMITS, Limits
from toolkeeper.runtime.peer import GovernedPeer
from toolkeeper.runtime.reconciliation import FOREIGN_INTENT_AFTER, Reconciliation, recover
from toolkeeper.runtime.recording import base_record
from toolkeeper.runtime.registry import (
    CallAnalyzer,
    Registry,
    ResourceVersionReader,
    Verifier,
    compile_entry,
)
from toolkeeper.runtime.views import ToolViews, View, suggest
from toolkeeper.secrets.providers import SecretBroker, default_broker

if TYPE_CHECKING:
    from toolkeeper.adapters.turn import ToolTurn
    from toolkeeper.codemode.run_code import CodeMode
    from toolkeeper.discovery import SearchFilters, SearchHit, ToolIndex

HOOK_TIMEOUT = 30.0
"""Default seconds for a verifier, version reader or secret lookup of a contract without a
timeout of its own."""
DERIVED_KEY_TTL = 24 * 3600.0
"""Default seconds a derived idempotency key keeps a settled outcome: a retried turn within a
day replays, the same call next month runs again."""
RESUME_WAIT = 30.0
"""Default seconds a resume waits for the outcome of a call another resume is running."""
ARGUMENT_THRESHOLD = 64 * 1024
"""Default canonical-JSON bytes of recorded arguments above which the row references an
artifact instead of holding them."""
CALL_TIMEOUT = 300.0
"""Default seconds one executor attempt may take when its contract sets no timeout: no call
waits forever (an upstream that never answers, a hung function), whatever the contract says."""


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
        derived_key_ttl: float | None = DERIVED_KEY_TTL,
        resume_wait: float = RESUME_WAIT,
        foreign_intent_after: float = FOREIGN_INTENT_AFTER,
        argument_threshold: int = ARGUMENT_THRESHOLD,
        call_timeout: float = CALL_TIMEOUT,
        limits: Limits = DEFAULT_LIMITS,
        code_limits: CodeLimits = DEFAULT_CODE_LIMITS,
        code_tiers: Mapping[str, str] | None = None,
        code_spare: bool = True,
    ) -> None:
        """`derived_key_ttl`: seconds a derived idempotency key (a keyed call without a
        caller's key) keeps a settled outcome, None for good; a caller's own key keeps it for
        good. `resume_wait`: seconds a resume waits for the outcome of the same call another
        resume is running before answering that it still runs. `limits` bounds every call's
        arguments and what its result carries inline (docs/limits.md); the defaults suit
        calls a model writes. `code_limits` bounds every Code Mode program (docs/code-mode.md);
        `code_tiers` maps a principal id (``"*"``: everyone else) to the sandbox tier its
        programs run in when run_code names none. `code_spare`: keep one CPython-tier sandbox
        started ahead per event loop, so such a program does not wait for one to start."""
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
        self.derived_key_ttl = derived_key_ttl
        self.resume_wait = resume_wait
        self.foreign_intent_after = foreign_intent_after
        """Seconds after which an intent another host wrote counts as abandoned (its process
        cannot be asked); until then recovery leaves it alone."""
        self.argument_threshold = argument_threshold
        """Canonical-JSON bytes over which a call's recorded arguments are stored as an
        artifact, the ledger row keeping its reference and digest."""
        if not call_timeout > 0:
            raise ConfigError(
                f"call_timeout must be positive seconds, not {call_timeout!r}; every executor "
                "call runs under a finite timeout",
                key="call_timeout",
                value=call_timeout,
            )
        self.call_timeout = call_timeout
        self.limits = limits
        self.code_limits = code_limits
        self.code_tiers = dict(code_tiers or {})
        self.code_spare = code_spare
        self._code: CodeMode | None = None
        self._on_close: list[Callable[[], None]] = []
        self._recover = recover
        self._services: Services | None = None
        self._opening = threading.Lock()
        self._verifiers: dict[str, Verifier] = {}
        self.views = ToolViews(self.registry)
        self._discovery: ToolIndex | None = None
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
                    derived_key_ttl=self.derived_key_ttl,
                    resume_wait=self.resume_wait,
                    argument_threshold=self.argument_threshold,
                    call_timeout=self.call_timeout,
                    limits=self.limits,
                )
                if self._recover:
                    recover(ledger, foreign_after=self.foreign_intent_after)
                _log.info(
                    "toolkeeper writes its ledger to %s and artifacts to %s",
                    getattr(ledger, "path", None) or type(ledger).__name__,
                    self.artifacts.root,
                )
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
            if self._code is not None:
                self._code.close()
            for callback in self._on_close:
                callback()
            if services is not None:
                services.ledger.close()
                self._given_closed = self._given_ledger is not None

    def on_close(self, callback: Callable[[], None]) -> None:
        """Have `close()` call `callback` every time it runs: a tool's background
        resources (the shell's spare sandboxes) end with the harness and may start again
        when it is used after."""
        self._on_close.append(callback)

    # -- catalog -----------------------------------------------------------------------

    def register(
        self,
        tool: Callable[..., Any] | ToolContract,
        *,
        executor: Executor | Callable[..., Any] | None = None,
        verifier: Verifier | None = None,
        resource_version: ResourceVersionReader | None = None,
        analyzer: CallAnalyzer | None = None,
    ) -> ToolContract:
        """Add a tool: a function (decorated with `@tool` or not) or a contract plus its
        executor. Returns the registered contract. `analyzer` judges each call by its
        arguments when one contract covers calls of different effect (the shell)."""
        entry = compile_entry(
            tool,
            executor=executor,
            verifier=verifier,
            resource_version=resource_version,
            verifiers=self._verifiers,
            analyzer=analyzer,
        )
        self.registry.add(entry)  # the views follow through the registry's listener
        _warn_if_never_permitted(self._policy or _default_policy(), entry.contract)
        return entry.contract

    def register_shell(self, *, roots: list[str | Path], **options: Any) -> ToolContract:
        """Add the governed `shell` tool: each command parsed, judged by what it does and
        run under bubblewrap with `roots` as its only writable directories. Options:
        `timeout`, `network`, `cwd`, `environment`, `limits`, `policy`, `rules`,
        `unsandboxed_fallback` (docs/shell-execution.md)."""
        # Imported here: the shell's parser is the `shell` extra, which the core never loads.
        from toolkeeper.shell.tool import register_shell

        return register_shell(self, roots=roots, **options)

    def register_cli(self, name: str, *, argv: list[str], **options: Any) -> ToolContract:
        """Add a narrow tool over one CLI invocation, e.g. ``register_cli("git_commit",
        argv=["git", "commit", "-m", "{message}"], cwd=repo, description=...)``: typed
        parameters fill whole argv elements, and it runs in the shell's sandbox
        (docs/shell-execution.md)."""
        # Imported here, like register_shell: toolkeeper.shell needs the `shell` extra.
        from toolkeeper.shell.cli_tools import register_cli

        return register_cli(self, name, argv=argv, **options)

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

    @property
    def discovery(self) -> ToolIndex:
        """The tool search index over this harness's registry (built on first use, then kept
        current tool by tool); set its `ranker` to choose how searches rank."""
        if self._discovery is None:
            from toolkeeper.discovery import LedgerHealth, ToolIndex

            ledger = LedgerHealth(lambda: self._services.ledger if self._services else None)
            self._discovery = ToolIndex(self.registry, health=ledger)
        return self._discovery

    def search_tools(
        self,
        query: str,
        *,
        principal: Principal | None,
        k: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> list[SearchHit]:
        """The `k` tools `principal` may see that best fit `query`, best first, each with
        its name, one-line summary, effect class and score. Hidden tools are neither
        results nor part of any score (docs/discovery.md)."""
        return self.discovery.search(query, self._visible(principal, None), k=k, filters=filters)

    # -- entry points ------------------------------------------------------------------

    async def invoke(
        self,
        proposal: Proposal,
        *,
        principal: Principal,
        session: str | None = None,
        parent_request_id: str | None = None,
        environment: Mapping[str, Any] | None = None,
        peer: Peer | None = None,
    ) -> ResultEnvelope:
        """Run one proposal through all ten stages and answer with an envelope. `peer` is
        the client that made the call, which the tool may reach while it runs (progress, log
        messages, and — as policy allows — elicitation and sampling)."""
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
        if peer is not None:
            call.peer = GovernedPeer(peer, services.policy, call)
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

    async def run_tool_turn(
        self,
        response: Any,
        *,
        vendor: str,
        principal: Principal,
        session: str | None = None,
        **parse_options: Any,
    ) -> ToolTurn:
        """`run_tool_calls`, keeping the whole turn: messages, envelopes, the approvals it
        waits on, and `ToolTurn.resume` to answer the model once they are decided."""
        from toolkeeper.adapters import run_tool_turn

        return await run_tool_turn(
            self, response, vendor=vendor, principal=principal, session=session, **parse_options
        )

    # -- approvals ---------------------------------------------------------------------

    async def resume(self, approval_id: str, *, principal: Principal) -> ResultEnvelope:
        """Continue a call after its approval was decided, for `principal` as it is now: the
        caller says who resumes and with which capabilities today (the gateway passes the
        authenticated caller), and it must be the principal that proposed the call. The call
        re-enters the pipeline at normalize with the environment stored with the approval:
        visibility, contract digest, argument digest, resource versions and policy are all
        checked again, and any change gives `stale` or the new decision, never a silent run.

        Every resume of one approval answers with the call's final outcome: one takes the
        call up (in the transaction that writes its intent), and the others read its outcome
        from the ledger, waiting up to `resume_wait` seconds for it; a call still running
        then is answered as such (retryable).

        An approval a Code Mode program waits on continues that program (`code_mode`): the
        call is resumed as above, and the program goes on from it as a new run_code call.
        """
        services = await self._opened_async()
        approval = await stages.offload(services.approvals.get, approval_id)
        stored = approval.principal
        if (principal.id, principal.tenant) != (stored["id"], stored["tenant"]):
            raise ApprovalError(
                f"approval {approval_id} belongs to another principal", approval_id=approval_id
            )
        if approval.status is not ApprovalStatus.PENDING and is_code_origin(approval):
            return await self.code_mode().resume(approval, principal)
        return await self._resume_approval(services, approval, principal)

    async def _resume_approval(
        self, services: Services, approval: ApprovalRecord, principal: Principal
    ) -> ResultEnvelope:
        """Resume the one call `approval` is bound to (the principal already checked)."""
        record = await stages.offload(services.ledger.get, approval.request_id)
        if record is None:
            raise ApprovalError(
                f"approval {approval.approval_id} has no invocation in this ledger",
                approval_id=approval.approval_id,
            )
        if approval.status is ApprovalStatus.PENDING or record.state is RecordState.COMPLETED:
            return ResultEnvelope.model_validate(record.envelope)
        if record.state is not RecordState.PENDING_APPROVAL:  # taken up by another resume
            return await stages.awaited_outcome(services, record)
        call = Call(
            proposal=Proposal(
                approval.call_id,
                approval.contract_ref,
                approval.arguments,
                idempotency_key=approval.idempotency_key,
            ),
            principal=principal,
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

    def resume_sync(self, approval_id: str, *, principal: Principal) -> ResultEnvelope:
        """`resume` for code without an event loop."""
        _refuse_inside_loop("resume_sync", "await harness.resume(...)")
        return anyio.run(functools.partial(self.resume, approval_id, principal=principal))

    # -- code mode ---------------------------------------------------------------------

    def code_mode(self) -> CodeMode:
        """Code Mode for this harness, its `run_code` tool registered at first use (it needs
        the ``codemode`` extra: pydantic-monty). Registered inside a running event loop with
        the CPython tier in `code_tiers`, it starts that loop's spare sandbox right away."""
        with self._opening:
            if self._code is None:
                from toolkeeper.codemode.run_code import CodeMode

                async def resume_call(
                    approval: ApprovalRecord, principal: Principal
                ) -> ResultEnvelope:
                    return await self._resume_approval(
                        await self._opened_async(), approval, principal
                    )

                self._code = CodeMode(
                    limits=self.code_limits,
                    tiers=self.code_tiers,
                    spare=self.code_spare,
                    contracts=self.visible_contracts,
                    invoke=self.invoke,
                    resume_call=resume_call,
                    ledger=lambda: self.ledger,
                    artifacts=self.artifacts,
                )
                code = self._code
            else:
                return self._code
        self.register(code.contract, executor=code)
        code.warm()
        return code

    def sdk_text(self, principal: Principal, tools: Sequence[str] | None = None) -> str:
        """The tools `principal` may see (or the named ones) as a typed Python SDK: the text
        a model reads before it writes a program for `run_code`."""
        return self.code_mode().sdk_text(principal, list(tools) if tools is not None else None)

    async def run_code(
        self,
        code: str,
        *,
        principal: Principal,
        session: str | None = None,
        environment: Mapping[str, Any] | None = None,
        tier: str | None = None,
    ) -> ResultEnvelope:
        """Run a program through the `run_code` tool: the call and every call the program
        makes go through the pipeline. Answers ``pending_approval`` when an inner call waits
        on a human; `resume` with that approval continues the program where it stopped.
        `tier`: ``"monty"`` (default) or ``"cpython"``; policy sees it as an argument."""
        from toolkeeper.codemode.run_code import RUN_CODE_REF

        self.code_mode()
        arguments = {"code": code} if tier is None else {"code": code, "tier": tier}
        return await self.invoke(
            Proposal(new_id("code"), RUN_CODE_REF, arguments),
            principal=principal,
            session=session,
            environment=environment,
        )

    # -- recovery ----------------------------------------------------------------------

    def recover(self) -> list[InvocationRecord]:
        """Turn calls left between intent and completion by a gone process into
        `effect_unknown` records: never lost, never silently retried."""
        services = self._opened()
        return recover(services.ledger, foreign_after=self.foreign_intent_after)[0]

    async def reconcile(self, *, foreign_intent_after: float | None = None) -> Reconciliation:
        """One reconciliation pass: recover what gone processes left in flight, then read
        back every call whose effect is unknown and settle what the read-back can tell —
        succeeded (committed) or failed (not committed). The rest stay unknown and are
        reported. Paged through the ledger's indexes; it never holds the ledger for a scan.
        `foreign_intent_after` overrides the harness's setting for this pass."""
        services = await self._opened_async()
        after = self.foreign_intent_after if foreign_intent_after is None else foreign_intent_after
        return await reconciliation.reconcile(services, foreign_after=after)

    def reconcile_sync(self, *, foreign_intent_after: float | None = None) -> Reconciliation:
        """`reconcile` for code without an event loop."""
        _refuse_inside_loop("reconcile_sync", "await harness.reconcile()")
        return anyio.run(
            functools.partial(self.reconcile, foreign_intent_after=foreign_intent_after)
        )


def is_code_origin(approval: ApprovalRecord) -> bool:
    """Whether `approval` waits on a call a Code Mode program made (its program resumes with
    it)."""
    return approval.parent_request_id is not None and approval.environment.get("origin") == "code"


def _refuse_inside_loop(name: str, instead: str) -> None:
    try:
        anyio.get_current_task()
    except RuntimeError:
        return
    raise ToolkeeperError(f"{name}() cannot run inside an event loop; use {instead}")


_log = logging.getLogger(__name__)


@functools.cache
def _default_policy() -> CedarPolicyEngine:
    """The shipped policy set a harness given none will decide with, parsed once here for the
    registration check (the harness builds its own when it opens)."""
    return CedarPolicyEngine()


def _warn_if_never_permitted(policy: PolicyEngine, contract: ToolContract) -> None:
    """Warn when no policy permits `contract` even to a principal holding every capability it
    requires: every call would be denied, and the developer would learn it only from a
    ``toolkeeper.default_deny`` in the ledger (the default set permits no reversible tool).
    A forbid, a condition or an evaluation error is not this mistake and is left alone."""
    probe = Principal(
        "toolkeeper-registration-check", capabilities=frozenset(contract.required_capabilities)
    )
    try:
        decision = policy.decide(PolicyRequest(probe, contract, {}))
    except Exception:  # a custom engine's fault is the call's to report, not registration's
        return
    if decision.decision is not Decision.DENY or decision.policy_ids != (
        "toolkeeper.default_deny",
    ):
        return
    _log.warning(
        "no loaded policy permits %s (side_effect %s): every call will be denied. To allow "
        "it, add to a policy file: permit (principal, action == "
        'Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool) when { resource.id == '
        '%s }; (put @approval("required") above it to ask a human first)',
        contract.ref,
        contract.effective_side_effect.value,
        json.dumps(contract.id),
    )


__all__ = ["Harness"]
