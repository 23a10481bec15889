"""The scan's checks and the patterns they match, one check per kind of evidence.

`scanning.scan_tool` hands each check a string of the definition (raw or folded, see
`scanned_text.py`) or one input parameter; a check reports through ``add(code, path, message)``
with a finding class of `scanning.FINDING_CLASSES`. The patterns follow the published attack
write-ups that `scanning.py` lists.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from toolkeeper.gateway.scanning.text import fold, is_hidden, snippet

Add = Callable[[str, str, str], None]
"""Records a finding: ``add(code, path, message)``."""

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_invisible(text: str, path: str, add: Add) -> None:
    hidden = [ch for i, ch in enumerate(text) if is_hidden(ch) and not _emoji_joiner(text, i)]
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


def check_directives(folded: str, path: str, add: Add) -> None:
    for pattern, label in _DIRECTIVE_RES:
        match = pattern.search(folded)
        if match:
            add("hidden_directive", path, f"{label}: {snippet(folded, match)}")
            return
    match = _MODEL_IMPERATIVE.search(folded)
    if match:
        add(
            "model_instruction",
            path,
            f"imperative addressed to the model: {snippet(folded, match)}",
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


def check_credentials(folded: str, path: str, add: Add) -> None:
    match = _CREDENTIALS.search(folded)
    if match:
        add("credential_path", path, f"names a credential file: {snippet(folded, match)}")


def check_shadowing(text: str, reference: _Reference | None, path: str, add: Add) -> None:
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
def tool_reference(tools: frozenset[tuple[str, str]]) -> _Reference | None:
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


def check_instruction_name(words: str, path: str, add: Add) -> None:
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


def check_exfiltration(
    prop: str, schema: Mapping[str, Any], description: str, path: str, add: Add
) -> None:
    if not _SUSPICIOUS_PARAM.fullmatch(re.sub(r"[^a-z0-9]", "", prop.lower())):
        return
    own = fold(" ".join(str(schema.get(k, "")) for k in ("description", "title", "default")))
    match = _ASKS_FOR_CONTENT.search(own)
    if match:
        add(
            "exfiltration_parameter",
            path,
            f"parameter {prop!r} asks for content the tool does not need: {snippet(own, match)}",
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
            f"{snippet(description, match)}",
        )
