"""Machine-applicable fixes: JSON Patch (RFC 6902) operations over tool arguments.

A `Repair` is what a program (an agent loop, a test, a retry policy) can apply without
reading prose; the model reads the same fix as a sentence in `ToolError.suggested_fix`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolkeeper.schema.document import pointer_parts


@dataclass(frozen=True, slots=True)
class Repair:
    """One JSON Patch (RFC 6902) operation that resolves one field error."""

    op: Literal["add", "remove", "replace", "move"]
    path: str
    value: Any = None
    from_: str | None = None
    """The source pointer of a `move`."""
    placeholder: bool = False
    """True when `value` is a stand-in built from the schema, not from what the caller sent:
    it validates, but the caller should supply the real value."""

    def as_patch(self) -> dict[str, Any]:
        """The operation as an RFC 6902 JSON Patch object."""
        patch: dict[str, Any] = {"op": self.op, "path": self.path}
        if self.op in ("add", "replace"):
            patch["value"] = self.value
        if self.op == "move":
            patch["from"] = self.from_
        return patch


def apply_repairs(instance: Any, repairs: Sequence[Repair]) -> Any:
    """A copy of `instance` with `repairs` applied; `instance` itself is left untouched.

    Removals run last, deepest and highest index first, so removing array items never
    shifts the target of another operation. An operation whose location no longer exists
    (a conflicting repair removed it) is skipped rather than failing the rest.
    """
    document = copy.deepcopy(instance)
    removals = sorted(
        (r for r in repairs if r.op == "remove"),
        key=lambda r: [
            (0, int(t), "") if t.isdigit() else (1, 0, t) for t in pointer_parts(r.path)
        ],
        reverse=True,
    )
    for repair in [r for r in repairs if r.op != "remove"] + removals:
        document = _apply(document, repair)
    return document


def _apply(document: Any, repair: Repair) -> Any:
    if repair.op == "move":
        found, value = _take(document, pointer_parts(repair.from_ or ""))
        return _put(document, pointer_parts(repair.path), value, insert=True) if found else document
    if repair.op == "remove":
        _take(document, pointer_parts(repair.path))
        return document
    value = copy.deepcopy(repair.value)
    return _put(document, pointer_parts(repair.path), value, insert=repair.op == "add")


def _parent(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def _take(document: Any, tokens: list[str]) -> tuple[bool, Any]:
    parent = _parent(document, tokens)
    if not tokens:
        return False, None
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return True, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return True, parent.pop(int(last))
    return False, None


def _put(document: Any, tokens: list[str], value: Any, *, insert: bool) -> Any:
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and (insert or last in parent):
        parent[last] = value
    elif isinstance(parent, list) and last == "-" and insert:
        parent.append(value)
    elif isinstance(parent, list) and last.isdigit() and int(last) <= len(parent):
        index = int(last)
        if insert:
            parent.insert(index, value)
        elif index < len(parent):
            parent[index] = value
    return document
