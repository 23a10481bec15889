"""Stage 2, validate: are these the arguments the contract accepts, and if not, what to change.

Two paths. The fast path asks a compiled jsonschema_rs validator, cached per contract, one
question — valid? — and for valid input only copies the arguments and fills in schema
defaults. The rich path runs only on failure: jsonschema's `iter_errors` (with jsonschema_rs's
`format`, `pattern` and `multipleOf` semantics, so both paths judge alike) finds every
violation, and each becomes a `FieldError` with a JSON-pointer path, a code, and a concrete fix.

Invalid arguments are an outcome, not an exception: the result carries a `ToolError` the
model can act on, plus `Repair`s a program can apply.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema_rs
import referencing.exceptions

from toolkeeper.contract.model import ToolContract
from toolkeeper.errors import ContractError
from toolkeeper.runtime.envelope import ErrorCategory, FieldError, ToolError
from toolkeeper.schema.document import resolve_ref
from toolkeeper.validation.fixes import Explanation, explain
from toolkeeper.validation.repairs import Repair, apply_repairs
from toolkeeper.validation.text import Unreadable, parse_arguments
from toolkeeper.validation.violations import RichValidator, Violation, rs_violations, violations


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """The outcome of validating one set of arguments against one contract."""

    ok: bool
    arguments: dict[str, Any] | None = None
    """A copy of the valid arguments with schema defaults filled in; None when invalid."""
    error: ToolError | None = None
    """Every violation and its fix (`invalid_argument`); None when valid."""
    repairs: tuple[Repair, ...] = ()
    """JSON Patch operations that fix the violations; see `apply_repairs`."""


def validate_arguments(contract: ToolContract, raw: Any) -> ValidationResult:
    """Validate `raw` against `contract.input_schema`; never raises for any JSON input.

    `raw` is JSON text (str or bytes) or an already-parsed value. None, "" and blank text
    count as `{}`, because models send "" for tools without parameters. Tool arguments are
    always a JSON object, whatever the schema says. The one exception raised is
    `ContractError`, when the schema refers to a schema that cannot be resolved offline.
    A registered tool's entry holds its `compile_arguments` result, so the pipeline skips
    even the cache look-up this function makes.
    """
    return compile_arguments(contract).validate(raw)


def compile_arguments(contract: ToolContract) -> ArgumentValidator:
    """`contract`'s input schema compiled once: the validators and the defaults plan,
    shared by every contract of the same ref and content (a bounded cache)."""
    return ArgumentValidator(contract, _remember(contract))


class ArgumentValidator:
    """A contract's compiled input validation; `validate(raw)` as `validate_arguments`."""

    __slots__ = ("_compiled", "contract")

    def __init__(self, contract: ToolContract, compiled: _Compiled) -> None:
        self.contract = contract
        self._compiled = compiled

    def __repr__(self) -> str:
        return f"ArgumentValidator({self.contract.ref!r})"

    def validate(self, raw: Any) -> ValidationResult:
        """See `validate_arguments`."""
        contract, compiled = self.contract, self._compiled
        if type(raw) is dict:
            instance: Any = raw
        else:
            instance = parse_arguments(raw)
            if isinstance(instance, Unreadable):
                error = FieldError(
                    path="", code="json", message=instance.message, expected="object"
                )
                return _rejected(contract, [Explanation(error, instance.fix)], ())
            if isinstance(instance, Mapping):
                instance = dict(instance)
            else:
                found = [Violation((), "type", "object", instance, _AN_OBJECT, "")]
                return self._refuse(instance, found)
        found = compiled.judge(contract, instance)
        if found:
            return self._refuse(instance, found)
        plan, flat = compiled.defaults, compiled.flat_defaults
        if plan is not None:
            return _accepted(_apply_defaults(instance, plan))
        # Defaults fill absent keys only, after the caller's keys, in one C-level merge.
        return _accepted({**instance, **flat, **instance} if flat else dict(instance))

    def _refuse(self, instance: Any, found: list[Violation]) -> ValidationResult:
        compiled = self._compiled
        explanations = explain(found, instance, compiled.check, compiled.schema)
        repairs = self._harmless(instance, found, explanations)
        return _rejected(self.contract, explanations, repairs)

    def _harmless(
        self, instance: Any, found: list[Violation], explanations: list[Explanation]
    ) -> tuple[Repair, ...]:
        """The explanations' repairs that, applied together, leave no violation the
        arguments did not already have: a repair never trades one error for another.

        Each repair was checked against its own field's schema, but a value can still break
        a rule that field shares with others (`allOf` branches, `oneOf` at the parent,
        `dependentRequired`, `uniqueItems`). All repairs are tried at once; if that adds a
        violation, each explanation's repairs (a rename's move and its value go together)
        are kept only while they add none, in order, for at most `_MAX_REPAIR_TRIALS`.
        """
        before = {(v.path, v.code) for v in found}

        def harmless(repairs: list[Repair]) -> bool:
            repaired = apply_repairs(instance, repairs)
            if not isinstance(repaired, dict):  # arguments are an object, whatever the schema
                return False
            after = self._compiled.judge(self.contract, repaired)
            return all((v.path, v.code) in before for v in after)

        units = [list(e.repairs) for e in explanations if e.repairs]
        everything = [repair for unit in units for repair in unit]
        if not everything or harmless(everything):
            return tuple(everything)
        kept: list[Repair] = []
        for unit in units[:_MAX_REPAIR_TRIALS]:
            if harmless([*kept, *unit]):
                kept.extend(unit)
        return tuple(kept)


_AN_OBJECT: Final = {"type": "object"}

_new = object.__new__
_set_ok = vars(ValidationResult)["ok"].__set__
_set_arguments = vars(ValidationResult)["arguments"].__set__
_set_error = vars(ValidationResult)["error"].__set__
_set_repairs = vars(ValidationResult)["repairs"].__set__


def _accepted(arguments: dict[str, Any]) -> ValidationResult:
    """`ValidationResult(True, arguments)`, built through the slots: a frozen dataclass's
    `__init__` costs as much as jsonschema_rs validating a small object."""
    result = _new(ValidationResult)
    _set_ok(result, True)
    _set_arguments(result, arguments)
    _set_error(result, None)
    _set_repairs(result, ())
    return result


_MAX_REPAIR_TRIALS: Final = 32
"""Explanations whose repairs are tried one by one when all of them together do harm."""


def _rejected(
    contract: ToolContract, explanations: list[Explanation], repairs: tuple[Repair, ...]
) -> ValidationResult:
    def label(e: Explanation) -> str:
        return e.field_error.path or "(arguments)"

    count = len(explanations)
    summary = "; ".join(f"{label(e)}: {e.field_error.message}" for e in explanations[:3])
    more = f"; and {count - 3} more" if count > 3 else ""
    error = ToolError(
        category=ErrorCategory.INVALID_ARGUMENT,
        retryable=False,
        message=f"{count} invalid argument{'s' * (count != 1)} for {contract.id}: {summary}{more}",
        field_errors=tuple(e.field_error for e in explanations),
        suggested_fix="; ".join(f"{label(e)}: {e.fix}" for e in explanations),
        effect_committed=False,
    )
    return ValidationResult(False, None, error, repairs)


# -- compiled contracts -------------------------------------------------------------------

_NO_DEFAULT: Final = object()
_MAX_SUBVALIDATORS: Final = 512

_DefaultsPlan = tuple[tuple[str, Any, "_DefaultsPlan | None"], ...]
"""(property, default or _NO_DEFAULT, plan for the property's own object) per property."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    schema: Any
    fast: jsonschema_rs.Validator | None
    """None when jsonschema_rs cannot compile the schema; jsonschema then decides alone."""
    fast_failure: str
    rich: Any
    flat_defaults: dict[str, Any]
    """Top-level immutable defaults, merged in one step when they are the only defaults."""
    defaults: _DefaultsPlan | None
    """The full plan, when defaults are nested or mutable; None otherwise."""
    subvalidators: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """Validators for subschemas, made on first use by `check`."""

    def violations(
        self, contract: ToolContract, instance: dict[str, Any], *, rs_rejected: bool
    ) -> list[Violation]:
        try:
            found = violations(self.rich, instance)
        except RecursionError:
            # Too deep for jsonschema; if jsonschema_rs could not judge either, refuse.
            too_deep = Violation((), "not", None, instance, {}, "nested too deeply to check")
            found = [] if rs_rejected else [too_deep]
        except referencing.exceptions.Unresolvable as exc:
            raise ContractError(
                f"contract {contract.id!r}: input_schema refers to {exc.ref!r}, which cannot "
                f"be resolved offline ({self.fast_failure or exc}); move the referenced schema "
                "under $defs and refer to it as '#/$defs/...'",
                contract_id=contract.id,
                field="input_schema",
            ) from exc
        if not found and rs_rejected and self.fast is not None:
            # The libraries disagree on this value; jsonschema_rs decided, so it explains.
            found = rs_violations(self.fast, instance, self.schema)
        return found

    def judge(self, contract: ToolContract, instance: dict[str, Any]) -> list[Violation]:
        """Every violation of `instance`; none when it is valid. On valid input the compiled
        verdict is most of the cost of validation, and the rich path never runs."""
        try:
            verdict = self.fast.is_valid(instance) if self.fast is not None else None
        except (ValueError, OverflowError, RecursionError):
            verdict = None  # values jsonschema_rs cannot read (a set, a non-string key)
        if verdict:
            return []
        return self.violations(contract, instance, rs_rejected=verdict is False)

    def check(self, schema: Any, value: Any) -> bool:
        """Does `value` satisfy `schema`, a subschema of this contract's (refs resolved)?"""
        cached = self.subvalidators.get(id(schema))
        if cached is None or cached[0] is not schema:
            if len(self.subvalidators) >= _MAX_SUBVALIDATORS:
                self.subvalidators.clear()
            # Holding `schema` keeps its id from being reused by another object.
            cached = self.subvalidators[id(schema)] = (schema, self.rich.evolve(schema=schema))
        try:
            return bool(cached[1].is_valid(value))
        except (RecursionError, referencing.exceptions.Unresolvable):
            return False


def _compile(schema: Any) -> _Compiled:
    try:
        fast = jsonschema_rs.Draft202012Validator(schema, validate_formats=True, offline=True)
        failure = ""
    except (jsonschema_rs.ValidationError, ValueError) as exc:
        fast, failure = None, str(exc).splitlines()[0]
    rich = RichValidator(schema)
    plan = _defaults_plan(schema, schema, frozenset())
    if plan is None or any(n is not None or isinstance(d, dict | list) for _, d, n in plan):
        return _Compiled(schema, fast, failure, rich, {}, plan)
    return _Compiled(schema, fast, failure, rich, {name: d for name, d, _ in plan}, None)


_BY_CONTENT: dict[tuple[str, str], _Compiled] = {}
_MAX_CONTENT_ENTRIES: Final = 1024


def _remember(contract: ToolContract) -> _Compiled:
    """The compiled validators of `contract`, cached by ref and content digest (which the
    contract computes once), the oldest dropped past `_MAX_CONTENT_ENTRIES`."""
    key = (contract.ref, contract.content_digest())
    compiled = _BY_CONTENT.get(key)
    if compiled is None:
        if len(_BY_CONTENT) >= _MAX_CONTENT_ENTRIES:
            _BY_CONTENT.pop(next(iter(_BY_CONTENT)), None)
        compiled = _BY_CONTENT[key] = _compile(contract.input_schema)
    return compiled


# -- defaults -----------------------------------------------------------------------------


def _defaults_plan(schema: Any, root: Any, followed: frozenset[str]) -> _DefaultsPlan | None:
    """Where `schema` puts defaults: its properties and, recursively, their properties.

    Local `$ref`s and `allOf` branches are followed; a reference already being followed is
    not, so recursive schemas get defaults down to their first repetition.
    """
    if not isinstance(schema, dict):
        return None
    steps: list[tuple[str, Any, _DefaultsPlan | None]] = []
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ref not in followed:
        target = resolve_ref(root, ref)
        steps.extend(_defaults_plan(target, root, followed | {ref}) or ())
    for branch in schema.get("allOf", ()) if isinstance(schema.get("allOf"), list) else ():
        steps.extend(_defaults_plan(branch, root, followed) or ())
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            default = sub.get("default", _NO_DEFAULT) if isinstance(sub, dict) else _NO_DEFAULT
            nested = _defaults_plan(sub, root, followed)
            if default is not _NO_DEFAULT or nested is not None:
                steps.append((name, default, nested))
    return tuple(steps) or None


def _apply_defaults(arguments: dict[str, Any], plan: _DefaultsPlan) -> dict[str, Any]:
    result = dict(arguments)
    for name, default, nested in plan:
        if name in result:
            if nested is not None and type(result[name]) is dict:
                result[name] = _apply_defaults(result[name], nested)
        elif default is not _NO_DEFAULT:
            # A mutable default must not be shared between calls.
            result[name] = copy.deepcopy(default) if isinstance(default, dict | list) else default
    return result
