"""Contracts from the tool formats in the wild: MCP, OpenAI, Anthropic, BFCL and the
docker/mcp-registry ``tools.json`` catalog.

An imported tool says what it takes, not what it does. Nothing in an MCP, OpenAI, Anthropic or
BFCL definition is a trustworthy statement of effects — MCP annotations are explicitly hints
from a server we do not control — so every imported contract starts at the most cautious effect
class: ``side_effect=committing``, ``open_world=True``, ``idempotency=none``. Only the caller's
``overrides`` (ToolContract field values applied on top) relax that. Annotations are kept in
`ToolContract.annotations` for people and policy authors to read, and never set a field.

Schemas go through `toolkeeper.schema.dialects.normalize_schema`; its warnings, and any source field
the contract has no place for, are kept in `ToolContract.import_warnings`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from toolkeeper.contract.model import (
    CONTRACT_ID,
    ContractExample,
    Idempotency,
    SideEffect,
    ToolContract,
    read_data_file,
)
from toolkeeper.errors import CatalogError, ContractError
from toolkeeper.schema.dialects import normalize_schema

CAUTIOUS_DEFAULTS: dict[str, Any] = {
    "side_effect": SideEffect.COMMITTING,
    "open_world": True,
    "idempotency": Idempotency.NONE,
}
"""The effect class of a tool nobody has vouched for: it may commit, anywhere, once only."""

_BFCL_LANGUAGES = {"python": "bfcl", "java": "bfcl-java", "javascript": "bfcl-javascript"}

_Item = tuple[str, str, Callable[[], ToolContract]]
"""Where a tool sits in the list, a fingerprint of its definition, and how to import it."""


def from_mcp_tool(tool: dict[str, Any], **overrides: Any) -> ToolContract:
    """A contract from an MCP `Tool` (name, title, description, inputSchema, outputSchema,
    annotations). The title is kept as ``annotations["title"]``, where MCP's own
    `ToolAnnotations` puts it."""
    tool = _object(tool, "MCP tool")
    warnings = _unused(
        tool, {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}, "MCP"
    )
    annotations = tool.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        warnings.append(f"annotations: not an object ({type(annotations).__name__}); not imported")
        annotations = None
    hints = dict(annotations or {})
    title = tool.get("title")
    if isinstance(title, str):
        if hints.get("title") not in (None, title):
            warnings.append("title: differs from annotations.title; the tool's title is kept")
        hints["title"] = title
    if "inputSchema" not in tool:
        warnings.append("inputSchema: missing; the tool is imported as taking no arguments")
    input_schema, input_warnings = _schema(tool.get("inputSchema"), "input_schema", "mcp")
    output_schema, output_warnings = _schema(tool.get("outputSchema"), "output_schema", "mcp")
    return _contract(
        tool,
        "MCP",
        input_schema=input_schema,
        warnings=warnings + input_warnings + output_warnings,
        fields={"output_schema": output_schema, "annotations": hints or None},
        overrides=overrides,
    )


_JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}


def from_docker_tool(tool: dict[str, Any], **overrides: Any) -> ToolContract:
    """A contract from a docker/mcp-registry ``tools.json`` entry: ``{"name", "description",
    "arguments": [{"name", "type", "desc", "optional"?, "items": {"type"}?}],
    "annotations"?}``. Each argument becomes a property (its ``desc`` the description); an
    argument is required unless ``optional`` is true. Annotations are kept as hints, as for
    an MCP tool."""
    tool = _object(tool, "docker/mcp-registry tool")
    warnings = _unused(tool, {"name", "description", "arguments", "annotations"}, "docker")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for position, argument in enumerate(tool.get("arguments") or []):
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            warnings.append(f"arguments/{position}: not an argument with a name; not imported")
            continue
        name = argument["name"]
        prop: dict[str, Any] = {}
        kind = argument.get("type")
        if kind in _JSON_TYPES:
            prop["type"] = kind
        elif kind is not None:
            warnings.append(f"arguments/{position} ({name}): type {kind!r} is not a JSON type")
        items = argument.get("items")
        if kind == "array" and isinstance(items, dict) and items.get("type") in _JSON_TYPES:
            prop["items"] = {"type": items["type"]}
        if isinstance(argument.get("desc"), str) and argument["desc"]:
            prop["description"] = argument["desc"]
        properties[name] = prop
        if argument.get("optional") is not True:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    input_schema, schema_warnings = _schema(schema, "input_schema", "mcp")
    annotations = tool.get("annotations")
    hints = dict(annotations) if isinstance(annotations, dict) and annotations else None
    return _contract(
        tool,
        "docker/mcp-registry",
        input_schema=input_schema,
        warnings=warnings + schema_warnings,
        fields={"annotations": hints},
        overrides=overrides,
    )


def from_openai_function(tool: dict[str, Any], **overrides: Any) -> ToolContract:
    """A contract from an OpenAI function tool, in the Chat Completions shape
    ``{"type": "function", "function": {...}}``, the flat Responses shape
    ``{"type": "function", "name": ..., "parameters": ..., "strict": ...}``, or a bare
    legacy ``functions`` entry."""
    tool = _object(tool, "OpenAI tool")
    kind = tool.get("type", "function")
    if kind != "function":
        raise CatalogError(
            f"OpenAI tool of type {kind!r} ({tool.get('name', 'unnamed')}) is a hosted tool, "
            "not a function; only function tools have a schema to import"
        )
    warnings: list[str] = []
    body = tool
    if "function" in tool:
        body = _object(tool["function"], "OpenAI tool 'function' member")
        warnings += _unused(tool, {"type", "function"}, "OpenAI")
    warnings += _unused(body, {"type", "name", "description", "parameters", "strict"}, "OpenAI")
    if body.get("strict") is True:
        warnings.append(
            "strict: OpenAI strict mode belongs to the OpenAI view, not the contract; not imported"
        )
    input_schema, schema_warnings = _schema(body.get("parameters"), "input_schema", "openai")
    return _contract(
        body,
        "OpenAI",
        input_schema=input_schema,
        warnings=warnings + schema_warnings,
        overrides=overrides,
    )


def from_anthropic_tool(tool: dict[str, Any], **overrides: Any) -> ToolContract:
    """A contract from an Anthropic custom tool (name, description, input_schema,
    input_examples). Input examples that validate become contract examples; the others are
    named in `import_warnings`."""
    tool = _object(tool, "Anthropic tool")
    kind = tool.get("type", "custom")
    if kind != "custom":
        raise CatalogError(
            f"Anthropic tool of type {kind!r} ({tool.get('name', 'unnamed')}) is defined by "
            "Anthropic, not by a schema; only custom tools with an input_schema can be imported"
        )
    warnings = _unused(
        tool, {"type", "name", "description", "input_schema", "input_examples"}, "Anthropic"
    )
    input_schema, schema_warnings = _schema(tool.get("input_schema"), "input_schema", "anthropic")
    examples, example_warnings = _examples(tool.get("input_examples"), input_schema)
    return _contract(
        tool,
        "Anthropic",
        input_schema=input_schema,
        warnings=warnings + schema_warnings + example_warnings,
        fields={"examples": examples},
        overrides=overrides,
    )


def from_bfcl_function(
    doc: dict[str, Any], *, language: str = "python", **overrides: Any
) -> ToolContract:
    """A contract from a BFCL function doc (name, possibly dotted like ``math.factorial``;
    description; parameters in BFCL's dialect). `language` is the BFCL category's language —
    ``python``, ``java`` or ``javascript`` — which decides how parameters are read (see
    `toolkeeper.schema.dialects`)."""
    if language not in _BFCL_LANGUAGES:
        raise CatalogError(
            f"unknown BFCL language {language!r}; use one of {', '.join(_BFCL_LANGUAGES)}"
        )
    doc = _object(doc, "BFCL function doc")
    warnings = _unused(doc, {"name", "description", "parameters"}, "BFCL")
    source = _BFCL_LANGUAGES[language]
    input_schema, schema_warnings = _schema(doc.get("parameters"), "input_schema", source)
    return _contract(
        doc,
        "BFCL",
        input_schema=input_schema,
        warnings=warnings + schema_warnings,
        overrides=overrides,
    )


def load_tool_list(
    data: Any, *, source: str, on_problem: Callable[[str], None] | None = None
) -> list[ToolContract]:
    """Contracts from a tool list in any of the formats this module imports, detected per item.

    `data` is an MCP ``tools/list`` result (``{"tools": [...]}`` or the JSON-RPC response
    around it), a list of MCP, OpenAI or Anthropic tool definitions, a docker/mcp-registry
    ``tools.json`` list, one BFCL entry or a list of them (``{"id": ..., "function": [...]}``),
    JSON or JSON-lines text, or a `Path` to such a file (.json, .jsonl, .yaml, .toml). `source`
    names where the list came from, for errors. A name defined twice identically is imported
    once.

    A tool that cannot be imported (an illegal name, an unknown format, a second, different
    definition of a name) raises `CatalogError` — or, given `on_problem`, is reported there
    (with its position and name) and skipped, and the rest of the list is imported.
    """
    contracts: dict[str, tuple[str, str, ToolContract]] = {}
    for where, fingerprint, build in _items(_parse(data, source), source):
        try:
            contract = build()
            seen = contracts.get(contract.id)
            if seen is None:
                contracts[contract.id] = (where, fingerprint, contract)
            elif seen[1] != fingerprint:
                bfcl = "entry" in where
                hint = (
                    ". BFCL entries are separate catalogs: load one entry at a time" if bfcl else ""
                )
                raise CatalogError(
                    f"tool {contract.id!r} is defined twice, differently ({seen[0]} and "
                    f"{where}); a catalog needs one definition per name{hint}; the first is kept"
                )
        except CatalogError as exc:
            message = str(exc).removeprefix(f"{source}: ")
            problem = CatalogError(f"{source}: {where}: {message}", source=source)
            if on_problem is None:
                raise problem from exc
            on_problem(f"{problem} (skipped)")
    return [contract for _, _, contract in contracts.values()]


# -- shared import steps ------------------------------------------------------------------


def _contract(
    tool: dict[str, Any],
    label: str,
    *,
    input_schema: dict[str, Any] | None,
    warnings: list[str],
    overrides: dict[str, Any],
    fields: dict[str, Any] | None = None,
) -> ToolContract:
    """Check the name and the argument shape, apply the cautious defaults, then the caller's
    overrides. A tool without an input schema takes no arguments (the contract default)."""
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise CatalogError(f"{label} tool without a name ({_keys(tool)}); every tool needs one")
    contract_id = overrides.get("id", name)
    if contract_id == name and not CONTRACT_ID.match(name):
        suggestion = re.sub(r"[^A-Za-z0-9_.:/-]", "_", name).lstrip(".:/-")[:200] or "tool"
        raise CatalogError(
            f"{label} tool name {name!r} is not a legal contract id (1-200 letters, digits, "
            "'_', '.', ':', '/', '-', not starting with punctuation); rename the tool or import "
            f"it with id={suggestion!r}"
        )
    if contract_id != name:
        warnings.append(f"id: imported as {contract_id!r}; the source calls it {name!r}")
    description = tool.get("description")
    if not isinstance(description, str) or not description.strip():
        warnings.append("description: missing; the model will see only the tool's name")
        description = description if isinstance(description, str) else ""
    if input_schema is not None and input_schema.get("type") != "object":
        raise CatalogError(
            f"{label} tool {name!r}: the input schema describes {input_schema.get('type')!r}, "
            "not an object; tool arguments are always an object, so wrap the value in a property"
        )
    data: dict[str, Any] = {
        "id": name,
        "description": description,
        **CAUTIOUS_DEFAULTS,
        **(fields or {}),
        "import_warnings": tuple(warnings),
    }
    if input_schema is not None:
        data["input_schema"] = input_schema
    return ToolContract.from_dict({**data, **overrides})


def _schema(schema: Any, field: str, source: str) -> tuple[dict[str, Any] | None, list[str]]:
    if schema is None:
        return None, []
    normalized, warnings = normalize_schema(schema, source=source)
    return normalized, [f"{field}{warning}" for warning in warnings]


def _examples(
    examples: Any, schema: dict[str, Any] | None
) -> tuple[tuple[ContractExample, ...], list[str]]:
    if examples is None:
        return (), []
    if not isinstance(examples, list):
        return (), [f"input_examples: not a list ({type(examples).__name__}); not imported"]
    validator = Draft202012Validator(schema or {"type": "object"})
    kept: list[ContractExample] = []
    warnings: list[str] = []
    for index, example in enumerate(examples):
        error = next(validator.iter_errors(example), None) if isinstance(example, dict) else None
        if isinstance(example, dict) and error is None:
            kept.append(ContractExample(arguments=example))
            continue
        problem = (
            f"{'/' + '/'.join(str(p) for p in error.absolute_path)}: {error.message}"
            if error is not None
            else "not an object"
        )
        warnings.append(
            f"input_examples/{index}: does not match input_schema at {problem}; "
            "not kept as an example"
        )
    return tuple(kept), warnings


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CatalogError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _unused(tool: dict[str, Any], known: set[str], label: str) -> list[str]:
    return [f"{key}: {label} field not imported" for key in tool if key not in known]


def _keys(value: dict[str, Any]) -> str:
    return "keys: " + (", ".join(map(str, value)) or "none")


# -- tool lists ---------------------------------------------------------------------------


def _parse(data: Any, source: str) -> Any:
    """Decode files and text; structured data passes through."""
    if isinstance(data, Path):
        if data.suffix.lower() in (".yaml", ".yml", ".toml"):
            try:
                return read_data_file(data)
            except ContractError as exc:
                raise CatalogError(str(exc), source=source) from exc
        try:
            data = data.read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(f"cannot read {data}: {exc.strerror}", source=source) from exc
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    if not isinstance(data, str):
        return data
    try:
        return json.loads(data)
    except json.JSONDecodeError as whole:
        lines = [line for line in data.splitlines() if line.strip()]
        try:
            return [json.loads(line) for line in lines]
        except json.JSONDecodeError:
            raise CatalogError(
                f"{source}: not JSON or JSON lines ({whole}); to load a file, pass a pathlib.Path",
                source=source,
            ) from whole


def _items(data: Any, source: str) -> list[_Item]:
    """(where, fingerprint, build) for every tool in `data`, in order."""
    if isinstance(data, dict) and "jsonrpc" in data:
        if "error" in data:
            raise CatalogError(
                f"{source}: the server answered with an error: {data['error']}", source=source
            )
        data = data.get("result")
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    elif isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise CatalogError(
            f"{source}: expected a tool list, got {type(data).__name__}; pass an MCP tools/list "
            "result, a list of MCP, OpenAI or Anthropic tools, or BFCL entries",
            source=source,
        )
    items: list[_Item] = []
    for index, item in enumerate(data):
        if isinstance(item, dict) and isinstance(item.get("function"), list):
            items += _bfcl_entry(item, index)
            continue
        where = f"item {index}"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            where += f" ({item['name']!r})"
        try:
            items.append(_tool_item(item, where, source))
        except CatalogError as exc:  # raised when the list is read, like any other item's
            items.append((where, "", partial(_raise, exc)))
    return items


def _raise(exc: CatalogError) -> ToolContract:
    raise exc


def _bfcl_entry(entry: dict[str, Any], index: int) -> list[_Item]:
    """The entry's functions, read in its category's language (the id is ``<category>_<n>``)."""
    entry_id = str(entry.get("id", index))
    category = entry_id.rsplit("_", 1)[0]
    language = next((lang for lang in ("javascript", "java") if category.endswith(lang)), "python")
    items: list[_Item] = []
    for position, doc in enumerate(entry["function"]):
        fingerprint = language + json.dumps(doc, sort_keys=True, default=str)
        build = partial(from_bfcl_function, doc, language=language)
        items.append((f"entry {entry_id} function {position}", fingerprint, build))
    return items


def _tool_item(item: Any, where: str, source: str) -> _Item:
    if not isinstance(item, dict):
        raise CatalogError(
            f"{source}: {where} is {type(item).__name__}, not a tool object", source=source
        )
    importer: Callable[[dict[str, Any]], ToolContract]
    if "inputSchema" in item:
        importer = from_mcp_tool
    elif isinstance(item.get("arguments"), list) and "parameters" not in item:
        importer = from_docker_tool
    elif "input_schema" in item or item.get("type") == "custom":
        importer = from_anthropic_tool
    elif item.get("type") == "function" or ("name" in item and "type" not in item):
        importer = from_openai_function
    elif "type" in item and "name" in item:
        raise CatalogError(
            f"{source}: {where} ({item['name']!r}) is a built-in tool of type {item['type']!r}; "
            "only tools defined by a schema can be imported",
            source=source,
        )
    else:
        raise CatalogError(
            f"{source}: cannot tell the format of {where} ({_keys(item)}); expected an MCP tool "
            "(inputSchema), an OpenAI function tool (type 'function'), an Anthropic tool "
            "(input_schema), a docker/mcp-registry tool (arguments: [...]) or a BFCL entry "
            "(function: [...])",
            source=source,
        )
    fingerprint = importer.__name__ + json.dumps(item, sort_keys=True, default=str)
    return where, fingerprint, partial(importer, item)
