"""The registry: compiled tool entries by id@version, each of which can be disabled.

`compile_entry` turns what `Harness.register` was given into a frozen `ToolEntry` once: the
contract (with the verifier it really runs), its ref and digest, the executor, the read-back
hooks, the call analyzer, the context parameter, how output is serialized and the compiled
output validator.
Anything that does not fit together is refused there, with the fix, not found on a call.

Several versions of one tool live side by side, so a call approved against 1.0.0 can still be
checked against exactly that version after 2.0.0 is registered (seed 000 §11). A disabled
entry (a withdrawn or unapproved upstream tool) stays registered but does not resolve, is in
no listing and no suggestion, until it is enabled again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import jsonschema_rs

from toolkeeper.contract.functions import RESULT_KEY, contract_of, returned_schema
from toolkeeper.contract.model import SideEffect, ToolContract, semver_key
from toolkeeper.errors import RegistryError
from toolkeeper.executors import Executor
from toolkeeper.executors.inprocess import FunctionExecutor
from toolkeeper.policy import PolicyDecision
from toolkeeper.runtime.envelope import FieldError
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.output import NoJsonForm, json_output
from toolkeeper.validation.arguments import ArgumentValidator, compile_arguments

Verifier = Callable[..., Any]
"""`verifier(arguments, context) -> bool | None` (may be async): read back whether the
intended effect is in place. True confirmed, False absent, None cannot tell."""

ResourceVersionReader = Callable[..., Any]
"""`reader(arguments, context) -> dict[str, str]` (may be async): the current versions of
the resources a call would change, compared again before an approved call resumes."""


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What one call of a tool whose effect depends on its arguments will do — the shell,
    where ``ls`` and ``rm -rf build/`` are one contract. The contract declares the worst
    case (and the pipeline's durability — intents, retries — follows it); policy and the
    approver judge the call by these facts instead."""

    side_effect: SideEffect
    """This call's effect class, as policy sees it in place of the contract's."""
    open_world: bool
    account: str
    """What the call does, in a sentence a reviewer can judge (the approval shows it)."""
    summary: Mapping[str, Any] = field(default_factory=dict)
    """Recorded in the ledger with the call (for the shell: the parse tree's summary)."""
    refusal: str | None = None
    """Why the call cannot be judged at all (it is then refused before policy)."""
    decision: PolicyDecision | None = None
    """The tool's own policy answer, if it has one; the stricter of it and the engine's
    decision stands."""
    bound: Mapping[str, str] = field(default_factory=dict)
    """Facts an approval is bound to besides the arguments (for the shell: the argv digest,
    the working directory, the environment). A resumed call whose facts differ is stale."""


CallAnalyzer = Callable[[dict[str, Any], Principal], CallFacts]
"""`analyzer(arguments, principal) -> CallFacts`: judge one call by its arguments, compiled
into the entry at registration. Called once per call, at normalize (and again on resume)."""

_MAX_FIELD_ERRORS = 20


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One registered tool at one version, compiled: every fact the pipeline needs about it."""

    contract: ToolContract
    executor: Executor | None
    verifier: Verifier | None = None
    resource_version: ResourceVersionReader | None = None
    context_parameter: str | None = None
    """The executor function's parameter that receives the `ToolContext`, if any."""
    wraps_result: bool = False
    """Output is always wrapped as ``{"result": value}`` (the function's return type is not an
    object); otherwise a dict is the output as is and anything else is wrapped."""
    analyzer: CallAnalyzer | None = None
    """Judges each call by its arguments (`CallFacts`); None: the contract says it all."""
    ref: str = field(init=False)
    digest: str = field(init=False)
    validator: ArgumentValidator = field(init=False, repr=False)
    """The input schema, compiled (stage 2 runs it)."""
    _fast_validator: jsonschema_rs.Validator | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        contract = self.contract
        object.__setattr__(self, "ref", contract.ref)
        object.__setattr__(self, "digest", contract.digest())
        object.__setattr__(self, "validator", compile_arguments(contract))
        fast = None
        if contract.output_schema is not None:
            try:
                fast = jsonschema_rs.validator_for(contract.output_schema)
            except (jsonschema_rs.ValidationError, ValueError):
                fast = None  # a schema the Rust validator cannot compile is checked in Python
        object.__setattr__(self, "_fast_validator", fast)

    def check_output(self, value: Any) -> tuple[dict[str, Any] | None, tuple[FieldError, ...]]:
        """What the executor returned as structured content (`serialize_output`) and how it
        breaks the output schema (`output_errors`); None, with a ``serialization`` field
        error, when it has no JSON form."""
        try:
            output = self.serialize_output(value)
        except NoJsonForm as exc:
            problem = FieldError(
                path="",
                code="serialization",
                message=f"returned {type(value).__name__}, which has no JSON form: {exc}",
                expected="JSON values, pydantic models, dataclasses or TypedDicts",
            )
            return None, (problem,)
        return output, self.output_errors(output)

    def serialize_output(self, value: Any) -> dict[str, Any]:
        """`value` as structured content: plain JSON by `json_output`'s rules (which say
        what is converted and what refused), a non-object wrapped in ``{"result": ...}``.
        Raises `NoJsonForm` for a value with no faithful JSON form."""
        output = json_output(value)
        if self.wraps_result or not isinstance(output, dict):
            return {RESULT_KEY: output}
        return output

    def output_errors(self, output: dict[str, Any]) -> tuple[FieldError, ...]:
        """Violations of the output schema: the compiled check first, details only on
        failure."""
        schema = self.contract.output_schema
        if schema is None:
            return ()
        if self._fast_validator is not None and self._fast_validator.is_valid(output):
            return ()
        errors = jsonschema.Draft202012Validator(schema).iter_errors(output)
        return tuple(
            FieldError(
                path="/" + "/".join(str(part) for part in error.path),
                code=str(error.validator),
                message=error.message,
            )
            for _, error in zip(range(_MAX_FIELD_ERRORS), errors, strict=False)
        )


def compile_entry(
    tool: Callable[..., Any] | ToolContract,
    *,
    executor: Executor | Callable[..., Any] | None = None,
    verifier: Verifier | None = None,
    resource_version: ResourceVersionReader | None = None,
    verifiers: Mapping[str, Verifier] | None = None,
    analyzer: CallAnalyzer | None = None,
) -> ToolEntry:
    """The entry `Harness.register` adds: a function (decorated with `@tool` or not) or a
    contract plus its executor. `verifiers` are those registered by name. Raises
    `RegistryError` (or `ContractError` from the function's signature) saying the fix."""
    if isinstance(tool, ToolContract):
        contract = tool
        if executor is None:
            raise RegistryError(
                f"{contract.ref}: a contract needs an executor; pass executor=<function "
                "or Executor> to register()"
            )
    elif hasattr(tool, "__toolkeeper_contract__"):
        contract, executor = contract_of(tool), executor or tool
    else:
        contract, executor = ToolContract.from_function(tool), executor or tool
    runner = _executor(contract, executor)
    contract, verifier = _verifier(contract, verifier, verifiers or {})
    if resource_version is None and contract.resource_version is not None:
        raise RegistryError(
            f"{contract.ref} names resource-version reader {contract.resource_version!r}, but "
            "none was given; pass resource_version=<function(arguments, context)> to register()"
        )
    _require_callable(contract, resource_version, "resource_version")
    _require_callable(contract, analyzer, "analyzer", "(arguments, principal) -> CallFacts")
    context, wraps = None, False
    if isinstance(runner, FunctionExecutor):
        context = runner.context_parameter
        _check_parameters(contract, runner.fn, context)
        if contract.output_schema is not None:
            schema, wraps = returned_schema(runner.fn)
            wraps = wraps and schema == contract.output_schema
    return ToolEntry(contract, runner, verifier, resource_version, context, wraps, analyzer)


def _executor(contract: ToolContract, executor: Any) -> Executor:
    if hasattr(executor, "execute"):
        if not callable(executor.execute):
            raise RegistryError(
                f"{contract.ref}: executor {executor!r} has an `execute` that is not callable; "
                "define `async def execute(self, arguments, context)`"
            )
        runner: Executor = executor
        return runner
    if not callable(executor):
        raise RegistryError(
            f"{contract.ref}: executor {executor!r} is neither a function nor an Executor; pass "
            "a function taking the tool's arguments, or an object with "
            "`async def execute(self, arguments, context)`"
        )
    return FunctionExecutor(executor)


def _verifier(
    contract: ToolContract, verifier: Verifier | None, verifiers: Mapping[str, Verifier]
) -> tuple[ToolContract, Verifier | None]:
    """The contract and the verifier it runs, as one fact: a verifier given without a name in
    the contract is written into the contract, so the check stage gates success on it."""
    named = contract.verifier
    _require_callable(contract, verifier, "verifier")
    if verifier is None:
        if named is None:
            return contract, None
        found = verifiers.get(named)
        if found is None:
            raise RegistryError(
                f"{contract.ref} names verifier {named!r}, which is not registered; pass "
                "verifier=... or call register_verifier() first"
            )
        return contract, found
    if named is None:
        name = getattr(verifier, "__qualname__", None) or type(verifier).__qualname__
        return contract.model_copy(update={"verifier": name}), verifier
    registered = verifiers.get(named)
    if registered is not None and registered is not verifier:
        raise RegistryError(
            f"{contract.ref} names verifier {named!r}, but register() was given another "
            f"function ({_name(verifier)}); drop verifier=... to use the registered "
            f"{named!r}, or name this one in the contract"
        )
    return contract, verifier


def _require_callable(
    contract: ToolContract,
    hook: Any,
    kind: str,
    signature: str = "(arguments, context), sync or async",
) -> None:
    if hook is not None and not callable(hook):
        raise RegistryError(
            f"{contract.ref}: {kind}={hook!r} is not callable; pass a function {signature}"
        )


def _check_parameters(contract: ToolContract, fn: Callable[..., Any], context: str | None) -> None:
    """Every input field must have a parameter to land in, or each call fails in the tool."""
    fields = contract.input_schema.get("properties")
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: nothing to compare
        return
    if not isinstance(fields, dict):
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    named = {
        name
        for name, p in parameters.items()
        if name != context and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    missing = sorted(set(fields) - named)
    if missing:
        raise RegistryError(
            f"{contract.ref}: executor {_name(fn)} has no parameter for input field(s) "
            f"{', '.join(missing)}; add them to its signature (or **kwargs), or remove them "
            "from the input schema"
        )


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


class Registry:
    """Compiled entries keyed by `id@version`; `latest(id)` is the highest enabled semver.

    Only enabled entries resolve (`get`, `latest`, `find`, `refs`, `latest_contracts`);
    `disabled(ref)` says why one does not.
    """

    def __init__(self) -> None:
        self._entries: dict[str, ToolEntry] = {}
        self._versions: dict[str, set[str]] = {}  # id → every registered ref
        self._disabled: dict[str, str] = {}  # ref → reason
        self._latest: dict[str, str] = {}  # id → ref of the highest enabled version
        self.generation = 0
        """Bumped on every change, so caches of rendered views know when to rebuild."""
        self._listeners: list[Callable[[str, str | None], None]] = []

    def subscribe(self, listener: Callable[[str, str | None], None]) -> None:
        """Call `listener(tool_id, added_ref)` after every change to a tool: an add (with
        the ref added), a disable or an enable (with None). Views stay current this way
        however the registry is changed — by `register`, or by the gateway withholding an
        upstream tool."""
        self._listeners.append(listener)

    def add(self, entry: ToolEntry) -> None:
        """Register `entry`. The same content with the same code again is a no-op; different
        content, or other code (executor, verifier, version reader) behind the same content,
        under a registered ref is refused, unless that ref is disabled (a withdrawn
        definition is replaced, and stays disabled until `enable`)."""
        ref = entry.ref
        existing = self._entries.get(ref)
        if existing is not None and ref not in self._disabled:
            if _content(existing) != _content(entry):
                raise RegistryError(
                    f"{ref} is already registered with different content "
                    f"({existing.digest[:19]} vs {entry.digest[:19]}); "
                    "a changed tool needs a new version"
                )
            if _code(existing) != _code(entry):
                # An approval binds the ref and digest: swapping the code behind them would
                # run what nobody approved.
                raise RegistryError(
                    f"{ref} is already registered with another executor or hook; a changed "
                    "implementation needs a new version (or disable the ref first)"
                )
            return
        self._entries[ref] = entry
        self._versions.setdefault(entry.contract.id, set()).add(ref)
        self._changed(entry.contract.id, ref)

    def disable(self, ref: str, reason: str) -> None:
        """Stop serving `ref`: it no longer resolves, lists or is suggested, so no call can
        reach its executor or wait for an approval. `reason` says why, for operators."""
        self._require(ref)
        already = ref in self._disabled
        self._disabled[ref] = reason
        if not already:  # a new reason alone changes no view
            self._changed(self._entries[ref].contract.id)

    def enable(self, ref: str) -> None:
        """Serve `ref` again."""
        self._require(ref)
        if self._disabled.pop(ref, None) is not None:
            self._changed(self._entries[ref].contract.id)

    def disabled(self, ref: str) -> str | None:
        """Why `ref` is disabled, or None when it is served (or unknown)."""
        return self._disabled.get(ref)

    def get(self, ref: str) -> ToolEntry | None:
        """The enabled entry registered as `ref`."""
        return None if ref in self._disabled else self._entries.get(ref)

    def entry(self, ref: str) -> ToolEntry | None:
        """The entry registered as `ref`, enabled or not."""
        return self._entries.get(ref)

    def latest(self, tool_id: str) -> ToolEntry | None:
        ref = self._latest.get(tool_id)
        return self._entries[ref] if ref else None

    def find(self, name: str) -> ToolEntry | None:
        """By `id@version`, else the latest version of `id`."""
        return self.get(name) or self.latest(name)

    def all_refs(self) -> list[str]:
        """Every registered ref, disabled ones too, sorted."""
        return sorted(self._entries)

    def refs(self) -> list[str]:
        """Every enabled ref, sorted."""
        return sorted(ref for ref in self._entries if ref not in self._disabled)

    def latest_contracts(self) -> list[ToolContract]:
        return [self._entries[ref].contract for ref in sorted(self._latest.values())]

    def __contains__(self, ref: object) -> bool:
        """Whether `ref` is registered, enabled or not."""
        return ref in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def _require(self, ref: str) -> None:
        if ref not in self._entries:
            raise RegistryError(f"{ref} is not registered; register() it first")

    def _changed(self, tool_id: str, added: str | None = None) -> None:
        enabled = [ref for ref in self._versions[tool_id] if ref not in self._disabled]
        if enabled:
            self._latest[tool_id] = max(
                enabled, key=lambda ref: (semver_key(self._entries[ref].contract.version), ref)
            )
        else:
            self._latest.pop(tool_id, None)
        self.generation += 1
        for listener in self._listeners:
            listener(tool_id, added)


def _code(entry: ToolEntry) -> tuple[Any, ...]:
    """What runs for an entry, by identity (a function executor by its function)."""
    executor = entry.executor
    runs = executor.fn if isinstance(executor, FunctionExecutor) else executor
    return (runs, entry.verifier, entry.resource_version, entry.analyzer)


def _content(entry: ToolEntry) -> tuple[str, str]:
    # The implementation digest alone misses contract edits made at registration (a verifier).
    return entry.digest, entry.contract.content_digest()
