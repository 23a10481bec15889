"""The policy seam: what an engine is asked (`PolicyRequest`), what it answers
(`PolicyDecision`, with `Condition`s), and `decide_safely`, which the authorize stage calls.

`decide_safely` turns anything but a well-formed `PolicyDecision` (an exception, garbage, an
unknown decision) into a deny: the policy seam fails closed (seed 000 §12, DESIGN.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolkeeper.errors import PolicyError
from toolkeeper.schema.document import resolve

if TYPE_CHECKING:
    from toolkeeper.contract.model import ToolContract
    from toolkeeper.runtime.invocation import Principal


class Decision(StrEnum):
    """What policy says about one call. Anything else is treated as deny."""

    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"
    ALLOW_WITH_CONDITIONS = "allow_with_conditions"


# -- conditions -----------------------------------------------------------------------------

CONDITION_GRAMMAR = (
    "FIELD OP VALUE, where FIELD is an argument name or a JSON pointer such as /items/0/qty, "
    "OP is one of == != < <= > >= in, and VALUE is a JSON literal (a JSON array for in), "
    'e.g. amount <= 100 or region in ["eu", "us"]'
)
_FIELD = r"[A-Za-z_][A-Za-z0-9_]*|/[^\s<>=!]*"
_CONDITION = re.compile(
    rf"\s*(?P<field>{_FIELD})\s*(?P<op>==|!=|<=|>=|<|>|(?<=\s)in(?=\s))\s*(?P<value>\S.*?)\s*",
    re.DOTALL,
)
_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_OPERATORS = frozenset({"==", "!=", "in", *_ORDERINGS})
_FIELD_PATTERN = re.compile(_FIELD)
_MISSING = object()


@dataclasses.dataclass(frozen=True, slots=True)
class Condition:
    """A constraint on the normalized arguments that the harness checks before dispatch."""

    field: str
    """An argument name, or a JSON pointer into the arguments."""
    op: str
    """One of == != < <= > >= in."""
    value: Any
    """A JSON scalar; a tuple of scalars for `in`; a number or string for orderings."""

    def __post_init__(self) -> None:
        if self.op == "in" and isinstance(self.value, list):
            object.__setattr__(self, "value", tuple(self.value))
        problem = _condition_problem(self.field, self.op, self.value)
        if problem:
            raise PolicyError(f"invalid condition: {problem}. Write {CONDITION_GRAMMAR}")

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        """True only when the field exists and satisfies the operator; unsure means False."""
        actual = _lookup(arguments, self.field)
        if actual is _MISSING:
            return False
        if self.op == "==":
            return _same(actual, self.value)
        if self.op == "!=":
            return not _same(actual, self.value)
        if self.op == "in":
            return any(_same(actual, item) for item in self.value)
        if isinstance(actual, bool) or not isinstance(actual, str | int | float):
            return False
        if isinstance(actual, str) is not isinstance(self.value, str):
            return False
        return _ORDERINGS[self.op](actual, self.value)

    def describe(self) -> str:
        """The condition as `parse` reads it, e.g. ``amount <= 100``."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return f"{self.field} {self.op} {json.dumps(value, ensure_ascii=False)}"

    @classmethod
    def parse(cls, text: str) -> Condition:
        """Read one condition written as ``FIELD OP JSON``; raise `PolicyError` otherwise."""
        match = _CONDITION.fullmatch(text)
        if match is None:
            raise PolicyError(
                f"cannot parse condition {text!r}; write {CONDITION_GRAMMAR}", text=text
            )
        try:
            value = json.loads(match["value"], parse_constant=_reject_constant)
        except ValueError as exc:
            raise PolicyError(
                f"condition {text!r}: {match['value']!r} is not a JSON literal ({exc}); "
                f"write {CONDITION_GRAMMAR}",
                text=text,
            ) from None
        if match["op"] == "in" and isinstance(value, list):
            value = tuple(value)
        problem = _condition_problem(match["field"], match["op"], value)
        if problem:
            raise PolicyError(
                f"condition {text!r}: {problem}; write {CONDITION_GRAMMAR}", text=text
            )
        return cls(match["field"], match["op"], value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int)


def _condition_problem(field: str, op: str, value: Any) -> str | None:
    if not isinstance(field, str) or not _FIELD_PATTERN.fullmatch(field):
        return f"field {field!r} is neither an argument name nor a JSON pointer"
    if op not in _OPERATORS:
        return f"operator {op!r} is not one of == != < <= > >= in"
    if op == "in":
        if not isinstance(value, tuple) or not all(_is_scalar(item) for item in value):
            return "in needs a JSON array of scalars"
    elif op in _ORDERINGS:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return f"{op} needs a number or a string"
        if not _is_scalar(value):
            return f"{op} needs a finite number"
    elif not _is_scalar(value):
        return f"{op} needs a JSON scalar (string, number, true, false or null)"
    return None


def _same(actual: Any, expected: Any) -> bool:
    # JSON equality: true is not 1, unlike in Python.
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)


def _lookup(arguments: Any, field: str) -> Any:
    if not field.startswith("/"):
        return arguments.get(field, _MISSING) if isinstance(arguments, Mapping) else _MISSING
    return resolve(arguments, field, _MISSING)


def string_continues(char: str, escaped: bool) -> tuple[bool, bool]:
    """Inside a double-quoted string: (still inside after `char`, `char` escapes the next)."""
    if escaped:
        return True, False
    return char != '"', char == "\\"


def parse_conditions(text: str) -> tuple[Condition, ...]:
    """Split an ``@conditions`` annotation at semicolons outside JSON strings."""
    parts, start, in_string, escaped = [], 0, False, False
    for index, char in enumerate(text):
        if in_string:
            in_string, escaped = string_continues(char, escaped)
        elif char == '"':
            in_string = True
        elif char == ";":
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    conditions = tuple(Condition.parse(part) for part in parts if part.strip())
    if not conditions:
        raise PolicyError(f"@conditions({text!r}) names no condition", text=text)
    return conditions


# -- decisions and the engine seam ----------------------------------------------------------

_DECISIONS = frozenset(Decision)


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyDecision:
    """An engine's answer: the decision, the policies that made it, why, and any conditions."""

    decision: Decision
    policy_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyRequest:
    """Everything policy may look at: who, which tool, which arguments, in what environment."""

    principal: Principal
    contract: ToolContract
    arguments: dict[str, Any]
    environment: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Facts about the moment, e.g. ``{"session": ..., "hour": 14, "tenant": "acme"}``."""
    resource: str | None = None
    """The target resource id, when the contract names one."""
    action: str = "invoke"
    """What the principal asks to do with the tool: ``invoke`` it, or — mid-call, when the
    tool's upstream asks — be asked for input (``elicit``) or lend its model (``sample``)."""


class PolicyEngine(Protocol):
    """The policy seam: any object that decides a `PolicyRequest`."""

    def decide(self, request: PolicyRequest) -> PolicyDecision: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ReadRequest:
    """A principal asking to read what an upstream offers read-only (the gateway's
    federated prompts and resources): no tool runs, so there is no contract or argument."""

    principal: Principal
    action: str
    """``read_resource`` (list, read, subscribe to, complete a template of a resource) or
    ``get_prompt`` (list, get, complete an argument of a prompt)."""
    kind: str
    """``resource``, ``template`` (a URI one of its templates matches) or ``prompt``."""
    id: str
    """The URI read, or the prompt's name, as the client names it."""
    server: str
    """The upstream that offers it."""
    environment: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@runtime_checkable
class ReadPolicy(Protocol):
    """An engine that also judges `ReadRequest`s; one that does not denies every read."""

    def decide_read(self, request: ReadRequest) -> PolicyDecision: ...


def decide_read_safely(engine: object, request: ReadRequest) -> PolicyDecision:
    """Ask `engine` about a read, and deny unless it answers a well-formed allow: a read
    cannot wait for an approval, and has no arguments a condition could hold to."""
    name = type(engine).__name__
    if not isinstance(engine, ReadPolicy):
        return PolicyDecision(
            Decision.DENY,
            ("toolkeeper.reads_unjudged",),
            (f"policy engine {name} does not judge reads (it has no decide_read)",),
        )
    try:
        answer = engine.decide_read(request)
    except Exception as exc:
        return engine_error(f"policy engine {name} raised {type(exc).__name__}: {exc}")
    problem = _malformed(answer)
    if problem:
        return engine_error(f"policy engine {name} returned {problem}")
    if answer.decision != Decision.ALLOW:
        return dataclasses.replace(answer, decision=Decision.DENY)
    return dataclasses.replace(answer, decision=Decision.ALLOW)


def decide_safely(engine: PolicyEngine, request: PolicyRequest) -> PolicyDecision:
    """Ask `engine`, and deny unless it answers with a well-formed `PolicyDecision`."""
    name = type(engine).__name__
    try:
        answer = engine.decide(request)
    except Exception as exc:
        return engine_error(f"policy engine {name} raised {type(exc).__name__}: {exc}")
    problem = _malformed(answer)
    if problem:
        return engine_error(f"policy engine {name} returned {problem}")
    if type(answer.decision) is Decision:
        return answer
    # A plain-string decision equal to a member is accepted, but leaves here as the enum.
    return dataclasses.replace(answer, decision=Decision(answer.decision))


def _malformed(answer: Any) -> str | None:
    if not isinstance(answer, PolicyDecision):
        return f"{type(answer).__name__}, not a PolicyDecision"
    if not isinstance(answer.decision, str) or answer.decision not in _DECISIONS:
        return f"unknown decision {answer.decision!r}"
    for name, kind in (("policy_ids", str), ("reasons", str), ("conditions", Condition)):
        values = getattr(answer, name)
        if not isinstance(values, tuple) or not all(isinstance(v, kind) for v in values):
            return f"{name} that are not a tuple of {kind.__name__}"
    return None


def engine_error(reason: str) -> PolicyDecision:
    """The deny an engine failure becomes; the reason names the failure, never a traceback."""
    return PolicyDecision(Decision.DENY, ("toolkeeper.engine_error",), (reason,))
