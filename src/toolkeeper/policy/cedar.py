"""`CedarPolicyEngine`: policy decisions by Cedar, over the shipped defaults plus operator files.

The Cedar model:

    principal  Toolkeeper::Principal::"<id>"       tenant, kind, capabilities (Set<String>)
    action     Toolkeeper::Action::"invoke" (run the tool), "elicit", "sample" and "roots"
               (the tool's upstream asks the calling client for input, a completion or its
               roots mid-call)
    resource   Toolkeeper::Tool::"<id@version>"    id, version, side_effect, open_world,
               idempotency, required_capabilities, input_classification, output_classification
    (reads)    Toolkeeper::Action::"read_resource" on Toolkeeper::Resource::"<uri>" and
               "get_prompt" on Toolkeeper::Prompt::"<name>" (an upstream's, served read-only
               by the gateway): attributes server, kind (resource, template, prompt), name
    context    arguments, environment (records), omitted (Set<String>), tenant?, target?

Annotations on permits shape the outcome: `@approval("required")` asks a human,
`@conditions("amount <= 100; dry_run == true")` allows only under constraints the harness
enforces before dispatch, `@id("...")` names the policy in decisions and the ledger.

Values in the context are exact or the call is denied (docs/policy-values.md): a policy that
guards with `has` must never be skipped because a value was left out. A JSON number is a
Long when it is an integer within 64 bits (`20000`, `2e4` and `20000.0` alike), a decimal
when it has at most four decimal places within decimal's range, and otherwise the record
``{number: "<its exact text>"}``: equality with any Long or decimal is then rightly false,
and every ordering (`>`, `.lessThan`) is a type error, which denies — rounding could not
promise that, since no direction of rounding is safe for both a forbid's `>` and a permit's
`<`. Only a null object member is left out (listed in ``context.omitted``: a null compares
to nothing); any other value Cedar cannot hold (null in a list, NaN, a key Cedar reads as
an escape, a non-JSON object) denies the call as ``toolkeeper.unrepresentable_value``.

Answers are cached per (principal, tool, context JSON), bounded by bytes: a context over
64 KiB is never kept, and the whole cache accounts for at most ``decision_cache_bytes``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import re
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cedarpy

from toolkeeper.errors import PolicyError
from toolkeeper.policy.decision import (
    Condition,
    Decision,
    PolicyDecision,
    PolicyRequest,
    ReadRequest,
    engine_error,
    parse_conditions,
    string_continues,
)
from toolkeeper.schema.document import escape

if TYPE_CHECKING:
    from toolkeeper.contract.model import ToolContract
    from toolkeeper.runtime.invocation import Principal

_PRINCIPAL_TYPE = "Toolkeeper::Principal"
_TOOL_TYPE = "Toolkeeper::Tool"
_ACTION_TYPE = "Toolkeeper::Action"
_READ_TYPES = {
    "prompt": "Toolkeeper::Prompt",
    "resource": "Toolkeeper::Resource",
    "template": "Toolkeeper::Resource",
}
# Cedar's JSON reads a record with one of these keys as an entity or extension value: an
# argument could otherwise smuggle in `{"__entity": ...}` and impersonate a principal.
_RESERVED_KEYS = frozenset({"__entity", "__extn", "__expr"})
_LONG_RANGE = range(-(2**63), 2**63)
_DECIMAL_LIMIT = Decimal("922337203685477.5807")
DECISION_CACHE_BYTES = 8 * 1024 * 1024
"""The decision cache's default bound, in accounted bytes (see `_DecisionCache`)."""
_CEDAR_POLICY_ID = re.compile(r"`(policy\d+)`")


@functools.cache
def default_policies() -> str:
    """The shipped Cedar policy set (``toolkeeper/policy/default.cedar``)."""
    return resources.files("toolkeeper.policy").joinpath("default.cedar").read_text("utf-8")


@dataclasses.dataclass(frozen=True, slots=True)
class _Policy:
    label: str
    order: int
    approval: bool
    conditions: tuple[Condition, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Statement:
    source: str
    line: int
    text: str


class CedarPolicyEngine:
    """Decide with Cedar: the shipped defaults plus operator policy text, parsed once.

    A satisfied forbid denies; no satisfied permit denies (``toolkeeper.default_deny``); any
    evaluation error denies, so policies should guard optional attributes with ``has``.
    Among satisfied permits the most cautious wins: require_approval > allow_with_conditions >
    allow. An approval carries the conditions written on the approval permits; an allow with
    conditions carries those of every satisfied permit, all of which must hold.
    `decision_cache_bytes` bounds the cache of answers (0 keeps none).
    """

    def __init__(
        self,
        *,
        policies: str = "",
        policy_files: Sequence[str | Path] = (),
        include_defaults: bool = True,
        decision_cache_bytes: int = DECISION_CACHE_BYTES,
    ) -> None:
        sources: list[tuple[str, str]] = []
        if include_defaults:
            sources.append(("toolkeeper/policy/default.cedar", default_policies()))
        sources += policy_sources(policy_files, policies)
        self._policy_set, statements = compile_policies(sources)
        self._sources = tuple(source for source, _ in sources)
        # Building the Cedar context costs more than evaluating it; parts no policy names
        # are left out (a policy cannot read what it never mentions).
        text = "\n".join(text for _, text in sources)
        self._reads = frozenset(part for part in _CONTEXT_PARTS if part in text)
        self._decisions = _DecisionCache(decision_cache_bytes)
        self._policies = _read_annotations(self._policy_set, statements)

    def __repr__(self) -> str:
        return (
            f"CedarPolicyEngine(policies={len(self._policies)}, sources={list(self._sources)}, "
            f"decision_cache_bytes={self._decisions.limit})"
        )

    @property
    def cached_bytes(self) -> int:
        """What the decision cache accounts for now; never above ``decision_cache_bytes``."""
        return self._decisions.size

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """The loaded policies' ids (``@id`` or Cedar's positional id), in source order."""
        return tuple(policy.label for policy in sorted(self._policies.values(), key=_by_order))

    def decide(self, request: PolicyRequest) -> PolicyDecision:
        """Decide one request; never raises: a failure is a deny naming the error.

        Cedar's answer is a pure function of the policy set, the two entities and the
        context, so answers are kept per (principal, tool, context) within the cache's byte
        bound. Errors are never kept: a retry evaluates again."""
        try:
            tool = _Tool.of(request.contract)
            context, inexact = _context_json(request, self._reads)
            key = (request.principal, tool, context, request.action)
            known = self._decisions.get(key)
            if known is not None:
                return known
            result = cedarpy.is_authorized(
                {
                    "principal": {"type": _PRINCIPAL_TYPE, "id": request.principal.id},
                    "action": {"type": _ACTION_TYPE, "id": request.action},
                    "resource": {"type": _TOOL_TYPE, "id": request.contract.ref},
                    "context": context,
                },
                self._policy_set,
                _entities(request.principal, tool),
            )
            asked = f"{request.principal.id} to {request.action} {request.contract.ref}"
            decision = self._interpret(result, asked, inexact)
        except _Unrepresentable as exc:
            return PolicyDecision(
                Decision.DENY,
                ("toolkeeper.unrepresentable_value",),
                (f"{exc}: Cedar cannot hold it, so policy cannot judge the call",),
            )
        except Exception as exc:
            return engine_error(f"Cedar evaluation failed: {type(exc).__name__}: {exc}")
        if "toolkeeper.evaluation_error" not in decision.policy_ids:
            self._decisions.keep(key, decision)
        return decision

    def decide_read(self, request: ReadRequest) -> PolicyDecision:
        """Decide a read of an upstream's prompt or resource; never raises. Not cached: a
        read costs one evaluation, and the ids are the upstream's, unbounded in number."""
        try:
            context: dict[str, Any] = {}
            tenant = request.environment.get("tenant")
            if tenant is not None:
                context["tenant"] = str(tenant)
            kind = _READ_TYPES.get(request.kind)
            if kind is None:
                raise ValueError(f"unknown kind {request.kind!r}")
            principal = request.principal
            entities = [
                principal_entity(principal),
                {
                    "uid": {"type": kind, "id": request.id},
                    "attrs": {"server": request.server, "kind": request.kind},
                    "parents": [],
                },
            ]
            result = cedarpy.is_authorized(
                {
                    "principal": {"type": _PRINCIPAL_TYPE, "id": principal.id},
                    "action": {"type": _ACTION_TYPE, "id": request.action},
                    "resource": {"type": kind, "id": request.id},
                    "context": context,
                },
                self._policy_set,
                cedarpy.Entities.from_json_str(json.dumps(entities)),
            )
            asked = f"{principal.id} to {request.action} {request.kind} {request.id!r}"
            return self._interpret(result, asked, {})
        except Exception as exc:
            return engine_error(f"Cedar evaluation failed: {type(exc).__name__}: {exc}")

    def _interpret(
        self, result: cedarpy.AuthzResult, asked: str, inexact: dict[str, str]
    ) -> PolicyDecision:
        fired = sorted((self._policies[pid] for pid in result.diagnostics.reasons), key=_by_order)
        labels = tuple(policy.label for policy in fired)
        errors = tuple(
            _CEDAR_POLICY_ID.sub(lambda m: f"`{self._label(m[1])}`", error)
            for error in result.diagnostics.errors
        )
        if errors and inexact:
            errors += (_inexact_note(inexact),)
        if result.decision is cedarpy.Decision.Deny and fired:
            return PolicyDecision(
                Decision.DENY, labels, tuple(f"forbidden by {label}" for label in labels) + errors
            )
        if errors:
            return PolicyDecision(Decision.DENY, ("toolkeeper.evaluation_error",), errors)
        if result.decision is not cedarpy.Decision.Allow:
            return PolicyDecision(
                Decision.DENY,
                ("toolkeeper.default_deny",),
                (f"no policy permits {asked}",),
            )
        asking = [policy for policy in fired if policy.approval]
        if asking:
            # The human sees the exact call, so only conditions written on the approval
            # permits themselves still apply; other permits' conditions were another road.
            return PolicyDecision(
                Decision.REQUIRE_APPROVAL,
                labels,
                (f"approval required by {', '.join(policy.label for policy in asking)}",),
                _conditions_of(asking),
            )
        conditions = _conditions_of(fired)
        if conditions:
            described = "; ".join(condition.describe() for condition in conditions)
            reason = f"allowed by {', '.join(labels)} on conditions: {described}"
            return PolicyDecision(Decision.ALLOW_WITH_CONDITIONS, labels, (reason,), conditions)
        return PolicyDecision(Decision.ALLOW, labels, (f"allowed by {', '.join(labels)}",))

    def _label(self, cedar_id: str) -> str:
        policy = self._policies.get(cedar_id)
        return policy.label if policy else cedar_id


def principal_entity(principal: Principal) -> dict[str, Any]:
    """The principal as a Cedar entity, in the one shape every decision (tools, reads,
    shell commands) gives it."""
    return {
        "uid": {"type": _PRINCIPAL_TYPE, "id": principal.id},
        "attrs": {
            "tenant": principal.tenant,
            "kind": principal.kind,
            "capabilities": sorted(principal.capabilities),
        },
        "parents": [],
    }


def policy_sources(policy_files: Sequence[str | Path], policies: str) -> list[tuple[str, str]]:
    """(source name, text) of each policy file and of inline policies, in that order; an
    unreadable file is a `PolicyError` naming it."""
    sources = []
    for path in policy_files:
        try:
            sources.append((str(path), Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {path}: {exc}", source=str(path)) from exc
    if policies:
        sources.append(("<policies>", policies))
    return sources


def compile_policies(
    sources: Sequence[tuple[str, str]],
) -> tuple[cedarpy.PolicySet, list[_Statement]]:
    """One Cedar policy set from `sources`, with each statement remembered by source and
    line so a syntax error points at the file that has it."""
    statements = [stmt for source, text in sources for stmt in _split_statements(source, text)]
    try:
        policy_set = cedarpy.PolicySet.from_str("\n".join(text for _, text in sources))
    except ValueError as exc:
        raise _syntax_error(statements, exc) from None
    return policy_set, statements


def _by_order(policy: _Policy) -> int:
    return policy.order


def _conditions_of(policies: list[_Policy]) -> tuple[Condition, ...]:
    return tuple(dict.fromkeys(c for policy in policies for c in policy.conditions))


def _split_statements(source: str, text: str) -> list[_Statement]:
    """Cut Cedar text at top-level semicolons, remembering where each policy starts, so a
    parse error can name its line (Cedar's messages carry no position)."""
    statements: list[_Statement] = []
    start, line, first_line = 0, 1, None
    in_string = escaped = in_comment = False
    for index, char in enumerate(text):
        if char == "\n":
            line += 1
            in_comment = False
        elif in_comment:
            continue
        elif in_string:
            in_string, escaped = string_continues(char, escaped)
        elif char == "/" and text.startswith("//", index):
            in_comment = True
        elif char == ";":
            statements.append(_Statement(source, first_line or line, text[start : index + 1]))
            start, first_line = index + 1, None
        elif not char.isspace():
            in_string = char == '"'
            first_line = first_line or line
    if first_line is not None:
        statements.append(_Statement(source, first_line, text[start:]))
    return statements


def _syntax_error(statements: list[_Statement], exc: ValueError) -> PolicyError:
    for statement in statements:
        try:
            cedarpy.PolicySet.from_str(statement.text)
        except ValueError as found:
            return _at(statement, f"{found}. Fix the Cedar syntax of the policy starting here")
    return PolicyError(f"Cedar cannot parse the policies: {exc}")


def _at(statement: _Statement | None, message: str) -> PolicyError:
    if statement is None:
        return PolicyError(message)
    return PolicyError(
        f"{statement.source}, line {statement.line}: {message}",
        source=statement.source,
        line=statement.line,
        text=statement.text.strip(),
    )


def _read_annotations(
    policy_set: cedarpy.PolicySet, statements: list[_Statement]
) -> dict[str, _Policy]:
    """Check every policy's toolkeeper annotations and index them by Cedar policy id."""
    tree = policy_set.to_pst()
    # Cedar numbers policies and templates in one positional sequence, like our statements;
    # if the counts disagree we still check everything, only without line numbers.
    located = len(statements) == len(tree.static_policies) + len(tree.templates)

    def where(cedar_id: str) -> _Statement | None:
        return statements[int(cedar_id.removeprefix("policy"))] if located else None

    if tree.templates:
        template = next(iter(tree.templates))
        raise _at(where(template), "templates (?principal, ?resource) are never linked here")
    policies: dict[str, _Policy] = {}
    seen: dict[str, str] = {}
    for cedar_id, node in tree.static_policies.items():
        notes = node.annotations
        label = notes.get("id") or cedar_id
        if label in seen:
            raise _at(where(cedar_id), f"policy id {label!r} is already used by {seen[label]}")
        statement = where(cedar_id)
        seen[label] = f"{statement.source}, line {statement.line}" if statement else label
        if node.effect == "forbid" and ("approval" in notes or "conditions" in notes):
            raise _at(statement, "@approval and @conditions belong on permit policies only")
        if notes.get("approval", "required") != "required":
            raise _at(statement, f'@approval({notes["approval"]!r}): write @approval("required")')
        try:
            conditions = parse_conditions(notes["conditions"]) if "conditions" in notes else ()
        except PolicyError as exc:
            raise _at(statement, str(exc)) from None
        order = int(cedar_id.removeprefix("policy"))
        policies[cedar_id] = _Policy(label, order, "approval" in notes, conditions)
    return policies


@dataclasses.dataclass(frozen=True, slots=True)
class _Tool:
    """The contract facts the Cedar tool entity carries; hashable, so entities can be cached."""

    ref: str
    id: str
    version: str
    side_effect: str
    open_world: bool
    idempotency: str
    required_capabilities: tuple[str, ...]
    input_classification: str
    output_classification: str

    @classmethod
    def of(cls, contract: ToolContract) -> _Tool:
        return cls(
            ref=contract.ref,
            id=contract.id,
            version=contract.version or "0.0.0",
            side_effect=contract.effective_side_effect.value,
            open_world=contract.open_world,
            idempotency=contract.effective_idempotency.value,
            required_capabilities=tuple(sorted(contract.required_capabilities)),
            input_classification=contract.data_classification.inputs.value,
            output_classification=contract.data_classification.outputs.value,
        )


@functools.lru_cache(maxsize=1024)
def _entities(principal: Principal, tool: _Tool) -> cedarpy.Entities:
    # Parsing entities costs more than evaluating the policies; a harness sees the same
    # principal and tool pairs again and again, so the parsed handle is kept.
    attrs = dataclasses.asdict(tool)
    del attrs["ref"]
    return cedarpy.Entities.from_json_str(
        json.dumps(
            [
                principal_entity(principal),
                {"uid": {"type": _TOOL_TYPE, "id": tool.ref}, "attrs": attrs, "parents": []},
            ]
        )
    )


_CONTEXT_PARTS = ("arguments", "environment", "target", "omitted")
_LARGEST_KEPT = 64 * 1024
_ENTRY_OVERHEAD = 1024
_INEXACT_NAMED = 3


class _DecisionCache:
    """Cedar answers by (principal, tool, context JSON), oldest dropped first, bounded by bytes.

    An entry is accounted as its context's length (ASCII JSON: one byte a character) plus
    `_ENTRY_OVERHEAD` for the key tuple, the dict slot and the decision, which is measured
    at about 0.6 KB. A context over `_LARGEST_KEPT` is never kept: a large argument is
    rarely sent twice, and keeping it would push out hundreds of small answers. A lock keeps
    the accounting true when the authorize stage runs on several threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._entries: dict[tuple[Principal, _Tool, str, str], PolicyDecision] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[Principal, _Tool, str, str]) -> PolicyDecision | None:
        return self._entries.get(key)

    def keep(self, key: tuple[Principal, _Tool, str, str], decision: PolicyDecision) -> None:
        cost = _cost(key)
        if len(key[2]) > _LARGEST_KEPT or cost > self.limit:
            return
        with self._lock:
            if key in self._entries:
                return
            while self.size + cost > self.limit:
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                self.size -= _cost(oldest)
            self._entries[key] = decision
            self.size += cost


def _cost(key: tuple[Principal, _Tool, str, str]) -> int:
    return len(key[2]) + _ENTRY_OVERHEAD


class _Unrepresentable(Exception):
    """A value in the context Cedar has no form for; the engine denies the call."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem


def _context_json(
    request: PolicyRequest, reads: frozenset[str] = frozenset(_CONTEXT_PARTS)
) -> tuple[str, dict[str, str]]:
    """The Cedar context as JSON, with the parts named in `reads`, and the numbers it holds
    as ``{number: text}`` records (JSON pointer → text). A null object member is left out
    and its pointer listed in ``context.omitted``; any other value Cedar cannot hold raises
    `_Unrepresentable`."""
    omitted: list[str] = []
    inexact: dict[str, str] = {}
    context: dict[str, Any] = {}
    for name, values in (("arguments", request.arguments), ("environment", request.environment)):
        if name not in reads and "omitted" not in reads:
            continue
        record = _record(values, f"/{name}", omitted, inexact)
        if name in reads:
            context[name] = record
    if "tenant" in request.environment:
        tenant = request.environment["tenant"]
        if not isinstance(tenant, str):
            raise TypeError(f"environment['tenant'] must be a string, not {tenant!r}")
        context["tenant"] = tenant
    if request.resource is not None and "target" in reads:
        context["target"] = request.resource
    if "omitted" in reads:
        context["omitted"] = omitted
    return json.dumps(context), inexact


def _record(
    values: Mapping[Any, Any], path: str, omitted: list[str], inexact: dict[str, str]
) -> dict[str, Any]:
    record = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise _Unrepresentable(path, f"has the key {key!r} (not a string)")
        where = f"{path}/{escape(key)}"
        if key in _RESERVED_KEYS:
            raise _Unrepresentable(where, f"uses {key}, a key Cedar reads as an escape")
        if value is None:
            omitted.append(where)
        else:
            record[key] = _cedar_value(value, where, omitted, inexact)
    return record


def _cedar_value(value: Any, path: str, omitted: list[str], inexact: dict[str, str]) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return _cedar_number(value, path, inexact)
    if isinstance(value, Mapping):
        return _record(value, path, omitted, inexact)
    if isinstance(value, list | tuple | set | frozenset):
        items = []
        for index, item in enumerate(value):
            if item is None:
                # Leaving the item out would change what the set holds (`isEmpty`, `==`).
                raise _Unrepresentable(f"{path}/{index}", "is null inside a list")
            items.append(_cedar_value(item, f"{path}/{index}", omitted, inexact))
        return items
    raise _Unrepresentable(path, f"is a {type(value).__name__} (not a JSON value)")


def _cedar_number(value: int | float, path: str, inexact: dict[str, str]) -> Any:
    """The number exactly: a Long, a decimal, or the record ``{number: text}``.

    A float is the JSON number it prints as (`repr`, what `json.dumps` writes into the
    ledger, the approval and an upstream's request), so 1e23 is 10**23 here. Equal numbers
    get equal text (integers as digits, fractions as `repr`), so record equality stays
    numeric equality."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Unrepresentable(path, f"is {value!r} (not a JSON number)")
        exact = Decimal(repr(value))
        if exact != exact.to_integral_value():
            exponent = exact.as_tuple().exponent
            if isinstance(exponent, int) and exponent >= -4 and abs(exact) <= _DECIMAL_LIMIT:
                # A fraction prints with a decimal point, as Cedar's decimal literal needs.
                return {"__extn": {"fn": "decimal", "arg": f"{exact:f}"}}
            inexact[path] = repr(value)
            return {"number": repr(value)}
        value = int(exact)
    if value in _LONG_RANGE:
        return value
    inexact[path] = str(value)
    return {"number": str(value)}


def _inexact_note(inexact: dict[str, str]) -> str:
    """Why an evaluation error may have come from a number no Long or decimal holds."""
    first = itertools.islice(inexact.items(), _INEXACT_NAMED)
    named = ", ".join(f"{path} = {text}" for path, text in first)
    more = len(inexact) - _INEXACT_NAMED
    return (
        f"{named}{f' and {more} more' if more > 0 else ''}: no Cedar Long (64-bit integer) "
        "or decimal (4 decimal places, at most 922337203685477.5807) holds "
        f"{'this number' if len(inexact) == 1 else 'these numbers'} exactly, so policy sees "
        '{number: "<text>"}, which no ordering (> < .lessThan) accepts'
    )
