"""Letters of other scripts that render like Latin ones, and the script a letter belongs to.

NFKC already folds fullwidth and mathematical letters (`ｒｅａｄ`, `𝐫𝐞𝐚𝐝`) into ASCII; what it
leaves are letters of other alphabets drawn the same way — Cyrillic `і` (U+0456) in
`read_fіle`, Greek `ο`, Armenian `օ`. The table holds the look-alikes of Unicode's
confusables list (UTS #39) that map to a single Latin letter, for the scripts attacks use.
"""

from __future__ import annotations

import functools
import unicodedata

_LOOKALIKES: dict[str, str] = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ү": "y",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԛ": "Q",
    "Ԝ": "W", "Һ": "H", "Ӏ": "I",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "υ": "u", "χ": "x",
    "ε": "e", "τ": "t", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I",
    "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n", "զ": "q", "ց": "g", "Օ": "O", "Ս": "U",
    # Latin letters outside ASCII that NFKC keeps
    "ı": "i", "ɑ": "a", "ɩ": "i", "ǀ": "l", "ʏ": "y", "ɪ": "i", "ʀ": "r", "ꞵ": "b",
}  # fmt: skip


def latin_lookalike(char: str) -> str | None:
    """The Latin letter `char` passes for, or None when it passes for none."""
    return _LOOKALIKES.get(char)


@functools.lru_cache(maxsize=8192)
def script_of(char: str) -> str:
    """The script of a letter, from its Unicode name (``LATIN``, ``CYRILLIC``, ``CJK`` ...);
    ``COMMON`` for digits, marks and anything unnamed."""
    if not char.isalpha():
        return "COMMON"
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else "COMMON"


def skeleton(name: str) -> str:
    """A name as it looks: NFKC, look-alikes mapped to Latin, case folded. Two names with
    one skeleton are indistinguishable to a reviewer."""
    folded = unicodedata.normalize("NFKC", name)
    return "".join(_LOOKALIKES.get(c, c) for c in folded).casefold()


def disguised_letters(name: str) -> list[str]:
    """The letters of a Latin-lettered `name` that only pose as Latin ones (the Cyrillic `і`
    of ``read_fіle``). A name wholly in another script disguises nothing."""
    letters = [c for c in unicodedata.normalize("NFKC", name) if c.isalpha()]
    if not any(script_of(c) == "LATIN" and c not in _LOOKALIKES for c in letters):
        return []
    return [c for c in letters if c in _LOOKALIKES]
