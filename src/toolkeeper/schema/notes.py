"""What a schema normalization says about its rewrites: the warnings it returns to the caller
(`Run`) and the notes it leaves in a node's description.

Nothing is dropped silently, so every rewrite of `dialects.py` and `type_names.py` goes through
these: a warning naming the JSON pointer, and for what 2020-12 cannot express, a note where
the model and a reviewer still read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    """One normalization: the source's labels and the warnings collected so far."""

    label: str
    language: str | None
    warnings: list[str] = field(default_factory=list)

    def warn(self, pointer: str, message: str) -> None:
        self.warnings.append(f"{pointer}: {message}")


def move_to_description(
    node: dict[str, Any], keyword: str, pointer: str, run: Run, reason: str
) -> None:
    """Remove `keyword` from `node`, keep its value as a description note, and warn why."""
    value = node.pop(keyword)
    describe(node, f"({keyword}: {short(value)})")
    run.warn(f"{pointer}/{keyword}", f"{reason}; moved into description")


def describe(node: dict[str, Any], note: str) -> None:
    """Append `note` to `node`'s description."""
    description = node.get("description")
    node["description"] = f"{description} {note}" if description else note


def short(value: Any, limit: int = 120) -> str:
    """`value` as text for a warning or note, cut to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
