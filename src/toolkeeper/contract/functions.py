"""`@tool` and `ToolContract.from_function`: contracts from typed Python functions.

The function is the single source of truth: the input schema comes from its type hints (via
pydantic; ``Annotated[..., Field(...)]`` constraints included), parameter descriptions from its
docstring (Google, NumPy or reST), the description from the docstring's summary and body, and
``Use when:`` / ``Do not use when:`` lines fill `when_to_use` / `when_not_to_use`.

Conventions the harness relies on:

- One parameter annotated `ToolContext` or ``ToolContext | None`` (also inside ``Annotated``)
  is not in the schema; the harness passes the context there (`context_parameter`, which the
  in-process executor uses too, so what the schema leaves out is what gets injected).
- Every object schema generated has ``additionalProperties: false``: an argument the function
  would silently ignore hides the model's mistake, so it is rejected instead.
- A return type whose schema is not an object is wrapped as
  ``{"type": "object", "properties": {"result": ...}}``, and the harness wraps the returned
  value likewise as ``{"result": value}`` (`wraps_result`); structured content is always an
  object. A return type that constrains nothing (``Any``, ``object``) gives no output schema.
  For async functions the return annotation is the awaited value's type.
- Schemas are built per parameter type and cached (bounded), so decorating thousands of
  functions costs little more than reading their signatures.
- `implementation_digest` is sha256 over the function's source and the contract's declared
  content, so an edit to either changes it and invalidates grants bound to the old one.
- The decorator returns the function itself with the contract attached as
  ``fn.__toolkeeper_contract__``; read it with `contract_of`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import linecache
import logging
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
from docstring_parser import rest as rest_docstring
from pydantic import ConfigDict, Field, PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticSerializationError, PydanticUndefined, to_jsonable_python
from typing_extensions import TypedDict

from toolkeeper.contract.model import Idempotency, SideEffect, ToolContract
from toolkeeper.errors import ContractError
from toolkeeper.runtime.context import ToolContext
from toolkeeper.schema.document import canonical_json, unescape

_F = TypeVar("_F", bound=Callable[..., Any])
_log = logging.getLogger(__name__)

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
    contract = _unversioned_contract(
        fn,
        id=id,
        version=version,
        description=description,
        when_to_use=when_to_use,
        when_not_to_use=when_not_to_use,
        side_effect=side_effect,
        idempotency=idempotency,
        **contract_fields,
    )
    if contract.version is None and not contract.is_read_only:
        effect = contract.side_effect or "undeclared (counts as committing)"
        raise ContractError(
            f"tool {contract.id!r} has side_effect {effect} and no version; a tool that changes "
            'the world needs an explicit version: pass version="1.0.0" (or side_effect="none" '
            "if it only reads)",
            contract_id=contract.id,
            field="version",
        )
    return contract


def _unversioned_contract(
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
    """`contract_from_function` without its demand for a version (a bare ``@tool`` has none)."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ContractError(
            f"{fn!r} is not a function; decorate a def or async def with @toolkeeper.tool"
        )
    name = id or fn.__name__
    hints = _hints(fn, name)
    doc = _parse_docstring(inspect.getdoc(fn) or "")
    summary, use, avoid = _usage(doc)
    data: dict[str, Any] = {
        "id": name,
        "version": version,
        "description": description or summary,
        "when_to_use": when_to_use or use,
        "when_not_to_use": when_not_to_use or avoid,
        "input_schema": _input_schema(fn, name, hints, doc),
        "output_schema": _output_schema(hints, name)[0],
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
    # The declared data, not the contract's full dump: it says the same (the contract is built
    # from it alone) at a fraction of the cost, which matters for thousands of tools.
    declared = canonical_json(to_jsonable_python(data))
    digest = hashlib.sha256(_source(fn) + b"\n" + declared.encode())
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

    A bare ``@tool`` declares nothing, so it is taken at its most cautious: its side effect is
    undeclared, which counts as committing (the default policy asks a human before every
    call), and it has no version (its ref is ``name@0.0.0``). That is logged once, as a
    warning naming the declaration to write, and `toolkeeper lint` flags it (TK501, TK601).
    """
    if fn is not None:
        return _bare(fn)
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
        return _attach(function, contract_from_function(function, **options))

    return attach


def _bare(function: _F) -> _F:
    contract = _unversioned_contract(function)
    if not contract.is_read_only:
        _log.warning(
            "@tool on %s declares no side effect, so it counts as committing: under the default "
            "policy every call waits for a human approval. Declare it: "
            '@tool(side_effect="none") if it only reads, else @tool(version="1.0.0", '
            'side_effect="reversible"|"committing")',
            contract.id,
        )
    return _attach(function, contract)


def _attach(function: _F, contract: ToolContract) -> _F:
    # A bound method forwards attribute reads to its function, which is where we write.
    target: Any = getattr(function, "__func__", function)
    target.__toolkeeper_contract__ = contract
    return function


def contract_of(fn: Callable[..., Any]) -> ToolContract:
    """The contract `@tool` attached to `fn`."""
    contract = getattr(fn, "__toolkeeper_contract__", None)
    if not isinstance(contract, ToolContract):
        raise ContractError(
            f"{getattr(fn, '__qualname__', fn)!r} has no toolkeeper contract; decorate it with "
            "@toolkeeper.tool(...)"
        )
    return contract


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of `fn`'s parameter the harness fills with the `ToolContext`, if any: the one
    annotated ``ToolContext`` or ``ToolContext | None`` (``Optional``, ``Annotated`` too). The
    schema builder leaves exactly this parameter out and the in-process executor injects
    exactly this one. Raises `ContractError` for two such parameters or a union that mixes
    `ToolContext` with other types."""
    name = getattr(fn, "__name__", type(fn).__name__)
    return _context_name(name, _lenient_hints(fn))


def wraps_result(fn: Callable[..., Any]) -> bool:
    """Whether the harness must wrap `fn`'s return value as ``{"result": value}`` to match the
    output schema (the return annotation's schema is not an object)."""
    return returned_schema(fn)[1]


def returned_schema(fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, bool]:
    """The output schema `fn`'s return annotation gives (None without one, or when its hints
    cannot be resolved) and whether that schema wraps the value in ``{"result": ...}``."""
    hints = _lenient_hints(fn)
    if isinstance(hints.get("return"), str):
        return None, False
    try:
        return _output_schema(hints, getattr(fn, "__name__", type(fn).__name__))
    except ContractError:
        return None, False


# -- schemas ------------------------------------------------------------------------------


def _input_schema(
    fn: Callable[..., Any], name: str, hints: dict[str, Any], doc: docstring_parser.Docstring
) -> dict[str, Any]:
    described = {param.arg_name: param.description for param in doc.params}
    context = _context_name(name, hints)
    parameters: list[tuple[inspect.Parameter, Any]] = []
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
        if param.name != context:
            parameters.append((param, hints[param.name]))
    what = f"the parameters of tool {name!r}"
    return _assembled(parameters, described, what) or _typed_dict_schema(
        parameters, described, name, what
    )


def _assembled(
    parameters: list[tuple[inspect.Parameter, Any]], described: dict[str, str | None], what: str
) -> dict[str, Any] | None:
    """The input schema from cached per-type schemas, as pydantic would derive it for the
    whole signature; None where only the whole-signature build is exact (a default set in
    ``Field``, a default with no JSON form, two types claiming one `$defs` name)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for param, hint in parameters:
        metadata = get_args(hint)[1:] if get_origin(hint) is Annotated else ()
        fields = [m for m in metadata if isinstance(m, FieldInfo)]
        if any(not f.is_required() or f.default_factory is not None for f in fields):
            return None
        schema = _schema_of(hint, what, "validation")
        for def_name, definition in schema.pop("$defs", {}).items():
            if defs.setdefault(def_name, definition) != definition:
                return None
        description = described.get(param.name)
        if description and not any(f.description for f in fields):
            schema["description"] = description
        if param.default is param.empty:
            required.append(param.name)
        else:
            try:
                schema["default"] = to_jsonable_python(param.default)
            except PydanticSerializationError:
                return None
        properties[param.name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    if defs:
        result["$defs"] = defs
    return result


def _typed_dict_schema(
    parameters: list[tuple[inspect.Parameter, Any]],
    described: dict[str, str | None],
    name: str,
    what: str,
) -> dict[str, Any]:
    """The input schema pydantic derives for the whole signature as one TypedDict."""
    fields: dict[str, Any] = {}
    for param, hint in parameters:
        required = param.default is param.empty
        default = PydanticUndefined if required else param.default
        field = Field(default, description=described.get(param.name))
        # Explicit Annotated metadata comes last so it wins over the docstring.
        base, *metadata = get_args(hint) if get_origin(hint) is Annotated else (hint,)
        annotated = Annotated[(base, field, *metadata)]  # type: ignore[valid-type]
        fields[param.name] = Required[annotated] if required else NotRequired[annotated]
    arguments = TypedDict(f"{name}_arguments", fields)  # type: ignore[misc]
    arguments.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return _schema_of(arguments, what, "validation", cache=False)


def _output_schema(hints: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, bool]:
    """The output schema and whether it wraps the value as ``{"result": value}``."""
    if "return" not in hints:
        return None, False
    schema = _schema_of(hints["return"], f"the return type of tool {name!r}", "serialization")
    if not schema:
        return None, False  # Any or object: the function promises no shape to check
    if schema.get("type") == "object":
        return schema, False
    wrapped = {
        "type": "object",
        "properties": {RESULT_KEY: schema},
        "required": [RESULT_KEY],
        "additionalProperties": False,
    }
    return wrapped, True


def _schema_of(
    annotation: Any,
    what: str,
    mode: Literal["validation", "serialization"],
    *,
    cache: bool = True,
) -> dict[str, Any]:
    """A flat JSON Schema for `annotation` (a copy the caller may change): `$defs` inlined
    unless recursive, no titles. Built once per type and mode while it stays in the cache."""
    try:
        if cache and _hashable(annotation):
            schema: dict[str, Any] = _copy(_cached_schema(annotation, mode))
            return schema
        return _flat_schema(annotation, mode)
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise ContractError(f"cannot derive a JSON Schema for {what}: {exc}") from exc


def _hashable(annotation: Any) -> bool:
    try:
        hash(annotation)
    except TypeError:  # e.g. Annotated metadata holding a dict
        return False
    return True


@functools.lru_cache(maxsize=1024)
def _cached_schema(annotation: Any, mode: Literal["validation", "serialization"]) -> dict[str, Any]:
    return _flat_schema(annotation, mode)


def _flat_schema(annotation: Any, mode: Literal["validation", "serialization"]) -> dict[str, Any]:
    schema = TypeAdapter(annotation).json_schema(schema_generator=_ToolJsonSchema, mode=mode)
    defs = schema.pop("$defs", {})
    recursive: set[str] = set()
    flat: dict[str, Any] = _inline(
        _untitled(schema, _type_name(annotation)), defs, frozenset(), recursive
    )
    kept: dict[str, Any] = {}
    while pending := recursive - kept.keys():
        for def_name in sorted(pending):
            target = _untitled(defs[def_name], def_name)
            kept[def_name] = _inline(target, defs, frozenset({def_name}), recursive)
    if kept:
        flat["$defs"] = kept
    return flat


def _type_name(annotation: Any) -> str | None:
    """The class name pydantic titles a schema with (`Annotated` looked through)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return getattr(annotation, "__name__", None)


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _copy(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_copy(item) for item in node]
    return node


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


def _lenient_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolved hints where they resolve, else the annotations as written (strings under
    ``from __future__ import annotations``): an executor function need not be a `@tool`."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    try:
        return get_type_hints(target, include_extras=True)
    except Exception:  # any failure to evaluate a user's annotation means: read them as written
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            return {}
        return {
            name: param.annotation
            for name, param in signature.parameters.items()
            if param.annotation is not param.empty
        }


_CONTEXT_TEXT = {"ToolContext", "ToolContext|None", "None|ToolContext", "Optional[ToolContext]"}


def _context_name(name: str, hints: dict[str, Any]) -> str | None:
    found = [
        param for param, hint in hints.items() if param != "return" and _is_context(hint, name)
    ]
    if len(found) > 1:
        raise ContractError(
            f"{name!r}: parameters {', '.join(found)} are all annotated ToolContext; keep one, "
            "the harness passes one context per call",
            contract_id=name,
            field=f"input_schema/{found[1]}",
        )
    return found[0] if found else None


def _is_context(hint: Any, name: str) -> bool:
    if hint is ToolContext:
        return True
    if isinstance(hint, str):
        return hint.replace(" ", "").strip("'\"") in _CONTEXT_TEXT
    origin = get_origin(hint)
    if origin is Annotated:
        return _is_context(get_args(hint)[0], name)
    if origin is Union or origin is types.UnionType:
        others = [arg for arg in get_args(hint) if arg is not type(None)]
        if not any(_is_context(arg, name) for arg in others):
            return False
        if len(others) > 1:
            raise ContractError(
                f"{name!r}: a parameter is annotated {hint}, mixing ToolContext with other "
                "types; annotate it `ToolContext` or `ToolContext | None` (the harness fills "
                "it) and take other values in separate parameters",
                contract_id=name,
            )
        return True
    return False


_SECTION_LINE = re.compile(r"^\s*(?::|@|-{2,}\s*$|[A-Za-z][\w ]*:\s*$)", re.MULTILINE)
"""A line that could open a section in some docstring style: reST ``:param``, Epydoc
``@param``, a NumPy underline, a Google ``Args:`` title."""


def _parse_docstring(text: str) -> docstring_parser.Docstring:
    """`docstring_parser.parse`, skipping its try-every-style search for a docstring no style
    can find sections in: there every style finds none and the search returns the reST
    reading, which is what is parsed directly here."""
    if _SECTION_LINE.search(text):
        return docstring_parser.parse(text)
    return rest_docstring.parse(text)


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
    """The function's source lines, or for functions without one (exec, REPL) its compiled
    code. The lines come from the code's own positions rather than `inspect.getsource`, which
    tokenizes the file again for every function."""
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    code: types.CodeType = target.__code__
    lines = linecache.getlines(code.co_filename, getattr(target, "__globals__", None))
    last = _last_line(code)
    if lines and last is not None and last <= len(lines):
        return "".join(lines[code.co_firstlineno - 1 : last]).encode()
    return _code_bytes(code)


def _last_line(code: types.CodeType) -> int | None:
    ends = [end for _, end, _, _ in code.co_positions() if end is not None]
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and (nested := _last_line(const)) is not None:
            ends.append(nested)
    return max(ends, default=None)


def _code_bytes(code: types.CodeType) -> bytes:
    # Names are included too: `return foo(x)` and `return bar(x)` differ only in co_names.
    # Nested code objects are expanded, since their repr holds a memory address.
    parts = [code.co_code, repr(code.co_names).encode()]
    for const in code.co_consts:
        nested = isinstance(const, types.CodeType)
        parts.append(_code_bytes(const) if nested else repr(const).encode())
    return b"\0".join(parts)
