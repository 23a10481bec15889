"""Scanning upstream tool definitions for prompt injection before anyone approves them.

A model reads every string of a tool definition, so every string is scanned — name, title,
description, annotations and the whole input and output schema — in the form the model
reads it (`text.read`: Unicode folded, invisible characters and look-alikes undone, markup
taken out but remembered). The checks ask what the text *asks the model to do*, whatever
wrapper it comes in; markup only raises a finding's severity. Finding classes (the keys of an
upstream's ``scan`` setting):

    hidden_directive         override or role change, concealment from the user, effects
                             redirected to a third party, messages addressed to the model
    exfiltration             asks to read or send data the call does not need
    tool_steering            steers tool choice: "always use this tool first", "ignore the
                             other weather tools", advertising aimed at the model
    shadowing                instructions about another server's tool; a name that looks
                             like another server's tool
    confusable_name          a name mixing scripts (``read_fіle`` with a Cyrillic і)
    exfiltration_parameter   a parameter asking for the conversation, other tools' output
                             or secrets the description never explains
    credential_path          ~/.ssh/id_rsa, .aws/credentials, .env, mcp.json ... (unless the
                             sentence denies touching it)
    invisible_unicode        zero-width, tag, bidi and other characters that hide text
    encoded_payload          base64 or hex that decodes to an instruction or to hidden text
    model_instruction        an imperative to the model with nothing harmful in it (medium)
    markup                   pseudo-system markup with no instruction found in it (medium)
    oversized_text           a string over the length limit (medium)
    classifier               the optional second opinion of a small local classifier
                             (`classifier.py`; off unless asked for, medium)

Every finding names its check, the JSON pointer of the string, the span in that string, its
severity and a one-line reason. A scan is a tripwire, not the control: the control is the
pin (`pins.py`) — nothing an upstream says is served before an operator approved exactly
that definition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from toolkeeper.gateway.scanning.classifier import opinion as second_opinion
from toolkeeper.gateway.scanning.directives import (
    Hit,
    ToolReference,
    credential_path,
    cross_server,
    directives,
    model_instruction,
)
from toolkeeper.gateway.scanning.structure import (
    Flaw,
    chat_turn,
    confusable_name,
    imitated_name,
    instruction_name,
    instruction_value,
    invisible,
    is_distinctive,
    parameter_asks,
    preset_destination,
    tool_reference,
)
from toolkeeper.gateway.scanning.text import (
    Marker,
    Reading,
    encoded_runs,
    excerpt,
    fold,
    humanize,
    parameters,
    read,
)
from toolkeeper.gateway.scanning.text import strings as definition_strings

ScanAction = Literal["block", "warn"]

_HIDING = re.compile(
    r"(?i)hidden|secret|invisible|do not show|don't show|not visible|display\s*:\s*none"
    r"|visibility\s*:\s*hidden|font-size\s*:\s*0|opacity\s*:\s*0(?![.\d]*[1-9])"
)
# Markup that names itself an override ("SYSTEM OVERRIDE:", `<override>`) claims to replace
# the model's instructions, whatever follows it.
_OVERRIDING = re.compile(r"(?i)override|jailbreak|god ?mode|unlock")
_TAG_NAME = re.compile(r"<\s*([\w:-]+)")


class Severity(StrEnum):
    """How bad a finding is; high-severity findings block by default."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


FINDING_CLASSES: dict[str, Severity] = {
    "hidden_directive": Severity.HIGH,
    "exfiltration": Severity.HIGH,
    "tool_steering": Severity.HIGH,
    "shadowing": Severity.HIGH,
    "confusable_name": Severity.HIGH,
    "exfiltration_parameter": Severity.HIGH,
    "credential_path": Severity.HIGH,
    "invisible_unicode": Severity.HIGH,
    "encoded_payload": Severity.HIGH,
    "model_instruction": Severity.MEDIUM,
    "markup": Severity.MEDIUM,
    "oversized_text": Severity.MEDIUM,
    "classifier": Severity.MEDIUM,
}
"""The scan's finding classes and their usual severity; `UpstreamConfig.scan` keys are these."""

DEFAULT_MAX_TEXT = 2000
READ_LIMIT = 1 << 15
"""Characters of one string that are read; a longer string blocks, since the rest — which a
model would read — goes unchecked, and reading is linear but not cheap."""
TOOL_READ_LIMIT = 1 << 18
"""Characters of one definition that are read, over all its strings; past it, the same."""

_Add = Callable[[str, str, "Hit | Flaw", "Severity", str], None]
"""Records a finding: ``add(path, raw string, hit or flaw, severity, note)``."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One suspicious thing in a tool definition: its class (`code`), severity, the JSON
    pointer of the string, a one-line message, and which check found it at which span
    (``[start, end)`` in that string)."""

    code: str
    severity: Severity
    path: str
    message: str
    server: str = ""
    tool: str = ""
    check: str = ""
    span: tuple[int, int] | None = None


def default_action(code: str) -> ScanAction:
    """What a class does when the upstream's config says nothing: high classes block."""
    return "block" if FINDING_CLASSES.get(code) is Severity.HIGH else "warn"


def blocking(findings: Collection[Finding], actions: Mapping[str, ScanAction]) -> list[Finding]:
    """The findings that withhold a tool: those whose class the upstream's `actions` set to
    block, and, for classes it does not mention, those of high severity."""
    return [
        f
        for f in findings
        if actions.get(f.code, "block" if f.severity is Severity.HIGH else "warn") == "block"
    ]


def scan_tool(
    server: str,
    tool: Mapping[str, Any],
    *,
    known_tools: Mapping[str, Collection[str]],
    max_text: int = DEFAULT_MAX_TEXT,
    classifier: bool = False,
) -> list[Finding]:
    """Every finding in `tool` (an MCP tool definition) from upstream `server`.

    `known_tools` maps each server to its tool names: instructions about another server's
    tool, and names that look like one, are shadowing. With `classifier`, the second opinion
    of the shipped classifier is added as one `classifier` finding when it objects.
    """
    name = str(tool.get("name", ""))
    found: dict[tuple[str, str], Finding] = {}

    def add(path: str, raw: str, item: Hit | Flaw, severity: Severity, note: str) -> None:
        span = (item.start, item.end)
        message = f"{item.reason}{note}: {excerpt(raw, span)}"
        finding = Finding(item.code, severity, path, message, server, name, item.check, span)
        earlier = found.get((item.check, path))
        # One finding per check and string: the first, unless a later match of the same check
        # is more severe (a warning pattern must not hide a blocking one after it).
        if earlier is None or (earlier.severity is not Severity.HIGH and severity is Severity.HIGH):
            found[(item.check, path)] = finding

    own = set(known_tools.get(server, ()))
    # A plain word the definition itself defines (a parameter, an enum value: "`add` adds the
    # given tags") refers to that, not to another server's tool of the same name. A
    # distinctive one (`send_email`) is not excused: the schema is the author's to write too,
    # and an enum value must not license orders about another server's tool. A boolean
    # parameter is a switch: only true or false leaves through it, whatever it is called.
    switches: set[str] = set()
    defined: set[str] = set()
    _schema_words([tool.get("inputSchema"), tool.get("outputSchema")], switches, defined)
    own.update(name for name in defined if not is_distinctive(name))
    reference = tool_reference(
        frozenset(
            (other, tool_name)
            for other, names in known_tools.items()
            if other != server
            for tool_name in names
            if tool_name not in own
        )
    )
    budget = TOOL_READ_LIMIT
    for path, whole, is_name in definition_strings(tool):
        if budget <= 0:
            unread = Flaw(
                "oversized", "oversized_text", True,
                f"the definition holds more than the {TOOL_READ_LIMIT} characters read; the "
                "rest is not checked",
                0, len(whole),
            )  # fmt: skip
            add(path, whole, unread, Severity.HIGH, "")
            break
        raw = whole[: min(READ_LIMIT, budget)]
        budget -= len(raw)
        if flaw := invisible(raw):
            add(path, raw, flaw, Severity.HIGH, "")
        if len(whole) > len(raw):
            cut = Flaw(
                "oversized", "oversized_text", True,
                f"{len(whole)} characters; only the first {len(raw)} are read, the rest is not "
                "checked",
                len(raw), len(whole),
            )  # fmt: skip
            add(path, whole, cut, Severity.HIGH, "")
        elif len(raw) > max_text:
            oversized = Flaw(
                "oversized", "oversized_text", False,
                f"{len(raw)} characters, over the {max_text} allowed", max_text, len(raw),
            )  # fmt: skip
            add(path, raw, oversized, Severity.MEDIUM, "")
        if is_name:
            _scan_name(path, raw, server, known_tools, add, switch=raw in switches)
            continue
        reading = read(raw)
        _scan_text(path, reading, reference, add)
        if flaw := chat_turn(reading):
            add(path, raw, flaw, Severity.HIGH, "")
        _scan_encoded(path, raw, reference, add)
        if flaw := instruction_value(raw):
            add(path, raw, flaw, Severity.HIGH, "")
    description = fold(str(tool.get("description") or "")[:READ_LIMIT])
    for path, prop, schema in parameters(tool):
        if flaw := parameter_asks(prop, schema, description):
            add(path, prop, flaw, Severity.HIGH, "")
        if flaw := preset_destination(prop, schema):
            add(path, prop, flaw, Severity.HIGH, "")
    if classifier:
        _second_opinion(tool, add)
    return list(found.values())


def _second_opinion(tool: Mapping[str, Any], add: _Add) -> None:
    """The classifier's opinion as a finding on the description, at the first of the word
    n-grams that raised its score most."""
    view = second_opinion(tool)
    if not view.objects:
        return
    raw = str(tool.get("description") or "")[:READ_LIMIT]
    lowered = raw.lower()
    found = [(lowered.find(r), len(r)) for r in view.reasons if lowered.find(r) >= 0]
    span = (found[0][0], found[0][0] + found[0][1]) if found else (0, len(raw))
    words = ", ".join(repr(r) for r in view.reasons) or "the text as a whole"
    flaw = Flaw(
        "classifier", "classifier", False,
        f"the classifier puts the odds of poisoning at {view.probability:.0%} (most telling: "
        f"{words})",
        *span,
    )  # fmt: skip
    add("/description", raw, flaw, Severity.MEDIUM, "")


def _scan_encoded(path: str, raw: str, reference: ToolReference | None, add: _Add) -> None:
    """Base64 and hex runs that decode to text: the decoded text is read like any other, and
    text hidden this way is a finding even when it orders nothing."""
    for start, end, decoded in encoded_runs(raw):
        reading = read(decoded)
        hits = [*directives(reading)]
        hits += [h for h in (credential_path(reading), cross_server(reading, reference)) if h]
        shown = " ".join(decoded.split())
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        if hits:
            reason = f"encoded text that decodes to an order ({hits[0].reason}): {shown!r}"
        elif len(decoded.split()) >= 4:
            reason = f"encoded text a reviewer cannot read: {shown!r}"
        else:
            continue
        flaw = Flaw("encoded_payload", "encoded_payload", True, reason, start, end)
        add(path, raw, flaw, Severity.HIGH, "")


def _scan_text(path: str, reading: Reading, reference: ToolReference | None, add: _Add) -> None:
    """The language checks on one string; markup raises what they find to high."""
    hits = [*directives(reading)]
    for extra in (
        credential_path(reading),
        cross_server(reading, reference),
        model_instruction(reading),
    ):
        if extra is not None:
            hits.append(extra)
    kinds = sorted({marker.kind for marker in reading.markers})
    note = f" (inside {', '.join(kinds)})" if kinds else ""
    for hit in hits:
        raw_hit = Hit(hit.check, hit.code, hit.high, hit.reason, *reading.span(hit.start, hit.end))
        severity = Severity.HIGH if hit.high or kinds else Severity.MEDIUM
        add(path, reading.raw, raw_hit, severity, note)
    if kinds and not hits:
        # Markup that says what it is declares it, whatever its content says: a tag calling
        # its content hidden or secret keeps it from the user (concealment by the frame
        # alone), and one calling itself an override claims to replace the model's rules.
        for check, reason, declares in _DECLARATIONS:
            marker = next((m for m in reading.markers if declares(reading.raw, m)), None)
            if marker is not None:
                flaw = Flaw(check, "hidden_directive", True, reason, marker.start, marker.end)
                add(path, reading.raw, flaw, Severity.HIGH, "")
                return
        first = reading.markers[0]
        markup = Flaw(
            "markup", "markup", False,
            f"pseudo-system markup ({', '.join(kinds)}) with no instruction found in it",
            first.start, first.end,
        )  # fmt: skip
        add(path, reading.raw, markup, Severity.MEDIUM, "")


def _hides(raw: str, marker: Marker) -> bool:
    return (
        marker.kind in ("pseudo-system tag", "bracket marker", "hidden html")
        and _HIDING.search(raw[marker.start : marker.end]) is not None
        and _wraps(raw, marker)
    )


def _overrides(raw: str, marker: Marker) -> bool:
    return _OVERRIDING.search(raw[marker.start : marker.end]) is not None


_DECLARATIONS: tuple[tuple[str, str, Callable[[str, Marker], bool]], ...] = (
    ("concealment", "markup that declares the text it wraps hidden from the user", _hides),
    ("override", "markup that declares it overrides the model's instructions", _overrides),
)
"""What markup may declare of itself, in the order it is looked for: the check it fails, the
reason shown, and whether a marker declares it."""


def _wraps(raw: str, marker: Marker) -> bool:
    """Whether a marker wraps text: a tag is closed later (`<secret>…</secret>`); a lone
    `<secret>` is a placeholder ("use <secret> placeholders", `?s=<secret>` in a URL)."""
    opened = raw[marker.start : marker.end]
    name = _TAG_NAME.match(opened)
    if name is None or opened.lstrip("<").lstrip().startswith("/"):
        return True
    return f"</{name.group(1).lower()}" in raw[marker.end :].lower().replace("< /", "</")


def _schema_words(root: Any, switches: set[str], identifiers: set[str]) -> None:
    """Collect the definition's own parameter names and enum values (`identifiers`) and the
    names of its boolean parameters (`switches`), at any depth of the schema — without
    recursion, since a schema may nest thousands of levels deep."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        props = node.get("properties")
        if isinstance(props, dict):
            for prop, sub in props.items():
                identifiers.add(str(prop))
                kinds = sub.get("type") if isinstance(sub, dict) else None
                kinds = [kinds] if isinstance(kinds, str) else kinds
                if isinstance(kinds, list) and set(kinds) - {"null"} == {"boolean"}:
                    switches.add(str(prop))
        enum = node.get("enum")
        if isinstance(enum, list):
            identifiers.update(str(value) for value in enum if isinstance(value, str))
        stack.extend(node.values())


def _scan_name(
    path: str,
    raw: str,
    server: str,
    known_tools: Mapping[str, Collection[str]],
    add: _Add,
    *,
    switch: bool = False,
) -> None:
    """Names: the tool's own is checked for disguise and imitation; parameter names and
    unknown keys are also read as the sentences they may be."""
    if flaw := confusable_name(raw):
        add(path, raw, flaw, Severity.HIGH, "")
    if path == "/name":
        if flaw := imitated_name(raw, server, known_tools):
            add(path, raw, flaw, Severity.HIGH, "")
        return
    if not switch and (flaw := instruction_name(raw)):
        add(path, raw, flaw, Severity.HIGH, "")
    if hit := credential_path(read(raw)):
        whole = Hit(hit.check, hit.code, hit.high, hit.reason, 0, len(raw))
        add(path, raw, whole, Severity.HIGH, "")
    for hit in directives(read(humanize(raw))):
        if switch and hit.code == "exfiltration":
            continue  # true or false is all that can leave through a switch
        whole = Hit(hit.check, hit.code, hit.high, hit.reason, 0, len(raw))
        add(path, raw, whole, Severity.HIGH if hit.high else Severity.MEDIUM, "")
