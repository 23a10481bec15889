"""JSON Pointer (RFC 6901), local `$ref` resolution and canonical JSON: the one copy of each."""

from __future__ import annotations

import datetime
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.gateway.upstreams.pins import pin_hash
from toolkeeper.runtime.invocation import arguments_digest
from toolkeeper.schema.document import (
    canonical_json,
    escape,
    pointer,
    pointer_parts,
    resolve,
    resolve_ref,
    unescape,
)

# Keys made mostly of the characters RFC 6901 escapes, so the tricky orders ("~1" written as
# a key, "~/", "/~0") come up often.
keys = st.text(alphabet=st.sampled_from("~/01a"), max_size=6) | st.text(max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(keys, max_size=6))
def test_pointer_parts_inverts_pointer(parts: list[str]) -> None:
    assert pointer_parts(pointer(*parts)) == parts


@given(keys)
def test_unescape_inverts_escape_and_escaped_tokens_hold_no_slash(key: str) -> None:
    token = escape(key)
    assert unescape(token) == key
    assert "/" not in token
    # every '~' in an escaped token starts '~0' or '~1'
    assert token.replace("~0", "").replace("~1", "").count("~") == 0


def test_escaping_order_follows_rfc_6901() -> None:
    # '~01' is the key '~1', not '/': '~1' is unescaped before '~0'.
    assert unescape("~01") == "~1"
    assert escape("~1") == "~01"
    assert pointer("a/b", "m~n", 0) == "/a~1b/m~0n/0"
    assert pointer() == ""
    assert pointer_parts("") == []
    assert pointer_parts("/") == [""]


def _paths(value: Any, at: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Any]]:
    found = [(at, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


@given(json_values)
def test_every_location_in_a_document_resolves_to_its_value(document: Any) -> None:
    for at, value in _paths(document):
        assert resolve(document, pointer(*at), default=KeyError) == value


def test_resolve_returns_the_default_where_nothing_is() -> None:
    document = {"a": [10, 20], "": {"": 1}}
    missing = object()
    assert resolve(document, "/a/1") == 20
    assert resolve(document, "//") == 1
    for text in ("/b", "/a/2", "/a/01", "/a/-1", "/a/-", "/a/0/x", "/a/²"):
        assert resolve(document, text, missing) is missing, text


def test_resolve_ref_follows_same_document_pointers_only() -> None:
    item = {"type": "string"}
    root = {"$defs": {"Item": item, "a/b": {"type": "integer"}, "flag": True}}
    assert resolve_ref(root, "#/$defs/Item") is item
    assert resolve_ref(root, "#/$defs/a~1b") == {"type": "integer"}
    assert resolve_ref(root, "#") is root
    for ref in ("#/$defs/Missing", "#/$defs/flag", "#Item", "other.json#/$defs/Item", ""):
        assert resolve_ref(root, ref) is None, ref


@given(json_values)
def test_canonical_json_is_sorted_compact_and_round_trips(value: Any) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, dict):
        assert canonical_json(dict(reversed(list(value.items())))) == text


def test_digests_keep_their_bytes() -> None:
    """Digests stored in ledgers and pin files stay valid: the bytes hashed do not change."""
    value = {"b": [1, 2.5, None, True], "a": "é ☃", "c": {"z": 1, "y": "\u200b"}}
    assert canonical_json(value) == '{"a":"é ☃","b":[1,2.5,null,true],"c":{"y":"\u200b","z":1}}'
    assert arguments_digest(value) == (
        "sha256:8a7efc146fc60b7995670e076dffd9e13c8cdec73d82f547f22f68942c786a63"
    )
    assert pin_hash({"name": "x", "description": "é", "inputSchema": {"type": "object"}}) == (
        "sha256:7b6bc318bbfd484836a4b260ec4b003e87792d6ef700fd34e52e98d14542c0c5"
    )


def test_values_json_cannot_hold_are_written_as_text() -> None:
    assert canonical_json({"on": datetime.date(2026, 1, 2)}) == '{"on":"2026-01-02"}'
