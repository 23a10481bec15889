"""Checks of the input and output schemas (TK3, TK4).

Seed 000 §2 and seed 003 pattern 1: inputs small, flat and self-describing, with no
mutually exclusive modes in one object; outputs with a structured shape and a short summary.
Local ``$ref``s are followed (schemas generated from pydantic models nest through
``$defs``), each at most once along a path, so a recursive schema ends the walk and is
reported as too deep.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.lint.advice import Origin, declare, origin_of
from toolkeeper.lint.rules import Finding, LintConfig, finding
from toolkeeper.lint.surface import name_tokens, states_action
from toolkeeper.schema.document import pointer, resolve_ref

_MODE_NAMES = frozenset({"mode", "action", "operation", "op"})
_MODE_NAMES_WITH_ENUM = frozenset({"command", "cmd", "subcommand", "method"})
"""Names that switch a tool between actions; the second set only when the values are closed
(a shell tool's free-text ``command`` is its one action, not a switch). Closed values count
only when one of them names an action (``create``, ``get_comments``)."""
_SHORT_NAMES_OK = frozenset({"id", "to", "cc", "ip", "os", "db", "x", "y", "z"})
_PROSE_VALUES = re.compile(
    r"\bone of\b|\beither\b.+\bor\b|(['\"])[^'\"]+\1\s*(,|/|\||\bor\b)\s*(['\"])[^'\"]+\3",
    re.IGNORECASE,
)
"""A closed set of values written in prose: 'one of', 'either ... or', or a list of quoted
values. Backticks quote syntax (`repo:owner/repo`, `OR`), not values, so they do not count."""
_EXAMPLES = re.compile(
    r"\b(e\.\s?g\.?|eg\.|for (example|instance)|such as|examples?:)[^)\n;]*?(?:\)|\.(?=\s|$)|$)",
    re.IGNORECASE | re.MULTILINE,
)
"""An example clause, to the closing parenthesis or the end of its sentence: the values it
lists are illustrations of an open set (``e.g., 'America/New_York', 'Europe/London'``)."""
_SHAPING_KEYS = ("type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf", "not", "properties")


@dataclass(frozen=True, slots=True)
class _Node:
    schema: dict[str, Any]
    where: str
    depth: int
    """How many ``properties`` hops lead here from the root."""
    recursive: bool = False


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    ref = schema.get("$ref")
    target = resolve_ref(root, ref) if isinstance(ref, str) else None
    return (schema, None) if target is None else (target, ref)


def _walk(
    schema: dict[str, Any], root: dict[str, Any], where: str, depth: int, seen: frozenset[str]
) -> Iterator[_Node]:
    target, ref = _resolve(schema, root)
    if ref is not None:
        if ref in seen:
            yield _Node(schema, where, depth, recursive=True)
            return
        schema, seen, where = target, seen | {ref}, "/input_schema" + ref[1:]
    yield _Node(schema, where, depth)
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _walk(sub, root, where + pointer("properties", name), depth + 1, seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _walk(schema[key], root, f"{where}/{key}", depth, seen)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for index, sub in enumerate(schema.get(key) or ()):
            if isinstance(sub, dict):
                yield from _walk(sub, root, f"{where}/{key}/{index}", depth, seen)


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def check_input_schema(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK301-TK311: an object root, few properties, flat, one mode, typed and described."""
    ref, root, origin = contract.ref, contract.input_schema, origin_of(contract)
    if root.get("type") != "object":
        yield finding(
            "TK301",
            ref,
            "/input_schema",
            f"input schema root has type {root.get('type')!r}; every vendor requires an object",
            'wrap the arguments: {"type": "object", "properties": {...}}',
        )
    properties = root.get("properties") or {}
    if len(properties) > config.max_properties:
        yield finding(
            "TK302",
            ref,
            "/input_schema/properties",
            f"{len(properties)} input properties, over the limit of {config.max_properties}; "
            "every extra option is another chance to get the first call wrong",
            "split the tool by task, or drop options the model rarely needs",
        )
    for key in ("oneOf", "anyOf"):
        if key in root:
            yield finding(
                "TK304",
                ref,
                f"/input_schema/{key}",
                f"root {key} packs {len(root[key])} mutually exclusive argument shapes into "
                "one tool",
                "make one tool per shape, each with a flat schema",
            )
    nodes = list(_walk(root, root, "/input_schema", 0, frozenset()))
    deep = next((n for n in nodes if n.recursive or n.depth > config.max_depth), None)
    if deep is not None:
        levels = "without bound (a recursive $ref)" if deep.recursive else f"{deep.depth} levels"
        yield finding(
            "TK303",
            ref,
            deep.where,
            f"input nests {levels}, over the limit of {config.max_depth}",
            "flatten: lift nested fields to the top level under descriptive names",
        )
    for node in nodes:
        if not node.recursive:
            yield from _check_object(ref, node, root, origin)
    for name, sub in properties.items():
        enum = sub.get("enum") if isinstance(sub, dict) else None
        switch = name.lower() in _MODE_NAMES or (name.lower() in _MODE_NAMES_WITH_ENUM and enum)
        # Closed values that name no action (a travel mode: driving, walking) are options of
        # one action, not a switch between actions.
        if switch and (not enum or any(states_action(name_tokens(str(v))) for v in enum)):
            modes = f" ({', '.join(map(str, enum))})" if enum else ""
            yield finding(
                "TK305",
                ref,
                pointer("input_schema", "properties", name),
                f"parameter {name!r} switches the tool between actions{modes}",
                "make one narrow tool per action, each with its own schema and side effect",
            )


def _check_object(ref: str, node: _Node, root: dict[str, Any], origin: Origin) -> Iterator[Finding]:
    schema, where = node.schema, node.where
    declared = schema.get("properties") or {}
    open_ended = schema.get("additionalProperties", True) is True
    if _is_object(schema) and not declared and "patternProperties" not in schema and open_ended:
        if node.depth > 0:
            yield finding(
                "TK306",
                ref,
                where,
                "free-form object: it accepts any keys, so the model has to guess them",
                "declare its properties, or additionalProperties with a value schema",
            )
        else:
            yield finding(
                "TK307",
                ref,
                where,
                "the arguments object accepts any keys, so a misspelt argument passes "
                "validation and is silently ignored",
                'declare "properties" (even {}) and set "additionalProperties": false',
            )
    elif declared and open_ended:
        yield finding(
            "TK307",
            ref,
            where,
            "object accepts properties it does not declare, so a misspelt argument passes "
            "validation and is silently ignored",
            'set "additionalProperties": false',
        )
    for name in schema.get("required") or ():
        if name not in declared and "patternProperties" not in schema:
            yield finding(
                "TK309",
                ref,
                where + "/required",
                f"required names {name!r}, which is not a declared property, so the model "
                "never learns what to put there",
                f"declare property {name!r} or remove it from required",
            )
    for name, sub in declared.items():
        if isinstance(sub, dict):
            where_name = where + pointer("properties", name)
            yield from _check_parameter(ref, where_name, name, sub, root, origin)


def _check_parameter(
    ref: str, where: str, name: str, written: dict[str, Any], root: dict[str, Any], origin: Origin
) -> Iterator[Finding]:
    schema, _ = _resolve(written, root)
    if not any(key in schema for key in _SHAPING_KEYS):
        yield finding(
            "TK306",
            ref,
            where,
            f"parameter {name!r} is untyped: it accepts any JSON value",
            "give it a type (and an enum or format where the values are known)",
        )
    description = written.get("description") or schema.get("description")
    if not description:
        if not _items_described(schema, root):
            yield finding(
                "TK308",
                ref,
                where,
                f"parameter {name!r} has no description",
                "describe its meaning, unit and format in one line, with an example value"
                + (" (in the docstring's Args section)" if origin is Origin.FUNCTION else ""),
            )
    elif (
        schema.get("type") == "string"
        and "enum" not in schema
        and _PROSE_VALUES.search(_EXAMPLES.sub(" ", description))
    ):
        yield finding(
            "TK310",
            ref,
            where,
            f"parameter {name!r} lists its values in its description",
            "annotate it Literal['a', 'b'], so validation can suggest the closest valid value"
            if origin is Origin.FUNCTION
            else "declare them as an enum, so validation can suggest the closest valid value",
        )
    if len(name) <= 2 and name.lower() not in _SHORT_NAMES_OK:
        yield finding(
            "TK311",
            ref,
            where,
            f"parameter name {name!r} does not say what it holds",
            "use a self-describing name, e.g. 'query' rather than 'q', 'limit' rather than 'n'",
        )


def _items_described(schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether `schema` is a list of objects whose every field is described: the model reads
    what each entry holds there, and the type says it is a list of them (the reference
    memory server's ``entities``, the filesystem server's ``edits``). Not for a list of
    plain values, whose meaning only a description can give."""
    items = schema.get("items")
    if schema.get("type") != "array" or not isinstance(items, dict):
        return False
    fields = _resolve(items, root)[0].get("properties")
    return (
        isinstance(fields, dict)
        and bool(fields)
        and all(
            isinstance(field, dict)
            and bool(field.get("description") or _resolve(field, root)[0].get("description"))
            for field in fields.values()
        )
    )


def check_output(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK401-TK404: an output schema, projected fields and a summary template that fit it."""
    ref, projection, output_schema = (
        contract.ref,
        contract.result_projection,
        contract.output_schema,
    )
    if output_schema is None:
        yield finding(
            "TK401",
            ref,
            "/output_schema",
            "no output schema: results cannot be checked, and the model cannot know their shape",
            "annotate the return type (a TypedDict or pydantic model with the fields it returns)"
            if origin_of(contract) is Origin.FUNCTION
            else "declare output_schema with the fields the tool returns",
        )
    known = set((output_schema or {}).get("properties") or ())
    for index, name in enumerate(projection.fields or ()):
        if known and name not in known:
            yield finding(
                "TK402",
                ref,
                pointer("result_projection", "fields", index),
                f"projected field {name!r} is not in the output schema, so it never reaches "
                "the model",
                f"use one of {', '.join(sorted(known))}",
            )
    where, template = "/result_projection/summary_template", projection.summary_template
    if template is None:
        yield finding(
            "TK404",
            ref,
            where,
            "no summary template: the model gets a generic 'Returned N fields' summary",
            "write a one-line template over output fields: "
            + declare(contract, "result_projection.summary_template", '"Found {count}"'),
        )
        return
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        yield finding(
            "TK403",
            ref,
            where,
            f"summary template {template!r} does not parse: {exc}",
            "balance the braces; write a literal brace as {{ or }}",
        )
        return
    for field_name in names:
        head = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if not head or head.isdigit():
            yield finding(
                "TK403",
                ref,
                where,
                "summary template has a positional field {" + field_name + "}",
                "name an output field instead, e.g. {count}",
            )
        elif known and head not in known:
            yield finding(
                "TK403",
                ref,
                where,
                f"summary template names {head!r}, which the output schema does not declare, "
                "so it renders as {" + field_name + "}",
                f"use one of {', '.join(sorted(known))}",
            )
