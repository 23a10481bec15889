"""Checks on the shape of a definition rather than its sentences: hidden characters, names
that pass for other names, and parameters that ask for more than the tool needs.

Each check returns the raw span it objects to, so a finding points at the character, name
or parameter a reviewer should look at.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from toolkeeper.gateway.scanning.confusables import disguised_letters, skeleton
from toolkeeper.gateway.scanning.directives import AMBIENT_SECRET, CONVERSATION, ToolReference
from toolkeeper.gateway.scanning.text import Reading, fold, humanize, is_hidden

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@dataclass(frozen=True, slots=True)
class Flaw:
    """A structural problem: the check, the finding class, whether it blocks on its own, a
    one-line reason and the raw span."""

    check: str
    code: str
    high: bool
    reason: str
    start: int
    end: int


def invisible(raw: str) -> Flaw | None:
    """Characters that render as nothing, with what tag characters spell out."""
    hidden = [
        i
        for i, ch in enumerate(raw)
        if is_hidden(ch) and not _emoji_joiner(raw, i) and not _orthographic(raw, i)
    ]
    if not hidden:
        return None
    chars = [raw[i] for i in hidden]
    tags = "".join(chr(ord(ch) - 0xE0000) for ch in chars if 0xE0020 <= ord(ch) <= 0xE007E)
    kinds = sorted({"bidi control" if ch in _BIDI else f"U+{ord(ch):04X}" for ch in chars})
    reason = f"{len(hidden)} invisible or control character(s): {', '.join(kinds[:8])}"
    if tags:
        reason += f"; tag characters spell {tags[:120]!r}"
    return Flaw("invisible", "invisible_unicode", True, reason, hidden[0], hidden[-1] + 1)


# Marks that do not reorder or hide text but are part of writing some scripts: a zero-width
# (non-)joiner between two letters of a script that shapes its letters (Persian
# "محاسبه‌ی", Hindi conjuncts), a left-to-right or right-to-left mark beside a letter of a
# right-to-left script. Between Latin letters the same characters only hide.
_JOINERS = frozenset("\u200c\u200d")
_DIRECTION_MARKS = frozenset("\u200e\u200f\u061c")
_SHAPING_SCRIPTS = frozenset(
    {"ARABIC", "HEBREW", "SYRIAC", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA",
     "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "THAI", "KHMER", "MYANMAR"}
)  # fmt: skip
_RIGHT_TO_LEFT = frozenset({"ARABIC", "HEBREW", "SYRIAC", "THAANA", "NKO"})


def _orthographic(text: str, index: int) -> bool:
    """A joiner or direction mark used as the writing of its script needs it."""
    char = text[index]
    # By character name, so that a vowel sign or virama counts as its script's.
    before = unicodedata.name(text[index - 1], "").split(" ", 1)[0] if index > 0 else ""
    after = unicodedata.name(text[index + 1], "").split(" ", 1)[0] if index + 1 < len(text) else ""
    if char in _JOINERS:
        return before in _SHAPING_SCRIPTS and after in _SHAPING_SCRIPTS
    if char in _DIRECTION_MARKS:
        return before in _RIGHT_TO_LEFT or after in _RIGHT_TO_LEFT
    return False


def _emoji_joiner(text: str, index: int) -> bool:
    """A zero-width joiner inside an emoji sequence (👩‍💻) is not hiding anything."""
    if text[index] != "\u200d" or index == 0 or index + 1 >= len(text):
        return False
    before = text[index - 1] if text[index - 1] != "\ufe0f" else text[max(0, index - 2)]
    return unicodedata.category(before) == "So" and unicodedata.category(text[index + 1]) == "So"


def confusable_name(name: str) -> Flaw | None:
    """A Latin name with letters from another script that look Latin (``read_fіle``), or
    with compatibility forms of ASCII letters (fullwidth ``ｇｅｔ_data``, mathematical
    ``𝐫𝐞𝐚𝐝``): a name that is not the string it looks like."""
    compat = [
        i
        for i, c in enumerate(name)
        if not c.isascii()
        and unicodedata.normalize("NFKC", c).isascii()
        and unicodedata.normalize("NFKC", c).isalnum()
    ]
    if compat:
        shown = ", ".join(f"{name[i]!r} U+{ord(name[i]):04X}" for i in compat[:4])
        return Flaw(
            "confusable_name", "confusable_name", True,
            f"the name spells ASCII letters in compatibility forms: {shown}",
            compat[0], compat[-1] + 1,
        )  # fmt: skip
    disguised = disguised_letters(name)
    if not disguised:
        return None
    shown = ", ".join(f"{c!r} U+{ord(c):04X}" for c in disguised[:4])
    first = next(i for i, c in enumerate(name) if c in disguised)
    return Flaw(
        "confusable_name", "confusable_name", True,
        f"the name mixes scripts: {shown} pose as Latin letters", first, first + 1,
    )  # fmt: skip


def imitated_name(
    name: str, server: str, known_tools: Mapping[str, Collection[str]]
) -> Flaw | None:
    """A name that looks exactly like another server's tool without being it: a reviewer and
    a model will take one for the other. (An identical name is a collision, judged where
    every listing is seen at once.)"""
    shape = skeleton(name)
    for other, names in sorted(known_tools.items()):
        if other == server:
            continue
        for candidate in sorted(names):
            if candidate != name and skeleton(candidate) == shape:
                return Flaw(
                    "imitated_name", "shadowing", True,
                    f"the name looks like {candidate!r} of server {other!r}", 0, len(name),
                )  # fmt: skip
    return None


_VERB = (
    r"(?:read|reading|include|including|send|sending|pass|passing|paste|provide|copy|attach"
    r"|forward|upload|append|fetch|leak|exfiltrate|put|dump)"
)
_INSTRUCTION_NAME = re.compile(r"\b" + _VERB + r"\b")


# Words that make a name an order rather than a label.
_ORDER_WORDS = re.compile(r"\b(?:please|all|every|here|previous|prior|this|always|must|first)\b")
# Words naming what an identifier-shaped value would have the model hand over.
_HANDED_OVER = re.compile(
    r"\b(?:ssh|keys?|credentials?|passwords?|secrets?|tokens?|env|environment|history"
    r"|conversation|messages?|prompt|cookies?)\b"
)


def instruction_name(name: str) -> Flaw | None:
    """A parameter or key name that is a sentence telling the model what to put in it: an
    order to hand something over (``content_from_reading_ssh_id_rsa``), not a flag named for
    what the output includes (``includeAuthInfoInExample``)."""
    words = fold(humanize(name))
    if (
        len(words.split()) >= 4
        and _INSTRUCTION_NAME.search(words)
        and (_HANDED_OVER.search(words) or _ORDER_WORDS.search(words))
    ):
        return Flaw(
            "instruction_name", "hidden_directive", True,
            f"a name that reads as an instruction: {words[:120]!r}", 0, len(name),
        )  # fmt: skip
    return None


# Parameter names that by themselves ask for the conversation or other tools' output.
_CONTEXT_NAME = re.compile(
    r"(?:all|full|previous|prior|last|user)?(?:tools?list|tooloutputs?|toolresults?"
    r"|conversation(?:history|context|log)?|chathistory|chatlog|messagehistory|previousmessages"
    r"|allmessages|usermessages?|transcript|systemprompt|systemmessage|prompthistory)"
)
# Names an honest tool also uses, that turn bad only when their text asks for content.
_CARRIER_NAME = re.compile(
    r"(?:side)?notes?|(?:extra|additional)?context|feedback|debug(?:info)?|memory|metadata"
    r"|history|userdata|details|extra|comment|reasoning|secrets?|token|apikey|password"
    r"|credentials?"
)
_ASKS_FOR_CONTENT = re.compile(
    r"\b(?:full|entire|complete|whole|all|verbatim|exact|raw)\b(?:[^.]|\.(?=\S)){0,40}"
    r"\b(?:conversation|chat|history|transcript|messages|context|prompt|instructions|contents?)\b"
    r"|\b(?:conversation|chat|message) history\b|\bsystem prompt\b"
    r"|\b(?:previous|prior|last|earlier) (?:messages?|instructions"
    r"|tool (?:calls|results|outputs))\b"
    r"|\buser'?s? (?:previous|last|prior) message\b"
    r"|\b(?:contents?|text) of\b(?:[^.]|\.(?=\S)){0,40}"
    r"\b(?:files?|keys?|config\w*|environment)\b"
    r"|\b(?:api keys?|access tokens?|secrets?|credentials|environment variables|env vars?"
    r"|private keys?)\b(?:[^.]|\.(?=\S)){0,30}\b(?:you have|you've|seen|found|available|read)\b"
    r"|\b(?:everything|anything|all)\s+(?:the user|you)\s+(?:said|wrote|typed|know|have seen)\b"
    r"|\b(?:paste|include|put|copy|append|dump)\b(?:[^.]|\.(?=\S)){0,40}"
    r"\b(?:here|this field|this parameter)\b"
)
# A parameter's own text asking for what only the model's context holds, whatever the
# parameter is called: the dialogue with the user, what other calls returned, the model's own
# instructions, secrets met during the session, the content of a key file.
_ASKS_FROM_CONTEXT = re.compile(
    r"\b(?:conversation|dialogue|dialog|chat|exchange)s?\s+(?:\w+\s+){0,2}?between you\b"
    r"|\b(?:outputs?|results?|responses?|returns?) of (?:the |any |every |each )?(?:\w+\s+){0,2}?"
    r"(?:tools?|functions?|calls?) (?:you|that you|the assistant|the model)\b"
    r"|\b(?:everything|anything|all) (?:\w+\s+)?you (?:know|have learned|learned|remember"
    r"|have seen|saw|were told) (?:about|of|from)\b"
    r"|\b(?:system (?:message|prompt)|instructions|prompt) (?:that )?you (?:were|are|have been)"
    r" (?:given|started|configured|initiali[sz]ed|running|launched|told)\b"
    r"|\byour (?:\w+ )?(?:system (?:message|prompt)|instructions|initial prompt)\b"
    r"|\b(?:every|all|each|any) (?:\w+ )?(?:tools?|functions?) you (?:can|could|have|are able to)"
    r"|\btools? (?:available|visible) to you\b|\byour (?:available )?tools?\b"
    r"|\b(?:tokens?|passwords?|secrets?|credentials?|keys?|cookies)\b(?:[^.]|\.(?=\S)){0,40}"
    r"\b(?:you(?:'ve| have)? (?:encountered|seen|come across|found|access to|read)"
    r"|(?:during|in|from) (?:this|the current) (?:session|conversation|chat))\b"
    r"|\bcontents? of (?:the user'?s? |your |any )?(?:\w+\s+)?(?:private[ -]?key|ssh[ -]?key"
    r"|credentials?|secrets?|\.env|key|wallet|keychain|password)s?(?: file)?\b"
)
# A tool that itself drives a model (a chat completion, an assistant's setup) has honest use
# for a parameter named `system_prompt` or `messages`.
_MODEL_TOOL = re.compile(
    r"\b(?:completions?|llm|language model|chat model|assistants?|agents?|gpt|claude|gemini"
    r"|prompt engineering|fine-tun\w*|inference)\b"
)
# A tool about conversations (summarizing a chat, exporting a thread) has use for one.
_ABOUT_CONVERSATION = re.compile(
    r"\b(?:conversations?|chats?|messages?|threads?|transcripts?|dialog(?:ue)?s?|replies)\b"
)
_SOMEONES = re.compile(r"\b(?:you|your|user|they|their|tools?|previous|prior|earlier)\b")
# A dot-directory of the home directory, not any path under it (`~/projects/app.apk`).
_SECRET_PATH = re.compile(
    r"~/\.|/etc/|\.ssh\b|id_(?:rsa|dsa|ecdsa|ed25519)|(?<![\w-])\.aws/|\.env\b|\.npmrc|\.netrc"
    r"|\.kube/"
    r"|mcp\.json|bash_history"
)


def parameter_asks(prop: str, schema: Mapping[str, Any], description: str) -> Flaw | None:
    """A parameter that asks for the conversation, other tools' output or secrets the tool
    has no use for; `description` is the tool's own description, folded."""
    key = re.sub(r"[^a-z0-9]", "", prop.lower())
    own = fold(" ".join(str(schema.get(k, "")) for k in ("description", "title", "default")))
    words = fold(humanize(prop))
    explained = words in description or prop.lower() in description
    if context := _ASKS_FROM_CONTEXT.search(own):
        return Flaw(
            "context_parameter", "exfiltration_parameter", True,
            f"parameter {prop!r} asks for what only the model's context holds: "
            f"{context.group()!r}",
            0, len(prop),
        )  # fmt: skip
    secret_word, ambient_word = AMBIENT_SECRET
    said = CONVERSATION.search(own)
    if said and not _SOMEONES.search(said.group()):
        said = None  # "the full transcript" of a meeting is data, not this conversation
    taken = (secret_word.search(own) and ambient_word.search(own)) or (
        not _ABOUT_CONVERSATION.search(description) and said
    )
    if taken:
        return Flaw(
            "context_parameter", "exfiltration_parameter", True,
            f"parameter {prop!r} asks for what the session holds, which the tool does not "
            f"need: {taken.group()!r}",
            0, len(prop),
        )  # fmt: skip
    if _CONTEXT_NAME.fullmatch(key) and not explained and not _MODEL_TOOL.search(description):
        return Flaw(
            "context_parameter", "exfiltration_parameter", True,
            f"parameter {prop!r} asks for the conversation or other tools' output, and the "
            "description never says why",
            0, len(prop),
        )  # fmt: skip
    asks = _ASKS_FOR_CONTENT.search(own)
    if _CONTEXT_NAME.fullmatch(key) and _MODEL_TOOL.search(description):
        # A model-driving tool's `system_prompt` is described as one; asking for the
        # model's own was judged above.
        asks = None
    if asks and (_CARRIER_NAME.fullmatch(key) or _CONTEXT_NAME.fullmatch(key)):
        return Flaw(
            "context_parameter", "exfiltration_parameter", True,
            f"parameter {prop!r} asks for content the tool does not need: {asks.group()!r}",
            0, len(prop),
        )  # fmt: skip
    secret = _SECRET_PATH.search(words + " " + prop.lower() + " " + own)
    if secret and not explained and not re.search(re.escape(secret.group()), description):
        return Flaw(
            "schema_mismatch", "exfiltration_parameter", True,
            f"parameter {prop!r} refers to {secret.group()!r}, which the description never "
            "explains",
            0, len(prop),
        )  # fmt: skip
    feeding = re.compile(
        r"\b(?:pass|put|include|provide|send|add|insert|paste|copy|append)\b(?:[^.]|\.(?=\S))"
        rf"{{0,80}}\b(?:as|in|into|to|via)\s+(?:the\s+)?['\"`]?{re.escape(prop.lower())}\b"
    )
    routed = feeding.search(description)
    carried = routed.group()[: -len(prop)] if routed else ""
    if any(word in carried for word in words.split() if len(word) > 2):
        # "pass a personal access token in `token`": the parameter is named for what it gets.
        routed = None
    if routed and _CARRIER_NAME.fullmatch(key):
        return Flaw(
            "context_parameter", "exfiltration_parameter", True,
            f"the description routes content into parameter {prop!r}: {routed.group()[:80]!r}",
            0, len(prop),
        )  # fmt: skip
    return None


# Parameters that name where the call's data goes, and the destination a default gives them.
_DESTINATION_NAME = re.compile(
    r"(?:destination|dest|recipients?|to|cc|bcc|forwardto|sendto|webhook(?:url)?|callback(?:url)?"
    r"|uploadurl|exporturl|targeturl|reportto|notify(?:email|url)?)"
)
_STATED_DEFAULT = re.compile(r"\bdefault(?:s to|:|\s+is)?\s*[`'\"]?(\S+?)[`'\"]?(?:[),;]|\s|$)")
_ADDRESS = re.compile(r"^(?:https?|ftp|s3)://\S+$|^[\w.+-]{1,64}@[\w-]+\.[\w.-]+$")


def preset_destination(prop: str, schema: Mapping[str, Any]) -> Flaw | None:
    """A parameter naming where the call's data goes, set by default to a fixed address: the
    tool delivers to its author's choice unless the model overrides it."""
    if not _DESTINATION_NAME.fullmatch(re.sub(r"[^a-z]", "", prop.lower())):
        return None
    default = schema.get("default")
    if not isinstance(default, str):
        stated = _STATED_DEFAULT.search(str(schema.get("description", "")))
        default = stated.group(1) if stated else None
    if default is None or not _ADDRESS.match(default.strip().lower()):
        return None
    return Flaw(
        "preset_destination", "exfiltration_parameter", True,
        f"parameter {prop!r} sends to a preset destination {default.strip()!r}", 0, len(prop),
    )  # fmt: skip


def instruction_value(value: str) -> Flaw | None:
    """An enum value or default spelled as an identifier that reads as an order to hand over
    secrets (``include_ssh_keys_and_credentials``)."""
    if any(c.isspace() for c in value) or not re.search(r"[_\-]|[a-z][A-Z]", value):
        return None
    words = fold(humanize(value))
    if _INSTRUCTION_NAME.search(words) and _HANDED_OVER.search(words):
        return Flaw(
            "instruction_name", "hidden_directive", True,
            f"a value that reads as an instruction: {words[:120]!r}", 0, len(value),
        )  # fmt: skip
    return None


@functools.lru_cache(maxsize=64)
def is_distinctive(name: str) -> bool:
    """Whether a name is an identifier no sentence uses as a word (``send_email``, ``getUser``,
    ``v2``), unlike a plain word (``fetch``, ``add``)."""
    return _DISTINCTIVE.search(name) is not None


_DISTINCTIVE = re.compile(r"[_\-.\d]|[a-z][A-Z]")


def tool_reference(tools: frozenset[tuple[str, str]]) -> ToolReference | None:
    """One pattern for every (server, tool name) in `tools`. A distinctive identifier
    (``send_email``, ``getUser``) counts as a whole token, or qualified the way clients
    namespace tools (``mcp__gmail__send_email``, ``mcp_tool_send_email``, ``gmail.send_email``)
    — never as part of a longer name (``jira_update_issue`` is not ``update_issue``); a plain
    word (``fetch``) only when it is called a tool."""
    owners = {name.lower(): server for server, name in sorted(tools, reverse=True)}
    distinctive = {n.lower() for _, n in tools if is_distinctive(n)}
    plain = set(owners) - distinctive
    parts = []
    if distinctive:
        words = _alternatives(distinctive)
        parts.append(
            rf"(?:(?<=__)|(?<=\w\.)|(?<![\w-])(?:mcp_(?:[a-z0-9-]+_){{0,2}}?)?)({words})(?![\w-])"
        )
    if plain:
        # A plain word names a tool only when it is referred to as one: quoted, called, or
        # "the search tool" — "the list or search tool you need" uses the word as English.
        words = _alternatives(plain)
        parts.append(
            rf"[`'\"]({words})[`'\"]|\b({words})\(|\bthe\s+({words})\s+tool\b"
            rf"|\btool\s+[`'\"]?({words})\b"
            rf"|\b(?:call|calling|invoke|invoking|run|running|using)\s+({words})(?=\s*(?:[,;:)]|$"
            r"|\.(?!\w)))"
        )
    return ToolReference(re.compile("|".join(parts)), owners) if parts else None


def _alternatives(names: Collection[str]) -> str:
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


# A chat template's turn opened for a role: the token, then the role it speaks as. Only a
# prompt has turns; text that opens one inside a tool definition poses as the system, the
# user or the assistant, whatever it then says. (A bare `[INST]` named in prose is not a turn
# until its closing `[/INST]` frames something.)
_ROLE = r"(?:system|user|assistant|developer|tool|human|model|ipython)"
_TURN = re.compile(
    rf"<\|im_start\|>\s*{_ROLE}\b|<\|start_header_id\|>\s*{_ROLE}\b|<\|{_ROLE}\|>"
    rf"|<start_of_turn>\s*{_ROLE}\b|<<sys>>|<\|(?:begin|end)_of_text\|>|<\|eot_id\|>"
    r"|<\|im_end\|>|<\|endoftext\|>|\[inst\].{1,400}?\[/inst\]",
    re.S,
)


def chat_turn(reading: Reading) -> Flaw | None:
    """A chat-template token that opens or closes a turn of the conversation (``<|im_start|>
    system``, ``<|start_header_id|>user``, ``<<SYS>>``, ``[INST] … [/INST]``)."""
    if not any(m.kind == "chat-template token" for m in reading.markers):
        return None
    raw = reading.raw
    lowered = raw.lower() if len(raw.lower()) == len(raw) else raw
    match = _TURN.search(lowered)
    if match is None:
        return None
    return Flaw(
        "chat_turn", "hidden_directive", True,
        f"a chat-template turn inside a tool definition: {match.group()[:40]!r} poses as a "
        "turn of the conversation",
        match.start(), match.end(),
    )  # fmt: skip
