"""How values, choices and counts are put to a model: JSON, not Python reprs, kept short.

Also where "closest" is decided — the enum value or property name a model most likely meant —
because a suggestion is only as good as that choice.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any


def show(value: Any, limit: int = 60) -> str:
    """`value` as JSON, shortened: models read JSON, not Python reprs."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def closest(value: Any, choices: Sequence[Any]) -> tuple[Any, bool]:
    """The choice nearest `value`, and whether it is near enough to be the likely intent.

    Numbers go to the numerically nearest choice; text matches case-insensitively first,
    then by difflib similarity (a ratio of 0.6 or more counts as near), with case-sensitive
    similarity breaking ties between choices that differ only in case.
    """
    numbers = [c for c in choices if is_number(c)]
    if is_number(value) and numbers:
        return min(numbers, key=lambda c: abs(c - value)), True
    text = folded(value)
    candidates = [folded(c) for c in choices]
    if text in candidates:
        return choices[candidates.index(text)], True
    # difflib's cheap upper bounds skip most full comparisons (as get_close_matches does).
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(text)
    best, best_key = 0, (-1.0, -1.0)
    for index, candidate in enumerate(candidates):
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < best_key[0] or matcher.quick_ratio() < best_key[0]:
            continue
        key = (matcher.ratio(), _similarity(value, choices[index]))
        if key > best_key:
            best, best_key = index, key
    return choices[best], best_key[0] >= 0.6


def _similarity(value: Any, choice: Any) -> float:
    return SequenceMatcher(None, as_text(value), as_text(choice), autojunk=False).ratio()


def is_number(value: Any) -> bool:
    """A JSON number: int or float, but not bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else show(value, limit=200)


def folded(value: Any) -> str:
    return as_text(value).casefold()


def squashed(name: str) -> str:
    # cityName, city_name and City-Name are the same intent.
    return re.sub(r"[^0-9a-z]", "", name.casefold()) or name


def json_type(value: Any) -> str:
    """The JSON type name of `value`, as a schema's `type` would say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else "non-finite number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def listing(choices: Sequence[Any], limit: int = 12) -> str:
    """The first `limit` choices as JSON, with the total when there are more."""
    shown = ", ".join(show(c, limit=40) for c in choices[:limit])
    return shown + (f", … ({len(choices)} in all)" if len(choices) > limit else "")


def count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number} {noun if number == 1 else plural}"


def article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"
