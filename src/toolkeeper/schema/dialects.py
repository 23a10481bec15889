"""Normalize the schema dialects of real tool catalogs to JSON Schema 2020-12.

Catalogs in the wild mix BFCL's Python type names, Java and JavaScript type names, OpenAPI 3.0
(`nullable`, `example`) and older drafts (`required: true` on a property, boolean
`exclusiveMinimum`, `definitions`, tuple `items`). `normalize_schema` rewrites them into a schema
that passes `Draft202012Validator.check_schema` and warns once per rewrite, naming the JSON
pointer. Nothing is dropped silently: what 2020-12 cannot express moves into the node's
`description`, where the model and a reviewer still read it.

This module walks the schema and rewrites keywords; type names are mapped by `type_names.py`
(which says why a Java or JavaScript position also accepts a string), and the warnings and
description notes of every rewrite are kept by `schema_notes.py`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any, TypeGuard

import jsonschema_rs
from jsonschema import Draft202012Validator

from toolkeeper.contract.model import JSON_SCHEMA_DIALECT
from toolkeeper.errors import CatalogError
from toolkeeper.schema.document import escape
from toolkeeper.schema.notes import Run, move_to_description, short
from toolkeeper.schema.type_names import normalize_type

SOURCES: dict[str, str] = {
    **dict.fromkeys(("json-schema", "mcp", "openai", "anthropic", "openapi"), "non-standard"),
    "bfcl": "BFCL",
    "bfcl-java": "Java",
    "bfcl-javascript": "JavaScript",
}
"""Known schema sources and how warnings name their foreign type names."""

_LANGUAGES = {"bfcl-java": "Java", "bfcl-javascript": "JavaScript"}

_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"prefixItems", "anyOf", "oneOf", "allOf"})
_SCHEMA_SINGLE = frozenset(
    {"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
     "propertyNames", "not", "if", "then", "else", "contentSchema"}
)  # fmt: skip
_FLAGS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_META = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)


def normalize_schema(schema: dict[str, Any], *, source: str) -> tuple[dict[str, Any], list[str]]:
    """Rewrite `schema` from `source`'s dialect into JSON Schema 2020-12.

    Returns a new schema (the argument is not modified) and one warning per rewrite, each
    starting with the JSON pointer of the keyword it changed. `source` is one of `SOURCES`.
    """
    if source not in SOURCES:
        raise CatalogError(
            f"unknown schema source {source!r}; use one of {', '.join(SOURCES)}", source=source
        )
    if not isinstance(schema, dict):
        raise CatalogError(
            f"a {source} schema must be a JSON object, got {type(schema).__name__}: "
            f"{short(schema)}; wrap the parameters in an object schema",
            source=source,
        )
    run = Run(label=SOURCES[source], language=_LANGUAGES.get(source))
    result = _node(copy.deepcopy(schema), "", run)
    if "type" not in result and ("properties" in result or not result):
        result["type"] = "object"
        run.warn("/type", "missing at the root; set to 'object' (tool arguments are an object)")
    _repair(result, run)
    return result, run.warnings


def _node(node: dict[str, Any], pointer: str, run: Run) -> dict[str, Any]:
    """Normalize one schema object in place, then its subschemas."""
    if "$schema" in node and node["$schema"] != JSON_SCHEMA_DIALECT:
        run.warn(f"{pointer}/$schema", f"{short(node['$schema'])} replaced by 2020-12")
        node["$schema"] = JSON_SCHEMA_DIALECT
    _definitions(node, pointer, run)
    if isinstance(node.get("$ref"), str):
        ref = _rewrite_ref(node["$ref"])
        if ref != node["$ref"]:
            run.warn(f"{pointer}/$ref", f"{node['$ref']!r} rewritten to {ref!r}")
            node["$ref"] = ref
    _dependencies(node, pointer, run)
    if "type" in node:
        normalize_type(node, pointer, run)
    _nullable(node, pointer, run)
    _examples(node, pointer, run)
    _exclusive_bounds(node, pointer, run)
    _tuple_items(node, pointer, run)
    _required(node, pointer, run)
    for container, key, suffix in _slots(node):
        container[key] = _sub(container[key], pointer + suffix, run)
    return node


def _slots(node: dict[str, Any]) -> list[tuple[Any, Any, str]]:
    """(container, key, pointer suffix) of every subschema position in `node`, in order."""
    slots: list[tuple[Any, Any, str]] = []
    for keyword, value in node.items():
        if keyword in _SCHEMA_SINGLE:
            slots.append((node, keyword, f"/{keyword}"))
        elif keyword in _SCHEMA_MAPS and isinstance(value, dict):
            slots += [(value, name, f"/{keyword}/{escape(name)}") for name in value]
        elif keyword in _SCHEMA_LISTS and isinstance(value, list):
            slots += [(value, index, f"/{keyword}/{index}") for index in range(len(value))]
    return slots


def _sub(value: Any, pointer: str, run: Run) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return _node(value, pointer, run)
    # Keep the declaration readable instead of dropping the property it describes.
    run.warn(pointer, f"{short(value)} is not a schema; kept as description, any value accepted")
    return {"description": f"declared as {short(value)}"}


def _definitions(node: dict[str, Any], pointer: str, run: Run) -> None:
    definitions = node.get("definitions")
    if not isinstance(definitions, dict) or not isinstance(node.get("$defs", {}), dict):
        return
    del node["definitions"]
    defs = node.setdefault("$defs", {})
    for name, sub in definitions.items():
        if name in defs and defs[name] != sub:
            raise CatalogError(
                f"schema at {pointer or '/'} defines {name!r} in both 'definitions' and '$defs' "
                "with different content; keep one of them"
            )
        defs[name] = sub
    run.warn(f"{pointer}/definitions", "renamed to $defs (references rewritten)")


def _rewrite_ref(ref: str) -> str:
    """Point a local reference at where normalization moved its target."""
    if not ref.startswith("#/"):
        return ref
    segments = ref[2:].split("/")
    for index in _keyword_positions(segments):
        if segments[index] == "definitions":
            segments[index] = "$defs"
        elif segments[index] == "items" and _index_follows(segments, index):
            segments[index] = "prefixItems"
    return "#/" + "/".join(segments)


def _keyword_positions(path: list[Any]) -> list[int]:
    """Indexes of the segments of a path into a schema that name keywords (the others are
    property names and list indexes), up to the first keyword whose value is no schema."""
    positions: list[int] = []
    expect_keyword = True
    for index, segment in enumerate(path):
        if not expect_keyword:
            expect_keyword = True
            continue
        positions.append(index)
        tuple_items = segment == "items" and _index_follows(path, index)
        if segment in _SCHEMA_MAPS | _SCHEMA_LISTS | {"definitions"} or tuple_items:
            expect_keyword = False
        elif segment not in _SCHEMA_SINGLE:
            break
    return positions


def _index_follows(path: list[Any], index: int) -> bool:
    return index + 1 < len(path) and str(path[index + 1]).isdigit()


def _dependencies(node: dict[str, Any], pointer: str, run: Run) -> None:
    dependencies = node.get("dependencies")
    if not isinstance(dependencies, dict):
        return
    del node["dependencies"]
    for name, dependency in dependencies.items():
        target = "dependentRequired" if isinstance(dependency, list) else "dependentSchemas"
        node.setdefault(target, {})[name] = dependency
    run.warn(f"{pointer}/dependencies", "split into dependentRequired and dependentSchemas")


def _nullable(node: dict[str, Any], pointer: str, run: Run) -> None:
    # A non-boolean `nullable` is no OpenAPI keyword: it stays, as any unknown keyword does.
    if not isinstance(node.get("nullable"), bool):
        return
    where = f"{pointer}/nullable"
    if node.pop("nullable") is False:
        run.warn(where, "OpenAPI nullable: false removed (the default)")
        return
    if "type" not in node:
        run.warn(where, "OpenAPI nullable without a type has no effect; removed")
        return
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    if "null" not in types:
        node["type"] = [*types, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"].append(None)
    run.warn(where, f"OpenAPI nullable: true normalized to type {node['type']!r}")


def _examples(node: dict[str, Any], pointer: str, run: Run) -> None:
    if "examples" in node and not isinstance(node["examples"], list):
        examples = node["examples"]
        node["examples"] = list(examples.values()) if isinstance(examples, dict) else [examples]
        run.warn(f"{pointer}/examples", "not a list; converted to a list of its values")
    if "example" in node:
        node.setdefault("examples", []).append(node.pop("example"))
        run.warn(f"{pointer}/example", "OpenAPI example moved into examples")


def _exclusive_bounds(node: dict[str, Any], pointer: str, run: Run) -> None:
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if not isinstance(node.get(exclusive), bool):
            continue
        where = f"{pointer}/{exclusive}"
        limit = node.get(bound)
        if not node.pop(exclusive):
            run.warn(where, f"draft-04 {exclusive}: false removed ({bound} stays inclusive)")
        elif isinstance(limit, int | float) and not isinstance(limit, bool):
            node[exclusive] = node.pop(bound)
            run.warn(where, f"draft-04 true with {bound} {limit} normalized to {limit}")
        else:
            node[exclusive] = True
            move_to_description(node, exclusive, pointer, run, f"draft-04 true without {bound}")


def _tuple_items(node: dict[str, Any], pointer: str, run: Run) -> None:
    if isinstance(node.get("items"), list) and "prefixItems" not in node:
        node["prefixItems"] = node.pop("items")
        run.warn(f"{pointer}/items", "tuple form (a list of schemas) normalized to prefixItems")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
            run.warn(f"{pointer}/additionalItems", "normalized to items (after prefixItems)")
    elif "additionalItems" in node:
        move_to_description(node, "additionalItems", pointer, run, "no effect without tuple items")


def _required(node: dict[str, Any], pointer: str, run: Run) -> None:
    """Hoist draft-03 `required: true` and BFCL `optional` into the parent's required list."""
    properties = node.get("properties")
    declared = node.get("required")
    if "required" in node and not _is_names(declared):
        move_to_description(node, "required", pointer, run, "not a list of property names")
        declared = None
    required: list[str] = list(dict.fromkeys(declared)) if declared else []
    if declared and len(required) != len(declared):
        run.warn(f"{pointer}/required", "duplicate names removed")
    for name, prop in properties.items() if isinstance(properties, dict) else ():
        if not isinstance(prop, dict):
            continue
        where = f"{pointer}/properties/{escape(name)}"
        if isinstance(prop.get("required"), bool):
            _mark(required, name, wanted=prop.pop("required"), where=f"{where}/required", run=run)
        if "optional" in prop and (wanted := _flag(prop["optional"])) is not None:
            _mark(required, name, wanted=not wanted, where=f"{where}/optional", run=run)
            del prop["optional"]
    optional = node.get("optional")
    if _is_names(optional):
        del node["optional"]
        for name in optional:
            _mark(required, name, wanted=False, where=f"{pointer}/optional", run=run)
    if required or declared is not None:
        node["required"] = required


def _is_names(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _mark(required: list[str], name: str, *, wanted: bool, where: str, run: Run) -> None:
    if wanted and name not in required:
        required.append(name)
        run.warn(where, f"{name!r} moved into the parent's required list")
    elif not wanted and name in required:
        # The standard keyword is what every validator enforces; it wins the conflict.
        run.warn(where, f"says {name!r} is optional but required lists it; kept required")
    else:
        run.warn(
            where,
            f"removed; required already says {name!r} is {'required' if wanted else 'optional'}",
        )


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else _FLAGS.get(str(value).lower())


def _repair(schema: dict[str, Any], run: Run) -> None:
    """Move every keyword the 2020-12 meta-schema still rejects into its node's description."""
    while not _valid(schema):
        errors = list(_META.iter_errors(schema))
        if not errors:
            return  # only values JSON cannot carry (NaN) make the two validators disagree
        for error in errors:
            path = list(error.absolute_path)
            positions = _keyword_positions(path)
            if not positions:
                raise CatalogError(f"cannot normalize schema: {error.message}")
            keyword_path = path[: positions[-1] + 1]
            parent: Any = schema
            for segment in keyword_path[:-1]:
                parent = parent[segment]
            if keyword_path[-1] not in parent:
                continue  # an earlier error of this pass moved the same keyword
            pointer = "".join(f"/{escape(str(segment))}" for segment in keyword_path[:-1])
            reason = f"not valid 2020-12 ({short(error.message, 80)})"
            move_to_description(parent, keyword_path[-1], pointer, run, reason)


def _valid(schema: dict[str, Any]) -> bool:
    """`check_schema`'s verdict, fast: the Rust meta-schema check plus the one format the
    Python check adds (``regex``). `jsonschema` only runs to locate an error."""
    try:
        if not jsonschema_rs.meta.is_valid(schema):
            return False
    except (ValueError, TypeError):
        return False
    return all(_compiles(pattern) for pattern in _patterns(schema))


def _patterns(node: Any) -> Iterator[Any]:
    if not isinstance(node, dict):
        return
    if "pattern" in node:
        yield node["pattern"]
    if isinstance(node.get("patternProperties"), dict):
        yield from node["patternProperties"]
    for container, key, _ in _slots(node):
        yield from _patterns(container[key])


def _compiles(pattern: Any) -> bool:
    try:
        re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True
