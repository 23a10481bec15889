"""For any catalog, every vendor: render, let the model call every tool, parse, and map each
proposed name back through the naming table to the contract it was rendered from."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.adapters import VENDORS, parse, render
from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import vendor_names

FAMILY = {
    "openai_chat": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "mcp": "mcp",
}


def names_of(vendor: str, tools: list[dict[str, Any]]) -> list[str]:
    if vendor == "openai_chat":
        return [t["function"]["name"] for t in tools]
    if vendor == "gemini":
        return [d["name"] for t in tools for d in t["function_declarations"]]
    return [t["name"] for t in tools]


def calling_all(vendor: str, names: list[str]) -> Any:
    """A response in `vendor`'s format that calls every name once."""
    if vendor == "openai_chat":
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
            for i, n in enumerate(names)
        ]
        return {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls}}]}
    if vendor == "openai_responses":
        return {
            "output": [
                {"type": "function_call", "call_id": f"c{i}", "name": n, "arguments": "{}"}
                for i, n in enumerate(names)
            ]
        }
    if vendor == "anthropic":
        return {
            "content": [
                {"type": "tool_use", "id": f"c{i}", "name": n, "input": {}}
                for i, n in enumerate(names)
            ]
        }
    if vendor == "gemini":
        parts = [{"function_call": {"name": n, "args": {}}} for n in names]
        return {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    return [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n}}
        for i, n in enumerate(names)
    ]


segment = st.text(alphabet="abcxyz019", min_size=1, max_size=12)
separator = st.sampled_from([".", "_", "-", ":", "/"])


@st.composite
def tool_ids(draw: st.DrawFn) -> str:
    parts = draw(st.lists(segment, min_size=1, max_size=8))
    seps = [draw(separator) for _ in parts[1:]]
    tool_id = parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True))
    return tool_id[:200]


@st.composite
def catalogs(draw: st.DrawFn) -> list[ToolContract]:
    ids = draw(st.lists(tool_ids(), min_size=1, max_size=8))
    # Near-collisions: the same id with its separators swapped for another vendor's choice.
    ids += [i.replace(".", "_").replace(":", "-") for i in ids if draw(st.booleans())]
    ids += [(draw(segment) * 20)[:200] for _ in range(draw(st.integers(0, 2)))]
    versions = st.sampled_from([None, "1.0.0", "1.1.0", "2.0.0-rc.1", "2.0.0"])
    specs = {(i, draw(versions)) for i in ids for _ in range(draw(st.integers(1, 3)))}
    return [
        ToolContract(id=tool_id, version=version, description="d")
        for tool_id, version in sorted(specs, key=lambda s: (s[0], s[1] or ""))
    ]


@settings(max_examples=100, deadline=None)
@given(catalogs())
def test_every_proposed_name_maps_back_to_the_contract_it_was_rendered_from(
    contracts: list[ToolContract],
) -> None:
    for vendor in VENDORS:
        table = vendor_names(contracts, FAMILY[vendor])
        back = {name: ref for ref, name in table.items()}
        assert len(back) == len(table), f"{vendor}: two contracts share a name"
        names = names_of(vendor, render(contracts, vendor=vendor))
        assert names == [table[c.ref] for c in contracts]
        proposals = parse(calling_all(vendor, names), vendor=vendor)
        assert [back[p.tool] for p in proposals] == [c.ref for c in contracts], vendor
        assert all(p.family == FAMILY[vendor] for p in proposals)
