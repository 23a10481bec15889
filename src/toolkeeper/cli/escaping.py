"""Text from the ledger made safe to print on a terminal.

Ids, tool names, principals and reasons in the ledger come from clients and models. Printed
raw, a newline in a call id starts a forged audit line, an ANSI escape rewrites what the
terminal shows, and a bidi override reverses it. Every CLI printer passes such text through
`visible`, which escapes each character Python does not call printable (C0 and C1
controls, DEL, format characters such as bidi overrides and zero-width joiners, line and
paragraph separators, surrogates, unassigned and private-use code points, every space but
U+0020) the way Python writes it in a string literal, and the backslash itself, so an
escape in the output always means the character was there.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def visible(text: object) -> str:
    """`text` as one printable line: nothing in it can move the cursor, change colours,
    reorder characters or start a new line."""
    value = str(text)
    if value.isprintable() and "\\" not in value:
        return value
    return "".join(_escape(ch) for ch in value)


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
