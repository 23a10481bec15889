"""`@tool` and `ToolContract.from_function`: contracts from typed Python functions.

The function is the single source of truth: the input schema comes from its type hints (via
pydantic; ``Annotated[..., Field(...)]`` constraints included), parameter descriptions from its
docstring (Google, NumPy or reST), the description from the docstring's summary and body, and
``Use when:`` / ``Do not use when:`` lines fill `when_to_use` / `when_not_to_use`.

Conventions the harness relies on:

- Parameters annotated `ToolContext` (also inside ``Optional`` or ``Annotated``) are not in
  the schema; the harness passes the context there (`context_parameters`).
- Every object schema generated has ``additionalProperties: false``: an argument the function
  would silently ignore hides the model's mistake, so it is rejected instead.
- A return type whose schema is not an object is wrapped as
  ``{"type": "object", "properties": {"result": ...}}``, and the harness wraps the returned
  value likewise as ``{"result": value}`` (`wraps_result`); structured content is always an
  object. For async functions the return annotation is the awaited value's type.
- `implementation_digest` is sha256 over the function's source and the contract's content
  digest, so an edit to either changes it and invalidates grants bound to the old one.
- The decorator returns the function itself with the contract attached as
  ``fn.__toolkeeper_contract__``; read it with `contract_of`.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
from collections.abc import Callable
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

import docstring_parser
from pydantic import ConfigDict, Field, PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticUndefined
from typing_extensions import TypedDict

from toolkeeper.contract.model import Idempotency, SideEffect, ToolContract
from toolkeeper.errors import ContractError
from toolkeeper.runtime.context import ToolContext
from toolkeeper.schema.document import unescape

_F = TypeVar("_F", bound=Callable[..., Any])

RESULT_KEY = "result"
"""The property a non-object return value is wrapped in."""

_DEFS = "#/$defs/"
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_DATA_KEYWORDS = ("enum", "const", "default", "examples")
_USE_WHEN = "use when:"
_AVOID_WHEN = "do not use when:"


class _ToolJsonSchema(GenerateJsonSchema):
    """Pydantic's generator without the titles it derives from field names: they repeat the
    name, cost tokens and tell the model nothing."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def contract_from_function(
    fn: Callable[..., Any],
    *,
    id: str | None = None,
    version: str | None = None,
    description: str | None = None,
    when_to_use: str | None = None,
    when_not_to_use: str | None = None,
    side_effect: SideEffect | str | None = None,
    idempotency: Idempotency | str | None = None,
    **contract_fields: Any,
) -> ToolContract:
    """The contract of `fn` (sync or async); keyword arguments override what the function
    says. `contract_fields` are further `ToolContract` fields (timeout, open_world, ...)."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ContractError(
            f"{fn!r} is not a function; decorate a def or async def with @toolkeeper.tool"
        )
    name = id or fn.__name__
    hints = _hints(fn, name)
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    summary, use, avoid = _usage(doc)
    data: dict[str, Any] = {
        "id": name,
        "version": version,
        "description": description or summary,
        "when_to_use": when_to_use or use,
        "when_not_to_use": when_not_to_use or avoid,
        "input_schema": _input_schema(fn, name, hints, doc),
        "output_schema": _output_schema(hints, name),
        "side_effect": side_effect,
        "idempotency": idempotency,
        **contract_fields,
    }
    if not data["description"]:
        raise ContractError(
            f"tool {name!r} has no description; write a docstring saying what it does and when "
            "to use it, or pass description=...",
            contract_id=name,
            field="description",
        )
    contract = ToolContract.from_dict(data)
    if contract.version is None and not contract.is_read_only:
        effect = contract.side_effect or "undeclared (counts as committing)"
        raise ContractError(
            f"tool {name!r} has side_effect {effect} and no version; a tool that changes the "
            'world needs an explicit version: pass version="1.0.0" (or side_effect="none" if '
            "it only reads)",
            contract_id=name,
            field="version",
        )
    digest = hashlib.sha256(_source(fn) + b"\n" + contract.content_digest().encode())
    return contract.model_copy(update={"implementation_digest": "sha256:" + digest.hexdigest()})


@overload
def tool(fn: _F, /) -> _F: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    id: str | None = None,
    version: str | None = None,
    description: str | None = None,
    when_to_use: str | None = None,
    when_not_to_use: str | None = None,
    side_effect: SideEffect | str | None = None,
    idempotency: Idempotency | str | None = None,
    **contract_fields: Any,
) -> Callable[[_F], _F]: ...


def tool(
    fn: _F | None = None,
    /,
    *,
    id: str | None = None,
    version: str | None = None,
    description: str | None = None,
    when_to_use: str | None = None,
    when_not_to_use: str | None = None,
    side_effect: SideEffect | str | None = None,
    idempotency: Idempotency | str | None = None,
    **contract_fields: Any,
) -> _F | Callable[[_F], _F]:
    """Attach a contract to a function: ``@tool`` or ``@tool(version="1.0.0", ...)``.

    Returns the function unchanged, so it stays directly callable and testable; the contract
    is built (and checked) at decoration time. Read it back with `contract_of`.
    """
    options = {
        "id": id,
        "version": version,
        "description": description,
        "when_to_use": when_to_use,
        "when_not_to_use": when_not_to_use,
        "side_effect": side_effect,
        "idempotency": idempotency,
        **contract_fields,
    }

    def attach(function: _F) -> _F:
        contract = contract_from_function(function, **options)
        # A bound method forwards attribute reads to its function, which is where we write.
        target: Any = getattr(function, "__func__", function)
        target.__toolkeeper_contract__ = contract
        return function

    return attach(fn) if fn is not None else attach


def contract_of(fn: Callable[..., Any]) -> ToolContract:
    """The contract `@tool` attached to `fn`."""
    contract = getattr(fn, "__toolkeeper_contract__", None)
    if not isinstance(contract, ToolContract):
        raise ContractError(
            f"{getattr(fn, '__qualname__', fn)!r} has no toolkeeper contract; decorate it with "
            "@toolkeeper.tool(...)"
        )
    return contract


def context_parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Names of `fn`'s parameters the harness fills with the `ToolContext`."""
    hints = _hints(fn, fn.__name__)
    return tuple(name for name, hint in hints.items() if name != "return" and _is_context(hint))


def wraps_result(fn: Callable[..., Any]) -> bool:
    """Whether the harness must wrap `fn`'s return value as ``{"result": value}`` to match the
    output schema (the return annotation's schema is not an object)."""
    hints = _hints(fn, fn.__name__)
    if "return" not in hints:
        return False
    return _schema_of(hints["return"], "its return type", "serialization").get("type") != "object"


# -- schemas ------------------------------------------------------------------------------


def _input_schema(
    fn: Callable[..., Any], name: str, hints: dict[str, Any], doc: docstring_parser.Docstring
) -> dict[str, Any]:
    described = {param.arg_name: param.description for param in doc.params}
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ContractError(
                f"tool {name!r}: parameter {param.name!r} is {param.kind.description}; tool "
                "arguments are named fields, so make it a regular or keyword-only parameter",
                contract_id=name,
                field=f"input_schema/{param.name}",
            )
        if param.name not in hints:
            raise ContractError(
                f"tool {name!r}: parameter {param.name!r} has no type annotation; annotate it "
                f"(e.g. {param.name}: str) so its schema can be derived",
                contract_id=name,
                field=f"input_schema/{param.name}",
            )
        hint = hints[param.name]
        if _is_context(hint):
            continue
        required = param.default is param.empty
        default = PydanticUndefined if required else param.default
        field = Field(default, description=described.get(param.name))
        # Explicit Annotated metadata comes last so it wins over the docstring.
        base, *metadata = get_args(hint) if get_origin(hint) is Annotated else (hint,)
        annotated = Annotated[(base, field, *metadata)]  # type: ignore[valid-type]
        fields[param.name] = Required[annotated] if required else NotRequired[annotated]
    arguments = TypedDict(f"{name}_arguments", fields)  # type: ignore[misc]
    arguments.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return _schema_of(arguments, f"the parameters of tool {name!r}", "validation")


def _output_schema(hints: dict[str, Any], name: str) -> dict[str, Any] | None:
    if "return" not in hints:
        return None
    schema = _schema_of(hints["return"], f"the return type of tool {name!r}", "serialization")
    if schema.get("type") == "object":
        return schema
    return {
        "type": "object",
        "properties": {RESULT_KEY: schema},
        "required": [RESULT_KEY],
        "additionalProperties": False,
    }


def _schema_of(
    annotation: Any, what: str, mode: Literal["validation", "serialization"]
) -> dict[str, Any]:
    """A flat JSON Schema for `annotation`: `$defs` inlined unless recursive, no titles."""
    try:
        schema = TypeAdapter(annotation).json_schema(schema_generator=_ToolJsonSchema, mode=mode)
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise ContractError(f"cannot derive a JSON Schema for {what}: {exc}") from exc
    defs = schema.pop("$defs", {})
    recursive: set[str] = set()
    flat = _inline(
        _untitled(schema, getattr(annotation, "__name__", None)), defs, frozenset(), recursive
    )
    kept: dict[str, Any] = {}
    while pending := recursive - kept.keys():
        for def_name in sorted(pending):
            target = _untitled(defs[def_name], def_name)
            kept[def_name] = _inline(target, defs, frozenset({def_name}), recursive)
    if kept:
        flat["$defs"] = kept
    return flat


def _inline(node: Any, defs: dict[str, Any], stack: frozenset[str], recursive: set[str]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, stack, recursive) for item in node]
    if not isinstance(node, dict):
        return node
    result: dict[str, Any] = {}
    ref = node.get("$ref")
    local = isinstance(ref, str) and ref.startswith(_DEFS)
    if isinstance(ref, str) and local:
        def_name = unescape(ref.removeprefix(_DEFS))
        if def_name in stack:
            recursive.add(def_name)
            result["$ref"] = ref
        else:
            target = _untitled(defs[def_name], def_name)
            result.update(_inline(target, defs, stack | {def_name}, recursive))
    for key, value in node.items():
        if key == "$ref" and local:
            continue
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {k: _inline(v, defs, stack, recursive) for k, v in value.items()}
        else:
            result[key] = _inline(value, defs, stack, recursive)
    if result.get("type") == "object" and "properties" in result:
        result.setdefault("additionalProperties", False)
    return result


def _untitled(schema: dict[str, Any], def_name: str | None) -> dict[str, Any]:
    """Drop the title pydantic copies from a class name; an explicit title differs and stays."""
    return {k: v for k, v in schema.items() if not (k == "title" and v == def_name)}


# -- function facts -----------------------------------------------------------------------


def _hints(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    try:
        return get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ContractError(
            f"tool {name!r}: cannot resolve its type annotations ({exc}); import the names "
            "they use at module level",
            contract_id=name,
        ) from exc


def _is_context(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    origin = get_origin(hint)
    if origin is Annotated:
        return _is_context(get_args(hint)[0])
    if origin is Union or origin is types.UnionType:
        return any(_is_context(arg) for arg in get_args(hint))
    return False


def _usage(doc: docstring_parser.Docstring) -> tuple[str, str | None, str | None]:
    """Split the docstring's text into description, `Use when:` and `Do not use when:`.

    Each marker's text runs to the next blank line or marker.
    """
    text = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
    kept: list[str] = []
    sections: dict[str, list[str]] = {_USE_WHEN: [], _AVOID_WHEN: []}
    current: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        marker = next((m for m in sections if stripped.lower().startswith(m)), None)
        if marker is not None:
            current = sections[marker]
            current.append(stripped[len(marker) :].strip())
        elif current is not None and stripped:
            current.append(stripped)
        else:
            current = None
            kept.append(line)
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept).strip())
    use, avoid = (" ".join(sections[m]).strip() or None for m in (_USE_WHEN, _AVOID_WHEN))
    return description, use, avoid


def _source(fn: Callable[..., Any]) -> bytes:
    """The function's source, or for functions without one (exec, REPL) its compiled code."""
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    try:
        return inspect.getsource(target).encode()
    except (OSError, TypeError):
        return _code_bytes(target.__code__)


def _code_bytes(code: types.CodeType) -> bytes:
    # Names are included too: `return foo(x)` and `return bar(x)` differ only in co_names.
    # Nested code objects are expanded, since their repr holds a memory address.
    parts = [code.co_code, repr(code.co_names).encode()]
    for const in code.co_consts:
        nested = isinstance(const, types.CodeType)
        parts.append(_code_bytes(const) if nested else repr(const).encode())
    return b"\0".join(parts)
