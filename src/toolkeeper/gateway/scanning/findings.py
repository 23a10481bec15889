"""Scanning upstream tool definitions for prompt injection before anyone approves them.

A model reads every string of a tool definition, so every string is scanned: the name, title
and description, and the whole input and output schema — property names, descriptions,
titles, defaults, enums, examples and unknown keys (CyberArk's "full-schema poisoning"). The
checks follow the published attack classes:

    hidden_directive         <IMPORTANT>-style pseudo-system tags, "ignore previous
                             instructions", "do not tell the user", "before using this tool,
                             read ...", redirection of other tools' effects (Invariant Labs'
                             tool poisoning and shadowing write-ups)
    invisible_unicode        zero-width, tag (U+E0000–E007F), bidi override/isolate and other
                             format or control characters that hide text from a reviewer
    shadowing                another server's tool named in this tool's text
    credential_path          ~/.ssh/id_rsa, .aws/credentials, .env, /etc/passwd, mcp.json ...
    exfiltration_parameter   a sidenote/context/history/token-like parameter whose text asks
                             for content the tool has no business receiving
    model_instruction        imperatives addressed to the assistant or model (medium)
    oversized_text           a description or schema string over the limit (medium)

A scan is a tripwire, not the control: it catches the published shapes and makes a reviewer
look. The control is the pin (`pins.py`): nothing an upstream says is served before an
operator approved exactly that definition.

This module holds the findings and `scan_tool`, which reads a definition's strings
(`scanned_text.py`) and runs the checks (`scan_checks.py`) on them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from toolkeeper.gateway.scanning.checks import (
    check_credentials,
    check_directives,
    check_exfiltration,
    check_instruction_name,
    check_invisible,
    check_shadowing,
    tool_reference,
)
from toolkeeper.gateway.scanning.text import fold, humanize, parameters, strings

ScanAction = Literal["block", "warn"]


class Severity(StrEnum):
    """How bad a finding is; high-severity classes block by default."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


FINDING_CLASSES: dict[str, Severity] = {
    "hidden_directive": Severity.HIGH,
    "invisible_unicode": Severity.HIGH,
    "shadowing": Severity.HIGH,
    "credential_path": Severity.HIGH,
    "exfiltration_parameter": Severity.HIGH,
    "model_instruction": Severity.MEDIUM,
    "oversized_text": Severity.MEDIUM,
}
"""The scan's finding classes and their severity; `UpstreamConfig.scan` keys are these."""

DEFAULT_MAX_TEXT = 2000


@dataclass(frozen=True, slots=True)
class Finding:
    """One suspicious thing in a tool definition, addressed by a JSON pointer into it."""

    code: str
    severity: Severity
    path: str
    message: str
    server: str = ""
    tool: str = ""


def default_action(code: str) -> ScanAction:
    """Block high-severity classes, warn about the rest (and about codes we do not know)."""
    return "block" if FINDING_CLASSES.get(code) is Severity.HIGH else "warn"


def blocking(findings: Collection[Finding], actions: Mapping[str, ScanAction]) -> list[Finding]:
    """The findings that withhold a tool under the per-class `actions` of its upstream."""
    return [f for f in findings if actions.get(f.code, default_action(f.code)) == "block"]


def scan_tool(
    server: str,
    tool: Mapping[str, Any],
    *,
    known_tools: Mapping[str, Collection[str]],
    max_text: int = DEFAULT_MAX_TEXT,
) -> list[Finding]:
    """Every finding in `tool` (an MCP tool definition) from upstream `server`.

    `known_tools` maps each server to its tool names; names of *other* servers that appear
    in this tool's text are reported as shadowing.
    """
    name = str(tool.get("name", ""))
    found: dict[tuple[str, str], Finding] = {}

    def add(code: str, path: str, message: str) -> None:
        found.setdefault(
            (code, path), Finding(code, FINDING_CLASSES[code], path, message, server, name)
        )

    reference = tool_reference(
        frozenset(
            (other, tool_name)
            for other, names in known_tools.items()
            if other != server
            for tool_name in names
        )
    )
    description = fold(str(tool.get("description") or ""))
    for path, text, is_name in strings(tool):
        plain = fold(text)
        words = fold(humanize(text)) if is_name else plain
        check_invisible(text, path, add)
        check_directives(words, path, add)
        check_credentials(plain, path, add)
        if len(text) > max_text:
            add("oversized_text", path, f"{len(text)} characters, over the {max_text} allowed")
        if path == "/name":
            continue  # another server's tool of the same name is a collision, judged elsewhere
        check_shadowing(plain, reference, path, add)
        if is_name:
            check_instruction_name(words, path, add)
    for path, prop, schema in parameters(tool):
        check_exfiltration(prop, schema, description, path, add)
    return list(found.values())
