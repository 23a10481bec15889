"""Vendor tool names: which names each model family accepts, and a reversible mapping to them.

Contract ids allow characters (``.``, ``:``, ``/``) and lengths (200) that no vendor accepts,
so every adapter renders a contract under a *vendor name* and the harness maps the name a
model proposes back to a contract ref. Reversibility comes from the table `vendor_names`
returns, never from escaping inside the string: the table is the only source of truth, and it
is a pure function of the contract set, so the renderer and the resolver agree as long as
both compute it over the same contracts (render what `Harness.visible_contracts(principal)`
returns, and resolve against that same set).

Rules per family (checked against each vendor's published name rule):

- ``openai`` and ``anthropic``: ``^[a-zA-Z0-9_-]{1,64}$``.
- ``gemini``: 1–64 of ``[A-Za-z0-9_.:-]``, starting with a letter or an underscore. The
  google-genai 3.x SDK documents 128 characters; the Gemini API reference documents 64, so
  the stricter bound is used.
- ``mcp``: 1–128 of ``[A-Za-z0-9_.-]`` (the MCP tool-name guidance).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from toolkeeper.contract.model import ToolContract, semver_key
from toolkeeper.errors import ConfigError

FAMILIES = ("openai", "anthropic", "gemini", "mcp")
"""The model families a `ModelView` may be keyed by, and that have a naming rule."""

_HASH_LENGTH = 8


@dataclass(frozen=True, slots=True)
class _NameRule:
    illegal: re.Pattern[str]
    """Matches one character the family does not allow anywhere in a name."""
    max_length: int
    must_start: re.Pattern[str] | None = None
    """Matches a legal first character, where the family restricts it."""


_RULES: dict[str, _NameRule] = {
    "openai": _NameRule(re.compile(r"[^A-Za-z0-9_-]"), 64),
    "anthropic": _NameRule(re.compile(r"[^A-Za-z0-9_-]"), 64),
    "gemini": _NameRule(re.compile(r"[^A-Za-z0-9_.:-]"), 64, re.compile(r"[A-Za-z_]")),
    "mcp": _NameRule(re.compile(r"[^A-Za-z0-9_.-]"), 128),
}


def _rule(family: str) -> _NameRule:
    try:
        return _RULES[family]
    except KeyError:
        raise ConfigError(
            f"unknown model family {family!r}; use one of {', '.join(FAMILIES)}",
            key="family",
            value=family,
        ) from None


def is_legal(name: str, family: str) -> bool:
    """Whether `family`'s API accepts `name` as a tool name."""
    rule = _rule(family)
    if not 1 <= len(name) <= rule.max_length or rule.illegal.search(name):
        return False
    return rule.must_start is None or bool(rule.must_start.match(name))


def vendor_names(contracts: Sequence[ToolContract], family: str) -> dict[str, str]:
    """Map each contract's ref to a distinct name legal for `family`.

    Each name starts from ``contract.view(family).name``: illegal characters become ``_``, a
    name whose first character the family forbids there gets a leading ``_``, and a name that
    is too long is cut and given an 8-hex suffix hashed from the full name. When several
    contracts land on one name, one keeps it and every other gets an 8-hex suffix hashed from
    its ref. The one that keeps it is, in order: the contract whose name needed no mapping
    (``math_factorial`` keeps ``math_factorial`` over ``math.factorial``), then the newest
    version by semver precedence (so upgrading a tool keeps the name the model knows and the
    older version is the one renamed), then the smallest ref. The result depends only on the
    set of contracts, never on their order.
    """
    rule = _rule(family)
    by_ref = {contract.ref: contract for contract in contracts}
    wanted = {
        ref: _legalize(_view_name(contract, family), rule) for ref, contract in by_ref.items()
    }

    claims: dict[str, list[str]] = defaultdict(list)
    for ref, name in wanted.items():
        claims[name].append(ref)

    names = {_keeper(refs, by_ref, family, name): name for name, refs in claims.items()}
    taken = set(names.values())
    for ref in sorted(set(by_ref) - set(names)):
        salt = 0
        name = _with_suffix(wanted[ref], _short_hash(ref), rule)
        while name in taken:
            salt += 1
            name = _with_suffix(wanted[ref], _short_hash(f"{ref}#{salt}"), rule)
        names[ref] = name
        taken.add(name)
    return names


def _view_name(contract: ToolContract, family: str) -> str:
    return contract.view(family).name or contract.id


def _legalize(name: str, rule: _NameRule) -> str:
    legal = rule.illegal.sub("_", name) or "_"
    if rule.must_start is not None and not rule.must_start.match(legal):
        legal = "_" + legal
    if len(legal) > rule.max_length:
        legal = _with_suffix(legal, _short_hash(name), rule)
    return legal


def _with_suffix(name: str, suffix: str, rule: _NameRule) -> str:
    return f"{name[: rule.max_length - len(suffix) - 1]}_{suffix}"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]


def _keeper(refs: list[str], by_ref: dict[str, ToolContract], family: str, name: str) -> str:
    """The ref that keeps `name` among those claiming it (see `vendor_names`)."""
    unmapped = [ref for ref in refs if _view_name(by_ref[ref], family) == name]
    pool = unmapped or refs
    newest = max(semver_key(by_ref[ref].version) for ref in pool)
    return min(ref for ref in pool if semver_key(by_ref[ref].version) == newest)
