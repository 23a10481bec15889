"""Foreign type names in schemas — BFCL's Python names, Java and JavaScript — and the JSON
type each stands for.

Java and JavaScript (BFCL `simple_java`, `simple_javascript`) describe source-code calls, where an
argument may be an expression: a variable name, ``"new ArrayList<>(...)"``, ``"42L"``. BFCL shows
the model every parameter as a string, yet its gold answers hold converted values (``true``,
``[101, 202]``, ``{"limit": 50}``) with variable names nested inside. So every typed position
accepts its JSON type *or* a string holding an expression (``{"type": ["boolean", "string"]}``,
the language type noted in the description): the model's strings and the gold values both
validate, and nothing looser is allowed.
"""

from __future__ import annotations

from typing import Any

from toolkeeper.schema.notes import Run, describe, short

_NATIVE = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_ANY = "any"
_SET_NAMES = ("Set", "HashSet", "TreeSet")
_TYPE_NAMES: dict[str, str] = {  # Python as BFCL writes it, Java, JavaScript
    **dict.fromkeys(("str", "String", "char", "Character"), "string"),
    **dict.fromkeys(("int", "byte", "short", "long", "Byte", "Short", "Integer", "Long",
                     "BigInteger", "Bigint", "BigInt"), "integer"),
    **dict.fromkeys(("float", "double", "Double", "Float", "BigDecimal", "Number"), "number"),
    **dict.fromkeys(("bool", "Boolean"), "boolean"),
    **dict.fromkeys(("tuple", "list", "Array", "ArrayList", "LinkedList", "List", "Queue",
                     "Deque", "Stack", "Vector", *_SET_NAMES), "array"),
    **dict.fromkeys(("dict", "Map", "HashMap", "Hashtable", "TreeMap", "LinkedHashMap"),
                    "object"),
    **dict.fromkeys(("None", "NoneType"), "null"),
    **dict.fromkeys(("any", "Any", "Object"), _ANY),
}  # fmt: skip


def normalize_type(node: dict[str, Any], pointer: str, run: Run) -> None:
    """Rewrite `node`'s ``type`` into JSON types, warning once if it changed; an unknown or
    any-value type is removed."""
    raw = node["type"]
    names = raw if isinstance(raw, list) else [raw]
    json_types = [_json_type(name) for name in names]
    where = f"{pointer}/type"
    if None in json_types or _ANY in json_types:
        del node["type"]
        if None in json_types:
            describe(node, f"(declared type: {short(raw)})")
            run.warn(where, f"unknown type {short(raw)}; moved into description")
        else:
            run.warn(where, f"{run.label} type {raw!r} removed: any value accepted")
        return
    mapped = [json_type for json_type in dict.fromkeys(json_types) if json_type]
    label = f"{run.label} type {raw!r}"
    if run.language and pointer and "string" not in mapped:
        # A source-code argument may be an expression; see the module docstring.
        mapped.append("string")
        label = f"{run.language} {'/'.join(map(str, names))}"
        describe(node, f"({label}; a string value is a {run.language} expression)")
    if any(str(name).split("<")[0] in _SET_NAMES for name in names):
        node.setdefault("uniqueItems", True)
    new = mapped[0] if len(mapped) == 1 else mapped
    if new != raw:
        node["type"] = new
        run.warn(where, f"{label} normalized to {new!r}")


def _json_type(name: Any) -> str | None:
    """The JSON type (or `_ANY`) a declared type name stands for; None when unknown."""
    if not isinstance(name, str):
        return None
    if name in _NATIVE:
        return name
    base = name.split("<", 1)[0].strip()
    return _TYPE_NAMES.get(base) or (base.lower() if base.lower() in _NATIVE else None)
