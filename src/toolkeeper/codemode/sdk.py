"""The catalog as a typed Python SDK: the text a model reads before it writes a program, and
the table that maps each function back to its contract.

One function per tool, parameters and defaults from the input schema (required first, so a
positional call maps back unambiguously), a `TypedDict` per object parameter and result, and
a docstring with the description, when to use it and when not, the effect class and the
version. Python names come from the contract ids the way vendor names do (`contract.naming`):
illegal characters become ``_``, a keyword or builtin gets a trailing ``_``, and names that
collide get a hash suffix, decided by the set of contracts alone — so the renderer and the
resolver agree whenever they see the same contracts.
"""

from __future__ import annotations

import builtins
import hashlib
import keyword
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolkeeper.contract.model import SideEffect, ToolContract
from toolkeeper.contract.naming import vendor_names
from toolkeeper.schema.document import resolve_ref

PREAMBLE = '''\
"""Tools as Python functions. Call them like functions; each call is checked by policy, may
wait for a human approval, and is recorded. Failures raise: ValueError (invalid arguments;
the message lists each field, what it expected and a fix), PermissionError (denied by policy
or an approver), LookupError (not found), TimeoutError, NameError (no such function; the
message suggests close names), RuntimeError (anything else). A None argument means "omitted".
print() what the user should see; the last expression is the program's value. sdk_help("f")
returns this text for f. In async code
`await f_async(...)` calls f: asyncio.gather runs read-only calls concurrently, writes one at
a time in the order started."""
from typing import Any, Literal, NotRequired, TypedDict
'''
"""The header of every SDK text: how calls behave and fail, once rather than per tool."""

ASYNC_SUFFIX = "_async"
"""`f_async(...)` is the awaitable twin of SDK function `f` (Monty's external calls cannot
tell a call that will be awaited from one that will not)."""
_RESERVED = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
_EFFECT_WORDS = {
    SideEffect.NONE: "read-only",
    SideEffect.REVERSIBLE: "reversible write",
    SideEffect.COMMITTING: "committing write",
}


@dataclass(frozen=True, slots=True)
class SdkFunction:
    """How one SDK function maps back to its tool."""

    name: str
    ref: str
    """The contract's ``id@version``, the name an inner call proposes."""
    parameters: tuple[str, ...]
    """Argument names in the order a positional call binds them."""
    nullable: frozenset[str]
    """Parameters whose schema admits null: a None passed to any other one is dropped."""
    read_only: bool
    aliases: dict[str, str]
    """Python argument name → schema key, for keys that are no Python identifier."""


@dataclass(frozen=True, slots=True)
class Sdk:
    """The SDK of one set of contracts: function name → how it maps back."""

    functions: dict[str, SdkFunction]

    def bind(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The tool arguments of a call ``name(*args, **kwargs)``; raises TypeError as
        Python would for a call that binds no arguments."""
        function = self.functions[name]
        if len(args) > len(function.parameters):
            raise TypeError(
                f"{name}() takes {len(function.parameters)} positional arguments but "
                f"{len(args)} were given"
            )
        arguments = dict(zip(function.parameters, args, strict=False))
        for key, value in kwargs.items():
            key = function.aliases.get(key, key)
            if key in arguments:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            arguments[key] = value
        return {
            key: value
            for key, value in arguments.items()
            if value is not None or key in function.nullable
        }


def python_names(contracts: Sequence[ToolContract]) -> dict[str, str]:
    """Contract ref → a distinct Python identifier, a pure function of the contract set."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    base = vendor_names(contracts, "openai")
    for ref in sorted(base):
        name = _identifier(base[ref])
        if name in taken:
            name = f"{name}_{hashlib.sha256(ref.encode()).hexdigest()[:8]}"
        names[ref] = name
        taken.add(name)
    return names


def _identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name.replace("-", "_"), flags=re.ASCII)
    if not name or name[0].isdigit():
        name = "_" + name
    return name + "_" if name in _RESERVED else name


def compile_sdk(contracts: Sequence[ToolContract]) -> Sdk:
    """The name table for `contracts` (no text: what a run needs on its path)."""
    names = python_names(contracts)
    functions = {}
    for contract in contracts:
        name = names[contract.ref]
        schema = contract.input_schema
        properties = schema.get("properties") or {}
        required = [key for key in schema.get("required", ()) if key in properties]
        order = (*required, *(key for key in properties if key not in required))
        nullable = frozenset(key for key in properties if _admits_null(properties[key], schema))
        aliases = {_arg(key): key for key in properties if _arg(key) != key}
        functions[name] = SdkFunction(
            name, contract.ref, order, nullable, contract.is_read_only, aliases
        )
    return Sdk(functions)


def render(contracts: Sequence[ToolContract], *, names: dict[str, str] | None = None) -> str:
    """The SDK text for `contracts`, in name order; `names` (ref → name) when they are part
    of a larger SDK whose names they keep."""
    names = names or python_names(contracts)
    parts = [PREAMBLE]
    for contract in sorted(contracts, key=lambda c: names[c.ref]):
        parts.append(_Renderer(names[contract.ref], contract).function())
    return "\n".join(parts)


def index(contracts: Sequence[ToolContract]) -> str:
    """A compact SDK for a large catalog: one signature line per function with the first
    sentence of its description; ``sdk_help("name")`` in a program gives the full text."""
    names = python_names(contracts)
    lines = [
        "# The SDK, one line per function (types simplified). In a program, "
        'print(sdk_help("name", ...)) shows the full signatures, TypedDicts and docs.'
    ]
    for contract in sorted(contracts, key=lambda c: names[c.ref]):
        properties = contract.input_schema.get("properties") or {}
        required = set(contract.input_schema.get("required", ()))
        params = [_arg(k) if k in required else f"{_arg(k)}=..." for k in properties]
        first = _clean(contract.description).split(". ")[0].rstrip(".")
        effect = "" if contract.is_read_only else " [writes]"
        lines.append(f"{names[contract.ref]}({', '.join(params)}){effect}  # {first}")
    return "\n".join(lines)


class _Renderer:
    """Renders one contract; the TypedDicts it needs come out before its function."""

    def __init__(self, name: str, contract: ToolContract) -> None:
        self.name = name
        self.contract = contract
        self.classes: list[str] = []
        self.class_names: set[str] = set()

    def function(self) -> str:
        contract = self.contract
        schema = contract.input_schema
        properties: dict[str, Any] = schema.get("properties") or {}
        required = [key for key in schema.get("required", ()) if key in properties]
        parameters = []
        for key in (*required, *(k for k in properties if k not in required)):
            annotation = self.type_of(properties[key], schema, _camel(self.name, key))
            if key in required:
                parameters.append(f"{_arg(key)}: {annotation}")
            elif "default" in properties[key]:
                parameters.append(f"{_arg(key)}: {annotation} = {properties[key]['default']!r}")
            else:
                optional = (
                    annotation if "None" in annotation.split(" | ") else f"{annotation} | None"
                )
                parameters.append(f"{_arg(key)}: {optional} = None")
        output = contract.output_schema
        returns = "Any"
        if output:
            inner = unwrapped_schema(output)
            returns = self.type_of(inner, output, _camel(self.name, "result"))
        signature = f"def {self.name}({', '.join(parameters)}) -> {returns}:"
        lines = [*self.classes, signature, f'    """{self.docstring()}"""', ""]
        return "\n".join(lines)

    def docstring(self) -> str:
        contract = self.contract
        lines = [_clean(contract.description)]
        if contract.when_to_use:
            lines.append(f"Use when: {_clean(contract.when_to_use)}")
        if contract.when_not_to_use:
            lines.append(f"Not when: {_clean(contract.when_not_to_use)}")
        effect = _EFFECT_WORDS[contract.effective_side_effect]
        if contract.open_world:
            effect += ", open world"
        lines.append(f"Effect: {effect}. Tool {contract.ref}.")
        return "\n    ".join(lines)

    def type_of(self, schema: Any, root: Any, hint: str) -> str:
        """A Python annotation for `schema`; objects with properties become TypedDicts."""
        if not isinstance(schema, dict):
            return "Any"
        if "$ref" in schema:
            target = resolve_ref(root, schema["$ref"])
            ref_name = schema["$ref"].rsplit("/", 1)[-1]
            if target is None or ref_name in self.class_names:
                return _camel(ref_name) if target is not None else "Any"
            return self.type_of(target, root, _camel(ref_name))
        if "const" in schema:
            return f"Literal[{schema['const']!r}]"
        if "enum" in schema:
            return f"Literal[{', '.join(repr(v) for v in schema['enum'])}]"
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                options = [
                    self.type_of(option, root, f"{hint}{n}")
                    for n, option in enumerate(schema[combinator], 1)
                ]
                return " | ".join(dict.fromkeys(options))
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(
                dict.fromkeys(self.type_of({**schema, "type": k}, root, hint) for k in kind)
            )
        if kind == "array":
            return f"list[{self.type_of(schema.get('items'), root, hint + 'Item')}]"
        if kind == "object" or "properties" in schema:
            if not schema.get("properties"):
                return "dict[str, Any]"
            return self.typed_dict(schema, root, hint)
        return _SCALARS.get(kind, "Any") if isinstance(kind, str) else "Any"

    def typed_dict(self, schema: dict[str, Any], root: Any, hint: str) -> str:
        name = hint
        while name in self.class_names:
            name += "_"
        self.class_names.add(name)
        required = set(schema.get("required", ()))
        fields = []
        for key, subschema in schema["properties"].items():
            annotation = self.type_of(subschema, root, _camel(name, key))
            if key not in required:
                annotation = f"NotRequired[{annotation}]"
            if key.isidentifier() and not keyword.iskeyword(key):
                fields.append(f"    {key}: {annotation}")
            else:
                fields = []  # a key that is no identifier needs the functional form
                break
        if fields:
            self.classes.append("\n".join([f"class {name}(TypedDict):", *fields]))
        else:
            body = ", ".join(
                f"{key!r}: {self.type_of(sub, root, _camel(name, key))}"
                for key, sub in schema["properties"].items()
            )
            self.classes.append(f"{name} = TypedDict({name!r}, {{{body}}}, total=False)")
        return name


_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}


def unwrapped_schema(schema: dict[str, Any]) -> Any:
    """The schema of what a program receives: a tool whose output is ``{"result": value}``
    (a function returning a non-object) hands the program the value itself."""
    properties = schema.get("properties")
    if isinstance(properties, dict) and set(properties) == {"result"}:
        return properties["result"]
    return schema


def _admits_null(schema: Any, root: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    if "$ref" in schema:
        target = resolve_ref(root, schema["$ref"])
        return target is None or _admits_null(target, root)
    kind = schema.get("type")
    if kind is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        return options is None or any(_admits_null(option, root) for option in options)
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _camel(*parts: str) -> str:
    words: Iterable[str] = (w for part in parts for w in re.split(r"[^A-Za-z0-9]+", part))
    name = "".join(w[:1].upper() + w[1:] for w in words if w)
    return name if name and not name[0].isdigit() else "T" + name


def _arg(key: str) -> str:
    return key if key.isidentifier() and not keyword.iskeyword(key) else f"{_identifier(key)}"


def _clean(text: str) -> str:
    # The text goes inside a triple-quoted docstring: it must not be able to close it.
    return " ".join(text.replace('"""', "'''").replace("\\", "\\\\").split())


__all__ = [
    "ASYNC_SUFFIX",
    "PREAMBLE",
    "Sdk",
    "SdkFunction",
    "compile_sdk",
    "index",
    "python_names",
    "render",
]
