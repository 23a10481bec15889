"""`CedarPolicyEngine`: policy decisions by Cedar, over the shipped defaults plus operator files.

The Cedar model:

    principal  Toolkeeper::Principal::"<id>"       tenant, kind, capabilities (Set<String>)
    action     Toolkeeper::Action::"invoke"
    resource   Toolkeeper::Tool::"<id@version>"    id, version, side_effect, open_world,
               idempotency, required_capabilities, input_classification, output_classification
    context    arguments, environment (records), omitted (Set<String>), tenant?, target?

Annotations on permits shape the outcome: `@approval("required")` asks a human,
`@conditions("amount <= 100; dry_run == true")` allows only under constraints the harness
enforces before dispatch, `@id("...")` names the policy in decisions and the ledger.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
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
_ACTION = {"type": "Toolkeeper::Action", "id": "invoke"}
# Cedar's JSON reads a record with one of these keys as an entity or extension value: an
# argument could otherwise smuggle in `{"__entity": ...}` and impersonate a principal.
_RESERVED_KEYS = frozenset({"__entity", "__extn", "__expr"})
_LONG_RANGE = range(-(2**63), 2**63)
_DECIMAL_LIMIT = Decimal("922337203685477.5807")
_OMIT = object()
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
    """

    def __init__(
        self,
        *,
        policies: str = "",
        policy_files: Sequence[str | Path] = (),
        include_defaults: bool = True,
    ) -> None:
        sources: list[tuple[str, str]] = []
        if include_defaults:
            sources.append(("toolkeeper/policy/default.cedar", default_policies()))
        for path in policy_files:
            try:
                sources.append((str(path), Path(path).read_text(encoding="utf-8")))
            except OSError as exc:
                raise PolicyError(
                    f"cannot read policy file {path}: {exc}", source=str(path)
                ) from exc
        if policies:
            sources.append(("<policies>", policies))
        statements = [stmt for source, text in sources for stmt in _split_statements(source, text)]
        try:
            self._policy_set = cedarpy.PolicySet.from_str("\n".join(text for _, text in sources))
        except ValueError as exc:
            raise _syntax_error(statements, exc) from None
        self._sources = tuple(source for source, _ in sources)
        # Building the Cedar context costs more than evaluating it; parts no policy names
        # are left out (a policy cannot read what it never mentions).
        text = "\n".join(text for _, text in sources)
        self._reads = frozenset(part for part in _CONTEXT_PARTS if part in text)
        self._decisions: dict[tuple[Principal, _Tool, str], PolicyDecision] = {}
        self._policies = _read_annotations(self._policy_set, statements)

    def __repr__(self) -> str:
        return f"CedarPolicyEngine(policies={len(self._policies)}, sources={list(self._sources)})"

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """The loaded policies' ids (``@id`` or Cedar's positional id), in source order."""
        return tuple(policy.label for policy in sorted(self._policies.values(), key=_by_order))

    def decide(self, request: PolicyRequest) -> PolicyDecision:
        """Decide one request; never raises: a failure is a deny naming the error.

        Cedar's answer is a pure function of the policy set, the two entities and the
        context, so answers are kept per (principal, tool, context) — up to _CACHED of them,
        oldest dropped first. Errors are never kept: a retry evaluates again."""
        try:
            tool = _Tool.of(request.contract)
            context = _context_json(request, self._reads)
            key = (request.principal, tool, context)
            known = self._decisions.get(key)
            if known is not None:
                return known
            result = cedarpy.is_authorized(
                {
                    "principal": {"type": _PRINCIPAL_TYPE, "id": request.principal.id},
                    "action": _ACTION,
                    "resource": {"type": _TOOL_TYPE, "id": request.contract.ref},
                    "context": context,
                },
                self._policy_set,
                _entities(request.principal, tool),
            )
            decision = self._interpret(result, request)
        except Exception as exc:
            return engine_error(f"Cedar evaluation failed: {type(exc).__name__}: {exc}")
        if "toolkeeper.evaluation_error" not in decision.policy_ids:
            if len(self._decisions) >= _CACHED:
                self._decisions.pop(next(iter(self._decisions)), None)
            self._decisions[key] = decision
        return decision

    def _interpret(self, result: cedarpy.AuthzResult, request: PolicyRequest) -> PolicyDecision:
        fired = sorted((self._policies[pid] for pid in result.diagnostics.reasons), key=_by_order)
        labels = tuple(policy.label for policy in fired)
        errors = tuple(
            _CEDAR_POLICY_ID.sub(lambda m: f"`{self._label(m[1])}`", error)
            for error in result.diagnostics.errors
        )
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
                (f"no policy permits {request.principal.id} to invoke {request.contract.ref}",),
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
                {
                    "uid": {"type": _PRINCIPAL_TYPE, "id": principal.id},
                    "attrs": {
                        "tenant": principal.tenant,
                        "kind": principal.kind,
                        "capabilities": sorted(principal.capabilities),
                    },
                    "parents": [],
                },
                {"uid": {"type": _TOOL_TYPE, "id": tool.ref}, "attrs": attrs, "parents": []},
            ]
        )
    )


_CONTEXT_PARTS = ("arguments", "environment", "target", "omitted")
_CACHED = 4096


def _context_json(request: PolicyRequest, reads: frozenset[str] = frozenset(_CONTEXT_PARTS)) -> str:
    """The Cedar context as JSON, with the parts named in `reads`. Values Cedar cannot hold
    (null, floats that are no Cedar decimal, integers beyond 64 bits, records using Cedar's
    escape keys, lists holding any of these) are left out and their JSON pointers listed in
    ``context.omitted``; a policy that reads a left-out value fails to evaluate, which
    denies."""
    omitted: list[str] = []
    context: dict[str, Any] = {}
    for name, values in (("arguments", request.arguments), ("environment", request.environment)):
        if name not in reads and "omitted" not in reads:
            continue
        record = _record(values, f"/{name}", omitted)
        if record is _OMIT:
            omitted.append(f"/{name}")
        elif name in reads:
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
    return json.dumps(context)


def _record(values: Mapping[Any, Any], path: str, omitted: list[str]) -> Any:
    if not _RESERVED_KEYS.isdisjoint(values):
        return _OMIT
    record = {}
    for key, value in values.items():
        where = f"{path}/{escape(str(key))}"
        converted = _cedar_value(value, where, omitted) if isinstance(key, str) else _OMIT
        if converted is _OMIT:
            omitted.append(where)
        else:
            record[key] = converted
    return record


def _cedar_value(value: Any, path: str, omitted: list[str]) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if value in _LONG_RANGE else _OMIT
    if isinstance(value, float):
        return _cedar_decimal(value)
    if isinstance(value, Mapping):
        return _record(value, path, omitted)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_cedar_value(item, f"{path}/{i}", omitted) for i, item in enumerate(value)]
        return _OMIT if any(item is _OMIT for item in items) else items
    return _OMIT


def _cedar_decimal(value: float) -> Any:
    # Cedar decimals carry at most four fractional digits; rounding would change the value
    # policy compares, so a float needing more is left out rather than approximated.
    if not math.isfinite(value):
        return _OMIT
    exact = Decimal(repr(value))
    exponent = exact.as_tuple().exponent
    if not isinstance(exponent, int) or exponent < -4 or abs(exact) > _DECIMAL_LIMIT:
        return _OMIT
    # A float under the limit always prints with a decimal point, as Cedar's literal needs.
    return {"__extn": {"fn": "decimal", "arg": f"{exact:f}"}}
