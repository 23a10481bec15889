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
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from jsonschema import Draft202012Validator

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

    reference = _tool_reference(
        frozenset(
            (other, tool_name)
            for other, names in known_tools.items()
            if other != server
            for tool_name in names
        )
    )
    description = _fold(str(tool.get("description") or ""))
    for path, text, is_name in _strings(tool):
        plain = _fold(text)
        words = _fold(_humanize(text)) if is_name else plain
        _check_invisible(text, path, add)
        _check_directives(words, path, add)
        _check_credentials(plain, path, add)
        if len(text) > max_text:
            add("oversized_text", path, f"{len(text)} characters, over the {max_text} allowed")
        if path == "/name":
            continue  # another server's tool of the same name is a collision, judged elsewhere
        _check_shadowing(plain, reference, path, add)
        if is_name:
            _check_instruction_name(words, path, add)
    for path, prop, schema in _parameters(tool):
        _check_exfiltration(prop, schema, description, path, add)
    return list(found.values())


# -- where the text is ----------------------------------------------------------------------

# What a schema may say; any other key is free text to the model and is read as such.
_SCHEMA_KEYWORDS = frozenset(Draft202012Validator.VALIDATORS) | {
    "$schema", "$id", "$defs", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary",
    "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "nullable", "contentEncoding", "contentMediaType", "contentSchema", "then",
    "else",
}  # fmt: skip
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _strings(tool: Mapping[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(JSON pointer, text, is_name) for every string a model would read."""
    yield "/name", str(tool.get("name", "")), True
    for key in ("title", "description"):
        if isinstance(tool.get(key), str):
            yield _pointer(key), tool[key], False
    yield from _walk(tool.get("annotations"), ("annotations",), schema=False)
    for key in ("inputSchema", "outputSchema"):
        yield from _walk(tool.get(key), (key,), schema=True)


def _walk(node: Any, at: tuple[str | int, ...], *, schema: bool) -> Iterator[tuple[str, str, bool]]:
    if isinstance(node, str):
        yield _pointer(*at), node, False
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, (*at, index), schema=schema)
    elif isinstance(node, dict):
        for key, value in node.items():
            key = str(key)
            if schema and key in _SCHEMA_MAPS and isinstance(value, dict):
                for prop, sub in value.items():
                    yield _pointer(*at, key, prop), str(prop), True
                    yield from _walk(sub, (*at, key, prop), schema=True)
                continue
            if schema and key == "required":
                continue  # the names again; already read under properties
            if schema and key not in _SCHEMA_KEYWORDS:
                yield _pointer(*at, key), key, True
            yield from _walk(value, (*at, key), schema=schema)


def _parameters(tool: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    for prop, sub in (props or {}).items():
        yield (
            _pointer("inputSchema", "properties", prop),
            str(prop),
            sub if isinstance(sub, dict) else {},
        )


# -- normalization --------------------------------------------------------------------------

_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # render as nothing: hidden text
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _hidden(char: str) -> bool:
    code = ord(char)
    if char in "\t\n\r":
        return False
    return (
        unicodedata.category(char) in ("Cf", "Cc") or 0xE0100 <= code <= 0xE01EF or char in _BLANK
    )


def _fold(text: str) -> str:
    """The text as a model reads it: entities decoded, compatibility forms and invisible
    characters removed (so "ig\u200bnore" still reads "ignore"), lower case, one space."""
    text = unicodedata.normalize("NFKC", html.unescape(text))
    text = "".join(ch for ch in text if not _hidden(ch))
    return " ".join(text.lower().split())


def _humanize(name: str) -> str:
    """An identifier as words: ``contentFromReading_ssh-key`` → ``content From Reading ssh key``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_\-.:/]+", " ", name)


def _snippet(text: str, match: re.Match[str]) -> str:
    start, end = max(0, match.start() - 20), min(len(text), match.end() + 20)
    return repr(text[start:end])


# -- the checks -----------------------------------------------------------------------------

Add = Callable[[str, str, str], None]
"""Records a finding: ``add(code, path, message)``."""


def _check_invisible(text: str, path: str, add: Add) -> None:
    hidden = [ch for i, ch in enumerate(text) if _hidden(ch) and not _emoji_joiner(text, i)]
    if not hidden:
        return
    tags = "".join(chr(ord(ch) - 0xE0000) for ch in hidden if 0xE0020 <= ord(ch) <= 0xE007E)
    kinds = sorted({"bidi control" if ch in _BIDI else f"U+{ord(ch):04X}" for ch in hidden})
    message = f"{len(hidden)} invisible or control character(s): {', '.join(kinds[:8])}"
    if tags:
        message += f"; tag characters spell {tags[:120]!r}"
    add("invisible_unicode", path, message)


def _emoji_joiner(text: str, index: int) -> bool:
    """A zero-width joiner inside an emoji sequence (👩‍💻) is not hiding anything."""
    if text[index] != "\u200d" or index == 0 or index + 1 >= len(text):
        return False
    before = text[index - 1] if text[index - 1] != "\ufe0f" else text[max(0, index - 2)]
    return unicodedata.category(before) == "So" and unicodedata.category(text[index + 1]) == "So"


def _rx(pattern: str) -> re.Pattern[str]:
    """Compile a pattern in which ``…`` means "any character of the same sentence": a dot
    ends a sentence only before a space, so ``~/.env`` stays inside one."""
    return re.compile(pattern.replace("…", r"(?:[^.]|\.(?=\S))"), re.S)


_AI = r"(?:ai|assistant|model|llm|agent|claude|chatgpt|gpt|copilot|cursor)"
_OBJECT = (
    r"(?:\b(?:files?|contents?|keys?|tokens?|secrets?|credentials?|passwords?|history"
    r"|conversation|messages|config(?:uration)?|environment|env|variables)\b"
    r"|~/|/etc/|(?<![\w.])\.[a-z]\w+)"
)
_DIRECTIVES: tuple[tuple[str, str], ...] = (
    (
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|critical|override"
        rf"|system[_ -]?prompt|note[_ -]to[_ -]{_AI})\b[^>]*>",
        "pseudo-system tag",
    ),
    (
        r"\[\s*(?:system|important|instructions?|admin|hidden)\s*(?:message|note|prompt)?\s*\]",
        "pseudo-system marker",
    ),
    (r"<!--(?:(?!-->).){3,}", "text hidden in an HTML comment"),
    (
        r"\b(?:ignore|disregard|forget|override|bypass)\b…{0,30}\b(?:previous|prior|above"
        r"|earlier|preceding|original|system|all|any|other|safety|security)\b…{0,20}"
        r"\b(?:instructions?|rules|guidelines|prompts?|directions|directives|policies"
        r"|restrictions|guardrails|constraints)\b",
        "tells the model to drop its instructions",
    ),
    (
        r"\b(?:new|updated|real|actual|true)\s+(?:system\s+)?instructions\s+(?:are|follow)\b",
        "announces replacement instructions",
    ),
    (
        r"\b(?:takes?|has|have) (?:precedence|priority) over\b|\bsupersedes?\b"
        r"|\bregardless of (?:what|any|the user|previous|prior)\b"
        r"|\beven if the user (?:says|asks|tells|requests|objects|refuses)\b",
        "claims priority over the user or other instructions",
    ),
    (
        r"\b(?:do not|don't|dont|never|must not|should not|shouldn't)\s+(?:\w+\s+){0,3}?"
        r"(?:tell|inform|mention|reveal|disclose|notify|alert|show|warn|let)\b…{0,40}"
        r"\b(?:user|human|anyone|them|operator|person)\b",
        "asks to keep something from the user",
    ),
    (
        r"\bwithout (?:telling|informing|notifying|alerting|asking|warning|showing|letting)"
        r"\b…{0,30}\b(?:user|human|anyone|them)\b"
        r"|\b(?:the user|they) (?:does not|doesn't|do not|don't|should not|shouldn't|must not"
        r"|need not|needn't)(?: need to)? (?:know|see|be told|be informed|notice)\b"
        r"|\b(?:mere|just an?|only an?) implementation detail\b"
        r"|\b(?:silently|secretly|quietly|covertly)\b…{0,30}"
        r"\b(?:send|forward|copy|include|read|upload|add|bcc|email|post|attach|append)\b",
        "conceals an action from the user",
    ),
    (
        r"\b(?:before|prior to)\s+(?:using|calling|invoking|running|executing|you use|you call)"
        r"\s+(?:this|the|any)\b…{0,80}?\b(?:read|open|cat|load|upload|send|forward|email"
        rf"|post|attach|paste|include|pass|provide|copy)\b…{{0,60}}?{_OBJECT}",
        "asks for a file or secret before the tool may be used",
    ),
    (
        r"\b(?:all|every|any)\s+(?:e-?mails?|messages?|payments?|transfers?|transactions?"
        r"|funds|invoices?)\b…{0,60}\b(?:must|should|shall|will|are to|have to)\b…{0,20}"
        r"\b(?:sent|go|routed|forwarded|redirected|copied|delivered|transferred|paid)\b"
        r"|\b(?:change|replace|redirect|override) the (?:recipient|destination|address|account"
        r"|iban|wallet)\b"
        r"|\b(?:bcc|send|forward|copy|email|upload|exfiltrate)\b…{0,80}\b[\w.+-]+@[\w-]+\.[\w.]+",
        "redirects an effect to a third party",
    ),
    (
        rf"\bnote to (?:the )?{_AI}\b|\b(?:attention|hey|dear),?\s+{_AI}\b"
        r"|\bif you are an? (?:ai|assistant|language model|llm|agent)\b"
        rf"|\b{_AI}s? reading this\b",
        "a message addressed to the model",
    ),
)
_DIRECTIVE_RES = tuple((_rx(pattern), label) for pattern, label in _DIRECTIVES)
_MODEL_IMPERATIVE = _rx(
    rf"\b(?:the|an?|any)\s+{_AI}\s+(?:must|should|shall|needs to|has to|is required to)\b"
    r"|\byou\s+(?:must|are required to|have to)\s+(?:always|first|also|immediately|never)\b"
)


def _check_directives(folded: str, path: str, add: Add) -> None:
    for pattern, label in _DIRECTIVE_RES:
        match = pattern.search(folded)
        if match:
            add("hidden_directive", path, f"{label}: {_snippet(folded, match)}")
            return
    match = _MODEL_IMPERATIVE.search(folded)
    if match:
        add(
            "model_instruction",
            path,
            f"imperative addressed to the model: {_snippet(folded, match)}",
        )


_CREDENTIALS = re.compile(
    r"(?:~|\$home|%userprofile%|/home/[^/\s]+|/users/[^/\s]+|/root)/\.(?:ssh|aws|gnupg|kube"
    r"|docker|azure|config/gcloud|npmrc|pypirc|netrc|git-credentials|bash_history"
    r"|zsh_history|env|cursor|vscode)"
    r"|\.ssh/|(?<![a-z0-9])id_(?:rsa|dsa|ecdsa|ed25519)(?:\.pub)?(?![a-z0-9])"
    r"|\bauthorized_keys\b|\.aws/(?:credentials|config)\b|/etc/(?:passwd|shadow|sudoers|ssh/)"
    r"|(?<![\w.])\.env(?:\.(?:local|production|prod|development|dev))?(?![\w-])"
    r"|\bmcp\.json\b|\bclaude_desktop_config\.json\b|\.cursor/|\.npmrc\b|\.pypirc\b|\.netrc\b"
    r"|\.git-credentials\b|\.docker/config\.json\b|\.kube/config\b|\bkubeconfig\b|\.gnupg\b"
    r"|\bapplication_default_credentials\.json\b|\.config/gcloud\b|\bcredentials\.json\b"
    r"|/proc/self/environ\b|\.(?:bash|zsh)_history\b|\.pgpass\b|\.vault-token\b|\bwallet\.dat\b"
)


def _check_credentials(folded: str, path: str, add: Add) -> None:
    match = _CREDENTIALS.search(folded)
    if match:
        add("credential_path", path, f"names a credential file: {_snippet(folded, match)}")


def _check_shadowing(text: str, reference: _Reference | None, path: str, add: Add) -> None:
    match = reference.pattern.search(text) if reference else None
    if reference and match:
        name = next(group for group in match.groups() if group)
        add(
            "shadowing",
            path,
            f"mentions {name!r}, a tool of server {reference.owners[name]!r}: a definition "
            "steering another server's tool (tool shadowing)",
        )


@dataclass(frozen=True, slots=True)
class _Reference:
    pattern: re.Pattern[str]
    owners: dict[str, str]  # lower-case tool name → its server


@functools.lru_cache(maxsize=64)
def _tool_reference(tools: frozenset[tuple[str, str]]) -> _Reference | None:
    """One pattern for every (server, tool name) in `tools`. A distinctive identifier
    (``send_email``, ``getUser``) counts anywhere, also inside a prefixed form like
    ``mcp_tool_send_email``; a plain word (``fetch``) only when quoted or called a tool."""
    owners = {name.lower(): server for server, name in sorted(tools, reverse=True)}
    distinctive = {n.lower() for _, n in tools if re.search(r"[_\-.\d]|[a-z][A-Z]", n)}
    plain = set(owners) - distinctive
    parts = []
    if distinctive:
        words = _alternatives(distinctive)
        parts.append(rf"(?<![a-z0-9])({words})(?![a-z0-9_])")
    if plain:
        words = _alternatives(plain)
        parts.append(
            rf"[`'\"]({words})[`'\"]|\b({words})\s+(?:tool|function)\b"
            rf"|\b(?:tool|function)\s+({words})\b"
        )
    return _Reference(re.compile("|".join(parts)), owners) if parts else None


def _alternatives(names: Collection[str]) -> str:
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


_VERB = (
    r"(?:read|reading|include|including|send|sending|pass|passing|paste|provide|copy|attach"
    r"|forward|upload|append|fetch|leak|exfiltrate)"
)
_INSTRUCTION_NAME = re.compile(r"\b" + _VERB + r"\b")


def _check_instruction_name(words: str, path: str, add: Add) -> None:
    if len(words.split()) >= 5 and _INSTRUCTION_NAME.search(words):
        add("hidden_directive", path, f"a name that reads as an instruction: {words[:120]!r}")


_SUSPICIOUS_PARAM = re.compile(
    r"(?:side)?notes?|(?:extra|additional)?context|feedback|conversation(?:history)?"
    r"|chathistory|history|previousmessages|transcript|(?:system)?prompt|instructions"
    r"|secrets?|token|apikey|password|credentials|debuginfo|memory|userdata"
)
_ASKS_FOR_CONTENT = _rx(
    r"\b(?:full|entire|complete|whole|all|verbatim|exact|raw)\b…{0,40}\b(?:conversation"
    r"|chat|history|transcript|messages|context|prompt|instructions|file|contents?)\b"
    r"|\b(?:conversation|chat|message) history\b|\bsystem prompt\b"
    r"|\bprevious (?:messages|instructions|tool (?:calls|results|outputs))\b"
    r"|\b(?:contents?|text) of\b…{0,40}\b(?:files?|keys?|config\w*|environment)\b"
    r"|\b(?:api keys?|access tokens?|passwords?|secrets?|credentials?|environment variables"
    r"|env vars?|private keys?)\b"
    r"|\b(?:everything|anything|all)\s+(?:the user|you)\s+(?:said|wrote|typed|know|have seen)\b"
    r"|\b(?:paste|include|put|copy|append|dump)\b…{0,40}\b(?:here|this field|this parameter)\b"
)


def _check_exfiltration(
    prop: str, schema: Mapping[str, Any], description: str, path: str, add: Add
) -> None:
    if not _SUSPICIOUS_PARAM.fullmatch(re.sub(r"[^a-z0-9]", "", prop.lower())):
        return
    own = _fold(" ".join(str(schema.get(k, "")) for k in ("description", "title", "default")))
    match = _ASKS_FOR_CONTENT.search(own)
    if match:
        add(
            "exfiltration_parameter",
            path,
            f"parameter {prop!r} asks for content the tool does not need: {_snippet(own, match)}",
        )
        return
    feeding = _rx(
        r"\b(?:pass|put|include|provide|send|add|insert|paste|copy|append)\b…{0,80}"
        rf"\b(?:as|in|into|to|via)\s+['\"`]?{re.escape(prop.lower())}\b"
    )
    match = feeding.search(description)
    if match:
        add(
            "exfiltration_parameter",
            path,
            f"the description routes content into parameter {prop!r}: "
            f"{_snippet(description, match)}",
        )
