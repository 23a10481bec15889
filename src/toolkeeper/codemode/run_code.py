"""`run_code`: one tool whose argument is a program, and the executor that runs it.

`toolkeeper.run_code` is a contract like any other: a call to it goes through the pipeline
(policy decides whether this principal may run code at all), and its executor runs the
program in a sandbox tier. Every function the program calls is an *inner call*: a proposal
for the tool it names, entering `pipeline.run` through `Harness.invoke` with
``parent_request_id`` = the run_code request, a call id ``<run_code call id>.<n>`` (n counts
the program's calls in order), and ``environment["origin"] = "code"`` so a policy can tell
code-originated calls apart. Nothing the program does reaches a tool any other way.

An inner call that needs approval pauses the program there: the sandbox state is stored with
that call's pending approval (`pauses.py`) and run_code answers ``pending_approval``.
`Harness.resume` continues it as a new run_code call (its parent the paused one), in any
process: the inner call is resumed like any approved call, and the program goes on exactly
there — no earlier call runs again.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import anyio.to_thread

from toolkeeper.codemode import pauses, replay
from toolkeeper.codemode.monty import Batch, Halt, MontyTier, Pause, Paused
from toolkeeper.codemode.pauses import InnerCall
from toolkeeper.codemode.program import (
    RUN_CODE_ID,
    CodeLimits,
    HostCall,
    InnerCallError,
    ProgramOutcome,
)
from toolkeeper.codemode.sdk import ASYNC_SUFFIX, Sdk, compile_sdk, index, python_names, render
from toolkeeper.contract.model import (
    Idempotency,
    ModelView,
    ResultProjection,
    SideEffect,
    ToolContract,
)
from toolkeeper.contract.naming import FAMILIES
from toolkeeper.errors import ConfigError
from toolkeeper.executors import ToolAnswer, ToolFailure, ToolSuspended
from toolkeeper.ledger import ApprovalRecord
from toolkeeper.ledger.sql import TAKEN
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import EffectState, ErrorCategory, ResultEnvelope, Status
from toolkeeper.runtime.invocation import Principal, Proposal

if TYPE_CHECKING:
    from toolkeeper.codemode.cpython import Spares

RUN_CODE_VERSION = "1.0.0"
RUN_CODE_REF = f"{RUN_CODE_ID}@{RUN_CODE_VERSION}"
ORIGIN = "code"
"""``environment["origin"]`` of every inner call: what a policy reads to tell them apart."""
MONTY = "monty"
"""The default tier: pydantic-monty workers, snapshots at every inner call."""
CPYTHON = "cpython"
"""Full CPython under bubblewrap (`cpython.py`): paused by abort and replay (`replay.py`)."""
HELP = "sdk_help"
"""The one function every program has besides the SDK: ``sdk_help()`` returns the SDK text,
``sdk_help("f", ...)`` that of the named functions."""
SDK_INLINE_BYTES = 24 * 1024
"""SDK text up to this size rides in the run_code description of a vendor view; a larger
catalog gets an index of signatures there, and `sdk_help` for the rest."""
INLINE_CALLS = 50
"""Inner calls listed in run_code's answer; a longer list is stored as an artifact."""

_CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200_000,
            "description": "A Python program calling the SDK functions. print() what the "
            "user should see; the last expression is returned.",
        }
    },
    "required": ["code"],
    "additionalProperties": False,
}


def _checked_tiers(tiers: Mapping[str, str]) -> dict[str, str]:
    for who, tier in tiers.items():
        if tier not in (MONTY, CPYTHON):
            raise ConfigError(
                f"code_tiers[{who!r}] is {tier!r}; a tier is {MONTY!r} or {CPYTHON!r}",
                key=f"code_tiers.{who}",
                value=tier,
            )
    return dict(tiers)


def run_code_contract(limits: CodeLimits) -> ToolContract:
    """The run_code contract for a harness with these limits."""
    schema = {
        **_CODE_SCHEMA,
        "properties": {
            **_CODE_SCHEMA["properties"],
            "resume": {
                "type": "string",
                "description": "Set by Harness.resume only: the approval a paused program "
                "continues after.",
            },
            "tier": {
                "enum": [MONTY, CPYTHON],
                "description": "The sandbox: monty (default) or cpython (full Python under "
                "bubblewrap). Policy sees it as context.arguments.tier.",
            },
        },
        "required": [],
        "anyOf": [{"required": ["code"]}, {"required": ["resume"]}],
    }
    view = ModelView(input_schema=_CODE_SCHEMA)
    return ToolContract(
        id=RUN_CODE_ID,
        version=RUN_CODE_VERSION,
        description=(
            "Run a Python program that calls the tools as typed functions (the SDK). Only "
            "what it prints and its last expression come back, so large intermediate data "
            "never enters the conversation. Every call it makes is checked by policy, may "
            "wait for approval, and is recorded."
        ),
        when_to_use=(
            "Several tool calls in a known sequence, a loop over many items, or filtering "
            "and aggregating large results."
        ),
        when_not_to_use=(
            "Open-ended research where each step depends on judging the last result, work "
            "that needs your judgement on every item mid-loop, or a single call."
        ),
        input_schema=schema,
        output_schema=_OUTPUT_SCHEMA,
        side_effect=SideEffect.COMMITTING,  # its inner calls may write, each governed alone
        open_world=True,
        idempotency=Idempotency.NONE,
        timeout=limits.wall_seconds + 30.0,
        result_projection=ResultProjection(artifact_threshold=256 * 1024),
        model_views={family: view for family in FAMILIES},
    )


_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {},
        "stdout": {"type": "string"},
        "stdout_artifact": {"type": ["string", "null"]},
        "error": {"type": ["object", "null"]},
        "calls": {"type": "array", "items": {"type": "object"}},
        "calls_total": {"type": "integer"},
        "calls_artifact": {"type": ["string", "null"]},
        "effects": {"type": "object"},
        "paused_at": {"type": ["object", "null"]},
    },
    "required": ["stdout", "calls", "calls_total", "effects"],
}

_ERROR_TYPES = {
    ErrorCategory.INVALID_ARGUMENT: "ValueError",
    ErrorCategory.UNKNOWN_TOOL: "NameError",
    ErrorCategory.POLICY_DENIED: "PermissionError",
    ErrorCategory.APPROVAL_DENIED: "PermissionError",
    ErrorCategory.NOT_FOUND: "LookupError",
    ErrorCategory.TIMEOUT: "TimeoutError",
}
"""The exception a program sees for an inner call that failed, by error category."""


Invoke = Callable[..., Awaitable[ResultEnvelope]]


@dataclass
class Program:
    """One run of one program: where its calls become governed calls."""

    sdk: Sdk
    invoke: Invoke
    context: ToolContext
    limits: CodeLimits
    call_prefix: str
    """Inner call ids are ``<call_prefix>.<sequence>``: the first run_code call's id."""
    read_artifact: Callable[[str], Any]
    contracts: list[ToolContract] = field(default_factory=list)
    tier: str = "monty"
    """The sandbox tier the program runs in (`MONTY` or `CPYTHON`)."""
    calls: list[InnerCall] = field(default_factory=list)
    sequence: int = 0
    _environment: dict[str, Any] | None = field(default=None, init=False, repr=False)

    async def __call__(self, call: HostCall) -> Any:
        if call.name == HELP and HELP not in self.sdk.functions:
            return self.help(*call.args)
        function = self.sdk.functions.get(call.name)
        if function is None:
            close = difflib.get_close_matches(call.name, list(self.sdk.functions), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InnerCallError("NameError", f"name {call.name!r} is not defined{hint}")
        if self.sequence >= self.limits.max_inner_calls:
            raise Halt(
                f"the program made more than {self.limits.max_inner_calls} tool calls "
                "(CodeLimits.max_inner_calls); raise it with "
                "Harness(code_limits=CodeLimits(max_inner_calls=...))",
            )
        try:
            arguments = self.sdk.bind(call.name, call.args, call.kwargs)
        except TypeError as exc:
            raise InnerCallError("TypeError", str(exc)) from None
        self.sequence += 1
        sequence = self.sequence
        context = self.context
        if self._environment is None:  # the same for every call (invoke copies it)
            self._environment = {**context.environment, "origin": ORIGIN}
        envelope = await self.invoke(
            Proposal(f"{self.call_prefix}.{sequence}", function.ref, arguments),
            principal=context.principal,
            session=context.session,
            parent_request_id=context.request_id,
            environment=self._environment,
        )
        return self.settle(sequence, call.name, function.ref, envelope)

    def settle(self, sequence: int, name: str, tool: str, envelope: ResultEnvelope) -> Any:
        """Note the inner call's outcome; its value, or the exception the program sees."""
        meta = envelope.execution_meta
        error = envelope.error
        self.calls.append(
            InnerCall(
                sequence=sequence,
                function=name,
                tool=tool,
                request_id=meta.request_id if meta else None,
                status=envelope.status.value,
                effect_state=(meta.effect_state if meta else EffectState.NONE).value,
                approval_id=meta.approval_id if meta else None,
                error=error.category.value if error else None,
            )
        )
        if envelope.status is Status.SUCCEEDED:
            return self.value_of(envelope)
        if envelope.status is Status.PENDING_APPROVAL:
            assert meta is not None and meta.approval_id is not None
            raise Pause(envelope.summary, key=meta.approval_id)
        assert error is not None
        message = f"{tool}: {error.message}"
        for problem in error.field_errors:
            if problem.message not in message:
                message += f"\n  {problem.path or '/'}: {problem.message}"
        if error.suggested_fix:
            message += f"\n  fix: {error.suggested_fix}"
        kind = _ERROR_TYPES.get(error.category, "RuntimeError")
        raise InnerCallError(kind, message, error.model_dump(mode="json"))

    def help(self, *names: Any) -> str:
        """`sdk_help()`: the SDK text, of every function or the named ones — no tool runs,
        and it shows only what the principal may call anyway."""
        wanted = {self.sdk.functions[n].ref for n in names if n in self.sdk.functions}
        unknown = [n for n in names if n not in self.sdk.functions]
        if unknown:
            raise InnerCallError("NameError", f"no SDK function {unknown[0]!r}")
        chosen = [c for c in self.contracts if not names or c.ref in wanted]
        return render(chosen, names=python_names(self.contracts))

    def names(self) -> list[str]:
        """What the program may call: the SDK's functions and `sdk_help`."""
        return [*self.sdk.functions, HELP]

    def awaitable(self, name: str) -> str | None:
        base = name.removesuffix(ASYNC_SUFFIX)
        if base != name and name not in self.sdk.functions and base in self.sdk.functions:
            return base
        return None

    def concurrent(self, call: HostCall) -> bool:
        function = self.sdk.functions.get(call.name)
        return function is not None and function.read_only

    def value_of(self, envelope: ResultEnvelope) -> Any:
        content = envelope.structured_content
        if envelope.artifact_refs and isinstance(content, dict) and "_artifact" in content:
            content = self.read_artifact(envelope.artifact_refs[0].uri)  # the whole result
        if isinstance(content, dict) and set(content) == {"result"}:
            return content["result"]
        return content

    def effects(self) -> dict[str, int]:
        """The inner calls by effect: ``pending`` waits on an approval (nothing done yet, the
        effect not known until it is decided and run), ``read_only`` succeeded changing
        nothing, ``not_committed`` failed or was refused before any effect."""
        counts = {"committed": 0, "unknown": 0, "not_committed": 0, "pending": 0, "read_only": 0}
        for call in self.calls:
            if call.status == Status.PENDING_APPROVAL.value:
                counts["pending"] += 1
            elif call.effect_state in counts:
                counts[call.effect_state] += 1
            elif call.status == Status.SUCCEEDED.value:
                counts["read_only"] += 1
            else:
                counts["not_committed"] += 1
        return counts

    def effect_committed(self) -> bool | None:
        effects = self.effects()
        if effects["unknown"]:
            return None
        return effects["committed"] > 0


class CodeMode:
    """Code Mode for one harness: the run_code executor, its tiers and its pauses."""

    source = "code_mode:monty"

    def __init__(
        self,
        *,
        limits: CodeLimits,
        tiers: Mapping[str, str] | None = None,
        contracts: Callable[[Principal], list[ToolContract]],
        invoke: Invoke,
        resume_call: Callable[[ApprovalRecord, Principal], Awaitable[ResultEnvelope]],
        ledger: Callable[[], Any],
        artifacts: Any,
        spare: bool = True,
    ) -> None:
        """`spare`: keep one CPython sandbox started ahead per event loop, so a CPython
        program does not wait for bubblewrap and the interpreter to start
        (docs/code-mode-cpython.md)."""
        self.limits = limits
        self.tiers = _checked_tiers(tiers or {})
        self.contract = run_code_contract(limits)
        self._contracts = contracts
        self._invoke = invoke
        self._resume_call = resume_call
        self._ledger = ledger
        self._artifacts = artifacts
        self.monty = MontyTier()
        self.spare = spare
        self._spares: Spares | None = None

    def tier_for(self, principal: Principal) -> str:
        """The tier `principal`'s programs run in when run_code names none: the operator's
        choice for that principal, else for everyone (``"*"``), else Monty."""
        return self.tiers.get(principal.id) or self.tiers.get("*") or MONTY

    def sdk_contracts(self, principal: Principal, tools: list[str] | None) -> list[ToolContract]:
        """What `principal` may call from code (run_code itself excluded), or the named ones
        among them."""
        visible = [c for c in self._contracts(principal) if c.id != RUN_CODE_ID]
        if tools is None:
            return visible
        wanted = set(tools)
        chosen = [c for c in visible if c.id in wanted or c.ref in wanted]
        missing = wanted - {c.id for c in chosen} - {c.ref for c in chosen}
        if missing:
            first = sorted(missing)[0]
            raise ConfigError(
                f"no tool {first!r} visible to {principal.id}; list them with "
                "harness.visible_contracts(principal)",
                key="tools",
                value=first,
            )
        return chosen

    def sdk_text(self, principal: Principal, tools: list[str] | None = None) -> str:
        # Names as the whole SDK has them: a subset must not rename a colliding function.
        everything = self.sdk_contracts(principal, None)
        return render(self.sdk_contracts(principal, tools), names=python_names(everything))

    def view_contract(
        self, principal: Principal, *, inline_bytes: int = SDK_INLINE_BYTES
    ) -> ToolContract:
        """run_code as one vendor-view tool for `principal`: its description carries the SDK
        (or, for a large catalog, an index of signatures; `sdk_help` gives the rest).
        Render it with `adapters.render([contract], vendor=...)`; calls resolve to the
        registered run_code as usual."""
        contracts = self.sdk_contracts(principal, None)
        text = render(contracts)
        if len(text.encode()) > inline_bytes:
            text = index(contracts)
        description = f"{self.contract.description}\n\n{text}"
        views = {
            family: view.model_copy(update={"description": description})
            for family, view in self.contract.model_views.items()
        }
        return self.contract.model_copy(update={"model_views": views})

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """The run_code executor: run a program, or continue a paused one."""
        if "resume" in arguments:
            return await self._continue(arguments["resume"], context)
        program = self._program(context, context.call_id, 0)
        tier = program.tier = arguments.get("tier") or self.tier_for(context.principal)
        outcome: ProgramOutcome | Paused
        if tier == CPYTHON:
            outcome = await self._run_cpython(arguments["code"], program)
        else:
            outcome = await self.monty.run(arguments["code"], call=program, limits=self.limits)
        return await self._answer(program, outcome, context)

    async def _run_cpython(
        self,
        code: str,
        program: Program,
        *,
        record: replay.Record | None = None,
        first: replay.Answer | None = None,
    ) -> ProgramOutcome | Paused:
        """Run (or replay) `code` in the CPython tier, in this loop's spare sandbox when one
        is up. The next spare starts while the program runs when it took one (so a program
        sent right after it finds more of that start done), else once the program has
        ended: a cold start is not made to share the CPU with a spare's."""
        self._require_cpython()
        spares = self._cpython_spares()
        sandbox = await spares.take() if spares is not None else None
        if spares is not None and sandbox is not None:
            # A task: its start runs once this one waits for the program's first frame.
            spares.refill()
        try:
            return await replay.run(
                code,
                host=program,
                functions=program.names(),
                limits=self.limits,
                record=record,
                first=first,
                sandbox=sandbox,
            )
        finally:
            if sandbox is not None and not sandbox.used:  # the run ended before it began
                await sandbox.close()
            if spares is not None:
                spares.refill()

    def warm(self) -> None:
        """Start the running loop's spare CPython sandbox now, when the operator chose the
        CPython tier for some principal (`code_tiers`): the first such program then needn't
        start one. Outside a running asyncio loop it does nothing; the spare starts after the
        first program instead."""
        if (
            CPYTHON not in self.tiers.values()
            or importlib.util.find_spec("toolkeeper.codemode.cpython") is None
        ):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        spares = self._cpython_spares()
        if spares is not None:
            spares.refill()

    def _cpython_spares(self) -> Spares | None:
        if self.spare and self._spares is None:
            self._spares = importlib.import_module("toolkeeper.codemode.cpython").Spares()
        return self._spares

    def _require_cpython(self) -> None:
        if importlib.util.find_spec("toolkeeper.codemode.cpython") is None:
            raise ToolFailure(
                "the cpython tier is not installed in this toolkeeper",
                category=ErrorCategory.INVALID_ARGUMENT,
                suggested_fix='Run the program in the default tier (omit "tier").',
                effect_committed=False,
            )

    def _program(self, context: ToolContext, prefix: str, sequence: int) -> Program:
        contracts = self.sdk_contracts(context.principal, None)
        return Program(
            sdk=compile_sdk(contracts),
            contracts=contracts,
            invoke=self._invoke,
            context=context,
            limits=self.limits,
            call_prefix=prefix,
            read_artifact=self._artifacts.get_json,
            sequence=sequence,
        )

    async def _answer(
        self, program: Program, outcome: ProgramOutcome | Paused, context: ToolContext
    ) -> ToolAnswer:
        if isinstance(outcome, Paused):
            await self._pause(program, outcome, context)
        output = self._output(program, outcome.stdout, outcome.truncated)
        output["value"] = outcome.value
        output["error"] = (
            {"type": outcome.error_type, "message": outcome.error} if outcome.error else None
        )
        if outcome.error is None:
            # The contract declares the worst case (committing); the answer says what the
            # program's inner calls did, so a program that only read is not "committed".
            return ToolAnswer(value=output, blocks=(), effect_committed=program.effect_committed())
        category = _raised_by_call(outcome, program)
        raise ToolFailure(
            f"the program raised {outcome.error_type}: {outcome.error}",
            category=category or _program_category(outcome),
            effect_committed=program.effect_committed(),
            suggested_fix=_program_fix(outcome, program),
            answer=ToolAnswer(value=output, blocks=(), structured=True),
        )

    def _output(self, program: Program, stdout: str, truncated: bool) -> dict[str, Any]:
        inline = stdout.encode("utf-8", "surrogatepass")
        stdout_artifact = None
        if len(inline) > self.limits.output_bytes:
            stdout_artifact = self._artifacts.put(
                {"stdout": stdout, "truncated": truncated}, description="printed output"
            ).uri
            stdout = inline[: self.limits.output_bytes].decode("utf-8", "ignore")
        calls = [call.as_json() for call in sorted(program.calls, key=lambda c: c.sequence)]
        calls_artifact = None
        if len(calls) > INLINE_CALLS:
            calls_artifact = self._artifacts.put(calls, description="inner calls").uri
            # What the model needs first: every call that wrote or failed, then the rest.
            notable = [
                c for c in calls if c["effect_state"] != "none" or c["status"] != "succeeded"
            ]
            calls = (notable + [c for c in calls if c not in notable])[:INLINE_CALLS]
        return {
            "stdout": stdout,
            "stdout_artifact": stdout_artifact,
            "calls": calls,
            "calls_total": len(program.calls),
            "calls_artifact": calls_artifact,
            "effects": program.effects(),
            "paused_at": None,
        }

    async def _pause(self, program: Program, paused: Paused, context: ToolContext) -> NoReturn:
        """Store the program's state with the approval its last call waits on, then end the
        run_code call pending on that approval."""
        [waiting] = [call for call in program.calls if call.approval_id == paused.key]
        approval_id = paused.key
        bundle = pauses.PausedProgram(
            state=paused.state,
            stdout=paused.stdout,
            calls=[call.as_json() for call in program.calls],
            sequence=program.sequence,
            call_prefix=program.call_prefix,
            request_id=context.request_id,
            batch=paused.batch.as_json() if paused.batch else None,
            waiting=waiting.sequence,
            tier=program.tier,
        )
        account = await self._store(bundle, waiting, program)
        output = self._output(program, paused.stdout, False)
        output["value"] = None
        output["error"] = None
        output["paused_at"] = waiting.as_json()
        raise ToolSuspended(
            account,
            approval_id=approval_id,
            answer=ToolAnswer(value=output, blocks=(), structured=True),
            effect_committed=program.effect_committed(),
        )

    async def _store(
        self, bundle: pauses.PausedProgram, waiting: InnerCall, program: Program
    ) -> str:
        """Store the program with the approval it waits on; every other call of it still
        waiting on an approval (reads paused together) gets a note naming that approval, so
        resuming one of them first is refused with the way forward, not lost."""
        ledger = self._ledger()
        assert waiting.approval_id is not None
        approval = await anyio.to_thread.run_sync(ledger.get_approval, waiting.approval_id)
        account = pauses.account(approval.account if approval else "", program.calls, waiting)
        await anyio.to_thread.run_sync(
            functools.partial(
                ledger.store_snapshot, waiting.approval_id, bundle.encode(), account=account
            )
        )
        note = pauses.QUEUED + waiting.approval_id.encode()
        for call in program.calls:
            if call.approval_id not in (None, waiting.approval_id) and call.status == (
                Status.PENDING_APPROVAL.value
            ):
                await anyio.to_thread.run_sync(ledger.store_snapshot, call.approval_id, note)
        return account

    async def _continue(self, approval_id: str, context: ToolContext) -> Any:
        ledger = self._ledger()
        approval = await anyio.to_thread.run_sync(ledger.get_approval, approval_id)
        principal = context.principal
        if approval is None or (approval.principal["id"], approval.principal["tenant"]) != (
            principal.id,
            principal.tenant,
        ):
            raise ToolFailure(
                f"no paused program of {principal.id} waits on approval {approval_id!r}",
                category=ErrorCategory.NOT_FOUND,
                effect_committed=False,
            )
        queued = approval.snapshot or b""
        if queued.startswith(pauses.QUEUED):
            first = queued[len(pauses.QUEUED) :].decode()
            raise ToolFailure(
                f"approval {approval_id} belongs to a program that paused at several calls "
                f"at once; it continues at approval {first} first, then pauses again on this "
                "one (already decided, it is not asked again)",
                category=ErrorCategory.STALE,
                suggested_fix=f"Decide and resume approval {first} first.",
                effect_committed=False,
            )
        data = await anyio.to_thread.run_sync(
            functools.partial(ledger.take_snapshot, approval_id, taker=context.request_id)
        )
        if data is None:
            raise ToolFailure(
                f"the program paused at approval {approval_id} was already continued (or "
                "its state was lost with the process that paused it); see "
                f"`toolkeeper ledger show {approval.parent_request_id}`",
                category=ErrorCategory.STALE,
                effect_committed=False,
            )
        bundle = pauses.PausedProgram.decode(data)
        program = self._program(context, bundle.call_prefix, bundle.sequence)
        program.calls = [
            pauses.inner_call(call) for call in bundle.calls if call["seq"] != bundle.waiting
        ]
        [waiting] = [call for call in bundle.calls if call["seq"] == bundle.waiting]

        async def answer() -> Any:
            envelope = await self._resume_call(approval, principal)
            return program.settle(waiting["seq"], waiting["function"], waiting["tool"], envelope)

        outcome: ProgramOutcome | Paused
        program.tier = bundle.tier
        if bundle.tier == CPYTHON:
            record = replay.Record.decode(bundle.state)
            outcome = await self._run_cpython(record.code, program, record=record, first=answer)
        else:
            outcome = await self.monty.resume(
                bundle.state,
                answer,
                call=program,
                limits=self.limits,
                stdout=bundle.stdout,
                batch=Batch.from_json(bundle.batch) if bundle.batch else None,
            )
        return await self._answer(program, outcome, context)

    async def resume(self, approval: ApprovalRecord, principal: Principal) -> ResultEnvelope:
        """`Harness.resume` of an approval an inner call waits on: continue its program as a
        new run_code call, the paused one its parent."""
        snapshot = approval.snapshot or b""
        if snapshot.startswith(TAKEN):
            # Another resume continued the program: answer with what that continuation
            # answered, as `Harness.resume` does for a call another resume took up.
            taker = snapshot[len(TAKEN) :].decode()
            record = await anyio.to_thread.run_sync(self._ledger().get, taker)
            if record is not None and record.envelope is not None:
                return ResultEnvelope.model_validate(record.envelope)
        return await self._invoke(
            Proposal(
                f"resume-{approval.approval_id}", RUN_CODE_REF, {"resume": approval.approval_id}
            ),
            principal=principal,
            session=approval.session,
            parent_request_id=approval.parent_request_id,
            environment={k: v for k, v in approval.environment.items() if k != "origin"},
        )

    def close(self) -> None:
        """Stop the Monty workers and kill the spare CPython sandboxes; both start again at
        the next program."""
        self.monty.close()
        if self._spares is not None:
            self._spares.close()


def _raised_by_call(outcome: ProgramOutcome, program: Program) -> ErrorCategory | None:
    """The category of the inner call whose exception ended the program, if one did."""
    last = program.calls[-1] if program.calls else None
    if last is None or last.error is None:
        return None
    category = ErrorCategory(last.error)
    raised = _ERROR_TYPES.get(category, "RuntimeError")
    if outcome.error_type == raised and last.tool in (outcome.error or ""):
        return category
    return None


def _program_category(outcome: ProgramOutcome) -> ErrorCategory:
    if outcome.error_type == "TimeoutError":
        return ErrorCategory.TIMEOUT
    return ErrorCategory.INVALID_ARGUMENT  # the program (run_code's argument) is at fault


def _program_fix(outcome: ProgramOutcome, program: Program) -> str:
    done = program.effects()
    if done["committed"] or done["unknown"]:
        return (
            "Some inner calls already took effect (see calls); do not rerun the whole "
            "program: fix it to continue from what is done."
        )
    return "Fix the program and run it again; no inner call took effect."


def is_code_origin(environment: Mapping[str, Any]) -> bool:
    """Whether a call's environment marks it as made from inside a program."""
    return environment.get("origin") == ORIGIN


__all__ = ["RUN_CODE_ID", "RUN_CODE_REF", "CodeMode", "is_code_origin", "run_code_contract"]
